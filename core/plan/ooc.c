/* ooc: out-of-core FDK in z-slabs (ooc.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo_util.h"
#include "plan/memory.h"
#include "plan/ooc.h"
#include "plan/open.h"
#include "plan/recon.h"
#include "projectors/proj_cpu.h"
#include "util/rc_clock.h"
#include "util/rc_io.h"
#include "util/threadpool.h"

/* rows read beside the projected extent: bilinear reads floor(v) and
 * floor(v) + 1, and one more against rounding in the corners' projection */
#define ROW_MARGIN 2

void rc_ooc_slab_rows(const rc_geom *g, int z0, int z1, int *r0, int *r1)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	*r0 = *r1 = 0;
	if (z1 <= z0)
		return;
	if (rc_geom_is_2d(g)) {
		*r0 = z0;
		*r1 = z1;
		return;
	}
	/* the slab's box, voxel edges included */
	double lo[3], hi[3];
	rc_volume_voxel_pos(v, -0.5, -0.5, z0 - 0.5, lo);
	rc_volume_voxel_pos(v, v->nx - 0.5, v->ny - 0.5, z1 - 0.5, hi);
	int curved = rc_geom_type_of(g) == RC_GEOM_CONE && d->shape == RC_DETECTOR_CURVED;
	double vmin = INFINITY, vmax = -INFINITY;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		const rc_view *vw = rc_geom_view(g, k);
		if (curved) {
			/* v = (S (z - zs) / L - offset_v) / dv + c is not projective:
			 * bound it with the in-plane distance L from the source over
			 * the box, between its nearest and farthest corner distances
			 * to the source less / plus nothing (L >= D - R, L <= D + R,
			 * R the box's reach from the axis) */
			double R = 0;
			for (int c = 0; c < 4; c++) {
				double x = c & 1 ? hi[0] : lo[0], y = c & 2 ? hi[1] : lo[1];
				R = fmax(R, hypot(x, y));
			}
			double D = hypot(vw->src[0], vw->src[1]), S = rc_geom_sdd(g);
			double Lmin = fmax(D - R, 1e-9), Lmax = D + R;
			double zs[2] = { lo[2] - vw->src[2], hi[2] - vw->src[2] }, Ls[2] = { Lmin, Lmax };
			for (int a = 0; a < 2; a++)
				for (int b = 0; b < 2; b++) {
					double vv = (S * zs[a] / Ls[b] - d->offset_v) / d->dv + (d->nv - 1) / 2.0;
					vmin = fmin(vmin, vv);
					vmax = fmax(vmax, vv);
				}
			continue;
		}
		/* a projective map of a box (no corner behind the source: the
		 * geometry's checks) has its extremes at the corners */
		for (int c = 0; c < 8; c++) {
			double X[3] = { c & 1 ? hi[0] : lo[0], c & 2 ? hi[1] : lo[1], c & 4 ? hi[2] : lo[2] };
			double u, vv, w;
			rc_view_project(vw, X, &u, &vv, &w);
			if (!(w > 0)) { /* behind the source: every row */
				vmin = -INFINITY;
				vmax = INFINITY;
				break;
			}
			vmin = fmin(vmin, vv);
			vmax = fmax(vmax, vv);
		}
	}
	double a = floor(vmin) - ROW_MARGIN, b = floor(vmax) + 1 + ROW_MARGIN;
	a = a < 0 ? 0 : a > d->nv ? d->nv : a;
	b = b < 0 ? 0 : b > d->nv ? d->nv : b;
	*r0 = (int)a;
	*r1 = b > a ? (int)b : (int)a;
}

int rc_ooc_sub_spec(const rc_recon_spec *s, int z0, int z1, int r0, int r1, rc_recon_spec *sub, double **owned,
		    rc_err *err)
{
	*sub = *s;
	*owned = NULL;
	/* the slab's centre moves by its offset from the volume's middle */
	sub->vol.nz = z1 - z0;
	sub->vol.cz = s->vol.cz + ((z0 + z1 - 1) / 2.0 - (s->vol.nz - 1) / 2.0) * s->vol.vz;
	/* a part of the checked volume: a view may miss a slab near the edge
	 * of the field of view (its voxels get 0 from it, as in core) */
	sub->limits.part = 1;
	int two_d = s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL;
	if (two_d)
		return 0;
	int nv = s->geom.det.nv, n = r1 - r0;
	sub->geom.det.nv = n;
	if (s->geom.type == RC_GEOM_MATRICES) {
		/* v' = v - r0: the v row of each matrix less r0 times its w row */
		double *m = malloc(sizeof(double) * 12 * (size_t)s->geom.nviews);
		if (!m)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for a slab's %d matrices", s->geom.nviews);
		memcpy(m, s->geom.matrices, sizeof(double) * 12 * (size_t)s->geom.nviews);
		for (int k = 0; k < s->geom.nviews; k++)
			for (int c = 0; c < 4; c++)
				m[12 * k + 4 + c] -= r0 * m[12 * k + 8 + c];
		sub->geom.matrices = m;
		*owned = m;
		return 0;
	}
	/* row j of the whole detector at (j - (nv-1)/2) dv + offset_v: the
	 * same height for row j - r0 of the narrowed one */
	sub->geom.det.offset_v = s->geom.det.offset_v + (r0 - (nv - 1) / 2.0 + (n - 1) / 2.0) * s->geom.det.dv;
	return 0;
}

