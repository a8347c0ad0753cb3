/*
 * Tests of server/worker/spec_rtk.c through spec.c (geometry.type "rtk"):
 *  - geometry files written by RTK's own writer (rtk_fixtures.h) give the
 *    view matrices that RTK computed for them, mapped to recond's frame
 *    ((X, Y, Z)_RTK = (y, z, x), pixel = (mm - origin) / spacing) here in
 *    the test, and a circular file gives the `cone` geometry of the
 *    equivalent JSON spec (docs/geometry.md's offset rule);
 *  - job_spec_rtk_xml writes a geometry that reads back to the same
 *    matrices (cone, tilted views through RTK's decomposition, a plain
 *    `matrices` job), and refuses fan;
 *  - bad XML (malformed, an entity expansion bomb, an external entity, a
 *    DOCTYPE with declarations, no or too many projections, unknown
 *    elements, a matrix that disagrees with its parameters, a cylindrical
 *    or parallel geometry, a file over the size cap) fails naming the field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>
#include <jansson.h>

#include "geometry/geometry.h"
#include "rtk_fixtures.h"
#include "spec.h"
#include "spec_rtk.h"

#define VOL "{\"nx\": 16, \"ny\": 16, \"nz\": 12, \"voxel_mm\": 1.0}"

/* A job spec with an rtk geometry (xml escaped by jansson). */
static char *rtk_job(const char *xml, int nu, int nv, double du, double dv, double ou, double ov, int views)
{
	json_t *det = json_pack("{sisisfsfsfsf}", "nu", nu, "nv", nv, "du_mm", du, "dv_mm", dv, "origin_u_mm", ou,
				"origin_v_mm", ov);
	json_t *g = json_pack("{sssssO}", "type", "rtk", "xml", xml, "detector", det);
	if (views)
		json_object_set_new(g, "views", json_integer(views));
	json_t *root = json_pack("{sos{sssi}}", "geometry", g, "algorithm", "name", "sirt", "iterations", 2);
	json_object_set_new(root, "volume", json_loads(VOL, 0, NULL));
	char *s = json_dumps(root, JSON_COMPACT);
	json_decref(det);
	json_decref(root);
	return s;
}

static int parse(const char *json, job_spec **s, rc_err *err)
{
	rc_err_clear(err);
	return job_spec_parse(json, strlen(json), 0, s, err);
}

/* A 3x4 matrix scaled as rc_geom does: third row of unit norm, w > 0 at the origin. */
static void unit_w(const double *in, double out[12])
{
	double n = sqrt(in[8] * in[8] + in[9] * in[9] + in[10] * in[10]) * (in[11] < 0 ? -1 : 1);
	for (int i = 0; i < 12; i++)
		out[i] = in[i] / n;
}

/* RTK's matrix M (world mm -> detector mm, RTK's frame) as recond's view matrix. */
static void rtk_to_recond(const double M[12], double du, double dv, double ou, double ov, double P[12])
{
	static const int col[4] = { 2, 0, 1, 3 }; /* x <- Z, y <- X, z <- Y */
	for (int j = 0; j < 4; j++) {
		P[j] = (M[col[j]] - ou * M[8 + col[j]]) / du;
		P[4 + j] = (M[4 + col[j]] - ov * M[8 + col[j]]) / dv;
		P[8 + j] = M[8 + col[j]];
	}
}

static double rel_diff(const double a[12], const double b[12])
{
	double worst = 0, scale = 0;
	for (int i = 0; i < 12; i++) {
		worst = fmax(worst, fabs(a[i] - b[i]));
		scale = fmax(scale, fabs(b[i]));
	}
	return worst / scale;
}

static rc_geom *geom_of(const job_spec *s)
{
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(rc_geom_new(&s->r.geom, &s->r.vol, NULL, &g, &err), 0);
	return g;
}

/* Every view of s against RTK's matrices M mapped with (du, dv, ou, ov). */
static void check_against_rtk(const job_spec *s, const double (*M)[12], int n, double du, double dv, double ou,
			      double ov)
{
	rc_geom *g = geom_of(s);
	assert_int_equal(rc_geom_nviews(g), n);
	for (int k = 0; k < n; k++) {
		double P[12], want[12];
		rtk_to_recond(M[k], du, dv, ou, ov, P);
		unit_w(P, want);
		double e = rel_diff(rc_geom_view(g, k)->P, want);
		if (e > 1e-9)
			print_error("view %d: relative difference %.3g from RTK's matrix\n", k, e);
		assert_true(e <= 1e-9);
	}
	rc_geom_free(g);
}

