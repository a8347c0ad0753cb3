/* memory: the worker's peak resident memory predicted from a spec (memory.h). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo_util.h"
#include "plan/extend.h"
#include "plan/memory.h"
#include "plan/tensor.h"
#include "projectors/proj_cpu.h"
#include "util/parfor.h"

/* a + b, a * k without wrapping: a figure that saturates still refuses */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t mul_sat(uint64_t a, double k)
{
	double r = (double)a * k;
	return r >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)r;
}

static int is_2d(rc_geom_type t)
{
	return t == RC_GEOM_FAN || t == RC_GEOM_PARALLEL;
}

/* Non-zeros of the 2-D distance-driven matrix (memory.h). */
static double dd_nnz(const rc_recon_spec *s)
{
	const rc_geom_spec *g = &s->geom;
	double mag = 1.0;
	if (g->type == RC_GEOM_FAN && g->source_isocenter_mm > 0 && g->source_detector_mm > g->source_isocenter_mm)
		mag = g->source_detector_mm / g->source_isocenter_mm;
	double du = g->det.du > 0 ? g->det.du / mag : 1.0;
	double w = 1.27 * (s->vol.vx > 0 ? s->vol.vx : 1.0);
	/* a pixel's footprint covers at most the detector's nu bins */
	double bins = 1.0 + w / du;
	if (g->det.nu > 0 && bins > g->det.nu)
		bins = g->det.nu;
	return (double)g->nviews * s->vol.nx * s->vol.ny * bins;
}

/* Whether the job's iterations may run the footprint pair (plan/open.c's
 * job_footprint): asked for, or auto on a flat cone whose voxels may
 * project more than a pixel apart (rc_splat_suits false; on a curved
 * cone rc_footprint_auto_suits, the same step), or auto on matrices (their step is not known without the geometry).  The step is
 * bounded from above, as the figure errs high: the largest voxel side
 * times the magnification at the volume's nearest corner to a source,
 * times the obliquity 1 + R / (D - R) there, over the smaller pixel side. */
static int footprint_runs(const rc_recon_spec *s)
{
	const rc_geom_spec *g = &s->geom;
	if (s->algo.name == RC_ALGO_FDK || (s->engine != RC_ENGINE_AUTO && s->engine != RC_ENGINE_CPU))
		return 0;
	if (g->type != RC_GEOM_MATRICES && !rc_geom_type_is_cone(g->type))
		return 0;
	if (s->algo.projector == RC_PROJECTOR_FOOTPRINT)
		return 1;
	if (s->algo.projector != RC_PROJECTOR_AUTO)
		return 0;
	/* a curved cone, which has no splat pair, runs ray casting's at steps
	 * of at most a pixel: the same bound */
	if (g->type == RC_GEOM_MATRICES)
		return 1;
	const rc_volume_desc *v = &s->vol;
	double ex = fabs(v->cx) + 0.5 * v->nx * v->vx, ey = fabs(v->cy) + 0.5 * v->ny * v->vy;
	double ez = fabs(v->cz) + 0.5 * v->nz * v->vz;
	double R = sqrt(ex * ex + ey * ey), D = g->source_isocenter_mm, S = g->source_detector_mm;
	/* a helix's view sees the volume near its source's height only
	 * (rc_splat_max_step) */
	if (g->type == RC_GEOM_HELIX && S > 0)
		ez = fmin(ez, (0.5 * g->det.nv * g->det.dv + fabs(g->det.offset_v) + g->det.dv) * (D + R) / S + v->vz);
	double pix = fmin(g->det.du, g->det.dv);
	if (!(D > R) || !(pix > 0))
		return 0; /* a voxel behind a source: neither pair (rc_footprint_suits) */
	double side = fmax(v->vx, fmax(v->vy, v->vz));
	double step = side * S / (D - R) * (1.0 + fmax(R, ez) / (D - R)) / pix;
	return step > RC_SPLAT_MAX_STEP;
}

/* The footprint pair's buffers (proj_footprint.c): the back projection's
 * block of transposed views (64 MiB at most, one view at least, the stack
 * at most), one transposed view per thread for the forward, a tile's
 * column sums per thread for the back (RC_MEM_FPF_TILE_COLS columns of
 * the extended volume's nz, as V is), and the z-fastest volume copy (a
 * kept buffer: counted whole). */
