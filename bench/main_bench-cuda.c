/*
 * bench-cuda: the CUDA engine's speed against the floors of the hardware.
 *
 *   1. RabbitCT-shaped voxel back projection (496 views of 1248x960, a
 *      short scan) into 512^3 and 1024^3: GUPS (voxel updates per second /
 *      1e9) with the projections resident on the device (kernels only) and
 *      through the engine from pinned host memory (upload overlapped, the
 *      volume downloaded), hardware and exact interpolation.
 *   2. Ray-casting forward projection: rays/s and samples/s.
 *   3. ms per SART iteration on paper 000's case (128^3 from 210 views of
 *      256x200), resident.
 *   4. ms per CGLS iteration on the same case, resident.
 *   5. Streaming FDK's tail on paper 000's and RabbitCT's shapes: views
 *      handed to a resident FDK run at a scanner's pace (the acquisition
 *      1.2x the batch run), the time from the last view to the volume on
 *      the host, in % of the batch run (open, upload, filter, back
 *      projection, download) of the same case.
 * Floors: fetches over the texture rate (SMs x 4 texture units x clock, one
 * filtered 2-D fetch per clock per unit, a trilinear 3-D fetch taken as two),
 * bytes over the bandwidth measured here (a device-to-device cudaMemcpy for
 * memory, a pinned cudaMemcpy for the upload).  "of floor" is floor / time:
 * 100% means the kernel runs at the bound.
 *
 * No device: prints "no CUDA device" and exits 0.  RECOND_BENCH_QUICK=1
 * shrinks every case so that it finishes in seconds.  --proof (make
 * gpu-proof, scripts/gpu-proof.sh): the cases of its table only (512^3 and
 * 1024^3 back projection, SART, CGLS, the streaming tails), each figure
 * also as a line "PROOF key value unit floor basis" for the table;
 * --small with it: stand-in sizes (a 64^3 "RabbitCT" and so on), for the
 * rehearsal on tools/cuda-emu, minutes on a CPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/engine_cuda.h"
#include "plan/resident.h"

#ifndef RC_HAVE_CUDA
int main(void)
{
	printf("no CUDA device (this build has no CUDA)\n");
	return 0;
}
#else

#include <cuda_runtime_api.h>

#include "backend/cuda/engine_cuda_impl.h"
#include "util/rc_clock.h"

static int quick, proof, small;

/* One figure of make gpu-proof's table (scripts/gpu-proof.sh reads these
 * lines): key, value, unit, the floor in the same unit and what bounds it. */
static void figure(const char *key, double value, const char *unit, double floor, const char *basis)
{
	if (proof)
		printf("PROOF %s %.6g %s %.6g %s\n", key, value, unit, floor, basis);
}

