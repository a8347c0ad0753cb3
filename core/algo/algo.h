/*
 * algo: the reconstruction algorithms, each written once over the backend
 * interface (backend.h), so that every engine, every split of devices and
 * the tensor path run the same code.
 *
 *   FDK   algo_fdk.c   cosine weight, ramp filter (FFTW) with a window,
 *                      Parker weights for a short scan, RC_BP_VOXEL
 *   SART  algo_sart.c  paper 000 Eq. 1, all views per iteration (or ordered
 *                      subsets), relaxation lambda, A / RC_BP_VOXEL
 *   SIRT  algo_sirt.c  row/column-sum normalised simultaneous updates
 *   CGLS  algo_cgls.c  paper 001 Alg. 1 on the matched pair A / A^T
 *   MLEM  algo_mlem.c  multiplicative EM update
 *
 * A and A^T are the matched pair algorithm.projector names (rc_algo_fp in
 * algo_util.h); auto is the backend's (rc_bk_fp, rc_bk_bp_matched in
 * backend.h): the splat pair on the CPU engine where voxels project at most
 * a pixel apart, else ray casting and its transpose.
 *
 * Every iteration calls hooks->progress and checks hooks->cancel; all
 * vectors are allocated once per run, never per iteration.  A backend whose
 * vectors live on a device gets the measured projections once and returns
 * the volume once; in between only the scalars an algorithm branches on
 * cross (dot products, residuals).
 */
#ifndef RC_ALGO_H
#define RC_ALGO_H

#include <stdatomic.h>
#include <stddef.h>

#include "backend/backend.h"
#include "backend/exec.h"

typedef enum rc_algo_name {
	RC_ALGO_FDK = 0,
	RC_ALGO_SART,
	RC_ALGO_SIRT,
	RC_ALGO_CGLS,
	RC_ALGO_MLEM,
} rc_algo_name;

typedef enum rc_filter_window {
	RC_WINDOW_RAM_LAK = 0,
	RC_WINDOW_SHEPP_LOGAN,
	RC_WINDOW_HANN,
} rc_filter_window;

typedef enum rc_scan_mode {
	RC_SCAN_AUTO = 0,  /* short scan (Parker) when the angular range < 360 deg - one step */
	RC_SCAN_FULL,
	RC_SCAN_SHORT,
} rc_scan_mode;

/* algorithm.initial: where an iterative algorithm starts */
typedef enum rc_initial {
	RC_INITIAL_ZERO = 0, /* 0 (MLEM: the constant sum(p+) / sum(A 1)) */
	RC_INITIAL_FDK,      /* FDK's volume of the same projections (rc_algo_start) */
	RC_INITIAL_GIVEN,    /* vol holds the start on entry (a caller that ran FDK
	                        elsewhere: recon.c for the tensor backend) */
	RC_INITIAL_AUTO,     /* the default: FDK where FDK reconstructs the
	                        geometry (rc_fdk_suits) on this backend, else
	                        ZERO (a limited-angle scan, views out of order,
	                        tilted matrices; the tensor backend) */
} rc_initial;

/* algorithm.extend: the long object (core/plan/extend.h).  An iterative
 * run reconstructs the slabs beyond the asked volume that the rays through
 * it cross, then keeps the asked slices; FDK never needs it. */
typedef enum rc_extend {
	RC_EXTEND_AUTO = 0, /* the default: extended where the data show mass beyond the asked z range */
	RC_EXTEND_OFF,      /* the asked volume only (the projections' mass beyond it lands in it) */
	RC_EXTEND_ON,       /* extended whatever the data show */
} rc_extend;