static uint64_t footprint_bytes(const rc_recon_spec *s, uint64_t V)
{
	const rc_geom_spec *g = &s->geom;
	uint64_t view = (uint64_t)(g->det.nu > 0 ? g->det.nu : 0) * (uint64_t)(g->det.nv > 0 ? g->det.nv : 0) *
			sizeof(float);
	if (!view)
		return V;
	uint64_t n = RC_MEM_FPF_BLOCK / view;
	n = n < 1 ? 1 : n;
	n = n > (uint64_t)(g->nviews > 0 ? g->nviews : 1) ? (uint64_t)(g->nviews > 0 ? g->nviews : 1) : n;
	long threads = s->threads > 0 ? s->threads : sysconf(_SC_NPROCESSORS_ONLN);
	threads = threads < 1 ? 1 : threads;
	int nz = rc_extent_bound_nz(s);
	nz = nz > s->vol.nz ? nz : s->vol.nz;
	const uint64_t tile = RC_MEM_FPF_TILE_COLS * (uint64_t)(nz > 0 ? nz : 0) * sizeof(float);
	return add_sat(add_sat(mul_sat(view, (double)n), mul_sat(view + tile, (double)threads)), V);
}

/* The long object (extend.h): an iterative run's volumes are of the
 * extended volume (the bound of its slices from the spec), and an extended
 * run keeps the asked one apart: *V becomes the extended volume's bytes,
 * *kept the asked one's (0 when not extended). */
static void extended_volume(const rc_recon_spec *s, uint64_t *V, uint64_t *kept)
{
	int nz = rc_extent_bound_nz(s);
	*kept = 0;
	if (s->vol.nz > 0 && nz > s->vol.nz) {
		*kept = *V;
		*V = mul_sat(*V, (double)nz / s->vol.nz);
	}
}

uint64_t rc_mem_fdk_filter_bytes(const rc_recon_spec *s)
{
	const rc_geom_spec *g = &s->geom;
	double nu = g->det.nu > 0 ? g->det.nu : 0;
	double rows = is_2d(g->type) ? (s->vol.nz > 0 ? s->vol.nz : 0) : (g->det.nv > 0 ? g->det.nv : 0);
	/* the FFT's length: 2 nu rounded up to a 7-smooth number (filter.c),
	 * within 5 % of it past a few dozen pixels; real floats and n/2 + 1
	 * complex ones, and the view's weights */
	double n = 2.1 * nu + 16;
	double per_thread = rows * (n * 4.0 + (n / 2 + 1) * 8.0) + rows * nu * 4.0;
	return mul_sat((uint64_t)rc_parallel_threads(0), per_thread);
}