#define CK(call)                                                                        \
	do {                                                                            \
		cudaError_t ce_ = (call);                                               \
		if (ce_ != cudaSuccess) {                                               \
			fprintf(stderr, "bench-cuda: %s: %s\n", #call, cudaGetErrorString(ce_)); \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

typedef struct hw {
	double dev_bw;   /* bytes/s, device memory (read + write counted) */
	double peak_bw;  /* bytes/s, the memory's nominal peak (clock x bus width) */
	double h2d_bw;   /* bytes/s, pinned host -> device */
	double tex_rate; /* filtered 2-D fetches/s */
} hw;

static hw measure(const rc_cuda_device_info *info)
{
	hw h;
	size_t n = (size_t)(quick || small ? 64 : 1024) << 20;
	void *a, *b, *hp;
	CK(cudaMalloc(&a, n));
	CK(cudaMalloc(&b, n));
	CK(cudaMemset(a, 1, n));
	CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
	CK(cudaDeviceSynchronize());
	double t0 = rc_now_s();
	for (int i = 0; i < 5; i++)
		CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
	CK(cudaDeviceSynchronize());
	h.dev_bw = 2.0 * 5 * (double)n / (rc_now_s() - t0);
	CK(cudaMallocHost(&hp, n / 4));
	memset(hp, 1, n / 4);
	CK(cudaMemcpy(a, hp, n / 4, cudaMemcpyHostToDevice));
	t0 = rc_now_s();
	for (int i = 0; i < 5; i++)
		CK(cudaMemcpy(a, hp, n / 4, cudaMemcpyHostToDevice));
	h.h2d_bw = 5 * (double)(n / 4) / (rc_now_s() - t0);
	CK(cudaFreeHost(hp));
	CK(cudaFree(a));
	CK(cudaFree(b));
	int clock_khz = 0, mem_khz = 0, bus_bits = 0;
	CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
	CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
	/* double data rate; where the attributes are missing, the data
	 * sheets' peaks of the GPUs this targets (H100 SXM 3.35 TB/s, H200
	 * 4.8 TB/s) */
	h.peak_bw = 2.0 * mem_khz * 1e3 * bus_bits / 8.0;
	if (h.peak_bw <= 0 && strstr(info->name, "H200"))
		h.peak_bw = 4.8e12;
	else if (h.peak_bw <= 0 && strstr(info->name, "H100"))
		h.peak_bw = 3.35e12;
	/* Hopper and Ampere have 4 texture units per SM */
	h.tex_rate = (double)info->multiprocessors * 4.0 * clock_khz * 1e3;
	printf("device: %s, %d SMs, %.0f MHz, %.1f GiB\n", info->name, info->multiprocessors,
	       clock_khz / 1e3, info->total_bytes / 1073741824.0);
	printf("measured: device memory %.0f GB/s (copy, read+write), upload %.1f GB/s (pinned), "
	       "texture rate %.0f Gfetch/s (4/SM/clock)\n\n",
	       h.dev_bw / 1e9, h.h2d_bw / 1e9, h.tex_rate / 1e9);
	figure("device_bw", h.dev_bw / 1e9, "GB/s", h.peak_bw / 1e9, "nominal-peak");
	figure("upload_bw", h.h2d_bw / 1e9, "GB/s", 0, "-");
	figure("texture_rate", h.tex_rate / 1e9, "Gfetch/s", 0, "-");
	return h;
}

static rc_geom *rabbit_geom(int n, int nviews, int nu, int nv)
{
	/* RabbitCT's C-arm: ~800 mm source-isocentre, ~1200 mm source-detector,
	 * a 384 x 296 mm detector, a short scan of about 200 degrees; the
	 * volume is 256 mm wide */
	double *angles = malloc((size_t)nviews * sizeof(double));
	if (!angles)
		exit(1);
	for (int k = 0; k < nviews; k++)
		angles[k] = 200.0 * k / nviews;
	rc_geom_spec s;
	memset(&s, 0, sizeof s);
	s.type = RC_GEOM_CONE;
	s.nviews = nviews;
	s.source_isocenter_mm = 800;
	s.source_detector_mm = 1200;
	s.det.nu = nu;
	s.det.nv = nv;
	s.det.du = 384.0 / nu;
	s.det.dv = 296.0 / nv;
	s.angles_deg = angles;
	double vx = 256.0 / n;
	rc_volume_desc v = {n, n, n, vx, vx, vx, 0, 0, 0};
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s, &v, NULL, &g, &err)) {
		fprintf(stderr, "bench-cuda: geometry: %s\n", err.msg);
		exit(1);
	}
	free(angles);
	return g;
}

static void fill_proj(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
}

/* label: the figures' keys ("bp512"; under --small the stand-in's
 * smaller case keeps the key of the case it stands for) */
static void bench_bp(const hw *h, const char *label, int n, int nviews, int nu, int nv)
{
	rc_geom *g = rabbit_geom(n, nviews, nu, nv);
	const size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(rc_geom_volume(g));
	const double updates = (double)nvox * nviews;
	float *hp = rc_cuda_host_alloc(np * sizeof(float));
	float *hv = malloc(nvox * sizeof(float));
	if (!hp || !hv) {
		printf("bp %d^3: not enough host memory\n", n);
		goto out;
	}
	fill_proj(hp, np);
	/* floors: one filtered fetch per update; the volume read and written
	 * once per batch of 32 views plus the projections read once; the
	 * upload of the projections */
	const double nb = ceil(nviews / 32.0);
	const double t_tex = updates / h->tex_rate;
	const double t_mem = (2.0 * nb * nvox * 4 + np * 4.0) / h->dev_bw;
	const double t_up = np * 4.0 / h->h2d_bw;
	const double t_floor = fmax(t_tex, t_mem);

	for (int exact = 0; exact < 2; exact++) {
		rc_cuda_options o;
		rc_cuda_options_default(&o);
		o.bp_interp = exact ? RC_CUDA_INTERP_EXACT : RC_CUDA_INTERP_HW;
		/* kernels only: projections already on the device */
		uint64_t budget;
		cu_plan plan;
		cu_ctx c;
		rc_err err;
		float *dp = NULL;
		if (cudaMalloc((void **)&dp, np * sizeof(float)) != cudaSuccess) {
			(void)cudaGetLastError();
			printf("bp %d^3: projections do not fit the device\n", n);
			goto out;
		}
		CK(cudaMemcpy(dp, hp, np * sizeof(float), cudaMemcpyHostToDevice));
		if (cu_budget(0, &o, &budget, &err) ||
		    cu_make_plan(g, &o, CU_NEED_VOL | CU_NEED_BATCH, budget, 0, &plan, &err) ||
		    plan.nslabs > 1 || cu_ctx_init(&c, g, &o, CU_NEED_VOL | CU_NEED_BATCH, &plan, &err)) {
			printf("bp %d^3: %s\n", n, plan.nslabs > 1 ? "needs slabs" : err.msg);
			CK(cudaFree(dp));
			goto out;
		}
		double best = 1e30;
		for (int rep = 0; rep < (quick || small ? 1 : 3); rep++) {
			CK(cudaDeviceSynchronize());
			double t0 = rc_now_s();
			if (cu_bp_voxel(&c, dp, c.dvol, 0, n, 0, nviews, exact, &err)) {
				printf("bp: %s\n", err.msg);
				break;
			}
			CK(cudaStreamSynchronize(c.ks));
			best = fmin(best, rc_now_s() - t0);
		}
		cu_ctx_release(&c);
		CK(cudaFree(dp));
		printf("bp %4d^3 x %d views of %dx%d, %-5s resident:     %8.1f ms  %7.1f GUPS  floor %7.1f ms (%s)  %3.0f%% of floor\n",
		       n, nviews, nu, nv, exact ? "exact" : "hw", best * 1e3, updates / best / 1e9,
		       t_floor * 1e3, t_tex > t_mem ? "texture" : "memory", 100 * t_floor / best);
		char key[64];
		snprintf(key, sizeof key, "%s_resident_%s_ms", label, exact ? "exact" : "hw");
		figure(key, best * 1e3, "ms", t_floor * 1e3, t_tex > t_mem ? "texture" : "memory");
		snprintf(key, sizeof key, "%s_resident_%s_gups", label, exact ? "exact" : "hw");
		figure(key, updates / best / 1e9, "GUPS", updates / t_floor / 1e9, t_tex > t_mem ? "texture" : "memory");

		/* through the engine: pinned upload overlapped, volume downloaded */
		rc_engine *e = NULL;
		if (rc_engine_cuda_new_opts(g, &o, &e, &err)) {
			printf("bp: %s\n", err.msg);
			goto out;
		}
		best = 1e30;
		for (int rep = 0; rep < (quick || small ? 1 : 3); rep++) {
			double t0 = rc_now_s();
			if (rc_engine_back(e, RC_BP_VOXEL, hp, hv, 0, nviews, &err)) {
				printf("bp: %s\n", err.msg);
				break;
			}
			best = fmin(best, rc_now_s() - t0);
		}
		const double t_dn = nvox * 4.0 / h->h2d_bw;
		const double f2 = fmax(t_floor, t_up) + t_dn;
		printf("bp %4d^3 x %d views of %dx%d, %-5s with upload:  %8.1f ms  %7.1f GUPS  floor %7.1f ms (upload %.1f + download %.1f)  %3.0f%% of floor  slabs %d\n",
		       n, nviews, nu, nv, exact ? "exact" : "hw", best * 1e3, updates / best / 1e9, f2 * 1e3,
		       t_up * 1e3, t_dn * 1e3, 100 * f2 / best, rc_engine_cuda_last_slabs(e));
		snprintf(key, sizeof key, "%s_upload_%s_ms", label, exact ? "exact" : "hw");
		figure(key, best * 1e3, "ms", f2 * 1e3, "upload+kernel+download");
		snprintf(key, sizeof key, "%s_upload_%s_gups", label, exact ? "exact" : "hw");
		figure(key, updates / best / 1e9, "GUPS", updates / f2 / 1e9, "upload+kernel+download");
		rc_engine_free(e);
	}
out:
	rc_cuda_host_free(hp);
	free(hv);
	rc_geom_free(g);
}

static void bench_fp(const hw *h, int n, int nviews, int nu, int nv)
{
	rc_geom *g = rabbit_geom(n, nviews, nu, nv);
	const size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(rc_geom_volume(g));
	float *vol = malloc(nvox * sizeof(float));
	float *out = NULL;
	if (!vol)
		goto out;
	for (size_t i = 0; i < nvox; i++)
		vol[i] = (float)(i % 97) * 1e-3f;
	float *dvol = NULL, *dout = NULL;
	CK(cudaMalloc((void **)&dvol, nvox * sizeof(float)));
	CK(cudaMalloc((void **)&dout, np * sizeof(float)));
	CK(cudaMemcpy(dvol, vol, nvox * sizeof(float), cudaMemcpyHostToDevice));
	/* samples per ray: about the chord through the volume over the step */
	const double step = 0.5 * 256.0 / n;
	const double samples = (double)np * (256.0 * 0.8) / step;
	for (int exact = 0; exact < 2; exact++) {
		rc_cuda_options o;
		rc_cuda_options_default(&o);
		uint64_t budget;
		cu_plan plan;
		cu_ctx c;
		rc_err err;
		if (cu_budget(0, &o, &budget, &err) ||
		    cu_make_plan(g, &o, CU_NEED_VOLTEX, budget, 0, &plan, &err) || plan.nslabs > 1 ||
		    cu_ctx_init(&c, g, &o, CU_NEED_VOLTEX, &plan, &err)) {
			printf("fp: %s\n", err.msg);
			break;
		}
		double best = 1e30;
		if (cu_upload_slab(&c, dvol, 0, n, &err) == 0)
			for (int rep = 0; rep < (quick ? 1 : 3); rep++) {
				CK(cudaDeviceSynchronize());
				double t0 = rc_now_s();
				if (cu_fp_ray(&c, 0, n, dout, 0, nviews, 0, exact, &err)) {
					printf("fp: %s\n", err.msg);
					break;
				}
				CK(cudaStreamSynchronize(c.ks));
				best = fmin(best, rc_now_s() - t0);
			}
		cu_ctx_release(&c);
		/* a trilinear fetch taken as two filtered fetches; exact: 8 point fetches */
		const double t_floor = samples * (exact ? 8.0 : 2.0) / h->tex_rate;
		printf("fp %4d^3 -> %d views of %dx%d, %-5s: %8.1f ms  %6.2f Grays/s  %7.1f Gsamples/s  floor %7.1f ms (texture)  %3.0f%% of floor\n",
		       n, nviews, nu, nv, exact ? "exact" : "hw", best * 1e3, np / best / 1e9,
		       samples / best / 1e9, t_floor * 1e3, 100 * t_floor / best);
	}
	CK(cudaFree(dvol));
	CK(cudaFree(dout));
out:
	free(vol);
	free(out);
	rc_geom_free(g);
}

typedef struct iter_times {
	double t[64];
	int n;
} iter_times;

static void on_progress(void *ud, const rc_progress *p)
{
	iter_times *s = ud;
	if (p->iteration < 64)
		s->t[p->iteration] = p->elapsed_s;
	s->n = p->iteration;
}

/* paper 000's case: 128^3 of 0.5 mm from 210 views of 256x200 of 1 mm
 * (the API.md example); --small: 32^3 of 2 mm from 42 views of 64x50 of
 * 4 mm, the same scan at a quarter of the resolution */
static rc_geom *paper000_geom(void)
{
	const int nviews = small ? 42 : 210, nu = small ? 64 : 256, nv = small ? 50 : 200, n = small ? 32 : 128;
	const double pix = small ? 4.0 : 1.0, vx = small ? 2.0 : 0.5;
	double angles[210];
	for (int k = 0; k < nviews; k++)
		angles[k] = 360.0 * k / nviews;
	rc_geom_spec s;
	memset(&s, 0, sizeof s);
	s.type = RC_GEOM_CONE;
	s.nviews = nviews;
	s.source_isocenter_mm = 1000;
	s.source_detector_mm = 1500;
	s.det.nu = nu;
	s.det.nv = nv;
	s.det.du = pix;
	s.det.dv = pix;
	s.angles_deg = angles;
	rc_volume_desc v = {n, n, n, vx, vx, vx, 0, 0, 0};
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s, &v, NULL, &g, &err)) {
		printf("paper 000 case: %s\n", err.msg);
		return NULL;
	}
	return g;
}