int rc_ooc_filters_once(const rc_geom *g)
{
	int dir = 0;
	/* a helix's FDK is its own (algo_fdk_helix.c): not this pass */
	if (rc_geom_is_2d(g) || rc_geom_type_of(g) == RC_GEOM_HELIX ||
	    rc_fdk_displaced(g, RC_SCAN_FULL, &dir, NULL, NULL))
		return 0;
	return dir == 0;
}

/* The threads the job's CPU engine runs (plan/open.c: execution.threads,
 * else every core), each with its tile scratch. */
static int job_threads(const rc_recon_spec *s)
{
	return s->threads > 0 ? s->threads : rc_pool_online_cores();
}

/* The peak of a filtered slab of nz slices reading rows detector rows
 * (rc_ooc_fdk_slab): the process, the slab, the CPU engine's tiles of sums
 * (as large as the slab, rounded up to whole tiles of 32 x 64 columns;
 * kept only where a call has more than one block of views: never with
 * RC_OOC_FDK_VIEWS), its rows of RC_OOC_FDK_VIEWS views and the back
 * projector's buffers (rc_bpv_bytes: its block of transposed, padded
 * views and each thread's tile scratch).  A device engine adds its
 * libraries; its copies live on the device. */
static uint64_t filtered_need(const rc_recon_spec *s, int nz, int rows)
{
	uint64_t nx = (uint64_t)s->vol.nx, ny = (uint64_t)s->vol.ny, z = (uint64_t)nz;
	uint64_t r = (uint64_t)(rows > 0 ? rows : 1), nu = (uint64_t)s->geom.det.nu;
	uint64_t chunk = (uint64_t)(s->geom.nviews < RC_OOC_FDK_VIEWS ? s->geom.nviews : RC_OOC_FDK_VIEWS);
	uint64_t need = RC_MEM_BASE + nx * ny * z * 4;
	need += chunk * r * nu * 4 + rc_bpv_bytes((int)nu, (int)r, nz, job_threads(s));
	rc_engine_choice e = s->engine;
	if (e == RC_ENGINE_OPENCL || e == RC_ENGINE_CUDA || e == RC_ENGINE_TRIGENEOUS)
		need += RC_MEM_DEVICE_LIBS;
	return need;
}

/* The peak of the slabs of nz slices each: for the most rows any of them
 * reads, filtered_need (once), else the narrowed job's prediction. */
static uint64_t slabs_need(const rc_recon_spec *s, const rc_geom *g, int nz, int once, int *rows)
{
	int most = 0, n = s->vol.nz;
	for (int z0 = 0; z0 < n; z0 += nz) {
		int r0, r1;
		rc_ooc_slab_rows(g, z0, z0 + nz < n ? z0 + nz : n, &r0, &r1);
		most = r1 - r0 > most ? r1 - r0 : most;
	}
	*rows = most;
	if (once)
		return filtered_need(s, nz, most);
	rc_recon_spec sub = *s;
	sub.vol.nz = nz;
	if (s->geom.type != RC_GEOM_FAN && s->geom.type != RC_GEOM_PARALLEL)
		sub.geom.det.nv = most > 0 ? most : 1;
	/* the voxel back projection's block of transposed, padded views
	 * (proj_voxel.c): nothing beside a whole detector, but measured 4 % of a
	 * 32-slice slab's 132 MiB at 512 x 512 (bench-large --scale 4) */
	return rc_plan_memory(&sub, 0) + rc_bpv_bytes(s->geom.det.nu, most > 0 ? most : 1, 1, 0);
}

/* The filtering pass's chunk of views (rc_ooc_filter): as many whole views
 * as fit, raw and filtered, beside the process, at most 64; its peak. */