/* algorithm.projector: the iterative algorithms' matched pair */
typedef enum rc_projector {
	RC_PROJECTOR_AUTO = 0, /* the backend's fastest (rc_bk_fp: the splat pair where offered,
	                          else the footprint pair where offered) */
	RC_PROJECTOR_SPLAT,    /* RC_FP_SPLAT / RC_BP_SPLAT; refused where not offered */
	RC_PROJECTOR_RAYCAST,  /* RC_FP_RAYCAST / RC_BP_MATCHED, on every backend */
	RC_PROJECTOR_FOOTPRINT, /* RC_FP_FOOTPRINT / RC_BP_FOOTPRINT; refused where not offered */
} rc_projector;

typedef struct rc_algo_params {
	rc_algo_name name;
	int iterations;          /* iterative algorithms; >= 1 */
	double relaxation;       /* SART/SIRT lambda, (0, 2) */
	int subsets;             /* SART's and MLEM's (OS-EM) ordered subsets; 1 =
	                            all views per update, 0 = the default
	                            (rc_algo_subsets) */
	int nonnegative;         /* clamp the volume at 0 after each update
	                            (CGLS: restarts, see algo_cgls.c) */
	double tv_weight;        /* kappa of the TV penalty (algo_util.h's rc_tv:
	                            relative to the data's mean density); 0 =
	                            none */
	int tv_auto;             /* tv_weight is the default's: the run scales it
	                            by the data's noise (rc_tv_weight); 0 = used
	                            as given */
	int tv_steps;            /* SART/SIRT/MLEM: TV descent steps per iteration */
	double stop_tolerance;   /* stop once ||p - A x|| <= this * ||p||; 0 = off */
	double stop_discrepancy; /* tau: stop once ||p - A x|| <= tau * noise,
	                            noise^2 = sum of the rays' variances; 0 = off */
	double stop_stagnation;  /* stop once ||p - A x|| fell by less than this
	                            fraction of itself over an iteration; 0 = off */
	double noise_sigma;      /* per-ray noise standard deviation of p; 0 =
	                            estimated from p (noise.h) */
	rc_filter_window window; /* FDK */
	double cutoff;           /* FDK, fraction of Nyquist in (0, 1]; 1 = none */
	rc_scan_mode scan;       /* FDK */
	int streaming;           /* FDK run with hooks->views (the caller sets
	                            both); no more memory: its groups are added
	                            onto the volume in place */
	rc_projector projector;  /* iterative cone/matrices jobs on a host backend */
	rc_initial initial;      /* iterative: the start; with FDK or GIVEN, vol is
	                            written before the iterations (also when they
	                            fail) */
	rc_extend extend;        /* iterative 3-D jobs: rc_recon_run's extension (extend.h) */
	size_t subset_cache_bytes; /* SART / OS-EM: per-subset column sums kept
	                              up to this many bytes, beyond it recomputed
	                              per subset; 0 = the default (SART: none,
	                              MLEM: RC_SUBSET_CACHE_BYTES; tests choose
	                              either path with it) */
} rc_algo_params;

/* Fills defaults (docs/algorithms.md says why each): 10 iterations; every
 * iterative method starts from FDK's volume and stops on stagnation
 * (RC_DEFAULT_STAGNATION, RC_MLEM_DEFAULT_STAGNATION);
 * SART/SIRT lambda 1;
 * SART's subsets 0 (the default count); non-negativity on; the TV phase
 * with RC_TV_DEFAULT_WEIGHT (tv_auto: scaled by the data's noise when the
 * run starts, rc_tv_weight) and RC_TV_DEFAULT_STEPS; the discrepancy stop
 * at tau = RC_STOP_DEFAULT_TAU with the noise estimated; FDK ram-lak,
 * cutoff 1. */
void rc_algo_params_default(rc_algo_params *p, rc_algo_name name);

/* The textbook method without what the defaults add: one subset, no
 * clamp, no TV, no stopping rule, the start at 0 (MLEM: the constant)
 * (tests and comparisons with peers). */
void rc_algo_params_plain(rc_algo_params *p, rc_algo_name name);

