/*
 * bench-tensor-cg: CGLS on the tensor path (paper 001 Alg. 1 as the one
 * CGLS of core/algo over the tensor backend), CPU products, in ms per image
 * per iteration: a fan-beam Shepp-Logan of 32 slices of n^2 from nviews x
 * nu projections (bench-tensor's geometry), fp16 non-zeros (precision
 * mixed, bsr_cpu.h: the CPU path), the former product over the fp16 BSR
 * blocks, and fp32 CSR.  The per-iteration time is the mean of iterations
 * 2..N from the progress calls (the first carries the set-up: the matrix,
 * its ordering and blocks are built before the run and not counted), wall
 * and CPU time of all threads (the machine is shared: CPU time is the
 * load-independent cost); the error is the relative L2 against the
 * voxelised phantom after N.  The whole iteration is timed: both products
 * and the element-wise steps, so this row moves when the algorithm code
 * does.
 *
 * The floor (issue 17): an iteration streams the matrix twice (A and A^T)
 * and does 2 x 2 x nnz x slices flops; the memory floor is those bytes over
 * the read bandwidth measured here (all cores reading a 1 GiB buffer), the
 * compute floor the flops over the FMA rate measured here on the path the
 * products take.  Printed for the BSR fp16 blocks (the GPU's matrix, as the
 * issue states it) and for the bytes the CPU layout really streams.
 *
 * Sizes: default 256^2 from 360 x 256; RECOND_BENCH_SEED001=1: paper 001's
 * case, 512^2 from 720 x 512 (the matrix is cached in RECOND_BENCH_CACHE,
 * default /tmp/recond-bench-cache, ~2.5 GB); RECOND_BENCH_QUICK=1: 64^2
 * from 90 x 64.  RECOND_BENCH_ROWS=nz,blocks,csr picks rows (default all;
 * nz1 and bf16-1 are the default and the bf16 input one row at a time, as
 * before the row groups of bsr_cpu.h;
 * blocks and csr are slow at 512^2).
 *
 * RECOND_BENCH_GPU=1: the GPU rows instead (RECOND_BENCH_ROWS=wmma,cusparse
 * by default): the fp16 BSR on tensor cores (WMMA) and the project's own
 * fp32 CSR on cuSPARSE, the baseline; the floor is the BSR's bytes twice
 * over the device's nominal memory bandwidth (its clock and bus width, or
 * the data sheet's H100 / H200 peak).  --proof (make gpu-proof): after the
 * rows, the first fp16 row against the last fp32 row as lines "PROOF key
 * value unit floor basis": ms per image per iteration, the speed-up and
 * the ratio of the errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/cuda/engine_cuda.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"
#include "plan/tensor.h"
#include "projectors/bsr_cpu.h"
#include "projectors/proj_cpu.h"
#include "util/tensor_par.h"
#include "paper001.h"

/* iterations: 8, or RECOND_BENCH_ITERS (2..64) */
#define ITERS_MAX 64
static int ITERS = 8;

typedef struct timing {
	double t[ITERS_MAX + 1], cpu[ITERS_MAX + 1];
} timing;

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_progress(void *ud, const rc_progress *p)
{
	timing *tm = ud;
	if (p->iteration >= 1 && p->iteration <= ITERS) {
		tm->t[p->iteration] = p->elapsed_s;
		tm->cpu[p->iteration] = cpu_s();
	}
}

/* The nominal memory bandwidth of CUDA device 0 in GB/s (0: none). */
static double gpu_peak_gbs(void)
{
	rc_cuda_device_info info;
	rc_err err;
	return rc_engine_cuda_info(0, &info, &err) ? 0 : info.mem_bandwidth_gbs;
}

static int want(const char *rows, const char *name)
{
	return !rows || strstr(rows, name) != NULL;
}

