/*
 * fuzz_geometry: the geometry import, from a spec's "geometry" object (the
 * angles, the matrices, the cone/fan/parallel detector) to core's rc_geom
 * (core/geometry/geometry.c), in two modes picked by byte 0:
 *
 *  even: structure-aware JSON.  The rest of the input is the text of the
 *        geometry object alone; the harness puts it into a valid spec with
 *        a volume and an algorithm from small tables (bits of byte 0), so
 *        every mutation lands in the geometry instead of breaking the
 *        spec's other objects, and runs what POST /v1/jobs runs on it
 *        (job_spec_parse, rc_recon_check).
 *  odd:  binary.  The rest fills an rc_geom_spec and an rc_volume_desc
 *        directly, as core's own callers (recon-demo, benches, tests) hand
 *        them to rc_geom_new: each number is a value from a table of the
 *        interesting ones or 8 raw bytes (NaN, infinities, subnormals,
 *        1e308), which JSON cannot carry.
 *
 * Whatever rc_geom_new accepts must be usable by every projector: each
 * view's matrices, source and inverse are finite, the depth row of P has
 * unit length (geometry.h's invariant), and the rays through the corner and
 * centre pixels have finite origins and unit directions.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/geometry.h"
#include "plan/recon.h"
#include "spec.h"

/* What fail() prints: the geometry as rc_geom_new saw it. */
static const rc_geom_spec *cur_sp;
static const rc_volume_desc *cur_vol;

static void fail(const char *what, int k)
{
	fprintf(stderr, "fuzz_geometry: view %d: %s\n", k, what);
	if (cur_sp && cur_vol) {
		const rc_geom_spec *sp = cur_sp;
		const rc_volume_desc *v = cur_vol;
		fprintf(stderr, "  type %d, %d views, detector %d x %d of %g x %g mm offset (%g, %g), D %g S %g\n",
			(int)sp->type, sp->nviews, sp->det.nu, sp->det.nv, sp->det.du, sp->det.dv, sp->det.offset_u,
			sp->det.offset_v, sp->source_isocenter_mm, sp->source_detector_mm);
		fprintf(stderr, "  volume %d x %d x %d of %g x %g x %g mm at (%g, %g, %g)\n", v->nx, v->ny, v->nz, v->vx,
			v->vy, v->vz, v->cx, v->cy, v->cz);
		for (int i = 0; i < sp->nviews && i < 4; i++) {
			if (sp->angles_deg)
				fprintf(stderr, "  angle %d: %.17g\n", i, sp->angles_deg[i]);
			else if (sp->matrices)
				for (int j = 0; j < 12; j++)
					fprintf(stderr, "  matrix %d [%d]: %.17g\n", i, j, sp->matrices[12 * i + j]);
		}
	}
	abort();
}

