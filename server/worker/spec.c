/*
 * spec: job JSON -> job_spec (spec.h), the stored spec read back
 * (job_spec_load) and the job's summary.  One function per object of the
 * schema (geometry, detector, volume, algorithm, execution); each checks its
 * keys against a list, reads every member through jfield, and leaves the
 * geometric consistency (source outside the volume, detector seeing it,
 * invertible matrices, buffer sizes) to rc_geom_new, so the checks live in
 * one place for the daemon, the worker and core's own callers.
 */
#include "spec.h"
#include "plan/checks.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jfield.h"
#include "spec_dicom.h"
#include "spec_rtk.h"
#include "algo/names.h"
#include "backend/cpu/engine_cpu.h"

#define DIST_MAX 1e6   /* mm: 1 km, well past any scanner */
/* mm: a nanometre, far below any pixel, voxel or distance of a CT scanner;
 * anything smaller (5e-324) overflows the geometry (distance / pixel). */
#define LEN_MIN 1e-6
#define ANGLE_MAX 1e6  /* degrees; only finiteness matters to the geometry */

/* geometry.detector.shape: fan and cone ("flat", the default, or
 * "curved"); on another type the key itself is refused, with the reason. */
static int parse_shape(const json_t *d, const char *p, rc_geom_type type, rc_detector_desc *det, rc_err *err)
{
	const char *shape = NULL;
	int sv = RC_DETECTOR_FLAT, rc;
	det->shape = RC_DETECTOR_FLAT;
	if (!json_object_get(d, "shape"))
		return 0;
	if (type != RC_GEOM_FAN && !rc_geom_type_is_cone(type))
		return rc_fail(err, RC_EINVAL, "geometry.detector.shape",
			       "geometry.detector.shape applies to geometry.type \"fan\", \"cone\" and \"helix\" only (flat or "
			       "curved); a %s "
			       "geometry's detector is flat: remove it",
			       rc_name_str(RC_NAMES_GEOMETRY, (int)type));
	if ((rc = jf_str(d, p, "shape", 0, 32, &shape, err)))
		return rc;
	if (rc_name_parse(RC_NAMES_SHAPE, shape, &sv))
		return rc_name_fail(err, RC_NAMES_SHAPE, "geometry.detector.shape", shape);
	det->shape = (rc_detector_shape)sv;
	return 0;
}

static int parse_detector(const json_t *d, rc_geom_type type, rc_detector_desc *det, rc_err *err)
{
	static const char *const cone_keys[] = { "nu", "nv", "du_mm", "dv_mm", "offset_u_mm", "offset_v_mm",
						 "shape", NULL };
	static const char *const flat_keys[] = { "nu", "du_mm", "offset_u_mm", "shape", NULL };
	static const char *const mat_keys[] = { "nu", "nv", "shape", NULL };
	const char *p = "geometry.detector";
	int is2d = type == RC_GEOM_FAN || type == RC_GEOM_PARALLEL;
	const char *const *keys = type == RC_GEOM_MATRICES ? mat_keys : is2d ? flat_keys : cone_keys;
	long long nu = 0, nv = 1;
	int rc;
	if ((rc = jf_check_keys(d, p, keys, err)) || (rc = parse_shape(d, p, type, det, err)))
		return rc;
	if ((rc = jf_int(d, p, "nu", 1, 1, 65536, &nu, err)))
		return rc;
	if (!is2d && (rc = jf_int(d, p, "nv", 1, 1, 65536, &nv, err)))
		return rc;
	det->nu = (int)nu;
	det->nv = (int)nv;
	det->du = det->dv = 1.0;
	det->offset_u = det->offset_v = 0.0;
	if (type == RC_GEOM_MATRICES)
		return 0;
	if ((rc = jf_num(d, p, "du_mm", 1, LEN_MIN, 0, DIST_MAX, &det->du, err)))
		return rc;
	if ((rc = jf_num(d, p, "offset_u_mm", 0, -DIST_MAX, 0, DIST_MAX, &det->offset_u, err)))
		return rc;
	if (is2d)
		return 0;
	if ((rc = jf_num(d, p, "dv_mm", 1, LEN_MIN, 0, DIST_MAX, &det->dv, err)))
		return rc;
	return jf_num(d, p, "offset_v_mm", 0, -DIST_MAX, 0, DIST_MAX, &det->offset_v, err);
}