/* ms per iteration of SART or CGLS on paper 000's case, resident */
static void bench_iter(const hw *h, rc_algo_name name, rc_cuda_interp interp)
{
	rc_geom *g = paper000_geom();
	if (!g)
		return;
	const rc_volume_desc *v = rc_geom_volume(g);
	const size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(v);
	const int nviews = rc_geom_nviews(g);
	const char *an = name == RC_ALGO_SART ? "sart" : "cgls";
	float *proj = malloc(np * sizeof(float)), *vol = malloc(nvox * sizeof(float));
	rc_err err;
	if (!proj || !vol)
		goto out;
	fill_proj(proj, np);
	rc_algo_params p;
	rc_algo_params_plain(&p, name);
	p.iterations = quick || small ? 3 : 11;
	if (name == RC_ALGO_SART)
		p.relaxation = 0.5;
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	o.fp_interp = interp;
	o.bp_interp = interp;
	iter_times t;
	memset(&t, 0, sizeof t);
	rc_algo_hooks hk = {.progress = on_progress, .ud = &t};
	if (rc_cuda_run_algo(&p, g, &o, proj, vol, &hk, &err)) {
		printf("%s: %s\n", an, err.msg);
		goto out;
	}
	/* the first iteration carries the set-up (row and column sums) */
	double per = t.n > 1 ? (t.t[t.n] - t.t[1]) / (t.n - 1) : t.t[1];
	/* floor per iteration: forward samples (a chord of 0.8 of the volume
	 * at half-voxel steps; trilinear = 2 fetches) and back projection
	 * updates (SART: one fetch per voxel and view; CGLS: the forward's
	 * transpose, as many samples again) over the texture rate, or the
	 * bytes of the element-wise passes over the bandwidth */
	const double samples = (double)np * 1.6 * v->nx;
	const double bp = name == RC_ALGO_SART ? (double)nvox * nviews : samples * 2.0;
	const double f_tex = (samples * 2.0 + bp) / h->tex_rate;
	const double f_mem = (4.0 * np * 4 + 6.0 * nvox * 4) / h->dev_bw;
	/* the resident run takes HW only for SART's forward projection
	 * (resident.c): every other algorithm runs the exact matched pair */
	const char *in = name == RC_ALGO_SART && interp != RC_CUDA_INTERP_EXACT ? "hw" : "exact";
	printf("%s %d^3 x %d views of %dx%d, %-5s: %7.2f ms/iteration (first incl. set-up %.2f ms)  floor %.2f ms  %3.0f%% of floor\n",
	       an, v->nx, nviews, rc_geom_detector(g)->nu, rc_geom_detector(g)->nv, in, per * 1e3, t.t[1] * 1e3,
	       fmax(f_tex, f_mem) * 1e3, 100 * fmax(f_tex, f_mem) / per);
	char key[64];
	snprintf(key, sizeof key, "%s_%s_ms", an, in);
	figure(key, per * 1e3, "ms", fmax(f_tex, f_mem) * 1e3, f_tex > f_mem ? "texture" : "memory");
out:
	free(proj);
	free(vol);
	rc_geom_free(g);
}

