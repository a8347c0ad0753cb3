/*
 * checks: signs that a job's data or geometry is not what the user meant,
 * found before and after a run that would otherwise succeed without a word
 * (pixel pitch or voxel size in cm, angles in radians, intensities sent as
 * line integrals, NaN, a truncated object, a volume larger than the field
 * of view, a detector read transposed).  Each finding is a warning with a
 * stable code (docs/api.md, "Warnings") and a message that says what to
 * check.  Pure computation on the geometry and the stack: no I/O, no JSON.
 */
#ifndef RC_CHECKS_H
#define RC_CHECKS_H

#include <stddef.h>

#include "geometry/geometry.h"

#define RC_WARN_MAX 12
#define RC_WARN_MSG 320

typedef struct rc_warning {
	const char *code; /* a static string: one of the codes below */
	char message[RC_WARN_MSG];
} rc_warning;

typedef struct rc_warnings {
	int n;
	rc_warning w[RC_WARN_MAX];
} rc_warnings;

/* The stable codes (docs/api.md). */
#define RC_WARN_PRE_LOG "pre_log"
#define RC_WARN_NON_FINITE "non_finite"
#define RC_WARN_TRUNCATED "truncated"
#define RC_WARN_FOV "fov_not_covered"
#define RC_WARN_DETECTOR_UNITS "detector_units"
#define RC_WARN_VOXEL_UNITS "voxel_units"
#define RC_WARN_ANGLES_RADIANS "angles_radians"
#define RC_WARN_RESIDUAL "residual_high"
#define RC_WARN_TRANSPOSED "detector_transposed"

/* Thresholds (docs/api.md states them). */
#define RC_CHECK_PRE_LOG_MEDIAN 20.0  /* line integrals of real objects are mostly 0..10 */
#define RC_CHECK_EDGE_FRACTION 0.1    /* an edge column above this fraction of its view's peak */
#define RC_CHECK_EDGE_VIEWS 0.2       /* ... in more than this fraction of views: truncated */
#define RC_CHECK_FOV_PARTIAL 0.5      /* volume fraction outside some view's detector */
#define RC_CHECK_MIN_DETECTOR_MM 5.0  /* a detector narrower than this: pitch in cm? */
#define RC_CHECK_VOXEL_RATIO 6.0      /* voxel vs magnified pitch beyond x6 or /6 */
#define RC_CHECK_RADIANS_VIEWS 20     /* more views than this all within 2 pi: radians? */
#define RC_CHECK_AXIS_RATIO 2.0       /* rows vary this much more over views than columns */
#define RC_CHECK_AXIS_MIN 0.05        /* ... and by at least this much (relative) */
#define RC_CHECK_RESIDUAL_FLOOR 0.25  /* exact data: 0.04-0.15 (test_warnings, test_push_confirm) */
#define RC_CHECK_RESIDUAL_NOISE 3.0   /* ... or this many times what the noise explains */

/* Adds a warning (dropped when the list is full). */
void rc_warn_add(rc_warnings *ws, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Geometry alone: detector size and voxel size against the magnified
 * pitch (units), angles that look like radians, and the fraction of the
 * volume that some view's detector does not see (a coarse grid of the
 * volume projected into every view). */
void rc_check_geometry(const rc_geom *g, rc_warnings *ws);

/* What the data says, from one pass over the stack (proj: the whole stack
 * in rc_geom's layout). */
typedef struct rc_data_stats {
	long long non_finite;   /* NaN and inf values (zeroed when asked) */
	int first_non_finite_view; /* -1 when none */
	double median;          /* of a sample of the finite values */
	double noise_sigma;     /* per-pixel noise, robust, from second differences along u */
	double rms;             /* root mean square of the finite values */
	double truncated_views; /* fraction of views with an edge far from 0 */
	double bright_edge_views; /* fraction of views whose edges are as bright as their peak */
	/* cone: how much each row's sum (over u) and each column's sum (over
	 * v) change from view to view, relative to their means over views.
	 * Rows along the rotation axis keep their sums (the object's mass per
	 * z, up to the cone's magnification); columns do not: a detector read
	 * transposed swaps the two.  0 when not computed. */
	double row_variation, col_variation;
} rc_data_stats;

/* Scans proj, a view per task on up to threads threads (0 = every core;
 * the result does not depend on them); where wproj is given (proj itself,
 * writable), NaN and inf are set to 0 there (NULL: counted only).  Warnings for non-finite
 * values, pre-log data, truncation and a transposed detector go into ws. */
void rc_check_data(const rc_geom *g, const float *proj, float *wproj, int threads, rc_data_stats *st,
		   rc_warnings *ws);

/* The relative residual ||p - Ax|| / ||p|| of a result against what the
 * data's noise explains: a warning when rel is above
 * max(RC_CHECK_RESIDUAL_FLOOR, RC_CHECK_RESIDUAL_NOISE * sigma / rms). */
void rc_check_residual(double rel, const rc_data_stats *st, rc_warnings *ws);

#endif