static void test_circular_is_cone(void **state)
{
	(void)state;
	const int nu = 64, nv = 56;
	const double d = 0.7, ou = -(nu - 1) / 2.0 * d, ov = -(nv - 1) / 2.0 * d;
	char *j = rtk_job(RTK_CIRC_XML, nu, nv, d, d, ou, ov, 8);
	job_spec *s = NULL;
	rc_err err;
	assert_int_equal(parse(j, &s, &err), 0);
	assert_int_equal(s->r.geom.type, RC_GEOM_CONE);
	assert_int_equal(s->nviews, 8);
	assert_true(s->r.geom.source_isocenter_mm == 300 && s->r.geom.source_detector_mm == 500);
	assert_true(fabs(s->r.geom.det.offset_u - 2.1) < 1e-12 && fabs(s->r.geom.det.offset_v + 1.4) < 1e-12);
	assert_true(s->angles[3] == 137.0);
	assert_true(s->view_bytes == 4u * nu * nv);
	check_against_rtk(s, RTK_CIRC_M, 8, d, d, ou, ov);

	/* the JSON cone spec that docs/geometry.md says is the same geometry */
	job_spec *c = NULL;
	const char *cj = "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 300, \"source_detector_mm\": 500, "
			 "\"angles_deg\": [0, 33, 90, 137, 180, 222, 270, 318], \"detector\": {\"nu\": 64, \"nv\": 56, "
			 "\"du_mm\": 0.7, \"dv_mm\": 0.7, \"offset_u_mm\": 2.1, \"offset_v_mm\": -1.4}}, \"volume\": " VOL
			 ", \"algorithm\": {\"name\": \"sirt\", \"iterations\": 2}}";
	assert_int_equal(parse(cj, &c, &err), 0);
	rc_geom *a = geom_of(s), *b = geom_of(c);
	for (int k = 0; k < 8; k++)
		assert_true(rel_diff(rc_geom_view(a, k)->P, rc_geom_view(b, k)->P) < 1e-12);
	rc_geom_free(a);
	rc_geom_free(b);
	job_spec_free(c);
	job_spec_free(s);
	free(j);

	/* an origin off centre (RTK's default 0, 0): the offsets move with it */
	j = rtk_job(RTK_CIRC_XML, nu, nv, d, d, 0.0, -5.0, 0);
	assert_int_equal(parse(j, &s, &err), 0);
	assert_int_equal(s->r.geom.type, RC_GEOM_CONE);
	assert_true(fabs(s->r.geom.det.offset_u - (2.1 + (nu - 1) / 2.0 * d)) < 1e-12);
	check_against_rtk(s, RTK_CIRC_M, 8, d, d, 0.0, -5.0);
	job_spec_free(s);
	free(j);
}

static void test_tilted_is_matrices(void **state)
{
	(void)state;
	const int nu = 40, nv = 30;
	const double du = 0.8, dv = 0.9, ou = -(nu - 1) / 2.0 * du + 1.0, ov = -(nv - 1) / 2.0 * dv;
	char *j = rtk_job(RTK_TILT_XML, nu, nv, du, dv, ou, ov, 5);
	job_spec *s = NULL;
	rc_err err;
	assert_int_equal(parse(j, &s, &err), 0);
	assert_int_equal(s->r.geom.type, RC_GEOM_MATRICES);
	assert_int_equal(s->nviews, 5);
	assert_int_equal(s->nu, nu);
	assert_int_equal(s->rows, nv);
	check_against_rtk(s, RTK_TILT_M, 5, du, dv, ou, ov);
	job_spec_free(s);
	free(j);
}

/* The XML that job_spec_rtk_xml writes for s, read back as an rtk job with
 * the same stack, gives s's matrices. */
static void check_roundtrip(const job_spec *s, double du, double dv, double ou, double ov)
{
	char *xml = NULL;
	size_t len = 0;
	rc_err err;
	if (job_spec_rtk_xml(s, &xml, &len, &err))
		print_error("%s\n", err.msg);
	assert_non_null(xml);
	assert_int_equal(strlen(xml), len);
	char *j = rtk_job(xml, s->nu, s->rows, du, dv, ou, ov, s->nviews);
	job_spec *t = NULL;
	if (parse(j, &t, &err))
		print_error("%s: %s\n%s\n", err.field, err.msg, xml);
	assert_non_null(t);
	rc_geom *a = geom_of(s), *b = geom_of(t);
	for (int k = 0; k < s->nviews; k++) {
		double e = rel_diff(rc_geom_view(b, k)->P, rc_geom_view(a, k)->P);
		if (e > 1e-9)
			print_error("view %d: relative difference %.3g after the round trip\n", k, e);
		assert_true(e <= 1e-9);
	}
	rc_geom_free(a);
	rc_geom_free(b);
	job_spec_free(t);
	free(j);
	free(xml);
}