/* Streaming FDK: views released at t0 + k * dt, handed to the run as
 * they come (algo.h's views hook) */
typedef struct pace {
	double t0, dt, last; /* last: when the last view came */
	int nviews, given;
} pace;

static int paced_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	(void)err;
	pace *s = ud;
	double now = rc_now_s() - s->t0;
	if (s->given < s->nviews && now < s->given * s->dt) {
		double sleep_s = fmin(wait_s, s->given * s->dt - now);
		struct timespec ts = {(time_t)sleep_s, (long)((sleep_s - floor(sleep_s)) * 1e9)};
		nanosleep(&ts, NULL);
		now = rc_now_s() - s->t0;
	}
	int n = 0;
	while (n < max && s->given < s->nviews && s->given * s->dt <= now)
		list[n++] = s->given++;
	if (s->given == s->nviews && n > 0)
		s->last = s->t0 + (s->nviews - 1) * s->dt;
	return n;
}

/* FDK batch (the whole stack at once) against streaming at a scanner's
 * pace on one resident CUDA backend per run: the tail (last view to the
 * volume in host memory) in % of the batch run */
static void bench_stream(const char *label, rc_geom *g)
{
	if (!g)
		return;
	const size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(rc_geom_volume(g));
	const int nviews = rc_geom_nviews(g);
	float *proj = malloc(np * sizeof(float)), *vol = malloc(nvox * sizeof(float));
	rc_err err;
	if (!proj || !vol) {
		printf("stream %s: not enough host memory\n", label);
		goto out;
	}
	fill_proj(proj, np);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_FDK);
	/* batch: the best of two (the first also warms the device up) */
	double batch = 1e30;
	for (int rep = 0; rep < 2; rep++) {
		double t0 = rc_now_s();
		if (rc_cuda_run_algo(&p, g, NULL, proj, vol, NULL, &err)) {
			printf("stream %s: batch FDK: %s\n", label, err.msg);
			goto out;
		}
		batch = fmin(batch, rc_now_s() - t0);
	}
	/* the acquisition 1.2x the batch run (the reconstruction keeps up,
	 * as behind a gantry), at least a second */
	pace s = {0, fmax(1.2 * batch, 1.0) / nviews, 0, nviews, 0};
	p.streaming = 1;
	rc_algo_hooks hk = {.views = paced_views, .ud = &s};
	s.t0 = rc_now_s();
	if (rc_cuda_run_algo(&p, g, NULL, proj, vol, &hk, &err)) {
		printf("stream %s: streaming FDK: %s\n", label, err.msg);
		goto out;
	}
	double tail = rc_now_s() - s.last;
	printf("stream %s: batch FDK %.1f ms, streaming tail %.1f ms = %.1f%% of batch (views over %.2f s)\n", label,
	       batch * 1e3, tail * 1e3, 100 * tail / batch, s.dt * nviews);
	char key[64];
	snprintf(key, sizeof key, "stream_%s_tail_pct", label);
	figure(key, 100 * tail / batch, "%", 0, "-");
	snprintf(key, sizeof key, "stream_%s_batch_ms", label);
	figure(key, batch * 1e3, "ms", 0, "-");