static int filter_chunk(const rc_recon_spec *s, uint64_t budget, uint64_t *need)
{
	uint64_t view = (uint64_t)s->geom.det.nu * (uint64_t)s->geom.det.nv * 4;
	/* the process, and the ramp's per-thread work and weights */
	uint64_t base = RC_MEM_BASE + rc_mem_fdk_filter_bytes(s);
	uint64_t n = budget > base ? (budget - base) / (2 * view) : 0;
	n = n > 64 ? 64 : n;
	n = n > (uint64_t)s->geom.nviews ? (uint64_t)s->geom.nviews : n;
	*need = base + 2 * view * (n ? n : 1);
	return (int)n;
}

int rc_ooc_plan_fdk(const rc_recon_spec *s, const rc_geom *g, uint64_t budget, rc_ooc_plan *p, rc_err *err)
{
	memset(p, 0, sizeof *p);
	p->chunks = 1;
	p->budget_bytes = budget;
	int nz = s->vol.nz, two_d = s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL;
	p->slabs = 1;
	p->slab_nz = nz;
	p->rows = two_d ? nz : s->geom.det.nv;
	p->predicted_bytes = rc_plan_memory(s, 0);
	if (!budget || p->predicted_bytes <= budget)
		return 0;
	p->out_of_core = 1; /* every path from here, one slab (nz 1) included */
	/* cone and matrices filter every view once into a scratch file first,
	 * in chunks of views, where the budget holds a view raw and filtered */
	uint64_t fneed = 0;
	int once = rc_ooc_filters_once(g), chunk = once ? filter_chunk(s, budget, &fneed) : 0;
	once = once && chunk > 0;
	/* the thickest slab that fits: the need grows with the slab */
	int rows = 0;
	uint64_t need1 = slabs_need(s, g, 1, once, &rows);
	if (need1 > budget || (once && fneed > budget)) {
		p->slabs = nz;
		p->slab_nz = 1;
		p->rows = rows;
		p->predicted_bytes = need1 > fneed ? need1 : fneed;
		return rc_fail(err, RC_EUNSUPPORTED, "volume",
			       "not even one slice of the volume fits: out of core, FDK one slice at a time needs about "
			       "%llu bytes (the process, the %d detector rows it reads and their filtered copy), over the "
			       "budget of %llu bytes",
			       (unsigned long long)p->predicted_bytes, rows, (unsigned long long)budget);
	}
	/* need(good) fits, need(bad) does not.  Filtered once, the whole
	 * volume as one slab may fit (the in-memory run holds the whole stack,
	 * the slab its rows of a chunk of views): one slab pays each column's
	 * set-up once.  Else one slab would be the in-memory run: two at least */
	int good = 1, bad = once ? nz + 1 : nz;
	while (bad - good > 1) {
		int mid = good + (bad - good) / 2;
		if (slabs_need(s, g, mid, once, &rows) <= budget)
			good = mid;
		else
			bad = mid;
	}
	/* as many slabs as that thickness asks, evened out; evened slabs start
	 * elsewhere and may read more rows than those it was found for:
	 * thinner while they do not fit */
	for (int t = good;; t--) {
		int slabs = (nz + t - 1) / t;
		p->slab_nz = (nz + slabs - 1) / slabs;
		p->slabs = (nz + p->slab_nz - 1) / p->slab_nz;
		p->predicted_bytes = slabs_need(s, g, p->slab_nz, once, &p->rows);
		if (p->predicted_bytes <= budget || t == 1)
			break;
	}
	if (once) {
		p->filter_chunk = chunk;
		p->chunks = (s->geom.nviews + chunk - 1) / chunk;
		p->predicted_bytes = p->predicted_bytes > fneed ? p->predicted_bytes : fneed;
	}
	return 0;
}

/* Rows [r0, r1) of every view (cone, matrices: [k][j][u], a view's rows
 * contiguous) or slices [r0, r1) (fan, parallel: [j][k][u], contiguous)
 * into buf, non-finite values zeroed. */
