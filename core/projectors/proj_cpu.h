/*
 * proj_cpu: the CPU projectors behind engine_cpu.c (not a public contract;
 * tests and the benchmark call them through the engine).
 *
 *   proj_raycast.c  RC_FP_RAYCAST and its exact adjoint RC_BP_MATCHED; the
 *                   forward's lane loop and the adjoint's group loop in
 *                   proj_raycast_group.h, compiled per ISA like the voxel
 *                   back projector's
 *   proj_rotate.c   RC_FP_ROTATE (paper 000 §3.2: rotation kernel + projection
 *                   kernel, Approach B)
 *   proj_voxel.c    RC_BP_VOXEL (paper 002 Eq. 1), the inner loops in
 *                   proj_voxel_tile.h compiled three times: baseline x86-64
 *                   (proj_voxel.c), AVX2 (proj_voxel_avx2.c), AVX-512
 *                   (proj_voxel_avx512.c), chosen at run time; with the
 *                   splat gain it is RC_BP_SPLAT
 *   proj_plane.c    RC_BP_VOXEL of a fan or parallel stack (FBP's)
 *   proj_joseph.c   RC_FP_RAYCAST and RC_BP_MATCHED of a fan or parallel
 *                   stack: Joseph's forward projection and its transpose
 *   proj_cyl.c      RC_BP_VOXEL of a cone with a curved (cylindrical)
 *                   detector: the column set-up of proj_voxel.c's tiles,
 *                   and a plain reference; its ray-casting pair is
 *                   proj_raycast.c's
 *   proj_splat.c    RC_FP_SPLAT, the voxel-driven forward projector whose
 *                   exact transpose is RC_BP_SPLAT (the matched pair of the
 *                   iterative algorithms where voxels project at most a
 *                   pixel apart)
 *   proj_footprint.c RC_FP_FOOTPRINT and its exact transpose
 *                   RC_BP_FOOTPRINT: the separable-footprint pair (SF-TR)
 *                   of the iterative algorithms where voxels project more
 *                   than a pixel apart; column loops in
 *                   proj_footprint_col.h, compiled per ISA
 *
 * Every projector runs views [first, last) of a cone or matrices geometry
 * (proj_plane.c and proj_joseph.c: of a fan or parallel stack; the caller
 * checks the type and range), splits its work over the pool and
 * writes disjoint outputs per task, so results do not depend on the number
 * of threads (RAYCAST, MATCHED, ROTATE: bit-identical; VOXEL: identical too,
 * each voxel is summed in view order by one task).
 */
#ifndef RC_PROJ_CPU_H
#define RC_PROJ_CPU_H

#include <math.h>

#include "geometry/geometry.h"
#include "util/threadpool.h"

typedef enum rc_cpu_isa {
	RC_ISA_BASELINE = 0,
	RC_ISA_AVX2,
	RC_ISA_AVX512,
	RC_ISA_COUNT
} rc_cpu_isa;

/* The widest path this CPU runs; RECOND_CPU_ISA=baseline|avx2|avx512 in the
 * environment caps it (for comparisons). */
rc_cpu_isa rc_cpu_isa_best(void);
int rc_cpu_isa_supported(rc_cpu_isa isa);
const char *rc_cpu_isa_name(rc_cpu_isa isa);

/* Ray casting: fixed step of half the smallest voxel size (mm), midpoint
 * samples from where the ray enters the support of the trilinear
 * interpolant (voxel index -1..n on each axis) to where it leaves. */
double rc_raycast_step_mm(const rc_volume_desc *v);
/* The forward ray caster keeps a zero-bordered copy of the volume (so that
 * no sample needs a bounds test), allocated at its first call and reused. */
typedef struct rc_fpr rc_fpr;
int rc_fpr_new(const rc_geom *g, rc_fpr **ret, rc_err *err);
void rc_fpr_free(rc_fpr *f);
void rc_fp_raycast(rc_fpr *f, rc_pool *pool, rc_cpu_isa isa, const float *vol, float *proj, int first, int last);
void rc_bp_matched(const rc_geom *g, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol,
		   int first, int last);