uint64_t rc_plan_memory(const rc_recon_spec *s, int streaming)
{
	if (!s)
		return 0;
	const rc_geom_spec *g = &s->geom;
	int two_d = is_2d(g->type);
	uint64_t nvox = (uint64_t)(s->vol.nx > 0 ? s->vol.nx : 0) * (uint64_t)(s->vol.ny > 0 ? s->vol.ny : 0);
	nvox = mul_sat(nvox, s->vol.nz > 0 ? s->vol.nz : 0);
	uint64_t rows = (uint64_t)(two_d ? s->vol.nz : g->det.nv);
	uint64_t nproj = mul_sat((uint64_t)(g->nviews > 0 ? g->nviews : 0) * (uint64_t)(g->det.nu > 0 ? g->det.nu : 0),
				 (double)rows);
	uint64_t V = mul_sat(nvox, sizeof(float)), P = mul_sat(nproj, sizeof(float)), kept = 0;
	extended_volume(s, &V, &kept);
	uint64_t base = RC_MEM_BASE;
	rc_engine_choice e = s->engine;
	int device = e == RC_ENGINE_OPENCL || e == RC_ENGINE_CUDA || e == RC_ENGINE_TRIGENEOUS;
	if (device)
		base += RC_MEM_DEVICE_LIBS;

	/* FDK, alone or as an iterative method's start: the stack, its
	 * filtered copy, the volume and, on cone and matrices, 1.5 volumes more
	 * (measured: 81 MiB over 2 P + V at 256^3, 685 MiB at RabbitCT's
	 * 512^3); a streaming run adds its groups onto the volume
	 * (rc_bk_back_add): no more */
	(void)streaming;
	uint64_t fdk = add_sat(mul_sat(P, 2.0), mul_sat(V, two_d ? 1.0 : 2.5));
	fdk = add_sat(fdk, rc_mem_fdk_filter_bytes(s));
	/* a displaced detector (algo_fdk.c): the stack widened by 2 |offset_u|
	 * / du pixels and its filtered copy on top (a curved cone's back
	 * projection is the flat one's tiles: nothing more) */
	if ((g->type == RC_GEOM_CONE || g->type == RC_GEOM_FAN) && g->det.du > 0 && g->det.nu > 1 &&
	    2 * fabs(g->det.offset_u) > 0.1 * (g->det.nu - 1) * g->det.du)
		fdk = add_sat(fdk, mul_sat(P, 2.0 * (1.0 + 2 * fabs(g->det.offset_u) / g->det.du / g->det.nu)));
	/* cone and matrices: the run's relative residual (plan/residual.c) forward
	 * projects the result after FDK freed its filtered copy, while the
	 * back projection's kept tiles (~1.06 V, proj_voxel.c) are still held,
	 * with the forward projector's kept volume copy (the splat's z-fastest
	 * one or ray casting's zero-bordered one, ~V) and the views it compares:
	 * P + 3.1 V + views (an iterative run's FDK start has no residual).  Measured: 242.6 MiB at 256^3 from 60 views of
	 * 160^2, where 2 P + 2.5 V said 227.7 */
	if (!two_d && s->algo.name == RC_ALGO_FDK) {
		int nviews = g->nviews > 0 ? g->nviews : 0, m = 2 + nviews / 100;
		m = m < nviews ? m : nviews;
		uint64_t views = nviews ? mul_sat(P, (double)m / nviews) : 0;
		uint64_t resid = add_sat(add_sat(P, mul_sat(V, 3.1)), views);
		fdk = resid > fdk ? resid : fdk;
	}
	const rc_algo_params *p = &s->algo;
	/* FBP's matrix on the tensor engine: ~2.5 bytes per view and pixel
	 * (fitted with the 50 MiB base: 130 MiB at 256^2 from 360 views, docs/benchmarks.md) */
	if (p->name == RC_ALGO_FDK && two_d && e == RC_ENGINE_TENSOR)
		fdk = add_sat(fdk, mul_sat((uint64_t)(g->nviews > 0 ? g->nviews : 0), 2.5 * s->vol.nx * s->vol.ny));
	if (p->name == RC_ALGO_FDK)
		return add_sat(base, fdk);

	/* the iterations: what the algorithm allocates (rc_algo_vectors), and on
	 * the host backend one volume of scratch, TV's three host buffers and,
	 * for CGLS, the residual (measured: 205 MiB plain, paper 000's case) */
	int tv = p->tv_weight > 0.0;
	int nv, np;
	rc_algo_vectors_n(p, g->nviews, (size_t)nvox, &nv, &np);
	nv += 1 + 3 * tv;
	np += p->name == RC_ALGO_CGLS;
	uint64_t iter = add_sat(mul_sat(V, nv), mul_sat(P, np));
	if (two_d && !device) {
		/* the tensor backend: its matrix, and the vectors in its order too */
		double per_nnz = rc_tensor_runs_fp32(s) ? 12.5 : 31.0;
		double m = dd_nnz(s) * per_nnz;
		iter = add_sat(mul_sat(iter, 2.0), m >= 1.8e19 ? UINT64_MAX : (uint64_t)m);
	}
	if (footprint_runs(s))
		iter = add_sat(iter, footprint_bytes(s, V));
	int from_fdk = p->initial == RC_INITIAL_FDK || p->initial == RC_INITIAL_AUTO;
	return add_sat(add_sat(base, kept), from_fdk && fdk > iter ? fdk : iter);
}