static void test_write_roundtrip(void **state)
{
	(void)state;
	rc_err err;
	job_spec *s = NULL;
	/* an rtk cone job: written with its own origin */
	char *j = rtk_job(RTK_CIRC_XML, 64, 56, 0.7, 0.7, -3.0, -20.0, 0);
	assert_int_equal(parse(j, &s, &err), 0);
	check_roundtrip(s, 0.7, 0.7, -3.0, -20.0);
	job_spec_free(s);
	free(j);
	/* tilted views: matrices decomposed into RTK's parameters */
	j = rtk_job(RTK_TILT_XML, 40, 30, 0.8, 0.8, -10.0, -12.0, 0);
	assert_int_equal(parse(j, &s, &err), 0);
	assert_int_equal(s->r.geom.type, RC_GEOM_MATRICES);
	check_roundtrip(s, 0.8, 0.8, -10.0, -12.0);
	job_spec_free(s);
	free(j);
	/* a JSON cone job: the stack centred */
	const char *cj = "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 400, \"source_detector_mm\": 700, "
			 "\"angles\": {\"start_deg\": -20, \"step_deg\": 7.5, \"count\": 30}, \"detector\": {\"nu\": 48, "
			 "\"nv\": 20, \"du_mm\": 1.1, \"dv_mm\": 0.9, \"offset_u_mm\": 12.5, \"offset_v_mm\": 2}}, "
			 "\"volume\": " VOL ", \"algorithm\": {\"name\": \"sirt\", \"iterations\": 2}}";
	assert_int_equal(parse(cj, &s, &err), 0);
	check_roundtrip(s, 1.1, 0.9, -23.5 * 1.1, -9.5 * 0.9);
	job_spec_free(s);
	/* a JSON matrices job (1 mm pixels, centred): the tilted RTK views in pixels */
	json_t *m = json_array();
	for (int k = 0; k < 5; k++) {
		double P[12];
		rtk_to_recond(RTK_TILT_M[k], 1.0, 1.0, -19.5, -14.5, P);
		json_t *row = json_array();
		for (int i = 0; i < 12; i++)
			json_array_append_new(row, json_real(P[i]));
		json_array_append_new(m, row);
	}
	json_t *root = json_pack("{s{sss{sisi}so}s{sssi}}", "geometry", "type", "matrices", "detector", "nu", 40, "nv",
				 30, "matrices", m, "algorithm", "name", "sirt", "iterations", 2);
	json_object_set_new(root, "volume", json_loads(VOL, 0, NULL));
	char *mj = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	assert_int_equal(parse(mj, &s, &err), 0);
	check_roundtrip(s, 1.0, 1.0, -19.5, -14.5);
	job_spec_free(s);
	free(mj);
	/* fan: RTK is 3-D */
	const char *fj = "{\"geometry\": {\"type\": \"fan\", \"source_isocenter_mm\": 400, \"source_detector_mm\": 700, "
			 "\"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 30}, \"slices\": 12, \"detector\": "
			 "{\"nu\": 48, \"du_mm\": 1.1}}, \"volume\": " VOL ", \"algorithm\": {\"name\": \"fdk\"}}";
	assert_int_equal(parse(fj, &s, &err), 0);
	char *xml = NULL;
	size_t len;
	rc_err_clear(&err);
	assert_int_equal(job_spec_rtk_xml(s, &xml, &len, &err), RC_EUNSUPPORTED);
	assert_null(xml);
	assert_string_equal(err.field, "format");
	job_spec_free(s);
}

/* The circular file with one substitution (first occurrence of from -> to). */
static char *edited(const char *from, const char *to)
{
	const char *at = strstr(RTK_CIRC_XML, from);
	assert_non_null(at);
	size_t n = strlen(RTK_CIRC_XML) - strlen(from) + strlen(to);
	char *s = malloc(n + 1);
	size_t head = (size_t)(at - RTK_CIRC_XML);
	memcpy(s, RTK_CIRC_XML, head);
	strcpy(s + head, to);
	strcat(s, at + strlen(from));
	return s;
}