/* The TV weight a run of p on the n values of proj (rows of nu) uses:
 * p->tv_weight when given (tv_auto 0), else
 * p->tv_weight * min(1, max(rel, RC_TV_MIN_NOISE) / RC_TV_REF_NOISE) with
 * rel the data's relative noise (noise.h's rc_noise_relative, from
 * p->noise_sigma when given).  A TV phase moves a voxel by about kappa
 * times the data's mean density; what it has to remove is noise of an
 * amplitude in proportion to rel, and where there is none it only rounds
 * edges, so the default follows the noise (docs/algorithms.md).
 * rc_algo_run_on applies it. */
double rc_tv_weight(const rc_algo_params *p, const float *proj, size_t n, int nu);
/* The same from rel, the data's relative noise found elsewhere (a stack
 * read in pieces out of core: core/plan/ooc_iter.c; -1: unknown). */
double rc_tv_weight_rel(const rc_algo_params *p, double rel);

#define RC_TV_DEFAULT_WEIGHT 0.02
/* The relative noise (noise.h's rc_noise_relative) at and above which the
 * default weight is RC_TV_DEFAULT_WEIGHT; below it the weight falls in
 * proportion (rc_tv_weight, docs/algorithms.md "The default TV weight"). */
#define RC_TV_REF_NOISE 0.01
/* The least relative noise the rule assumes: data never fit the discrete
 * model exactly (voxels, ray sampling), and on exact data no TV at all
 * leaves SART's ordered subsets apart (docs/algorithms.md). */
#define RC_TV_MIN_NOISE 0.001
#define RC_TV_DEFAULT_STEPS 10
#define RC_TV_MAX_WEIGHT 10.0
#define RC_STOP_DEFAULT_TAU 1.0
/* The default stagnation stops, MLEM's and the others' (docs/algorithms.md:
 * from FDK's volume their error rises while the residual keeps falling
 * slowly; EM's error turns after 2-3 iterations, when its residual still
 * falls by 5-6 % an iteration, SART's after 4, at 1 %; SIRT and CGLS with
 * TV gain what they gain in 2-6) */
#define RC_DEFAULT_STAGNATION 0.01
#define RC_MLEM_DEFAULT_STAGNATION 0.05
/* SART's default subset count for n views: about RC_SART_VIEWS_PER_SUBSET
 * views each (1 subset below twice that). */
#define RC_SART_VIEWS_PER_SUBSET 10
int rc_sart_default_subsets(int nviews);
/* The ordered subsets a run of p over nviews views uses: SART's and
 * MLEM's (OS-EM) given count, else SART's default and MLEM's 1; 1 for
 * the others. */
int rc_algo_subsets(const rc_algo_params *p, int nviews);

/* Parses "sart" etc.; returns 0 or RC_EINVAL. */
int rc_algo_name_parse(const char *s, rc_algo_name *ret);
const char *rc_algo_name_str(rc_algo_name n);
int rc_filter_window_parse(const char *s, rc_filter_window *ret);

typedef struct rc_progress {
	int iteration;      /* 1-based, just finished */
	int of;             /* total iterations */
	double residual;    /* ||A x - b|| (CGLS: ||A^T r|| is also fine; see each algo) */
	double elapsed_s;   /* since the start of the run */
	const char *stopped; /* the run ends after this iteration, before `of`:
	                        "tolerance", "discrepancy" or "stagnation" (algo.h's stop
	                        rule); NULL otherwise */
	int views_done;     /* streaming FDK: views back-projected so far; */
	int views_of;       /* of this many (0 when not streaming) */
	/* streaming helical FDK (zfinal 1): the slices final so far, counted
	 * from the volume's end where the scan begins, and the z (mm) of the
	 * far face of the last of them (the volume is final from that end up
	 * to final_z_mm); zfinal 0: not reported */
	int zfinal;
	int final_slices;
	double final_z_mm;
} rc_progress;