static int all_finite(const double *x, int n)
{
	for (int i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return 0;
	return 1;
}

static void check_ray(const rc_geom *g, int k, double i, double j, int iz)
{
	double o[3], d[3];
	rc_geom_ray(g, k, i, j, iz, o, d);
	if (!all_finite(o, 3) || !all_finite(d, 3))
		fail("a ray with a non-finite origin or direction", k);
	double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
	if (fabs(n - 1) > 1e-6)
		fail("a ray direction of other than unit length", k);
}

/* The invariants of geometry.h on a built geometry (the first 64 views). */
static void check_geom(const rc_geom *g)
{
	const rc_detector_desc *det = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	rc_geom_type t = rc_geom_type_of(g);
	int nv = rc_geom_nviews(g), is2d = rc_geom_is_2d(g);
	if (rc_geom_proj_count(g) != (size_t)nv * rc_geom_view_count(g))
		fail("proj_count != nviews * view_count", -1);
	for (int k = 0; k < nv && k < 64; k++) {
		const rc_view *vw = rc_geom_view(g, k);
		if (rc_geom_type_is_cone(t) || t == RC_GEOM_MATRICES) {
			if (!all_finite(vw->P, 12) || !all_finite(vw->Minv, 9) || !all_finite(vw->src, 3))
				fail("a non-finite projection matrix, inverse or source", k);
			double n = sqrt(vw->P[8] * vw->P[8] + vw->P[9] * vw->P[9] + vw->P[10] * vw->P[10]);
			if (fabs(n - 1) > 1e-6)
				fail("the depth row of P is not a unit vector", k);
		} else {
			if (!all_finite(vw->A, 6) || !all_finite(vw->src, 3) || !all_finite(vw->dir, 3))
				fail("a non-finite in-plane matrix, source or direction", k);
		}
		if (!isfinite(vw->angle_rad))
			fail("a non-finite angle", k);
		double rows = is2d ? 0 : det->nv - 1;
		check_ray(g, k, 0, 0, 0);
		check_ray(g, k, det->nu - 1, rows, v->nz - 1);
		check_ray(g, k, (det->nu - 1) / 2.0, rows / 2, v->nz / 2);
		double pos[3];
		if (rc_geom_type_is_cone(t) && (rc_geom_pixel_pos(g, k, 0, 0, pos) || !all_finite(pos, 3)))
			fail("a non-finite pixel position", k);
	}
}

/* ---- JSON mode -------------------------------------------------------- */

static const char *const volumes[] = {
	"{\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": [1, 1, 2], \"center_mm\": [0, 0, 3]}",
	"{\"nx\": 16, \"ny\": 16, \"nz\": 1, \"voxel_mm\": 0.5}",
	"{\"nx\": 4, \"ny\": 6, \"nz\": 8, \"voxel_mm\": [2, 2, 1], \"center_mm\": [40, -25, 0]}",
	"{\"nx\": 32, \"ny\": 32, \"nz\": 32, \"voxel_mm\": 4}",
};
static const char *const algorithms[] = {
	"{\"name\": \"sirt\", \"iterations\": 1}",
	"{\"name\": \"fdk\"}",
	"{\"name\": \"cgls\", \"iterations\": 2, \"projector\": \"splat\"}",
	"{\"name\": \"sart\", \"iterations\": 1, \"subsets\": 2}",
};

static void run_json(uint8_t sel, const uint8_t *data, size_t size)
{
	const char *vol = volumes[(sel >> 1) & 3], *alg = algorithms[(sel >> 3) & 3];
	static const char fmt[] = "{\"volume\": %s, \"algorithm\": %s, \"geometry\": ";
	size_t head = strlen(fmt) + strlen(vol) + strlen(alg);
	char *buf = malloc(head + size + 2);
	if (!buf)
		return;
	int n = snprintf(buf, head + 1, fmt, vol, alg);
	memcpy(buf + n, data, size);
	buf[n + size] = '}';
	job_spec *s = NULL;
	rc_err err;
	if (!job_spec_parse(buf, (size_t)n + size + 1, 64ull << 30, &s, &err)) {
		int rc = rc_recon_check(&s->r, &err);
		if (rc && rc != RC_EUNSUPPORTED)
			fail("rc_recon_check failed otherwise than unsupported", -1);
		rc_geom *g = NULL;
		cur_sp = &s->r.geom;
		cur_vol = &s->r.vol;
		if (rc_geom_new(&s->r.geom, &s->r.vol, &s->r.limits, &g, &err))
			fail("rc_geom_new refused what job_spec_parse accepted", -1);
		check_geom(g);
		rc_geom_free(g);
		cur_sp = NULL;
		job_spec_free(s);
	}
	free(buf);
}

/* ---- binary mode ------------------------------------------------------ */

typedef struct rd {
	const uint8_t *p;
	size_t n;
} rd;

static unsigned byte(rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static double num(rd *r)
{
	static const double table[] = { 0, 1, -1, 0.5, 2, 10, 100, 500, 1000, 1500, -1000, 1e6, -1e6, 1e12,
					1e-6, 1e-300, 4.9e-324, 1e300, 45, 90, 180, 360, 0.1, 3 };
	unsigned s = byte(r);
	if (s < 0xc0 || r->n < 8)
		return table[s % (sizeof table / sizeof table[0])];
	double x;
	memcpy(&x, r->p, 8);
	r->p += 8;
	r->n -= 8;
	return x;
}

static int count(rd *r, int most)
{
	unsigned s = byte(r);
	return s == 0xff ? -1 : (int)(s % (unsigned)most) + 1; /* -1 and 0: refused early */
}

static void run_binary(const uint8_t *data, size_t size)
{
	rd r = { data, size };
	rc_geom_spec sp;
	rc_volume_desc vol;
	memset(&sp, 0, sizeof sp);
	sp.type = (rc_geom_type)(byte(&r) % 5);
	sp.nviews = count(&r, 16);
	sp.det.nu = count(&r, 64);
	sp.det.nv = count(&r, 64);
	sp.det.du = num(&r);
	sp.det.dv = num(&r);
	sp.det.offset_u = num(&r);
	sp.det.offset_v = num(&r);
	sp.source_isocenter_mm = num(&r);
	sp.source_detector_mm = num(&r);
	vol.nx = count(&r, 16);
	vol.ny = count(&r, 16);
	vol.nz = count(&r, 16);
	vol.vx = num(&r);
	vol.vy = num(&r);
	vol.vz = num(&r);
	vol.cx = num(&r);
	vol.cy = num(&r);
	vol.cz = num(&r);
	int nv = sp.nviews > 0 ? sp.nviews : 1;
	double *vals = malloc(sizeof(double) * 12 * (size_t)nv);
	if (!vals)
		return;
	if (sp.type == RC_GEOM_MATRICES) {
		for (int i = 0; i < 12 * nv; i++)
			vals[i] = num(&r);
		sp.matrices = vals;
	} else {
		/* a start and a step, or each angle on its own */
		int each = byte(&r) & 1;
		double start = num(&r), step = num(&r);
		for (int k = 0; k < nv; k++)
			vals[k] = each ? num(&r) : start + k * step;
		sp.angles_deg = vals;
	}
	if (sp.type == RC_GEOM_HELIX) {
		sp.pitch_mm = num(&r);
		sp.z_start_mm = num(&r);
	}
	rc_limits lim = { .max_bytes = 64ull << 30 };
	rc_geom *g = NULL;
	rc_err err;
	cur_sp = &sp;
	cur_vol = &vol;
	if (!rc_geom_new(&sp, &vol, &lim, &g, &err)) {
		check_geom(g);
		rc_geom_free(g);
	} else if (!err.msg[0] || err.code >= 0) {
		fail("a refusal without its code or message", -1);
	}
	cur_sp = NULL;
	free(vals);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	if (data[0] & 1)
		run_binary(data + 1, size - 1);
	else
		run_json(data[0], data + 1, size - 1);
	return 0;
}