/* RTK's cylinder about the source (RadiusCylindricalDetector = SDD, offsets
 * in the origin) is recond's curved cone detector: where the JSON route
 * takes "shape": "curved" on a cone, the XML gives the same geometry and
 * writes itself back with the radius; where it does not, the XML is
 * refused naming geometry.xml. */
static void test_cylinder(void **state)
{
	(void)state;
	char *x1 = edited("<ProjectionOffsetX>2.1</ProjectionOffsetX>", "<ProjectionOffsetX>0</ProjectionOffsetX>");
	const char *at = strstr(x1, "<ProjectionOffsetY>-1.4</ProjectionOffsetY>");
	assert_non_null(at);
	size_t head = (size_t)(at - x1);
	const char *tail = at + strlen("<ProjectionOffsetY>-1.4</ProjectionOffsetY>");
	char *xml = malloc(strlen(x1) + 200);
	memcpy(xml, x1, head);
	strcpy(xml + head, "<ProjectionOffsetY>0</ProjectionOffsetY><RadiusCylindricalDetector>500</RadiusCylindricalDetector>");
	strcat(xml, tail);
	free(x1);
	/* the views' matrices in the file are the circular ones with offsets 2.1, -1.4: drop them */
	for (char *m; (m = strstr(xml, "<Matrix>"));) {
		char *e = strstr(m, "</Matrix>") + strlen("</Matrix>");
		memmove(m, e, strlen(e) + 1);
	}
	const double ou = -31.5 * 0.7 + 2.1, ov = -27.5 * 0.7 - 1.4;
	char *j = rtk_job(xml, 64, 56, 0.7, 0.7, ou, ov, 8);
	const char *cj = "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 300, \"source_detector_mm\": 500, "
			 "\"angles_deg\": [0, 33, 90, 137, 180, 222, 270, 318], \"detector\": {\"nu\": 64, \"nv\": 56, "
			 "\"du_mm\": 0.7, \"dv_mm\": 0.7, \"offset_u_mm\": 2.1, \"offset_v_mm\": -1.4, \"shape\": \"curved\"}}, "
			 "\"volume\": " VOL ", \"algorithm\": {\"name\": \"sirt\", \"iterations\": 2}}";
	job_spec *s = NULL, *c = NULL;
	rc_err err;
	int json_ok = parse(cj, &c, &err) == 0;
	int rc = parse(j, &s, &err);
	if (!json_ok) {
		if (rc != RC_EINVAL || strcmp(err.field, "geometry.xml"))
			print_error("rc %d field %s: %s\n", rc, err.field, err.msg);
		assert_int_equal(rc, RC_EINVAL);
		assert_string_equal(err.field, "geometry.xml");
	} else {
		if (rc)
			print_error("%s: %s\n", err.field, err.msg);
		assert_int_equal(rc, 0);
		assert_int_equal(s->r.geom.type, RC_GEOM_CONE);
		assert_int_equal(s->r.geom.det.shape, RC_DETECTOR_CURVED);
		assert_true(fabs(s->r.geom.det.offset_u - 2.1) < 1e-12 && fabs(s->r.geom.det.offset_v + 1.4) < 1e-12);
		rc_geom *a = geom_of(s), *b = geom_of(c);
		for (int k = 0; k < 8; k++) {
			double oa[3], da[3], ob[3], db[3];
			rc_geom_ray(a, k, 5.5, 40.25, 0, oa, da);
			rc_geom_ray(b, k, 5.5, 40.25, 0, ob, db);
			for (int i = 0; i < 3; i++)
				assert_true(fabs(oa[i] - ob[i]) < 1e-9 && fabs(da[i] - db[i]) < 1e-12);
		}
		rc_geom_free(a);
		rc_geom_free(b);
		char *out = NULL;
		size_t len;
		assert_int_equal(job_spec_rtk_xml(c, &out, &len, &err), 0);
		assert_non_null(strstr(out, "<RadiusCylindricalDetector>500</RadiusCylindricalDetector>"));
		free(out);
		check_roundtrip(c, 0.7, 0.7, ou, ov);
	}
	job_spec_free(s);
	job_spec_free(c);
	free(j);
	free(xml);
}