int main(int argc, char **argv)
{
	const int proof = argc > 1 && !strcmp(argv[1], "--proof");
	const char *gq = getenv("RECOND_BENCH_GPU");
	const int gpu = gq && *gq && strcmp(gq, "0");
	const char *q = getenv("RECOND_BENCH_QUICK"), *s1 = getenv("RECOND_BENCH_SEED001");
	const char *rows = getenv("RECOND_BENCH_ROWS"), *cache = getenv("RECOND_BENCH_CACHE");
	int quick = q && *q && strcmp(q, "0"), seed = s1 && *s1 && strcmp(s1, "0");
	const char *its = getenv("RECOND_BENCH_ITERS");
	if (its && atoi(its) >= 2 && atoi(its) <= ITERS_MAX)
		ITERS = atoi(its);
	int n = quick ? 64 : seed ? 512 : 256, nviews = quick ? 90 : seed ? 720 : 360, nu = n, nz = 32;
	if (!cache)
		cache = "/tmp/recond-bench-cache";
	if (gpu && !rows)
		rows = "wmma,cusparse";
	double peak = gpu ? gpu_peak_gbs() : 0;
	mkdir(cache, 0755);
	rc_geom *g = NULL;
	rc_phantom *ph = NULL;
	rc_err err;
	float *proj = NULL, *ref = NULL, *vol = NULL;
	int rc = 1;
	if (paper001_geom(n, nviews, nu, nz, &g, &err))
		goto out;
	const rc_volume_desc *v = rc_geom_volume(g);
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(v);
	proj = malloc(np * sizeof *proj);
	ref = malloc(nvox * sizeof *ref);
	vol = malloc(nvox * sizeof *vol);
	if (!proj || !ref || !vol) {
		rc_fail(&err, RC_ENOMEM, "", "out of memory");
		goto out;
	}
	if (rc_phantom_shepp_logan(0.9 * 512.0, &ph, &err) || rc_phantom_project(ph, g, 0, proj, &err) ||
	    rc_phantom_voxelize(ph, v, 2, 0, ref, &err))
		goto out;

	/* RECOND_BENCH_DUMP=dir: the sinograms, the phantom and the geometry
	 * for bench/tensor_astra.py (ASTRA's CGLS on the same data) */
	const char *dump = getenv("RECOND_BENCH_DUMP");
	if (dump && *dump) {
		char path[1024];
		mkdir(dump, 0755);
		snprintf(path, sizeof path, "%s/proj.f32", dump);
		FILE *f = fopen(path, "wb");
		if (f) {
			fwrite(proj, sizeof *proj, np, f);
			fclose(f);
		}
		snprintf(path, sizeof path, "%s/ref.f32", dump);
		if ((f = fopen(path, "wb"))) {
			fwrite(ref, sizeof *ref, nvox, f);
			fclose(f);
		}
		snprintf(path, sizeof path, "%s/geom.json", dump);
		if ((f = fopen(path, "w"))) {
			fprintf(f, "{\"n\": %d, \"nz\": %d, \"voxel_mm\": %.17g, \"nviews\": %d, \"nu\": %d, \"du_mm\": %.17g, "
				   "\"source_isocenter_mm\": %.17g, \"source_detector_mm\": %.17g}\n",
				n, nz, v->vx, nviews, nu, rc_geom_detector(g)->du, rc_geom_sid(g), rc_geom_sdd(g));
			fclose(f);
		}
	}

	__builtin_cpu_init();
	rc_cpu_isa isa = rc_cpu_isa_best() >= RC_ISA_AVX512 ? RC_ISA_AVX512 : RC_ISA_BASELINE;
	int has_bf16 = isa >= RC_ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
	double gbs = rc_cpu_read_gbs(0, (size_t)1 << 30), gfl = rc_cpu_fma_gflops(isa, 0);
	double gfl_bf = has_bf16 ? rc_cpu_fma_gflops(RC_FMA_BF16, 0) : 0;
	printf("tensor CG (CGLS, CPU products, all cores): %d slices of %d^2 from %d x %d fan projections, %d "
	       "iterations\n", nz, n, nviews, nu, ITERS);
	printf("  machine: read bandwidth %.1f GB/s (all cores, 1 GiB), FMA rate %.1f GFLOP/s (%s, all cores), vdpbf16ps "
	       "%.1f GFLOP/s; rates per CPU second of each thread\n", gbs, gfl, rc_cpu_isa_name(isa), gfl_bf);
	int ncores = rc_par_threads(0, 1 << 20);
	printf("  %-22s %8s %10s %10s %9s %8s %9s %7s %7s %8s  %s\n", "matrix", "build s", "wall ms", "cpu ms", "rel.err",
	       "MB/prod", "floor ms", "x floor", "x fl.cpu", "bsr-flr", "path");
	printf("  (per image per iteration: wall, and CPU time of all %d threads; floor: max(memory, compute) floor of the "
	       "bytes this row streams, on %d cores; x floor: wall / floor; x fl.cpu: cpu / %d / floor, the ratio on idle "
	       "cores; bsr-flr: the floor with the fp16 BSR's bytes, as issue 17 states it)\n", ncores, ncores, ncores);
	/* --proof: the first fp16 row and the last fp32 row */
	double pr_ms[2] = { 0, 0 }, pr_err[2] = { 0, 0 }, pr_floor = 0;
	for (int row0 = 0; row0 < 9; row0++) {
		/* nz1, bf16-1: the CPU path's default and bf16 input as before
		 * the row groups (one row at a time); nz: the default; bf16,
		 * fp16: its other inputs (bsr_cpu.h); blocks: the former product
		 * over the BSR blocks */
		static const char *names[9] = { "nz1", "nz", "bf16-1", "bf16", "fp16", "blocks", "csr", "wmma",
						 "cusparse" };
		static const char *labels[9] = { "fp16 nz, single rows", "fp16 non-zeros",  "  bf16, single rows",
						 "  bf16 (vdpbf16ps)",   "  fp16 input",    "fp16 BSR blocks",
						 "CSR fp32",             "GPU fp16 BSR, WMMA", "GPU CSR fp32, cuSPARSE" };
		static const int rowof[9] = { 0, 0, 1, 1, 2, 3, 4, 5, 6 };
		int single = row0 == 0 || row0 == 2, row = rowof[row0], on_gpu = row >= 5;
		if (!want(rows, names[row0]) || (row == 1 && !has_bf16) || on_gpu != gpu)
			continue;
		rc_tensor_opts o;
		rc_tensor_opts_default(&o);
		o.mixed = row < 4 || row == 5;
		o.cpu_blocks = row == 3;
		o.cpu_single_rows = single;
		o.cpu_input = row == 1 ? RC_SPM_IN_BF16 : row == 2 ? RC_SPM_IN_FP16 : -1;
		o.gpu = on_gpu;
		o.cache_dir = cache;
		rc_algo_params p;
		rc_algo_params_plain(&p, RC_ALGO_CGLS);
		p.iterations = ITERS;
		timing tm;
		memset(&tm, 0, sizeof tm);
		rc_algo_hooks h = { .progress = on_progress, .ud = &tm };
		rc_recon_report rep;
		if (rc_tensor_solve(&o, &p, g, proj, vol, &h, &rep, &err))
			goto out;
		double per = (tm.t[ITERS] - tm.t[1]) / (ITERS - 1), cper = (tm.cpu[ITERS] - tm.cpu[1]) / (ITERS - 1);
		/* bytes each product streams: the non-zeros' fp16 value + uint32
		 * index (+ row pointers), the BSR's blocks, or the CSR's fp32 +
		 * int32; the floor per image per iteration = 2 products */
		double nnz = (double)rep.matrix.nnz, bsr = (double)rep.matrix.bytes;
		double bytes = row < 3 ? 6.0 * nnz : row == 3 || row == 5 ? bsr : 8.0 * nnz;
		double flops = 2.0 * 2.0 * nnz * nz;
		/* the bf16 row's flops run at the vdpbf16ps rate; on the GPU the
		 * bytes over the nominal bandwidth (the products are memory-bound:
		 * tensor cores do the flops in a fraction of that) */
		double row_gbs = on_gpu ? peak : gbs;
		double fl_mem = 2.0 * bytes / (row_gbs * 1e9),
		       fl_fma = on_gpu ? 0 : flops / ((row == 1 ? gfl_bf : gfl) * 1e9);
		double floor_ms = 1e3 * (fl_mem > fl_fma ? fl_mem : fl_fma) / nz;
		double bsr_floor = 1e3 * (2.0 * bsr / (row_gbs * 1e9) > fl_fma ? 2.0 * bsr / (row_gbs * 1e9) : fl_fma) / nz;
		double rel = rc_metric_rel_error(vol, ref, NULL, nvox);
		if (o.mixed && pr_ms[0] == 0) {
			pr_ms[0] = 1e3 * per / nz;
			pr_err[0] = rel;
			pr_floor = bsr_floor;
		} else if (!o.mixed) {
			pr_ms[1] = 1e3 * per / nz;
			pr_err[1] = rel;
		}
		printf("  %-22s %8.1f %10.3f %10.3f %9.4f %8.0f %9.3f %7.2f %7.2f %8.3f  %s\n", labels[row0],
		       rep.seconds - tm.t[ITERS], 1e3 * per / nz, 1e3 * cper / nz, rel,
		       bytes / 1e6, floor_ms, 1e3 * per / nz / floor_ms, 1e3 * cper / nz / ncores / floor_ms, bsr_floor,
		       on_gpu ? rep.dev[0].name : rep.dev[0].name + 4);
		printf("    memory floor %.3f ms (%.0f MB x 2 / %.1f GB/s), compute floor %.3f ms (%.2f GFLOP / %.1f GFLOP/s), per image "
		       "per iteration; BSR %.0f MB, nnz %.0f\n",
		       1e3 * fl_mem / nz, bytes / 1e6, row_gbs, 1e3 * fl_fma / nz, flops / nz / 1e9, row == 1 ? gfl_bf : gfl,
		       bsr / 1e6, nnz);
		if (getenv("RECOND_BENCH_SLICES")) {
			size_t per_slice = nvox / (size_t)nz;
			printf("    per slice:");
			for (int z = 0; z < nz; z++)
				printf(" %.4f", rc_metric_rel_error(vol + z * per_slice, ref + z * per_slice, NULL, per_slice));
			printf("\n");
		}
		fflush(stdout);
	}
	if (proof && pr_ms[0] > 0 && pr_ms[1] > 0) {
		printf("PROOF tensor_cg_ms %.6g ms %.6g %s\n", pr_ms[0], pr_floor, gpu ? "memory(nominal)" : "cpu-floor");
		printf("PROOF tensor_cg_speedup %.6g x 0 -\n", pr_ms[1] / pr_ms[0]);
		printf("PROOF tensor_cg_err_ratio %.6g x 0 -\n", pr_err[0] / pr_err[1]);
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench-tensor-cg: %s\n", err.msg);
	rc_phantom_free(ph);
	rc_geom_free(g);
	free(proj);
	free(ref);
	free(vol);
	return rc;
}