static int parse_angles(const json_t *g, job_spec *s, rc_err *err)
{
	json_t *a = json_object_get(g, "angles");
	json_t *list = json_object_get(g, "angles_deg");
	int rc;
	if (a && list)
		return rc_fail(err, RC_EINVAL, "geometry.angles",
			       "give either geometry.angles or geometry.angles_deg, not both");
	if (!a && !list)
		return rc_fail(err, RC_EINVAL, "geometry.angles",
			       "geometry.angles ({start_deg, step_deg, count}) or geometry.angles_deg (a list) is required");
	if (a) {
		static const char *const keys[] = { "start_deg", "step_deg", "count", NULL };
		const char *p = "geometry.angles";
		double start = 0, step = 0;
		long long count = 0;
		if (!json_is_object(a))
			return rc_fail(err, RC_EINVAL, p, "geometry.angles must be an object {start_deg, step_deg, count}");
		if ((rc = jf_check_keys(a, p, keys, err)) ||
		    (rc = jf_num(a, p, "start_deg", 1, -ANGLE_MAX, 0, ANGLE_MAX, &start, err)) ||
		    (rc = jf_num(a, p, "step_deg", 1, -ANGLE_MAX, 0, ANGLE_MAX, &step, err)) ||
		    (rc = jf_int(a, p, "count", 1, 1, SPEC_MAX_VIEWS, &count, err)))
			return rc;
		s->nviews = (int)count;
		s->angles = malloc(sizeof(double) * (size_t)count);
		if (!s->angles)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for %lld angles", count);
		for (long long k = 0; k < count; k++)
			s->angles[k] = start + (double)k * step;
		return 0;
	}
	if (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > SPEC_MAX_VIEWS)
		return rc_fail(err, RC_EINVAL, "geometry.angles_deg",
			       "geometry.angles_deg must be a list of 1 to %d numbers", SPEC_MAX_VIEWS);
	size_t n = json_array_size(list);
	s->nviews = (int)n;
	s->angles = malloc(sizeof(double) * n);
	if (!s->angles)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %zu angles", n);
	for (size_t k = 0; k < n; k++) {
		char path[64];
		snprintf(path, sizeof path, "geometry.angles_deg[%zu]", k);
		if ((rc = jf_num_value(json_array_get(list, k), path, -ANGLE_MAX, 0, ANGLE_MAX, &s->angles[k], err)))
			return rc;
	}
	return 0;
}