/* 400 empty elements in one projection's place: far more than RTK's fields */
#define FLOOD4 "<a/><a/><a/><a/>"
#define FLOOD20 FLOOD4 FLOOD4 FLOOD4 FLOOD4 FLOOD4
#define FLOOD100 FLOOD20 FLOOD20 FLOOD20 FLOOD20 FLOOD20
#define FLOOD "<GantryAngle>0</GantryAngle>" FLOOD100 FLOOD100 FLOOD100 FLOOD100

static void test_bad(void **state)
{
	(void)state;
	static const char laughs[] =
		"<?xml version=\"1.0\"?>\n<!DOCTYPE RTKThreeDCircularGeometry [\n"
		" <!ENTITY a \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\">\n"
		" <!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">\n <!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">\n"
		" <!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">\n <!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">\n"
		" <!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\">\n <!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\">\n"
		"]>\n<RTKThreeDCircularGeometry version=\"3\"><SourceToIsocenterDistance>&g;</SourceToIsocenterDistance>"
		"</RTKThreeDCircularGeometry>\n";
	static const char external[] =
		"<?xml version=\"1.0\"?>\n<!DOCTYPE r [ <!ENTITY x SYSTEM \"file:///etc/passwd\"> ]>\n"
		"<RTKThreeDCircularGeometry version=\"3\"><SourceToIsocenterDistance>&x;</SourceToIsocenterDistance>"
		"</RTKThreeDCircularGeometry>\n";
	static const char external_dtd[] =
		"<?xml version=\"1.0\"?>\n<!DOCTYPE r SYSTEM \"http://example.invalid/rtk.dtd\">\n"
		"<RTKThreeDCircularGeometry version=\"3\"></RTKThreeDCircularGeometry>\n";
	static const char undeclared[] =
		"<?xml version=\"1.0\"?>\n<RTKThreeDCircularGeometry version=\"3\">"
		"<SourceToIsocenterDistance>&x;</SourceToIsocenterDistance></RTKThreeDCircularGeometry>\n";
	/* +ADw-!ENTITY is <!ENTITY in UTF-7: read as UTF-8, it is text */
	static const char utf7[] =
		"<?xml version=\"1.0\" encoding=\"UTF-7\"?>\n+ADw-!DOCTYPE r +AFs-+ADw-!ENTITY x \"y\"+AD4-+AF0-+AD4-\n"
		"<RTKThreeDCircularGeometry version=\"3\"></RTKThreeDCircularGeometry>\n";
	static const char empty[] = "<?xml version=\"1.0\"?>\n<RTKThreeDCircularGeometry version=\"3\">"
				    "<SourceToIsocenterDistance>300</SourceToIsocenterDistance>"
				    "</RTKThreeDCircularGeometry>\n";
	struct { const char *name; char *xml; int views; int code; const char *field; } bad[] = {
		{ "malformed", strdup("<RTKThreeDCircularGeometry version=\"3\"><Projection>"), 0, RC_EINVAL, "geometry.xml" },
		{ "not xml", strdup("{\"a\": 1}"), 0, RC_EINVAL, "geometry.xml" },
		{ "empty string", strdup(""), 0, RC_EINVAL, "geometry.xml" },
		{ "billion laughs", strdup(laughs), 0, RC_EINVAL, "geometry.xml" },
		{ "external entity", strdup(external), 0, RC_EINVAL, "geometry.xml" },
		{ "external DTD", strdup(external_dtd), 0, RC_EINVAL, "geometry.xml" },
		{ "undeclared entity", strdup(undeclared), 0, RC_EINVAL, "geometry.xml" },
		{ "no projection", strdup(empty), 0, RC_EINVAL, "geometry.xml" },
		{ "views differ", strdup(RTK_CIRC_XML), 9, RC_EINVAL, "geometry.xml" },
		{ "version 4", edited("version=\"3\"", "version=\"4\""), 0, RC_EINVAL, "geometry.xml" },
		{ "no version", edited(" version=\"3\"", ""), 0, RC_EINVAL, "geometry.xml" },
		{ "other root", edited("<RTKThreeDCircularGeometry", "<Geometry"), 0, RC_EINVAL, "geometry.xml" },
		{ "unknown element", edited("<GantryAngle>0</GantryAngle>", "<GantryAngel>0</GantryAngel>"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "matrix disagrees", edited("<GantryAngle>33</GantryAngle>", "<GantryAngle>34</GantryAngle>"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "matrix of 11", edited("630\n", "\n"), 0, RC_EINVAL, "geometry.xml" },
		{ "not a number", edited("<GantryAngle>90</GantryAngle>", "<GantryAngle>ninety</GantryAngle>"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "nan", edited("<GantryAngle>90</GantryAngle>", "<GantryAngle>nan</GantryAngle>"), 0, RC_EINVAL,
		  "geometry.xml" },
		{ "cylinder not about the source", edited("<ProjectionOffsetX>", "<RadiusCylindricalDetector>400"
							  "</RadiusCylindricalDetector><ProjectionOffsetX>"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "cylinder with projection offsets", edited("<ProjectionOffsetX>", "<RadiusCylindricalDetector>500"
							     "</RadiusCylindricalDetector><ProjectionOffsetX>"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "parallel", edited("<SourceToDetectorDistance>500", "<SourceToDetectorDistance>0"), 0, RC_EINVAL,
		  "geometry.xml" },
		{ "negative SID", edited("<SourceToIsocenterDistance>300", "<SourceToIsocenterDistance>-300"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "nested element", edited("<GantryAngle>0</GantryAngle>", "<GantryAngle><x>0</x></GantryAngle>"), 0,
		  RC_EINVAL, "geometry.xml" },
		{ "element flood", edited("<GantryAngle>0</GantryAngle>", FLOOD), 0, RC_EINVAL, "geometry.xml" },
		{ "UTF-7 hiding an entity", strdup(utf7), 0, RC_EINVAL, "geometry.xml" },
		{ "collimation", edited("<GantryAngle>0</GantryAngle>", "<GantryAngle>0</GantryAngle><CollimationUInf>"
					"3</CollimationUInf>"), 0, RC_EINVAL, "geometry.xml" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *j = rtk_job(bad[i].xml, 64, 56, 0.7, 0.7, -22.05, -19.25, bad[i].views);
		job_spec *s = NULL;
		rc_err err;
		int rc = parse(j, &s, &err);
		if (rc != bad[i].code || strcmp(err.field, bad[i].field) || !err.msg[0] || s) {
			print_error("case \"%s\": rc %d field \"%s\" msg \"%s\" (want %d, field \"%s\")\n", bad[i].name, rc,
				    err.field, err.msg, bad[i].code, bad[i].field);
			fail();
		}
		if (!strcmp(bad[i].name, "element flood") && !strstr(err.msg, "elements for")) {
			print_error("the flood was not refused before the tree was built: %s\n", err.msg);
			fail();
		}
		free(j);
		free(bad[i].xml);
	}
	/* the spec's own fields */
	rc_err err;
	job_spec *s = NULL;
	const char *no_origin = "{\"geometry\": {\"type\": \"rtk\", \"xml\": \"<a/>\", \"detector\": {\"nu\": 4, \"nv\": 4, "
				"\"du_mm\": 1, \"dv_mm\": 1, \"origin_u_mm\": 0}}, \"volume\": " VOL
				", \"algorithm\": {\"name\": \"fdk\"}}";
	assert_int_equal(parse(no_origin, &s, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector.origin_v_mm");
	const char *no_xml = "{\"geometry\": {\"type\": \"rtk\", \"xml\": 3}, \"volume\": " VOL
			     ", \"algorithm\": {\"name\": \"fdk\"}}";
	assert_int_equal(parse(no_xml, &s, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.xml");
	const char *extra = "{\"geometry\": {\"type\": \"rtk\", \"xml\": \"<a/>\", \"angles_deg\": [1]}, \"volume\": " VOL
			    ", \"algorithm\": {\"name\": \"fdk\"}}";
	assert_int_equal(parse(extra, &s, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.angles_deg");
	/* the size cap, straight to the parser */
	size_t big = SPEC_RTK_XML_MAX + 1;
	char *huge = malloc(big);
	memset(huge, ' ', big);
	spec_rtk_det det = { 4, 4, 1, 1, 0, 0 };
	rc_geom_spec gs;
	double *ang = NULL, *mat = NULL;
	assert_int_equal(spec_rtk_parse(huge, big, &det, &gs, &ang, &mat, &err), RC_ETOOBIG);
	assert_string_equal(err.field, "geometry.xml");
	assert_null(ang);
	assert_null(mat);
	free(huge);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_circular_is_cone),
		cmocka_unit_test(test_tilted_is_matrices),
		cmocka_unit_test(test_write_roundtrip),
		cmocka_unit_test(test_cylinder),
		cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