/* Rotation + projection; owns its rotated-volume buffer (cone only). */
typedef struct rc_rotate rc_rotate;
int rc_rotate_new(const rc_geom *g, rc_rotate **ret, rc_err *err);
void rc_rotate_free(rc_rotate *r);
void rc_fp_rotate(rc_rotate *r, rc_pool *pool, const float *vol, float *proj,
		  int first, int last);

/* Memory a projector keeps for a speed-up (a buffer it can do without):
 * reserves bytes if all such buffers of the process, these included, stay
 * within env (MiB) if set, else a quarter of physical memory or of the
 * process's cgroup limit (systemd's MemoryMax=, a container's), whichever
 * is less, so that a job near the memory cap is not pushed into the
 * out-of-memory killer (malloc rarely fails under overcommit).  Returns 1
 * if reserved; rc_proj_keep_release gives the bytes back when the buffer
 * is freed. */
int rc_proj_keep_reserve(size_t bytes, const char *env);
void rc_proj_keep_release(size_t bytes);

/* The volume z-fastest ([y][x][z]) for a voxel-driven forward projection
 * (proj_zfast.c): rc_zfast_fill copies vol into it over the pool and
 * returns it, or NULL where rc_proj_keep_reserve refused it (once: the
 * caller then reads columns with the volume's stride). */
typedef struct rc_zfast {
	float *xt;
	size_t bytes; /* reserved for xt */
	int failed;
} rc_zfast;
const float *rc_zfast_fill(rc_zfast *z, const rc_volume_desc *v, const float *vol, rc_pool *pool);
void rc_zfast_release(rc_zfast *z);

/* The z coordinate of each voxel plane (nz floats, malloc'd; NULL: out of
 * memory). */
float *rc_volume_z_table(const rc_volume_desc *v);

/* Voxel-driven back projection; owns padded view blocks and per-thread rows.
 * splat_gain != 0 multiplies every pixel by the splat gain (below) as the
 * views are padded and weighs cone views with the splat's footprint
 * instead of bilinearly: RC_BP_SPLAT, the exact transpose of rc_fp_splat. */
typedef struct rc_bpv rc_bpv;
#define RC_BPV_BLOCK 32 /* views per sweep of the volume: docs/cpu-engine.md */
int rc_bpv_new(const rc_geom *g, int threads, rc_bpv **ret, rc_err *err);
/* The bytes rc_bpv_new allocates, at most, for a detector of nu x nv
 * pixels, nz slices and threads threads (tiles of RC_BPV_BYMAX rows):
 * the block of padded views and each thread's tile scratch. */
uint64_t rc_bpv_bytes(int nu, int nv, int nz, int threads);
void rc_bpv_free(rc_bpv *b);
void rc_bp_voxel(rc_bpv *b, rc_pool *pool, rc_cpu_isa isa, const float *proj,
		 float *vol, int first, int last, int splat_gain);
/* rc_bp_voxel that adds the sum to vol (vol += ...) when accumulate: the
 * tiles' sums are added where they would be stored, so it costs no more. */
void rc_bp_voxel_acc(rc_bpv *b, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol, int first,
		     int last, int splat_gain, int accumulate);

/* Voxel-driven back projection of a cone geometry with a curved
 * (cylindrical) detector (proj_cyl.c): vol = sum over views first..last of
 * p_k(u, v) / L^2, (u, v) and L from rc_geom_cyl_project, bilinear with
 * zero outside; plain C in double, keeping a transposed copy of the call's
 * views while it runs (RC_ENOMEM if that cannot be had).  The reference of
 * the engine's RC_BP_VOXEL on that geometry, which is rc_bp_voxel's tiles
 * with the cylinder's column set-up. */
int rc_bp_cyl(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last, rc_err *err);

/* Voxel-driven back projection of a fan or parallel stack (proj_plane.c):
 * vol = sum over views first..last of p_k,z(u) / w^2 (w = 1 for parallel),
 * linear in u with zero outside; the FBP back projection of algo_fdk.c. */
int rc_bp_plane(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last, rc_err *err);
/* rc_bp_plane adding to vol when accumulate (vol += ...). */
int rc_bp_plane_acc(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last,
		    int accumulate, rc_err *err);
/* What rc_bp_plane applies at in-plane point (x, y) in view k, in double:
 * the continuous pixel index *u and the returned distance weight (1/w^2,
 * 1/L^2 for a curved fan, 1 for parallel).  The FBP matrix (fbp_matrix.h) is built from it. */