static int parse_matrices(const json_t *g, job_spec *s, rc_err *err)
{
	json_t *m = json_object_get(g, "matrices");
	if (!m)
		return rc_fail(err, RC_EINVAL, "geometry.matrices", "geometry.matrices is required for type \"matrices\"");
	if (!json_is_array(m) || json_array_size(m) < 1 || json_array_size(m) > SPEC_MAX_VIEWS)
		return rc_fail(err, RC_EINVAL, "geometry.matrices",
			       "geometry.matrices must be a list of 1 to %d matrices of 12 numbers", SPEC_MAX_VIEWS);
	size_t n = json_array_size(m);
	s->nviews = (int)n;
	s->matrices = malloc(sizeof(double) * 12 * n);
	if (!s->matrices)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %zu matrices", n);
	for (size_t k = 0; k < n; k++) {
		json_t *row = json_array_get(m, k);
		char path[64];
		snprintf(path, sizeof path, "geometry.matrices[%zu]", k);
		if (!json_is_array(row) || json_array_size(row) != 12)
			return rc_fail(err, RC_EINVAL, path, "%s must be a list of 12 numbers (3x4, row-major)", path);
		for (size_t i = 0; i < 12; i++) {
			char ep[80];
			snprintf(ep, sizeof ep, "%s[%zu]", path, i);
			int rc = jf_num_value(json_array_get(row, i), ep, -1e12, 0, 1e12, &s->matrices[12 * k + i], err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

_Static_assert(SPEC_RTK_MAX_VIEWS == SPEC_MAX_VIEWS, "RTK XML and JSON specs take as many views");

/* geometry.type "rtk": RTK's geometry XML and the projection stack's size,
 * spacing and origin (spec_rtk.h makes it a cone or matrices geometry). */
static int parse_rtk(const json_t *g, job_spec *s, rc_err *err)
{
	static const char *const keys[] = { "type", "xml", "detector", "views", NULL };
	static const char *const det_keys[] = { "nu", "nv", "du_mm", "dv_mm", "origin_u_mm", "origin_v_mm", NULL };
	const char *p = "geometry.detector";
	json_t *d = NULL, *x = json_object_get(g, "xml");
	long long nu = 0, nv = 0, views = 0;
	spec_rtk_det det;
	int rc;
	if ((rc = jf_check_keys(g, "geometry", keys, err)))
		return rc;
	if (!json_is_string(x))
		return rc_fail(err, RC_EINVAL, "geometry.xml",
			       "geometry.xml is required for type \"rtk\": RTK's geometry file as one JSON string");
	if ((rc = jf_obj(g, "geometry", "detector", 1, &d, err)) || (rc = jf_check_keys(d, p, det_keys, err)) ||
	    (rc = jf_int(d, p, "nu", 1, 1, 65536, &nu, err)) || (rc = jf_int(d, p, "nv", 1, 1, 65536, &nv, err)) ||
	    (rc = jf_num(d, p, "du_mm", 1, LEN_MIN, 0, DIST_MAX, &det.du, err)) ||
	    (rc = jf_num(d, p, "dv_mm", 1, LEN_MIN, 0, DIST_MAX, &det.dv, err)) ||
	    (rc = jf_num(d, p, "origin_u_mm", 1, -DIST_MAX, 0, DIST_MAX, &det.origin_u, err)) ||
	    (rc = jf_num(d, p, "origin_v_mm", 1, -DIST_MAX, 0, DIST_MAX, &det.origin_v, err)) ||
	    (rc = jf_int(g, "geometry", "views", 0, 1, SPEC_MAX_VIEWS, &views, err)))
		return rc;
	det.nu = (int)nu;
	det.nv = (int)nv;
	if ((rc = spec_rtk_parse(json_string_value(x), json_string_length(x), &det, &s->r.geom, &s->angles,
				 &s->matrices, err)))
		return rc;
	s->nviews = s->r.geom.nviews;
	/* RTK's cylinder (RadiusCylindricalDetector = SDD) is a curved cone
	 * detector: where the geometry does not take one, say so for the XML */
	if (s->r.geom.det.shape == RC_DETECTOR_CURVED) {
		rc_geom *probe = NULL;
		rc_err perr;
		rc = rc_geom_new(&s->r.geom, &s->r.vol, NULL, &probe, &perr);
		rc_geom_free(probe);
		if (rc && !strcmp(perr.field, "geometry.detector.shape"))
			return rc_fail(err, RC_EINVAL, "geometry.xml",
				       "geometry.xml: RadiusCylindricalDetector (a cylindrical detector) is not taken here: %s",
				       perr.msg);
	}
	if (views && views != s->nviews)
		return rc_fail(err, RC_EINVAL, "geometry.xml",
			       "geometry.xml has %d projections but geometry.views says %lld", s->nviews, views);
	s->rtk = 1;
	s->rtk_origin[0] = det.origin_u;
	s->rtk_origin[1] = det.origin_v;
	return 0;
}

static int parse_geometry(const json_t *g, job_spec *s, long long nz_for_slices, rc_err *err)
{
	static const char *const keys[] = { "type", "source_isocenter_mm", "source_detector_mm", "angles",
					    "angles_deg", "matrices", "slices", "detector", "pitch_mm", "z_start_mm", NULL };
	const char *p = "geometry";
	rc_geom_spec *gs = &s->r.geom;
	const char *type = NULL;
	json_t *det = NULL;
	int rc;
	if ((rc = jf_str(g, p, "type", 1, 32, &type, err)))
		return rc;
	if (!strcmp(type, "rtk"))
		return parse_rtk(g, s, err);
	if ((rc = jf_check_keys(g, p, keys, err)))
		return rc;
	int gt;
	if (rc_name_parse(RC_NAMES_GEOMETRY, type, &gt))
		return rc_name_fail(err, RC_NAMES_GEOMETRY, "geometry.type", type);
	gs->type = (rc_geom_type)gt;

	int has_dist = rc_geom_type_is_cone(gs->type) || gs->type == RC_GEOM_FAN;
	int is2d = gs->type == RC_GEOM_FAN || gs->type == RC_GEOM_PARALLEL;
	static const struct { const char *key; int when; } only[] = {
		{ "source_isocenter_mm", 1 }, { "source_detector_mm", 1 },
		{ "angles", 2 }, { "angles_deg", 2 }, { "matrices", 3 }, { "slices", 4 },
		{ "pitch_mm", 5 }, { "z_start_mm", 5 },
	};
	for (size_t i = 0; i < sizeof only / sizeof only[0]; i++) {
		int allowed = only[i].when == 1 ? has_dist : only[i].when == 2 ? gs->type != RC_GEOM_MATRICES
			    : only[i].when == 3 ? gs->type == RC_GEOM_MATRICES : only[i].when == 5 ? gs->type == RC_GEOM_HELIX
			    : is2d;
		if (!allowed && json_object_get(g, only[i].key)) {
			char path[64];
			jf_path(path, sizeof path, p, only[i].key);
			return rc_fail(err, RC_EINVAL, path, "%s does not apply to geometry.type \"%s\"", path, type);
		}
	}
	if (has_dist &&
	    ((rc = jf_num(g, p, "source_isocenter_mm", 1, LEN_MIN, 0, DIST_MAX, &gs->source_isocenter_mm, err)) ||
	     (rc = jf_num(g, p, "source_detector_mm", 1, LEN_MIN, 0, DIST_MAX, &gs->source_detector_mm, err))))
		return rc;
	/* helix: the table's z advance per turn (0: the circular cone) and the
	 * first view's source height */
	if (gs->type == RC_GEOM_HELIX &&
	    ((rc = jf_num(g, p, "pitch_mm", 1, -DIST_MAX, 0, DIST_MAX, &gs->pitch_mm, err)) ||
	     (rc = jf_num(g, p, "z_start_mm", 0, -DIST_MAX, 0, DIST_MAX, &gs->z_start_mm, err))))
		return rc;
	if ((rc = jf_obj(g, p, "detector", 1, &det, err)) || (rc = parse_detector(det, gs->type, &gs->det, err)))
		return rc;
	if (gs->type == RC_GEOM_MATRICES)
		rc = parse_matrices(g, s, err);
	else
		rc = parse_angles(g, s, err);
	if (rc)
		return rc;
	gs->nviews = s->nviews;
	gs->angles_deg = s->angles;
	gs->matrices = s->matrices;
	if (is2d) {
		long long slices = nz_for_slices;
		if ((rc = jf_int(g, p, "slices", 0, 1, 65536, &slices, err)))
			return rc;
		if (slices != nz_for_slices)
			return rc_fail(err, RC_EINVAL, "geometry.slices",
				       "geometry.slices (%lld) must equal volume.nz (%lld): one slice per volume plane",
				       slices, nz_for_slices);
	}
	return 0;
}

static int parse_volume(const json_t *v, rc_volume_desc *vol, rc_err *err)
{
	static const char *const keys[] = { "nx", "ny", "nz", "voxel_mm", "center_mm", NULL };
	const char *p = "volume";
	long long n[3] = { 0, 0, 0 };
	int rc;
	if ((rc = jf_check_keys(v, p, keys, err)) || (rc = jf_int(v, p, "nx", 1, 1, 65536, &n[0], err)) ||
	    (rc = jf_int(v, p, "ny", 1, 1, 65536, &n[1], err)) || (rc = jf_int(v, p, "nz", 1, 1, 65536, &n[2], err)))
		return rc;
	vol->nx = (int)n[0];
	vol->ny = (int)n[1];
	vol->nz = (int)n[2];
	double sp[3], c[3] = { 0, 0, 0 };
	json_t *vm = json_object_get(v, "voxel_mm");
	if (!vm)
		return rc_fail(err, RC_EINVAL, "volume.voxel_mm", "volume.voxel_mm is required (a number or [vx, vy, vz])");
	if (json_is_array(vm)) {
		if (json_array_size(vm) != 3)
			return rc_fail(err, RC_EINVAL, "volume.voxel_mm", "volume.voxel_mm must be a number or a list of 3 numbers");
		for (int a = 0; a < 3; a++) {
			char path[32];
			snprintf(path, sizeof path, "volume.voxel_mm[%d]", a);
			if ((rc = jf_num_value(json_array_get(vm, (size_t)a), path, LEN_MIN, 0, DIST_MAX, &sp[a], err)))
				return rc;
		}
	} else {
		if ((rc = jf_num_value(vm, "volume.voxel_mm", LEN_MIN, 0, DIST_MAX, &sp[0], err)))
			return rc;
		sp[1] = sp[2] = sp[0];
	}
	json_t *cm = json_object_get(v, "center_mm");
	if (cm) {
		if (!json_is_array(cm) || json_array_size(cm) != 3)
			return rc_fail(err, RC_EINVAL, "volume.center_mm", "volume.center_mm must be a list of 3 numbers");
		for (int a = 0; a < 3; a++) {
			char path[32];
			snprintf(path, sizeof path, "volume.center_mm[%d]", a);
			if ((rc = jf_num_value(json_array_get(cm, (size_t)a), path, -DIST_MAX, 0, DIST_MAX, &c[a], err)))
				return rc;
		}
	}
	vol->vx = sp[0]; vol->vy = sp[1]; vol->vz = sp[2];
	vol->cx = c[0]; vol->cy = c[1]; vol->cz = c[2];
	return 0;
}

/* algorithm.tv: {"weight": kappa >= 0 (0: off), "steps": n} */
static int parse_tv(const json_t *t, rc_algo_params *ap, rc_err *err)
{
	static const char *const keys[] = { "weight", "steps", NULL };
	long long steps = ap->tv_steps;
	int rc;
	if ((rc = jf_check_keys(t, "algorithm.tv", keys, err)) ||
	    (rc = jf_num(t, "algorithm.tv", "weight", 0, 0, 0, RC_TV_MAX_WEIGHT, &ap->tv_weight, err)) ||
	    (rc = jf_int(t, "algorithm.tv", "steps", 0, 1, 100, &steps, err)))
		return rc;
	ap->tv_steps = (int)steps;
	/* a weight given is used as given; the default follows the data's
	 * noise (algo.h's rc_tv_weight) */
	if (json_object_get(t, "weight"))
		ap->tv_auto = 0;
	return 0;
}

/* algorithm.stop: {"tolerance", "discrepancy", "stagnation", "noise_sigma"},
 * 0 = off or (noise_sigma) estimated */
static int parse_stop(const json_t *s, rc_algo_params *ap, rc_err *err)
{
	static const char *const keys[] = { "tolerance", "discrepancy", "stagnation", "noise_sigma", NULL };
	int rc;
	if ((rc = jf_check_keys(s, "algorithm.stop", keys, err)) ||
	    (rc = jf_num(s, "algorithm.stop", "tolerance", 0, 0, 0, 0.999, &ap->stop_tolerance, err)) ||
	    (rc = jf_num(s, "algorithm.stop", "discrepancy", 0, 0, 0, 100, &ap->stop_discrepancy, err)) ||
	    (rc = jf_num(s, "algorithm.stop", "stagnation", 0, 0, 0, 0.999, &ap->stop_stagnation, err)) ||
	    (rc = jf_num(s, "algorithm.stop", "noise_sigma", 0, 0, 0, 1e6, &ap->noise_sigma, err)))
		return rc;
	return 0;
}

static int parse_algorithm(const json_t *a, int nviews, rc_algo_params *ap, rc_err *err)
{
	static const char *const keys[] = { "name", "iterations", "relaxation", "subsets", "nonnegative",
					    "tv", "stop", "window", "cutoff", "scan", "projector", "initial", "extend",
					    NULL };
	const char *p = "algorithm";
	const char *name = NULL, *window = NULL, *scan = NULL, *projector = NULL, *initial = NULL, *extend = NULL;
	rc_algo_name an;
	int rc;
	if ((rc = jf_check_keys(a, p, keys, err)) || (rc = jf_str(a, p, "name", 1, 32, &name, err)))
		return rc;
	if (rc_algo_name_parse(name, &an))
		return rc_name_fail(err, RC_NAMES_ALGORITHM, "algorithm.name", name);
	rc_algo_params_default(ap, an);
	long long it = ap->iterations, subsets = ap->subsets;
	if ((rc = jf_int(a, p, "iterations", 0, INT_MIN, INT_MAX, &it, err)) ||
	    (rc = rc_algo_iterations_check(an, it, err)))
		return rc;
	ap->iterations = (int)it;
	if ((rc = jf_num(a, p, "relaxation", 0, 0, 1, 2, &ap->relaxation, err)))
		return rc;
	if (ap->relaxation >= 2)
		return rc_fail(err, RC_EINVAL, "algorithm.relaxation",
			       "algorithm.relaxation must be greater than 0 and less than 2 (got %g)", ap->relaxation);
	if ((rc = jf_int(a, p, "subsets", 0, 1, nviews, &subsets, err)))
		return rc;
	ap->subsets = (int)subsets;
	if ((rc = jf_bool(a, p, "nonnegative", 0, &ap->nonnegative, err)) ||
	    (rc = jf_str(a, p, "window", 0, 32, &window, err)))
		return rc;
	json_t *tv = NULL, *stop = NULL;
	if ((rc = jf_obj(a, p, "tv", 0, &tv, err)) || (rc = jf_obj(a, p, "stop", 0, &stop, err)))
		return rc;
	if (an == RC_ALGO_FDK && (tv || stop))
		return rc_fail(err, RC_EINVAL, tv ? "algorithm.tv" : "algorithm.stop",
			       "algorithm.%s applies to the iterative algorithms (sart, sirt, cgls, mlem), not fdk",
			       tv ? "tv" : "stop");
	if ((tv && (rc = parse_tv(tv, ap, err))) || (stop && (rc = parse_stop(stop, ap, err))))
		return rc;
	if (window && rc_filter_window_parse(window, &ap->window))
		return rc_name_fail(err, RC_NAMES_WINDOW, "algorithm.window", window);
	if ((rc = jf_num(a, p, "cutoff", 0, 0, 1, 1, &ap->cutoff, err)) ||
	    (rc = jf_str(a, p, "scan", 0, 16, &scan, err)))
		return rc;
	if (scan) {
		int sm;
		if (rc_name_parse(RC_NAMES_SCAN, scan, &sm))
			return rc_name_fail(err, RC_NAMES_SCAN, "algorithm.scan", scan);
		ap->scan = (rc_scan_mode)sm;
	}
	if ((rc = jf_str(a, p, "projector", 0, 16, &projector, err)))
		return rc;
	if (projector) {
		int pv;
		if (rc_name_parse(RC_NAMES_PROJECTOR, projector, &pv))
			return rc_name_fail(err, RC_NAMES_PROJECTOR, "algorithm.projector", projector);
		if (an == RC_ALGO_FDK)
			return rc_fail(err, RC_EINVAL, "algorithm.projector",
				       "algorithm.projector applies to the iterative algorithms (sart, sirt, cgls, "
				       "mlem), not fdk (which back-projects voxel by voxel)");
		ap->projector = (rc_projector)pv;
	}
	if ((rc = jf_str(a, p, "initial", 0, 16, &initial, err)))
		return rc;
	if (initial) {
		int iv;
		if (rc_name_parse(RC_NAMES_INITIAL, initial, &iv))
			return rc_name_fail(err, RC_NAMES_INITIAL, "algorithm.initial", initial);
		if (an == RC_ALGO_FDK)
			return rc_fail(err, RC_EINVAL, "algorithm.initial",
				       "algorithm.initial applies to the iterative algorithms (sart, sirt, cgls, mlem), "
				       "not fdk");
		ap->initial = (rc_initial)iv;
	}
	/* the long object (core/plan/extend.h) */
	if ((rc = jf_str(a, p, "extend", 0, 16, &extend, err)))
		return rc;
	if (extend) {
		int ev;
		if (rc_name_parse(RC_NAMES_EXTEND, extend, &ev))
			return rc_name_fail(err, RC_NAMES_EXTEND, "algorithm.extend", extend);
		if (an == RC_ALGO_FDK)
			return rc_fail(err, RC_EINVAL, "algorithm.extend",
				       "algorithm.extend applies to the iterative algorithms (sart, sirt, cgls, mlem), "
				       "not fdk (which back-projects onto the asked voxels only)");
		ap->extend = (rc_extend)ev;
	}
	return 0;
}

static int parse_execution(const json_t *e, rc_recon_spec *r, int *stream, double *checkpoint_s, rc_err *err)
{
	static const char *const keys[] = { "engine", "precision", "threads", "stream", "checkpoint_s", "ranks", NULL };
	const char *p = "execution";
	const char *engine = NULL, *prec = NULL;
	long long threads = 0;
	int rc;
	if ((rc = jf_check_keys(e, p, keys, err)) || (rc = jf_str(e, p, "engine", 0, 15, &engine, err)) ||
	    (rc = jf_str(e, p, "precision", 0, 7, &prec, err)) ||
	    (rc = jf_int(e, p, "threads", 0, 0, 1024, &threads, err)) ||
	    (rc = jf_num(e, p, "checkpoint_s", 0, 0.0, 0, SPEC_CHECKPOINT_MAX_S, checkpoint_s, err)))
		return rc;
	int v = -1;
	if ((rc = jf_bool(e, p, "stream", 0, &v, err)))
		return rc;
	*stream = v < 0 ? STREAM_AUTO : v ? STREAM_ON : STREAM_OFF;
	if (engine) {
		if (rc_name_parse(RC_NAMES_ENGINE, engine, &v))
			return rc_name_fail(err, RC_NAMES_ENGINE, "execution.engine", engine);
		r->engine = (rc_engine_choice)v;
	}
	if (prec) {
		if (rc_name_parse(RC_NAMES_PRECISION, prec, &v))
			return rc_name_fail(err, RC_NAMES_PRECISION, "execution.precision", prec);
		snprintf(r->precision, sizeof r->precision, "%s", prec);
	}
	r->threads = (int)threads;
	return 0;
}

static int parse_root(const json_t *root, uint64_t max_bytes, job_spec *s, rc_err *err)
{
	static const char *const keys[] = { "label", "geometry", "volume", "algorithm", "execution",
					    "priority", "autostart", "output", "dicom", "input", NULL };
	json_t *g, *v, *a, *e, *o, *d, *in;
	const char *label = "";
	long long prio = 5;
	int rc;
	if (!json_is_object(root))
		return rc_fail(err, RC_EBADJSON, "", "the job spec must be a JSON object");
	if ((rc = jf_check_keys(root, "", keys, err)) ||
	    (rc = jf_str(root, "", "label", 0, 4 * SPEC_LABEL_MAX, &label, err)) ||
	    (rc = jf_int(root, "", "priority", 0, 0, 9, &prio, err)) ||
	    (rc = jf_bool(root, "", "autostart", 0, &s->autostart, err)))
		return rc;
	if (jf_utf8_chars(label) > SPEC_LABEL_MAX)
		return rc_fail(err, RC_EINVAL, "label", "label must be at most %d characters (got %zu)", SPEC_LABEL_MAX,
			       jf_utf8_chars(label));
	snprintf(s->label, sizeof s->label, "%s", label);
	s->priority = (int)prio;
	/* The volume first: fan/parallel take their slice count from it. */
	if ((rc = jf_obj(root, "", "volume", 1, &v, err)) || (rc = parse_volume(v, &s->r.vol, err)))
		return rc;
	if ((rc = jf_obj(root, "", "geometry", 1, &g, err)) || (rc = parse_geometry(g, s, s->r.vol.nz, err)))
		return rc;
	if ((rc = jf_obj(root, "", "algorithm", 1, &a, err)) || (rc = parse_algorithm(a, s->nviews, &s->r.algo, err)))
		return rc;
	s->stream = STREAM_AUTO;
	s->checkpoint_s = SPEC_CHECKPOINT_DEFAULT_S;
	if ((rc = jf_obj(root, "", "execution", 0, &e, err)) ||
	    (e && (rc = parse_execution(e, &s->r, &s->stream, &s->checkpoint_s, err))))
		return rc;
	/* execution.ranks: whether this daemon runs MPI jobs, and how many
	 * ranks, is its own to say (http_jobs.c); ranks see no streamed views */
	long long ranks = 1;
	if (e && (rc = jf_int(e, "execution", "ranks", 0, 1, SPEC_MAX_RANKS, &ranks, err)))
		return rc;
	s->ranks = (int)ranks;
	if (s->ranks > 1 && s->stream == STREAM_ON)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.stream",
			       "a job across ranks (execution.ranks %d) does not stream: its ranks read the whole "
			       "stack from the spool; leave execution.stream out or false", s->ranks);
	if (s->ranks > 1 && s->r.geom.type == RC_GEOM_HELIX)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.ranks",
			       "a helix runs in one process (its FDK slabs the volume with the views each slab needs; "
			       "the ranks' z-slabs and view split are not built for it): leave execution.ranks out or 1");
	if (s->ranks > 1)
		s->stream = STREAM_OFF;
	/* asked for: it must stream here; by default only where it can */
	if (s->stream != STREAM_OFF && (rc = rc_recon_streams(&s->r, err))) {
		if (s->stream == STREAM_ON)
			return rc;
		s->stream = STREAM_OFF;
	}
	s->out.water_mu_per_mm = SPEC_WATER_MU_DEFAULT;
	if ((rc = jf_obj(root, "", "output", 0, &o, err)) || (o && (rc = spec_parse_output(o, &s->out, err))) ||
	    (rc = jf_obj(root, "", "dicom", 0, &d, err)) || (d && (rc = spec_parse_dicom(d, &s->dicom, err))))
		return rc;
	if ((rc = jf_obj(root, "", "input", 0, &in, err)) || (rc = spec_parse_input(in, &s->in, err)))
		return rc;
	s->sample_bytes = spec_input_sample_bytes(&s->in);

	s->r.limits.max_bytes = max_bytes;
	rc_geom *geom = NULL;
	if ((rc = rc_geom_new(&s->r.geom, &s->r.vol, &s->r.limits, &geom, err)))
		return rc;
	s->nu = s->r.geom.det.nu;
	s->rows = rc_geom_is_2d(geom) ? s->r.vol.nz : s->r.geom.det.nv;
	s->view_stride = rc_geom_view_stride(geom);
	s->row_stride = rc_geom_row_stride(geom);
	s->view_bytes = s->sample_bytes * (uint64_t)rc_geom_view_count(geom);
	s->proj_bytes = s->sample_bytes * (uint64_t)rc_geom_proj_count(geom);
	s->vol_bytes = 4 * (uint64_t)rc_volume_count(&s->r.vol);
	/* the splat pair where asked for: only where voxels project at most a
	 * pixel apart (the rest of what it needs is rc_recon_check's) */
	double step = 0, limit = 0;
	int refused = s->r.algo.projector == RC_PROJECTOR_SPLAT && !rc_geom_is_2d(geom) &&
		      !rc_engine_cpu_splat_check(geom, &step, &limit);
	/* fdk on a displaced detector: refused here where FDK cannot weigh
	 * it (a short scan, a detector beside the axis), reported otherwise */
	if (!refused && s->r.algo.name == RC_ALGO_FDK &&
	    (!(rc = rc_fdk_displaced(geom, RC_SCAN_FULL, &s->displaced, NULL, err)) && s->displaced))
		rc = rc_fdk_suits(geom, s->r.algo.scan, err);
	rc_geom_free(geom);
	if (rc)
		return rc;
	if (refused)
		return rc_fail(err, RC_EINVAL, "algorithm.projector",
			       "algorithm.projector \"splat\" needs voxels that project at most %.1f pixel apart; "
			       "here they are up to %.2f pixels apart (use \"raycast\" or \"auto\", or coarser "
			       "voxels or finer pixels)",
			       limit, step);
	return 0;
}

int job_spec_parse(const char *buf, size_t len, uint64_t max_bytes, job_spec **ret, rc_err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return rc_fail(err, RC_EBADJSON, "", "the body is not valid JSON: %s (line %d, column %d)",
			       jerr.text, jerr.line, jerr.column);
	job_spec *s = calloc(1, sizeof *s);
	int rc;
	if (!s) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto out_decref;
	}
	rc_recon_spec_default(&s->r);
	rc = parse_root(root, max_bytes, s, err);
	if (rc) {
		job_spec_free(s);
		goto out_decref;
	}
	*ret = s;
out_decref:
	json_decref(root);
	return rc;
}

void job_spec_free(job_spec *s)
{
	if (!s)
		return;
	free(s->angles);
	free(s->matrices);
	free(s);
}

int job_spec_rtk_xml(const job_spec *s, char **ret, size_t *len, rc_err *err)
{
	const rc_detector_desc *d = &s->r.geom.det;
	spec_rtk_det det = { d->nu, d->nv, d->du, d->dv, -(d->nu - 1) / 2.0 * d->du, -(d->nv - 1) / 2.0 * d->dv };
	rc_geom *g = NULL;
	if (s->rtk) {
		det.origin_u = s->rtk_origin[0];
		det.origin_v = s->rtk_origin[1];
	}
	int rc = rc_geom_new(&s->r.geom, &s->r.vol, NULL, &g, err);
	if (!rc)
		rc = spec_rtk_write(g, &det, ret, len, err);
	rc_geom_free(g);
	return rc;
}


/* The stored spec's bytes (malloc'd, NUL-terminated). */
static int read_spec(const char *path, char **ret, size_t *ret_len, rc_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return rc_fail(err, RC_EIO, "", "cannot read the job's spec %s: %s", path, strerror(e));
	}
	char *buf = malloc((size_t)sb.st_size + 1);
	size_t len = 0;
	while (buf && len < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)sb.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (!buf || len != (size_t)sb.st_size) {
		free(buf);
		return rc_fail(err, RC_EIO, "", "cannot read the job's spec %s", path);
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

int job_spec_load(const char *path, job_spec **ret, rc_err *err)
{
	char *buf;
	size_t len;
	int rc = read_spec(path, &buf, &len, err);
	if (rc)
		return rc;
	rc = job_spec_parse(buf, len, 0, ret, err);
	free(buf);
	return rc;
}

/* The stored spec's JSON object (for the loaders that read a part of it). */
static int load_root(const char *path, json_t **root, rc_err *err)
{
	char *buf;
	size_t len;
	int rc = read_spec(path, &buf, &len, err);
	if (rc)
		return rc;
	*root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	free(buf);
	if (json_is_object(*root))
		return 0;
	json_decref(*root);
	*root = NULL;
	return rc_fail(err, RC_EIO, "", "the job's spec %s is not a JSON object", path);
}

int job_spec_load_output(const char *path, job_output *out, job_dicom *d, rc_err *err)
{
	json_t *root;
	memset(out, 0, sizeof *out);
	memset(d, 0, sizeof *d);
	out->water_mu_per_mm = SPEC_WATER_MU_DEFAULT;
	int rc = load_root(path, &root, err);
	if (rc)
		return rc;
	json_t *o = json_object_get(root, "output"), *dj = json_object_get(root, "dicom");
	if (!(rc = o ? spec_parse_output(o, out, err) : 0) && dj)
		rc = spec_parse_dicom(dj, d, err);
	json_decref(root);
	return rc;
}

int job_spec_load_input(const char *path, job_input *in, rc_err *err)
{
	json_t *root;
	int rc = load_root(path, &root, err);
	if (rc)
		return rc;
	rc = spec_parse_input(json_object_get(root, "input"), in, err);
	json_decref(root);
	return rc;
}

int job_spec_slabs(const job_spec *s)
{
	return s->r.algo.name == RC_ALGO_FDK && (s->r.geom.type == RC_GEOM_CONE || s->r.geom.type == RC_GEOM_MATRICES);
}

/* What Open MPI's libraries and buffers add to a rank's process: measured
 * 50.2-50.4 MiB per rank against one process's 46.7 on the same small job
 * (tests/integration/test_mpi.py's tall FDK): 3.6 MiB, counted 6. */
#define SPEC_MPI_RANK_BYTES ((uint64_t)6 << 20)

/* One rank's peak in a job in z-slabs across ranks: the rank runs its
 * slices [z0, z1) (ranks_slab's split: nz * r / ranks) from only the
 * detector rows they project onto (rc_ooc_fdk_slab), so it holds that slab
 * and those rows, as an FDK job of that narrowed volume and detector
 * (rc_plan_memory), plus the voxel back projection's block of 32
 * transposed, padded views that ooc.c's plan counts; the largest over the
 * ranks. */
static uint64_t rank_slab_memory(const job_spec *s)
{
	rc_geom *g = NULL;
	int nz = s->r.vol.nz, full = s->r.geom.det.nv;
	/* each slab's rows cost a pass over the views: past ~1e6 slab-views
	 * (thousands of ranks of a long scan) every rank is counted with the
	 * whole detector instead, erring high, so POST stays quick */
	if ((long long)s->ranks * s->r.geom.nviews > (1LL << 20) ||
	    rc_geom_new(&s->r.geom, &s->r.vol, NULL, &g, NULL))
		g = NULL;
	uint64_t most = 0;
	for (int r = 0; r < s->ranks; r++) {
		int z0 = (int)((long long)nz * r / s->ranks), z1 = (int)((long long)nz * (r + 1) / s->ranks);
		int r0 = 0, r1 = full;
		if (z1 <= z0)
			continue;
		if (g)
			rc_ooc_slab_rows(g, z0, z1, &r0, &r1);
		rc_recon_spec sub = s->r;
		sub.vol.nz = z1 - z0;
		sub.geom.det.nv = r1 > r0 ? r1 - r0 : 1;
		uint64_t rows = (uint64_t)sub.geom.det.nv, nu = (uint64_t)s->r.geom.det.nu;
		uint64_t need = rc_plan_memory(&sub, 0) + 32 * ((rows + 3 + 15) & ~(uint64_t)15) * (nu + 3) * 4;
		most = need > most ? need : most;
	}
	rc_geom_free(g);
	return most;
}

uint64_t job_spec_memory(const job_spec *s)
{
	/* z-slabs across ranks (line integrals): one rank's slab and rows */
	if (s->ranks > 1 && job_spec_slabs(s) && !s->in.intensity)
		return rank_slab_memory(s) + SPEC_MPI_RANK_BYTES;
	/* counts across ranks: each rank converts and holds the whole stack,
	 * with the largest slab, ceil(nz / ranks) slices; a view split: each
	 * rank as one process */
	if (s->ranks > 1) {
		job_spec one = *s;
		one.ranks = 1;
		if (job_spec_slabs(s))
			one.r.vol.nz = (s->r.vol.nz + s->ranks - 1) / s->ranks;
		return job_spec_memory(&one) + SPEC_MPI_RANK_BYTES;
	}
	/* a job that may stream counts its scratch volume (the worker decides
	 * with the same rule when it runs) */
	int streams = s->stream != STREAM_OFF && rc_recon_streams(&s->r, NULL) == 0;
	/* counts: the line integrals are a float copy beside the mapped counts */
	return rc_plan_memory(&s->r, streams) + (s->in.intensity ? s->proj_bytes : 0);
}

char *job_spec_summary(const job_spec *s)
{
	const rc_recon_spec *p = &s->r;
	const char *type = rc_name_str(RC_NAMES_GEOMETRY, (int)p->geom.type);
	int subsets = rc_algo_subsets(&p->algo, s->nviews);
	json_t *j = json_pack("{sss[ii]s[iii]s[fff]sssisisfsssI}", "geometry", type, "detector", s->nu, s->rows,
			      "volume", p->vol.nx, p->vol.ny, p->vol.nz, "voxel_mm", p->vol.vx, p->vol.vy, p->vol.vz,
			      "algorithm", rc_algo_name_str(p->algo.name), "iterations", p->algo.iterations,
			      "subsets", subsets, "tv_weight", p->algo.tv_weight, "engine", rc_name_str(RC_NAMES_ENGINE, p->engine),
			      "plan_memory_bytes", (json_int_t)job_spec_memory(s));
	/* the geometry's warnings (checks.h), known before any view is sent;
	 * the Job shows them until the worker's report has its own */
	rc_geom *geom = NULL;
	rc_warnings ws = { 0 };
	if (j && rc_geom_new(&p->geom, &p->vol, NULL, &geom, NULL) == 0) {
		rc_check_geometry(geom, &ws);
		json_t *a = json_array();
		for (int i = 0; i < ws.n; i++)
			json_array_append_new(a, json_pack("{ssss}", "code", ws.w[i].code, "message", ws.w[i].message));
		json_object_set_new(j, "warnings", a);
	}
	rc_geom_free(geom);
	if (j && s->ranks > 1) /* across MPI ranks (docs/cluster.md) */
		json_object_set_new(j, "ranks", json_integer(s->ranks));
	/* what FDK weighs beyond the cosine and the scan's redundancy */
	if (j && p->algo.name == RC_ALGO_FDK)
		json_object_set_new(j, "fdk", json_pack("{sb}", "displaced_detector", s->displaced != 0));
	char *out = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return out;
}
