/*
 * ooc_iter_run: one out-of-core iterative run's state and the passes that
 * ooc_iter.c (CGLS, SIRT, MLEM) and ooc_subsets.c (SART, OS-EM) share;
 * internal to core/plan (ooc_iter.h is the interface).
 */
#ifndef RC_PLAN_OOC_ITER_RUN_H
#define RC_PLAN_OOC_ITER_RUN_H

#include <stdint.h>

#include "algo/algo.h"
#include "algo/algo_util.h"
#include "plan/recon_spec.h"

typedef struct ooc_run {
	const rc_recon_spec *s;
	const rc_geom *g;
	rc_projector pair;
	const atomic_int *cancel;
	uint64_t budget;        /* the plan's; 0: none */
	int nz, nzs, slabs, nviews, nk, chunks;
	size_t plane, view, nu; /* floats: a slice, a view, a row */
	uint64_t V, P;          /* bytes: a volume, a stack */
	int *r0, *r1;           /* per slab: the detector rows it reads */
	float *chunk, *rows, *a, *b, *c; /* c: SIRT's x slab */
	int pscr, vscr, stack;            /* SIRT: rinv (pscr at 0), C (vscr at 0), p */
	rc_stop stop;                     /* the stop rules' thresholds (stack_stats) */
	double psum;                      /* sum p (TV's scale) */
	double ppos, pmax;                /* MLEM's start: sum max(p, 0), max(p, 0) */
	int em;                           /* MLEM: the SIRT passes as EM's (algo_sart.c) */
	float em_eps;                     /* MLEM's ratio guard */
	double tv_weight;                 /* the TV weight that runs (rc_tv_weight's) */
	double fsum;                      /* forward's last sum (not SIRT's passes) */
	/* TV (algo_util.h's rc_tv): on, eps, SIRT's step and steps, CGLS's
	 * -beta_tv; tvx: backward adds tvneg L(x) x (x in xfd) to its slabs;
	 * tw, td, to: slabs with a slice of halo each side, carry a slice,
	 * tvs the operator's weights (rc_tv_apply_in's scratch) */
	int tv_on, tv_steps, tvx, xfd;
	double tv_scale;
	float tv_eps, tv_step, tvneg;
	float *tw, *td, *to, *carry, *tvs;
	/* SART and OS-EM (ooc_subsets.c): S blocks of views in order; bpvox:
	 * SART's voxel-driven back projector (else the matched one); form:
	 * the column sums' closed form (fmap the block's, kappa its scale;
	 * fsums scratch), else recomputed per slab, inverted against cmax, each
	 * block's largest B_s(1); T the TV steps per block, slot T + 1 slabs
	 * in flight (a slice of halo each side), carries T slices; next the
	 * next block's A x (chunk: this block's residual) */
	int S, T, bpvox, form, keep; /* keep: B_s(1) at blk V of vscr (rc_ooc_iter_colsum_kept) */
	int *order;
	double kappa;
	double *fsums;
	float *fmap, *cmax, *next, *slot, *carries;
} ooc_run;

/* Files: n bytes at off (past a sparse file's end: zeros), RC_EIO */
int ooc_rd(int fd, void *dst, size_t want, uint64_t off, rc_err *err);
int ooc_wr(int fd, const void *src, size_t len, uint64_t off, rc_err *err);
int ooc_cancelled(const ooc_run *R, rc_err *err);
/* Slab i's slices [*z0, *z1) */
void ooc_slab_z(const ooc_run *R, int i, int *z0, int *z1);
/* Slab z0..z1 of views k0..k1 onto (back 0) or from (back 1) rows r0..r1 */
int ooc_slab_project(const ooc_run *R, int back, int z0, int z1, int r0, int r1, int k0, int k1, float *vol,
		     float *rows, rc_err *err);
/* Slab i's (vol) projection onto views k0..k1 added to buf (whole views) */
int ooc_fp_add(ooc_run *R, float *vol, int i, int k0, int k1, float *buf, rc_err *err);
/* dst = A v (vfd < 0: ones) chunk by chunk; sirt: SIRT's weighted residual */
int ooc_forward(ooc_run *R, int vfd, uint64_t v_off, int dst, uint64_t dst_off, int sirt, double *qq, rc_err *err);
/* n floats of fd replaced by their guarded inverse (rc_vinv_guarded's) */
int ooc_inv_guarded(ooc_run *R, int fd, uint64_t off, uint64_t n, double rel, rc_err *err);
/* Views k0..k1 of A x in R->chunk made the residual (EM: the ratio) */
int ooc_sirt_residual(ooc_run *R, int k0, int k1, double *r2, rc_err *err);
/* x0 into xfd (zero or the FDK start), *start which */
int ooc_start_x(ooc_run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_initial *start,
		rc_err *err);
/* One TV step on a slab in w (nzw slices, the slab's nzm from lo): the
 * operator, the slab's last slice before the step into carry, the step,
 * with clamp the clamp at 0 */
void ooc_tv_step(ooc_run *R, float *w, int nzw, int lo, int nzm, float *carry, int clamp);
/* ooc_start_x, the stack's pass, A 1 into pscr at 0, TV's scale, x
 * floored (nonnegative; EM's start), pscr made rinv (not EM): SIRT's,
 * MLEM's, SART's and OS-EM's start.  ax (or NULL): views k0..k1 of A x0,
 * formed in the floor's pass or zero where x0 is, *ax_done 1; else zeroed,
 * *ax_done 0 (a pass of its own left to the caller) */
int ooc_em_start(ooc_run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_initial *start,
		 float *ax, int k0, int k1, int *ax_done, rc_err *err);
/* x clamped at lo (fill: set to lo); ax (or NULL): the floored x's
 * projection onto views k0..k1 added there */
int ooc_floor_x(ooc_run *R, int xfd, float lo, int fill, float *ax, int k0, int k1, rc_err *err);
/* The stack's pass: the stop rules' thresholds, sum p, the TV weight, EM's start */
int ooc_stack_stats(ooc_run *R, int cgls, rc_err *err);
/* TV's scale from sum A 1 over R->S blocks */
void ooc_tv_init(ooc_run *R, double a1sum);
/* An iteration's end: rep's count, the stop rules on the residual res,
 * the progress (stopped: the rule that ended the run); the rule or NULL */
const char *ooc_iteration_end(ooc_run *R, const rc_algo_hooks *hooks, int it, double res, double t0,
			      rc_recon_report *rep);

/* SART and OS-EM (ooc_subsets.c) */
int ooc_iterate_subsets(ooc_run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_recon_report *rep,
			rc_err *err);

#endif