double rc_plane_fbp_weight(const rc_geom *g, int k, double x, double y, double *u);

/* The matched pair of a fan or parallel stack (proj_joseph.c), the C
 * reference of the OpenCL engine's (kernels/opencl/bp_plane.cl): proj
 * views first..last = Joseph's forward projection of vol (line integrals in
 * mm x 1/mm; other views untouched), and vol = its exact transpose over
 * views first..last, gathered per voxel. */
int rc_fp_plane(const rc_geom *g, rc_pool *pool, const float *vol, float *proj, int first, int last, rc_err *err);
int rc_bp_plane_matched(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last,
			rc_err *err);

/* A view of a 2-D stack as the 2-D projectors read it, in voxel indices
 * (i, j) of a slice: u w = o[0] + o[1] i + o[2] j and w = o[3] + o[4] i +
 * o[5] j (w = 1 for parallel), from the view's A in double, rounded once. */
#define RC_PLANE_FLOATS 6
void rc_plane_view(const rc_geom *g, int k, float o[RC_PLANE_FLOATS]);
/* Every pixel's ray of a 2-D stack, the Joseph pair's table (rays[view][u]
 * of RC_PLANE_RAY_FLOATS): the line a i + b j + c = 0 in voxel indices
 * through the pixel, from rc_plane_view's floats with u = the pixel's
 * coordinate on A's flat detector (rc_geom_line_u: the pixel index when
 * flat, the tangent detector's point on the pixel's arc ray when curved),
 * and ds, the ray's length in mm per sample (per column where |b| >= |a|,
 * else per row).  Every implementation of the pair reads this table, so
 * forward and transpose weigh with the same floats. */
#define RC_PLANE_RAY_FLOATS 4
void rc_plane_rays(const rc_geom *g, float *rays);
/* A curved fan in the 2-D kernels that map a point to the detector
 * (FBP's bp_plane, the transpose's pixel search).  A's first row is the
 * tangent flat detector's, u w = (S/du) side + cu w with side = e_u.(X-s)
 * and w the depth (build_2d), so with h = u w and w from rc_plane_view's
 * rows, y = h - cu w and x = sdu w are side and depth times S/du, and the
 * arc's pixel index is atan2(y, x) sdu + cu (rc_geom_plane_u), its FBP
 * weight 1/L^2 = sdu^2 / (x^2 + y^2) (rc_plane_fbp_weight's cos^2/w^2).
 * Returns 1 and sets *cu = (nu-1)/2 - offset_u/du, *sdu = S/du for a curved
 * fan; 0 (both 0) otherwise, where the kernels keep the flat u = h / w. */
int rc_plane_arc(const rc_geom *g, float *cu, float *sdu);

/* The splat pair's per-pixel gain g(u, v) = V |c0 - u cu - v cv| of view k
 * (proj_splat.c derives it): what a voxel of unit density adds to the
 * detector in sum, times its depth squared. */
typedef struct rc_splat_gain {
	double c0[3], cu[3], cv[3];
} rc_splat_gain;
void rc_splat_gain_init(const rc_geom *g, int k, rc_splat_gain *gn);
/* out[i] = g at (u + i, v) (along_v 0) or (u, v + i) (along_v 1), i < n:
 * one vectorised float loop (c is linear along a detector row or column;
 * proj_splat.c is compiled without math-errno). */
void rc_splat_gain_line(const rc_splat_gain *gn, double u, double v, int along_v, int n, float *restrict out);
/* Gains a caller computes at once (a stack buffer of this many floats). */
#define RC_SPLAT_GAIN_CHUNK 512

/* The splat pair's footprint on a cone view (P[2] = P[10] = 0): along u
 * and along v a voxel whose projection is w < 1 pixel wide spreads over the
 * pixels within w of its projection with the weights (1 - |d| / w) / w (a
 * hat as wide as the voxel: neighbouring voxels' hats sum to a flat 1/w,
 * as the bilinear weights do, but a voxel is not smeared over a whole
 * pixel either side); at w >= 1 that is the bilinear weight 1 - |d|.  w
 * along u is the larger of the voxel's x and y steps projected on u (the
 * distance-driven projector's width), along v its z step.  Off cone views
 * the pair stays bilinear.  Measured against analytic line integrals, the
 * hat model's projections are closer than ray casting's, the bilinear ones
 * 1.2x further (docs/cpu-engine.md, "Splatting"). */