/* Checkpoints: an iterative run's state, from which a run of the same
 * parameters on the same projections continues to the same iterates
 * (docs/server.md, "Checkpoints").  Taken after whole iterations and, when
 * a cancel stops a run, of the state it still holds (SART's, SIRT's and
 * MLEM's last whole iteration, their subset position the first block;
 * CGLS's also within an iteration, before its back projection); what a
 * method carries across iterations is here, what it derives from p and the
 * projections (row and column sums, TV's scale) is made again. */
#define RC_STATE_MAX_VECS 3
typedef struct rc_algo_state {
	rc_algo_name name;
	int iteration;   /* whole iterations done, >= 1 */
	int nvec;        /* vec[0] the iterate x, then the method's (CGLS: r, d) */
	rc_space space[RC_STATE_MAX_VECS];
	const rc_vec *vec[RC_STATE_MAX_VECS]; /* saving: the run's vectors (rc_bk_download them) */
	float *host[RC_STATE_MAX_VECS];       /* resuming: the same in the host layouts */
	int nscal;
	double *scal;    /* [0] the stopping rule's last residual; CGLS then its
	                    residual, a phase (algo_cgls.c) and gamma and active
	                    per batch (3 + 2 nbatch) */
} rc_algo_state;

typedef struct rc_algo_hooks {
	/* Called after every iteration; may be NULL. */
	void (*progress)(void *ud, const rc_progress *p);
	void *ud;
	/* Non-zero asks the run to stop; checked at least once per iteration
	 * (and per subset / view block).  May be NULL. */
	const atomic_int *cancel;
	/* Called after every iteration with the current iterate (may be NULL):
	 * for tests and benchmarks that follow the error per iteration
	 * (rc_bk_download it).  A non-zero return stops the run with it.
	 * rc_recon_run of an extended run (core/plan/extend.h) passes x NULL:
	 * the iterate's asked slices are then already in its vol. */
	int (*iterate)(void *ud, rc_backend *b, const rc_vec *x, int iteration);
	/* Streaming FDK (NULL: proj holds the whole stack; rc_recon_streams
	 * says which runs honour it).  Puts up to max views that are now in
	 * proj and were not given before into list, waiting up to wait_s
	 * seconds for at least one; returns how many (0: none came in time),
	 * or a negative rc_code (err filled) to stop the run.  Each view is
	 * given once; FDK stops asking when it has them all, filters each as it
	 * comes and back-projects them in groups, reporting progress
	 * (views_done) and calling iterate (the partial sum) after each group. */
	int (*views)(void *ud, double wait_s, int *list, int max, rc_err *err);
	/* The run's phase changed (may be NULL): RC_PHASE_FDK_START before an
	 * iterative run's FDK start (algorithm.initial), RC_PHASE_ITERATING
	 * once it is in vol and the iterations begin.  The worker passes it on
	 * as its progress lines' "phase" (docs/api.md, "Progress"). */
	void (*phase)(void *ud, const char *phase);
	/* Iterative runs: called after every whole iteration but the last with
	 * the run's state (vec filled; the callee decides whether to keep it,
	 * e.g. every so many seconds; a non-zero return stops the run with it),
	 * and once more when a cancel stops the run with the state it holds
	 * (its return then ignored).  May be NULL. */
	int (*checkpoint)(void *ud, rc_backend *b, const rc_algo_state *s, rc_err *err);
	/* Non-NULL: the run continues from this state (host and scal filled,
	 * iteration < p->iterations) instead of its start; one not of this
	 * method and shape is refused (RC_EINVAL, field "checkpoint"). */
	const rc_algo_state *resume;
} rc_algo_hooks;

#define RC_PHASE_FDK_START "fdk_start"
#define RC_PHASE_ITERATING "iterating"

/* The shape of p's state on b (name, nvec, space, nscal): what a resume
 * must give and a checkpoint holds. */
void rc_algo_state_shape(const rc_algo_params *p, const rc_backend *b, rc_algo_state *s);