out:
	free(proj);
	free(vol);
	rc_geom_free(g);
}

int main(int argc, char **argv)
{
	quick = getenv("RECOND_BENCH_QUICK") && atoi(getenv("RECOND_BENCH_QUICK")) > 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--proof"))
			proof = 1;
		else if (!strcmp(argv[i], "--small"))
			small = 1;
		else {
			fprintf(stderr, "usage: bench-cuda [--proof [--small]]\n");
			return 2;
		}
	}
	if (rc_engine_cuda_count() < 1) {
		printf("no CUDA device\n");
		return 0;
	}
	rc_cuda_device_info info;
	rc_err err;
	if (rc_engine_cuda_info(0, &info, &err)) {
		printf("bench-cuda: %s\n", err.msg);
		return 1;
	}
	hw h = measure(&info);
	if (proof) {
		/* the table's cases; --small: the stand-in's, same keys */
		if (small) {
			bench_bp(&h, "bp512", 64, 32, 156, 120);
			bench_bp(&h, "bp1024", 96, 32, 156, 120);
		} else {
			bench_bp(&h, "bp512", 512, 496, 1248, 960);
			bench_bp(&h, "bp1024", 1024, 496, 1248, 960);
		}
		bench_iter(&h, RC_ALGO_SART, RC_CUDA_INTERP_HW);
		bench_iter(&h, RC_ALGO_CGLS, RC_CUDA_INTERP_AUTO);
		bench_stream("paper000", paper000_geom());
		bench_stream("rabbitct", small ? rabbit_geom(64, 32, 156, 120) : rabbit_geom(512, 496, 1248, 960));
		return 0;
	}
	if (quick) {
		bench_bp(&h, "bp128", 128, 64, 312, 240);
		bench_fp(&h, 128, 16, 312, 240);
	} else {
		bench_bp(&h, "bp512", 512, 496, 1248, 960);
		bench_bp(&h, "bp1024", 1024, 496, 1248, 960);
		bench_fp(&h, 512, 64, 1248, 960);
	}
	bench_iter(&h, RC_ALGO_SART, RC_CUDA_INTERP_HW);
	bench_iter(&h, RC_ALGO_SART, RC_CUDA_INTERP_EXACT);
	return 0;
}
#endif