static int read_rows(const rc_recon_spec *s, int fd, int r0, int r1, int k0, int k1, float *buf, rc_err *err)
{
	const rc_geom_spec *gs = &s->geom;
	size_t nu = (size_t)gs->det.nu, n = (size_t)(r1 - r0);
	int two_d = gs->type == RC_GEOM_FAN || gs->type == RC_GEOM_PARALLEL;
	int parts = two_d ? 1 : k1 - k0;
	size_t len = two_d ? n * (size_t)gs->nviews * nu : n * nu; /* floats per part */
	for (int i = 0; i < parts; i++) {
		int k = k0 + i;
		off_t off = two_d ? (off_t)((size_t)r0 * (size_t)gs->nviews * nu * sizeof(float))
				  : (off_t)(((size_t)k * (size_t)gs->det.nv + (size_t)r0) * nu * sizeof(float));
		char *dst = (char *)(buf + (size_t)i * len);
		size_t want = len * sizeof(float);
		ssize_t r = rc_io_read_full(fd, dst, want, off);
		if (r != (ssize_t)want)
			return rc_fail(err, RC_EIO, "projections", "cannot read rows %d..%d of view %d: %s", r0, r1 - 1, k,
				       r < 0 ? strerror(errno) : "the file is shorter than the stack");
	}
	size_t total = (size_t)parts * len;
	for (size_t i = 0; i < total; i++)
		if (!isfinite(buf[i]))
			buf[i] = 0.0f;
	return 0;
}

static int read_at(int fd, void *dst, size_t want, off_t off, rc_err *err)
{
	ssize_t r = rc_io_read_full(fd, dst, want, off);
	if (r != (ssize_t)want)
		return rc_fail(err, RC_EIO, "projections", "cannot read the stack: %s",
			       r < 0 ? strerror(errno) : "the file is shorter than the stack");
	return 0;
}

int rc_ooc_filter(const rc_recon_spec *s, const rc_geom *g, int in, int out, int chunk, const atomic_int *cancel,
		  rc_err *err)
{
	size_t view = rc_geom_view_count(g);
	int n = rc_geom_nviews(g), rc = 0;
	chunk = chunk < 1 ? 1 : chunk > n ? n : chunk;
	float *raw = malloc(sizeof(float) * view * (size_t)chunk), *filt = malloc(sizeof(float) * view * (size_t)chunk);
	if (!raw || !filt) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d views to filter", chunk);
		goto out;
	}
	for (int k0 = 0; k0 < n && !rc; k0 += chunk) {
		int k1 = k0 + chunk < n ? k0 + chunk : n;
		size_t len = sizeof(float) * view * (size_t)(k1 - k0);
		off_t off = (off_t)(sizeof(float) * view * (size_t)k0);
		if ((rc = read_at(in, raw, len, off, err)))
			break;
		for (size_t i = 0; i < view * (size_t)(k1 - k0); i++)
			if (!isfinite(raw[i]))
				raw[i] = 0.0f;
		if ((rc = rc_fdk_filter_views(&s->algo, g, raw, filt, k0, k1, cancel, err)))
			break;
		if (rc_io_write_full(out, filt, len, off))
			rc = rc_fail(err, RC_EIO, "", "cannot write the filtered views: %s", strerror(errno));
	}
out:
	free(raw);
	free(filt);
	return rc;
}

/* The back projection of views k0..k1 of filtered rows (rows [r0, r1) of
 * g's detector; buf holds those views only) into slab, overwritten (add 0)
 * or added to (add 1): what rc_fdk_run does after its filtering, on sub's
 * engine, with a geometry of those views cut from g (rc_geom_slab: no
 * checks, the matrices g's shifted by r0, bit for bit).  The backend's
 * report (and its models' refit) only for the last chunk (last 1) or a
 * failure: one per slab, not one per chunk. */
static int back_views(const rc_recon_spec *sub, const rc_geom *g, int k0, int k1, int r0, int r1, const float *rows,
		      float *slab, int add, int last, rc_recon_report *rep, rc_err *err)
{
	rc_geom *gc = NULL;
	rc_backend *b = NULL;
	rc_vec *vf = NULL, *vv = NULL;
	int rc;
	if (!(rc = rc_geom_slab(g, k0, k1, &sub->vol, r0, r1 - r0, &gc, err)) &&
	    !(rc = rc_backend_open(sub->engine, NULL, 0, sub, gc, &b, err)) &&
	    !(rc = rc_bk_vec_from(b, RC_SPACE_PROJ, rows, &vf, err)) &&
	    !(rc = add ? rc_bk_vec_holding(b, RC_SPACE_VOLUME, slab, &vv, err)
		       : rc_bk_vec_for(b, RC_SPACE_VOLUME, slab, &vv, err)) &&
	    !(rc = add ? rc_bk_back_add(b, RC_BP_VOXEL, vf, vv, 0, k1 - k0, err)
		       : rc_bk_back(b, RC_BP_VOXEL, vf, vv, 0, k1 - k0, err)))
		rc = rc_bk_download(b, vv, slab, err);
	if (b) {
		rc_bk_vec_free(b, vv);
		rc_bk_vec_free(b, vf);
		if (last || rc)
			rc_backend_report(b, rc == 0, rep);
	}
	rc_backend_free(b);
	rc_geom_free(gc);
	return rc;
}