/* The one rule on algorithm.iterations: FDK runs once, an iterative
 * algorithm 1 to RC_ALGO_MAX_ITERATIONS times.  0 or RC_EINVAL (field
 * algorithm.iterations) in err (may be NULL).  The spec parser checks a
 * job's count with it and every iterative algorithm checks its run's. */
#define RC_ALGO_MAX_ITERATIONS 10000
int rc_algo_iterations_check(rc_algo_name name, long long iterations, rc_err *err);

/* Reconstructs vol (rc_volume_count floats, overwritten) from proj (the whole
 * stack) on backend b.  Returns RC_ECANCELLED when cancelled (vol then holds
 * the last complete iterate); after any other error vol is unspecified
 * (a device backend writes it only at the end).  hooks may be NULL.  RC_ETOOBIG from a
 * device backend that cannot hold the run's vectors comes before the first
 * iteration, so the caller can run it elsewhere. */
int rc_algo_run_on(const rc_algo_params *p, rc_backend *b, const float *proj,
		   float *vol, const rc_algo_hooks *hooks, rc_err *err);

/* rc_algo_run_on over the host backend of x (rc_backend_host_new). */
int rc_algo_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err);

/* The start of an iterative run (algorithm.initial): with RC_INITIAL_FDK,
 * FDK's volume of proj (ram-lak, p's scan mode) on b into vol (its
 * cancellation honoured, no progress reported); nothing otherwise.
 * Refused on the tensor backend, whose RC_BP_VOXEL is A^T, not FDK's back
 * projection (recon.c runs FBP on the CPU engine first and passes
 * RC_INITIAL_GIVEN).  RC_INITIAL_AUTO is FDK where rc_fdk_suits and the
 * backend is not the tensor one, else ZERO.  *start is the start taken
 * (ZERO, FDK or GIVEN): after it, *start != RC_INITIAL_ZERO means vol holds
 * the start. */
/* 0 when FDK reconstructs g in scan mode scan (views in scan order, a full
 * circle or a short scan of 180 degrees plus the fan, matrices of a
 * circular-like scan); else FDK's refusal (RC_EINVAL or RC_EUNSUPPORTED,
 * its field geometry.*) in err (may be NULL).  No projection is read. */
int rc_fdk_suits(const rc_geom *g, rc_scan_mode scan, rc_err *err);

/* The displaced (offset, half-fan) detector of a cone or fan geometry
 * (algo_fdk.c's header has the weights): *dir = +1 or -1 when FDK weighs
 * g's views with Wang's redundancy weight (the detector reaches further
 * towards +e_u or -e_u), 0 when it is centred (within 10 % of its width,
 * RTK's rule) or the geometry is of another type; *gamma_o (may be NULL)
 * the overlap's half fan angle.  scan is the scan FDK runs (RC_SCAN_AUTO
 * is taken as full): a displaced detector on a short scan, or one that
 * does not see the rotation axis, is refused in err (RC_EUNSUPPORTED). */
int rc_fdk_displaced(const rc_geom *g, rc_scan_mode scan, int *dir, double *gamma_o, rc_err *err);

/* MLEM's start from a volume: at least this fraction of its constant start
 * (algo_sart.c), since EM cannot move a voxel off 0 (measured on the noisy
 * case: 0.01 to 0.3 give the same error within 0.5 %). */
#define RC_EM_START_FLOOR 0.05
int rc_algo_start(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol, const rc_algo_hooks *hooks,
		  rc_initial *start, rc_err *err);

/* Vectors a run of p allocates, volume-sized and projection-sized, on a
 * backend that cannot borrow host memory: a device backend checks them
 * against its free memory before the run (the result volume and the
 * measured projections included). */
void rc_algo_vectors(const rc_algo_params *p, const rc_geom *g, int *nvol, int *nproj);
/* The same from the counts alone (nviews views, nvox voxels), for a plan
 * made before the geometry is (core/plan/memory.c). */
void rc_algo_vectors_n(const rc_algo_params *p, int nviews, size_t nvox, int *nvol, int *nproj);

#endif