/* (Selects, not fmax/fmaxf: those are library calls without
 * -ffinite-math-only, and the forward's row loop must vectorise.) */
static inline float rc_splat_hat_scale(double w) { return w < 1 ? (float)(1.0 / w) : 1.0f; }
/* The weight at distance d (pixels, >= 0) for scale s = 1 / w. */
static inline float rc_splat_hat(float d, float s)
{
	float r = 1.0f - d * s;
	return r > 0.0f ? r * s : 0.0f;
}
/* The u weights of a voxel column at u (fraction fu = u - floor(u), depth
 * 1/iw) on cone view P, voxel sizes vx, vy: w0 on floor(u), w1 on the next. */
static inline void rc_splat_hat_u(const double *P, double u, double iw, double vx, double vy, float fu, float *w0,
				  float *w1)
{
	double a = fabs(P[0] - u * P[8]) * iw * vx, b = fabs(P[1] - u * P[9]) * iw * vy;
	float su = rc_splat_hat_scale(a > b ? a : b);
	*w0 = rc_splat_hat(fu, su);
	*w1 = rc_splat_hat(1.0f - fu, su);
}
/* The v scale of a column whose v moves dv pixels per mm of z, voxels vz mm. */
static inline float rc_splat_hat_sv(float dv, double vz) { return rc_splat_hat_scale(fabs((double)dv) * vz); }

/* Voxels further apart on the detector than this (pixels, in u or v) make
 * the splat's bilinear footprints ripple: rc_splat_suits is false. */
#define RC_SPLAT_MAX_STEP 1.0
/* The largest projected voxel step over every view (infinity for fan,
 * parallel or a volume reaching behind the source), and whether it is at
 * most RC_SPLAT_MAX_STEP. */
double rc_splat_max_step(const rc_geom *g);
int rc_splat_suits(const rc_geom *g);

/* Splatting forward projection; owns one padded image per worker (threads:
 * the pool's). */
typedef struct rc_fps rc_fps;
int rc_fps_new(const rc_geom *g, int threads, rc_fps **ret, rc_err *err);
void rc_fps_free(rc_fps *f);
void rc_fp_splat(rc_fps *f, rc_pool *pool, rc_cpu_isa isa, const float *vol, float *proj, int first,
		 int last);

/* The separable-footprint pair (proj_footprint.c): a trapezoid along u, a
 * rectangle along v, each integrated over the pixels, times the splat
 * pair's gain (a cylindrical detector's own per-row gain); offered where
 * rc_footprint_suits (a cone, flat or curved, or matrices geometry with
 * the volume in front of every source).  The forward keeps
 * one transposed view per worker (threads: the pool's) and a z-fastest
 * copy of the volume; the back a block of gained transposed views.  vol
 * is overwritten by the back projection. */
typedef struct rc_fpf rc_fpf;
int rc_footprint_suits(const rc_geom *g);
/* Whether projector auto should take the pair where rc_footprint_suits
 * (and no splat pair): always, but on a curved cone only where some voxel
 * projects more than RC_SPLAT_MAX_STEP pixels apart (rc_footprint_cyl_step;
 * below, ray casting's pair is closer to line integrals, as the splat
 * pair is on a flat detector). */
int rc_footprint_auto_suits(const rc_geom *g);
/* A curved cone's largest projected voxel step (pixels, in u or in v)
 * over the volume's eight corner voxels and each view's voxels nearest its
 * source in the plane, by central differences of rc_geom_cyl_project over
 * a voxel; infinity elsewhere. */
double rc_footprint_cyl_step(const rc_geom *g);
int rc_fpf_new(const rc_geom *g, int threads, rc_fpf **ret, rc_err *err);
void rc_fpf_free(rc_fpf *f);
int rc_fp_footprint(rc_fpf *f, rc_pool *pool, rc_cpu_isa isa, const float *vol, float *proj, int first, int last,
		    rc_err *err);
int rc_bp_footprint(rc_fpf *f, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol, int first, int last,
		    rc_err *err);
/* Every view by the per-voxel path, cone views too (a test compares the
 * two paths). */
void rc_fpf_force_general(rc_fpf *f, int on);

#endif