/* Filtered rows of views chunk at a time, read from fd into buf and
 * back-projected into slab (sub: the slab's spec, g the job's geometry). */
static int back_filtered(const rc_recon_spec *s, const rc_recon_spec *sub, const rc_geom *g, int fd, int r0, int r1,
			 int chunk, float *buf, float *slab, const atomic_int *cancel, rc_recon_report *rep,
			 rc_err *err)
{
	double t0 = rc_now_s();
	int n = s->geom.nviews, rc = rc_recon_check(sub, err);
	memset(rep, 0, sizeof *rep);
	for (int k0 = 0; k0 < n && !rc; k0 += chunk) {
		int k1 = k0 + chunk < n ? k0 + chunk : n;
		if (cancel && atomic_load(cancel))
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled");
		else if (!(rc = read_rows(s, fd, r0, r1, k0, k1, buf, err)))
			rc = back_views(sub, g, k0, k1, r0, r1, buf, slab, k0 > 0, k1 == n, rep, err);
	}
	rep->relative_residual = NAN;
	rep->iterations_done = rc == 0;
	rep->seconds = rc_now_s() - t0;
	return rc;
}

int rc_ooc_fdk_slab(const rc_recon_spec *s, const rc_geom *g, int fd, int filtered, int z0, int z1, float *slab,
		    const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err)
{
	return rc_ooc_fdk_slab_views(s, g, fd, filtered, z0, z1, RC_OOC_FDK_VIEWS, slab, hooks, rep, err);
}

int rc_ooc_fdk_slab_views(const rc_recon_spec *s, const rc_geom *g, int fd, int filtered, int z0, int z1, int views,
			  float *slab, const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	size_t nslab = (size_t)v->nx * (size_t)v->ny * (size_t)(z1 - z0);
	if (z0 < 0 || z1 > v->nz || z1 <= z0)
		return rc_fail(err, RC_EINVAL, "volume", "slab %d..%d is not within the volume's %d slices", z0, z1, v->nz);
	/* a helix's rows and views per slab are its FDK's (algo_fdk_helix.c),
	 * not a narrowed job's: the server runs it in core only */
	if (rc_geom_type_of(g) == RC_GEOM_HELIX)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type", "a helix is not reconstructed in slabs out of core");
	if (filtered && !rc_ooc_filters_once(g))
		return rc_fail(err, RC_EINVAL, "", "this geometry's views are not filtered once (rc_ooc_filters_once)");
	int r0, r1;
	rc_ooc_slab_rows(g, z0, z1, &r0, &r1);
	if (r1 <= r0) { /* no view sees the slab */
		memset(slab, 0, sizeof(float) * nslab);
		return 0;
	}
	rc_recon_spec sub;
	double *owned = NULL;
	float *buf = NULL;
	int rc = rc_ooc_sub_spec(s, z0, z1, r0, r1, &sub, &owned, err);
	if (rc)
		return rc;
	/* filtered: the rows of views at a time; else all of them */
	int nviews = s->geom.nviews, chunk = filtered && views > 0 && views < nviews ? views : nviews;
	size_t nbuf = (size_t)(r1 - r0) * (size_t)s->geom.det.nu * (size_t)chunk;
	if (!(buf = malloc(sizeof(float) * nbuf))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a slab's %zu projection values", nbuf);
		goto out;
	}
	sub.residual = 0; /* a forward projection of the whole volume: not out of core */
	/* auto runs the slabs on the cpu engine, which the plan counts (no
	 * device libraries): its choice among devices would enumerate OpenCL
	 * and CUDA (PoCL, LLVM, the CUDA runtime) for every chunk of views and
	 * may open a device whose context takes host memory */
	if (sub.engine == RC_ENGINE_AUTO)
		sub.engine = RC_ENGINE_CPU;
	if (filtered) {
		rc = back_filtered(s, &sub, g, fd, r0, r1, chunk, buf, slab, hooks ? hooks->cancel : NULL, rep, err);
		goto out;
	}
	if ((rc = read_rows(s, fd, r0, r1, 0, nviews, buf, err)))
		goto out;
	rc_algo_hooks h = { .cancel = hooks ? hooks->cancel : NULL };
	rc = rc_recon_run(&sub, buf, slab, &h, rep, err);
out:
	free(buf);
	free(owned);
	return rc;
}
