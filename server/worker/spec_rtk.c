/*
 * spec_rtk: RTK's geometry XML <-> recond's geometry (spec_rtk.h).  RTK's
 * matrix of a view is that of rtk::ThreeDCircularProjectionGeometry::
 * AddProjectionInRadians:
 *
 *   M = T2(sx - px, sy - py) . Mag(-SDD, -SID) . T3(-sx, -sy, 0) . R(-oa, -ga, -ia)
 *
 * with R(ax, ay, az) = Rz(az) Rx(ax) Ry(ay) (ITK's Euler3DTransform, ZXY),
 * Mag = [[f,0,0,0],[0,f,0,0],[0,0,1,d]] and T2, T3 translations.
 */
#include "spec_rtk.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlwriter.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define F "geometry.xml"
#define DEG (M_PI / 180.0)
#define RTK_VAL_MAX 1e9   /* |value| of any parameter: far past any scanner, still finite squared */
#define RTK_MATRIX_TOL 1e-3 /* RTK's reader: "Matrix and parameters are not consistent" */

/* One view in RTK's parameters (angles in degrees, lengths in mm). */
typedef struct rtk_view {
	double sid, sdd, ga, oa, ia, sx, sy, px, py;
} rtk_view;

static void rtk_rot(double ax, double ay, double az, double R[9])
{
	double cx = cos(ax), sx = sin(ax), cy = cos(ay), sy = sin(ay), cz = cos(az), sz = sin(az);
	double X[9] = { 1, 0, 0, 0, cx, -sx, 0, sx, cx };
	double Y[9] = { cy, 0, sy, 0, 1, 0, -sy, 0, cy };
	double Z[9] = { cz, -sz, 0, sz, cz, 0, 0, 0, 1 };
	double ZX[9];
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			ZX[3 * i + j] = 0;
			for (int k = 0; k < 3; k++)
				ZX[3 * i + j] += Z[3 * i + k] * X[3 * k + j];
		}
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			R[3 * i + j] = 0;
			for (int k = 0; k < 3; k++)
				R[3 * i + j] += ZX[3 * i + k] * Y[3 * k + j];
		}
}

/* RTK's 3x4 matrix (row-major) of view v. */
static void rtk_matrix(const rtk_view *v, double M[12])
{
	double R[9];
	rtk_rot(-v->oa * DEG, -v->ga * DEG, -v->ia * DEG, R);
	/* rows of Mag . T3 . R: (-SDD (R0 - sx), -SDD (R1 - sy), R2 - SID) */
	double r0[4] = { -v->sdd * R[0], -v->sdd * R[1], -v->sdd * R[2], v->sdd * v->sx };
	double r1[4] = { -v->sdd * R[3], -v->sdd * R[4], -v->sdd * R[5], v->sdd * v->sy };
	double r2[4] = { R[6], R[7], R[8], -v->sid };
	double tu = v->sx - v->px, tv = v->sy - v->py;
	for (int j = 0; j < 4; j++) {
		M[j] = r0[j] + tu * r2[j];
		M[4 + j] = r1[j] + tv * r2[j];
		M[8 + j] = r2[j];
	}
}

/* recond's view matrix P (pixel indices, recond's world) of RTK's M (mm on
 * the detector, RTK's world): rows through K, columns x <- Z, y <- X, z <- Y. */
static void rtk_to_recond(const double M[12], const spec_rtk_det *d, double P[12])
{
	static const int col[4] = { 2, 0, 1, 3 };
	for (int j = 0; j < 4; j++) {
		double m0 = M[col[j]], m1 = M[4 + col[j]], m2 = M[8 + col[j]];
		P[j] = (m0 - d->origin_u * m2) / d->du;
		P[4 + j] = (m1 - d->origin_v * m2) / d->dv;
		P[8 + j] = m2;
	}
}

/* The inverse of rtk_to_recond. */
static void recond_to_rtk(const double P[12], const spec_rtk_det *d, double M[12])
{
	static const int col[4] = { 1, 2, 0, 3 };
	for (int j = 0; j < 4; j++) {
		double p0 = P[col[j]], p1 = P[4 + col[j]], p2 = P[8 + col[j]];
		M[j] = d->du * p0 + d->origin_u * p2;
		M[4 + j] = d->dv * p1 + d->origin_v * p2;
		M[8 + j] = p2;
	}
}

/* --- reading ------------------------------------------------------------ */

/* Entities and DTDs refused on the raw bytes, before libxml2 sees them:
 * an internal subset ("<!DOCTYPE x [") or an entity declaration anywhere
 * (even in a comment: a false refusal costs nothing), and a DOCTYPE with an
 * external identifier (SYSTEM/PUBLIC).  libxml2 would not load or
 * substitute them with the options used, but a document that declares
 * entities is no geometry file, and refusing it here keeps the parser away
 * from their expansion altogether. */
/* Elements a projection may bring (its fields and a Matrix, with room),
 * and the document's own: the tree libxml2 builds stays in proportion to
 * the projections (4 million empty elements in 16 MiB were 550 MB of DOM). */
#define RTK_ELEMENTS_PER_VIEW 16
#define RTK_ELEMENTS_BASE 64

static int prescan(const char *xml, size_t len, rc_err *err)
{
	static const char ent[] = "<!ENTITY", doc[] = "<!DOCTYPE", proj[] = "<Projection>";
	size_t elements = 0, views = 0;
	for (size_t i = 0; i + 2 <= len; i++) {
		if (xml[i] != '<')
			continue;
		if ((xml[i + 1] >= 'A' && xml[i + 1] <= 'Z') || (xml[i + 1] >= 'a' && xml[i + 1] <= 'z') ||
		    xml[i + 1] == '_') {
			elements++;
			views += len - i >= sizeof proj - 1 && !memcmp(xml + i, proj, sizeof proj - 1);
			continue;
		}
		if (xml[i + 1] != '!')
			continue;
		if (len - i >= sizeof ent - 1 && !memcmp(xml + i, ent, sizeof ent - 1))
			return rc_fail(err, RC_EINVAL, F,
				       "geometry.xml declares an entity (<!ENTITY at byte %zu): entity declarations are "
				       "refused (an RTK geometry file has none)", i);
		if (len - i >= sizeof doc - 1 && !memcmp(xml + i, doc, sizeof doc - 1)) {
			size_t j = i + sizeof doc - 1;
			while (j < len && xml[j] != '>' && xml[j] != '[')
				j++;
			const char *body = xml + i + sizeof doc - 1;
			size_t n = j - (i + sizeof doc - 1);
			int ext = memmem(body, n, "SYSTEM", 6) || memmem(body, n, "PUBLIC", 6);
			if (j >= len || xml[j] == '[' || ext)
				return rc_fail(err, RC_EINVAL, F,
					       "geometry.xml: its DOCTYPE (byte %zu) has %s: only a bare <!DOCTYPE NAME>, as "
					       "RTK writes, is accepted", i,
					       ext ? "an external identifier" : "an internal subset of declarations");
		}
	}
	if (views > SPEC_RTK_MAX_VIEWS)
		return rc_fail(err, RC_EINVAL, F, "geometry.xml has %zu projections; at most %d", views,
			       SPEC_RTK_MAX_VIEWS);
	if (elements > RTK_ELEMENTS_BASE + RTK_ELEMENTS_PER_VIEW * views)
		return rc_fail(err, RC_EINVAL, F,
			       "geometry.xml has %zu elements for %zu projections (at most %d per projection and %d "
			       "more): an RTK geometry file has its projections' fields and nothing else",
			       elements, views, RTK_ELEMENTS_PER_VIEW, RTK_ELEMENTS_BASE);
	return 0;
}

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;
static void xml_init(void)
{
	xmlInitParser();
}

/* The value carried over between elements, as RTK's reader keeps it. */
typedef struct rtk_state {
	rtk_view v;
	int have_sid, have_sdd;
	double radius;
	double mat[12];
	int have_mat;
} rtk_state;

typedef struct rtk_acc {
	rtk_view *views;
	size_t n, cap;
} rtk_acc;

/* The text of an element that holds a value: text and CDATA only. */
static int node_text(xmlNode *n, const char *where, xmlChar **ret, rc_err *err)
{
	for (xmlNode *c = n->children; c; c = c->next)
		if (c->type != XML_TEXT_NODE && c->type != XML_CDATA_SECTION_NODE && c->type != XML_COMMENT_NODE)
			return rc_fail(err, RC_EINVAL, F, "geometry.xml: <%s>%s must hold a number, not other elements",
				       (const char *)n->name, where);
	xmlChar *t = xmlNodeGetContent(n);
	if (!t)
		return rc_fail(err, RC_ENOMEM, "", "out of memory reading geometry.xml");
	*ret = t;
	return 0;
}

/* Numbers of an element's text: exactly want of them, finite, |x| <= RTK_VAL_MAX. */
static int parse_numbers(xmlNode *n, const char *where, double *out, int want, rc_err *err)
{
	xmlChar *t = NULL;
	int rc = node_text(n, where, &t, err), got = 0;
	if (rc)
		return rc;
	const char *p = (const char *)t;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (!*p)
			break;
		char *end;
		double x = strtod(p, &end);
		if (end == p || got >= want || !isfinite(x) || fabs(x) > RTK_VAL_MAX ||
		    (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
			rc = rc_fail(err, RC_EINVAL, F,
				     "geometry.xml: <%s>%s must hold %d finite number%s of magnitude at most %g (got \"%.40s\")",
				     (const char *)n->name, where, want, want > 1 ? "s" : "", RTK_VAL_MAX, (const char *)t);
			goto out;
		}
		out[got++] = x;
		p = end;
	}
	if (got != want)
		rc = rc_fail(err, RC_EINVAL, F, "geometry.xml: <%s>%s must hold %d number%s (got %d)",
			     (const char *)n->name, where, want, want > 1 ? "s" : "", got);
out:
	xmlFree(t);
	return rc;
}

/* One value element (at the top or in a projection) into the state. */
static int read_value(xmlNode *n, const char *where, int in_projection, rtk_state *s, rc_err *err)
{
	static const struct { const char *name; size_t off; } fields[] = {
		{ "SourceToIsocenterDistance", offsetof(rtk_view, sid) },
		{ "SourceToDetectorDistance", offsetof(rtk_view, sdd) },
		{ "GantryAngle", offsetof(rtk_view, ga) },
		{ "Angle", offsetof(rtk_view, ga) }, /* RTK's older name, still read by RTK */
		{ "OutOfPlaneAngle", offsetof(rtk_view, oa) },
		{ "InPlaneAngle", offsetof(rtk_view, ia) },
		{ "SourceOffsetX", offsetof(rtk_view, sx) },
		{ "SourceOffsetY", offsetof(rtk_view, sy) },
		{ "ProjectionOffsetX", offsetof(rtk_view, px) },
		{ "ProjectionOffsetY", offsetof(rtk_view, py) },
	};
	const char *name = (const char *)n->name;
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		if (strcasecmp(name, fields[i].name))
			continue;
		double *dst = (double *)((char *)&s->v + fields[i].off);
		int rc = parse_numbers(n, where, dst, 1, err);
		if (!rc && fields[i].off == offsetof(rtk_view, sid))
			s->have_sid = 1;
		if (!rc && fields[i].off == offsetof(rtk_view, sdd))
			s->have_sdd = 1;
		return rc;
	}
	if (!strcasecmp(name, "RadiusCylindricalDetector"))
		return parse_numbers(n, where, &s->radius, 1, err);
	if (!strcasecmp(name, "Matrix")) {
		if (!in_projection)
			return rc_fail(err, RC_EINVAL, F, "geometry.xml: <Matrix> belongs inside a <Projection>");
		s->have_mat = 1;
		return parse_numbers(n, where, s->mat, 12, err);
	}
	if (!strncasecmp(name, "Collimation", 11))
		return rc_fail(err, RC_EINVAL, F,
			       "geometry.xml: <%s>%s: recond does not apply RTK's collimation; remove the "
			       "Collimation elements (and crop or zero those pixels in the projections instead)", name, where);
	return rc_fail(err, RC_EINVAL, F,
		       "geometry.xml: unknown element <%s>%s (RTK's ThreeDCircularGeometry has SourceToIsocenterDistance, "
		       "SourceToDetectorDistance, GantryAngle, OutOfPlaneAngle, InPlaneAngle, SourceOffsetX/Y, "
		       "ProjectionOffsetX/Y, RadiusCylindricalDetector and Matrix)", name, where);
}

static int add_view(rtk_state *s, rtk_acc *acc, rc_err *err)
{
	size_t k = acc->n;
	if (k >= SPEC_RTK_MAX_VIEWS)
		return rc_fail(err, RC_EINVAL, F, "geometry.xml has more than %d projections", SPEC_RTK_MAX_VIEWS);
	if (!s->have_sid || !s->have_sdd)
		return rc_fail(err, RC_EINVAL, F,
			       "geometry.xml: projection %zu has no %s (give it at the top or in the projection)", k,
			       !s->have_sid ? "SourceToIsocenterDistance" : "SourceToDetectorDistance");
	if (s->v.sdd == 0)
		return rc_fail(err, RC_EINVAL, F,
			       "geometry.xml: projection %zu has SourceToDetectorDistance 0, RTK's parallel geometry; "
			       "recond imports RTK's cone-beam geometries only", k);
	if (!(s->v.sid > 0) || !(s->v.sdd > 0))
		return rc_fail(err, RC_EINVAL, F,
			       "geometry.xml: projection %zu: SourceToIsocenterDistance (%g) and SourceToDetectorDistance "
			       "(%g) must be positive", k, s->v.sid, s->v.sdd);
	if (s->have_mat) {
		double M[12];
		rtk_matrix(&s->v, M);
		for (int i = 0; i < 12; i++)
			if (!(fabs(M[i] - s->mat[i]) <= RTK_MATRIX_TOL))
				return rc_fail(err, RC_EINVAL, F,
					       "geometry.xml: projection %zu: its <Matrix> element [%d][%d] is %.9g but its "
					       "parameters give %.9g: matrix and parameters are not consistent (RTK's "
					       "reader refuses this file too)", k, i / 4, i % 4, s->mat[i], M[i]);
	}
	if (acc->n == acc->cap) {
		size_t cap = acc->cap ? 2 * acc->cap : 64;
		rtk_view *nv = realloc(acc->views, cap * sizeof *nv);
		if (!nv)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for %zu projections", cap);
		acc->views = nv;
		acc->cap = cap;
	}
	acc->views[acc->n++] = s->v;
	s->have_mat = 0; /* a matrix checks its own projection only */
	return 0;
}

static int walk(xmlNode *root, rtk_state *s, rtk_acc *acc, rc_err *err)
{
	int rc;
	for (xmlNode *n = root->children; n; n = n->next) {
		if (n->type == XML_TEXT_NODE || n->type == XML_COMMENT_NODE || n->type == XML_PI_NODE)
			continue;
		if (n->type != XML_ELEMENT_NODE)
			return rc_fail(err, RC_EINVAL, F, "geometry.xml: unexpected %s in <%s>",
				       n->type == XML_ENTITY_REF_NODE ? "entity reference" : "node", (const char *)root->name);
		if (strcasecmp((const char *)n->name, "Projection")) {
			if ((rc = read_value(n, "", 0, s, err)))
				return rc;
			continue;
		}
		char where[48];
		snprintf(where, sizeof where, " of projection %zu", acc->n);
		for (xmlNode *c = n->children; c; c = c->next) {
			if (c->type == XML_TEXT_NODE || c->type == XML_COMMENT_NODE || c->type == XML_PI_NODE)
				continue;
			if (c->type != XML_ELEMENT_NODE || !strcasecmp((const char *)c->name, "Projection"))
				return rc_fail(err, RC_EINVAL, F, "geometry.xml: projection %zu holds %s", acc->n,
					       c->type == XML_ELEMENT_NODE ? "another <Projection>" : "an unexpected node");
			if ((rc = read_value(c, where, 1, s, err)))
				return rc;
		}
		if ((rc = add_view(s, acc, err)))
			return rc;
	}
	return 0;
}

static int parse_doc(xmlDoc *doc, rtk_state *s, rtk_acc *acc, rc_err *err)
{
	if (doc->intSubset && (doc->intSubset->children || doc->intSubset->ExternalID || doc->intSubset->SystemID))
		return rc_fail(err, RC_EINVAL, F, "geometry.xml: its DOCTYPE declares something; only a bare "
			       "<!DOCTYPE NAME> is accepted");
	xmlNode *root = xmlDocGetRootElement(doc);
	if (!root || strcmp((const char *)root->name, "RTKThreeDCircularGeometry"))
		return rc_fail(err, RC_EINVAL, F, "geometry.xml: the root element must be <RTKThreeDCircularGeometry> "
			       "(got <%.64s>)", root ? (const char *)root->name : "");
	xmlChar *ver = xmlGetProp(root, (const xmlChar *)"version");
	char *end = NULL;
	long v = ver ? strtol((const char *)ver, &end, 10) : 0;
	int ok = ver && end != (char *)ver && !*end && (v == 2 || v == 3);
	xmlFree(ver);
	if (!ok)
		return rc_fail(err, RC_EINVAL, F, "geometry.xml: <RTKThreeDCircularGeometry> needs version=\"3\" (or "
			       "\"2\"), as RTK's reader does");
	return walk(root, s, acc, err);
}

/* Nonzero when x and y are the same value for all practical purposes. */
static int same(double x, double y)
{
	return fabs(x - y) <= 1e-12 * (1.0 + fabs(x) + fabs(y));
}

static int zero_angle(double deg)
{
	return fabs(remainder(deg, 360.0)) <= 1e-12;
}

/* The one place that decides a cylindrical detector.  recond's curved cone
 * detector is a cylinder about the source of radius SDD, u an arc length
 * (RTK's RadiusCylindricalDetector = SDD): taken on a circular scan with
 * the offsets in the stack's origin (ProjectionOffsetX/Y 0, the form checked
 * against RTK); any other radius or form is refused.  Whether the geometry
 * takes a cylindrical cone detector at all is rc_geom_new's to say (spec.c
 * names geometry.xml when it does not). */
static int cylinder(double radius, const rtk_view *v0, int circular, rc_detector_shape *shape, rc_err *err)
{
	*shape = RC_DETECTOR_FLAT;
	if (radius == 0)
		return 0;
	if (!circular || !same(radius, v0->sdd) || v0->px != 0 || v0->py != 0)
		return rc_fail(err, RC_EINVAL, F,
			       "geometry.xml: RadiusCylindricalDetector is %g: a cylindrical detector is imported as a "
			       "cylinder about the source (radius = SourceToDetectorDistance, %g) on a circular scan with "
			       "ProjectionOffsetX/Y 0 (put the offsets in geometry.detector.origin_u_mm/origin_v_mm)",
			       radius, v0->sdd);
	*shape = RC_DETECTOR_CURVED;
	return 0;
}

static int build_spec(const rtk_acc *acc, double radius, const spec_rtk_det *det, rc_geom_spec *gs,
		      double **angles, double **matrices, rc_err *err)
{
	const rtk_view *v0 = &acc->views[0];
	int circular = 1, rc;
	for (size_t k = 0; k < acc->n && circular; k++) {
		const rtk_view *v = &acc->views[k];
		circular = zero_angle(v->oa) && zero_angle(v->ia) && v->sx == 0 && v->sy == 0 && same(v->sid, v0->sid) &&
			   same(v->sdd, v0->sdd) && same(v->px, v0->px) && same(v->py, v0->py) && v->sdd > v->sid;
	}
	rc_detector_shape shape;
	if ((rc = cylinder(radius, v0, circular, &shape, err)))
		return rc;
	memset(gs, 0, sizeof *gs);
	gs->nviews = (int)acc->n;
	gs->det.nu = det->nu;
	gs->det.nv = det->nv;
	gs->det.du = det->du;
	gs->det.dv = det->dv;
	gs->det.shape = shape;
	if (circular) {
		double *a = malloc(acc->n * sizeof *a);
		if (!a)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for %zu angles", acc->n);
		for (size_t k = 0; k < acc->n; k++)
			a[k] = acc->views[k].ga;
		gs->type = RC_GEOM_CONE;
		gs->source_isocenter_mm = v0->sid;
		gs->source_detector_mm = v0->sdd;
		/* docs/geometry.md: offset = origin + ProjectionOffset + (n - 1)/2 spacing */
		gs->det.offset_u = det->origin_u + v0->px + (det->nu - 1) / 2.0 * det->du;
		gs->det.offset_v = det->origin_v + v0->py + (det->nv - 1) / 2.0 * det->dv;
		gs->angles_deg = a;
		*angles = a;
		return 0;
	}
	double *m = malloc(acc->n * 12 * sizeof *m);
	if (!m)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %zu matrices", acc->n);
	for (size_t k = 0; k < acc->n; k++) {
		double M[12];
		rtk_matrix(&acc->views[k], M);
		rtk_to_recond(M, det, m + 12 * k);
	}
	gs->type = RC_GEOM_MATRICES;
	gs->matrices = m;
	*matrices = m;
	return 0;
}

int spec_rtk_parse(const char *xml, size_t len, const spec_rtk_det *det, rc_geom_spec *gs, double **angles,
		   double **matrices, rc_err *err)
{
	rtk_state st;
	rtk_acc acc = { NULL, 0, 0 };
	xmlParserCtxt *ctx = NULL;
	xmlDoc *doc = NULL;
	int rc;
	*angles = *matrices = NULL;
	if (len > SPEC_RTK_XML_MAX)
		return rc_fail(err, RC_ETOOBIG, F, "geometry.xml is %zu bytes; at most %u are accepted", len,
			       SPEC_RTK_XML_MAX);
	if ((rc = prescan(xml, len, err)))
		return rc;
	pthread_once(&xml_once, xml_init);
	memset(&st, 0, sizeof st);
	ctx = xmlNewParserCtxt();
	if (!ctx)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the XML parser");
	/* no XML_PARSE_NOENT (entities stay unsubstituted), no DTDLOAD/DTDATTR,
	 * no network; errors come back through the context, not stderr */
	/* read as UTF-8 whatever the declaration says: the prescan read the
	 * bytes as such, and another encoding (UTF-7) could hide a DOCTYPE
	 * or an entity from it */
	doc = xmlCtxtReadMemory(ctx, xml, (int)len, "geometry.xml", "UTF-8",
				XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOCDATA |
					XML_PARSE_IGNORE_ENC);
	if (!doc || !ctx->wellFormed) {
		const xmlError *e = xmlCtxtGetLastError(ctx);
		char msg[160] = "not well-formed";
		if (e && e->message) {
			snprintf(msg, sizeof msg, "%s", e->message);
			size_t n = strlen(msg);
			while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
				msg[--n] = '\0';
		}
		rc = rc_fail(err, RC_EINVAL, F, "geometry.xml is not well-formed XML: %s (line %d)", msg, e ? e->line : 0);
		goto out;
	}
	if ((rc = parse_doc(doc, &st, &acc, err)))
		goto out;
	if (acc.n == 0) {
		rc = rc_fail(err, RC_EINVAL, F, "geometry.xml has no <Projection>: a job needs at least one view");
		goto out;
	}
	rc = build_spec(&acc, st.radius, det, gs, angles, matrices, err);
out:
	free(acc.views);
	xmlFreeDoc(doc);
	xmlFreeParserCtxt(ctx);
	return rc;
}

/* --- writing ------------------------------------------------------------ */

static double det3(const double A[9])
{
	return A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
	       A[2] * (A[3] * A[7] - A[4] * A[6]);
}

/* RTK's parameters of matrix M (RTK's AddProjection(pMat): K R
 * decomposition with square pixels, Euler ZXY angles), then checked by
 * building M again from them: 0, or RC_EUNSUPPORTED naming the view. */
static int decompose(const double Min[12], int k, rtk_view *v, rc_err *err)
{
	double M[12];
	/* RTK's scale: third row of unit norm (w = depth, negative in front of the source) */
	double n = sqrt(Min[8] * Min[8] + Min[9] * Min[9] + Min[10] * Min[10]);
	for (int i = 0; i < 12; i++)
		M[i] = -Min[i] / n;
	double A[9] = { M[0], M[1], M[2], M[4], M[5], M[6], M[8], M[9], M[10] };
	double d = det3(A) < 0 ? 1.0 : -1.0; /* RTK: d = -sign(det A) */
	double u0 = A[0] * A[6] + A[1] * A[7] + A[2] * A[8];
	double v0 = A[3] * A[6] + A[4] * A[7] + A[5] * A[8];
	double aU = sqrt(fmax(0, A[0] * A[0] + A[1] * A[1] + A[2] * A[2] - u0 * u0));
	double aV = sqrt(fmax(0, A[3] * A[3] + A[4] * A[4] + A[5] * A[5] - v0 * v0));
	double sdd = 0.5 * (aU + aV);
	/* K = d [[sdd, 0, -u0], [0, sdd, -v0], [0, 0, -1]]; R = K^-1 A, s = -K^-1 p */
	double Ki[9] = { 1 / (d * sdd), 0, -u0 / (d * sdd), 0, 1 / (d * sdd), -v0 / (d * sdd), 0, 0, -1 / d };
	double R[9], p[3] = { M[3], M[7], M[11] }, s[3];
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < 3; j++)
			R[3 * i + j] = Ki[3 * i] * A[j] + Ki[3 * i + 1] * A[3 + j] + Ki[3 * i + 2] * A[6 + j];
		s[i] = -(Ki[3 * i] * p[0] + Ki[3 * i + 1] * p[1] + Ki[3 * i + 2] * p[2]);
	}
	/* ITK's Euler3DTransform angles of R = Rz Rx Ry */
	double ax = asin(fmax(-1, fmin(1, R[7]))), ay, az, ca = cos(ax);
	if (fabs(ca) > 5e-5) {
		ay = atan2(-R[6] / ca, R[8] / ca);
		az = atan2(-R[1] / ca, R[4] / ca);
	} else {
		az = 0;
		ay = atan2(R[3], R[0]);
	}
	v->sid = s[2];
	v->sdd = sdd;
	v->ga = -ay / DEG;
	v->oa = -ax / DEG;
	v->ia = -az / DEG;
	v->sx = s[0];
	v->sy = s[1];
	v->px = s[0] - u0;
	v->py = s[1] - v0;
	double B[12], scale = 0, worst = 0;
	rtk_matrix(v, B);
	for (int i = 0; i < 12; i++) {
		scale = fmax(scale, fabs(M[i]));
		worst = fmax(worst, fabs(B[i] - M[i]));
	}
	if (!(worst <= 1e-7 * scale) || !(v->sid > 0))
		return rc_fail(err, RC_EUNSUPPORTED, "format",
			       "view %d: its matrix has no RTK equivalent at this spacing (RTK's geometry needs square "
			       "pixels, a detector without skew and the source in front of it; rebuilt with a "
			       "relative difference of %.2g)", k, scale > 0 ? worst / scale : worst);
	return 0;
}

static int put_num(xmlTextWriter *w, const char *name, double x)
{
	return xmlTextWriterWriteFormatElement(w, (const xmlChar *)name, "%.17g", x) < 0;
}

static int put_matrix(xmlTextWriter *w, const double M[12])
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "\n");
	for (int i = 0; i < 3; i++)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "      %.17g %.17g %.17g %.17g\n", M[4 * i], M[4 * i + 1],
			      M[4 * i + 2], M[4 * i + 3]);
	snprintf(buf + n, sizeof buf - (size_t)n, "    ");
	return xmlTextWriterWriteElement(w, (const xmlChar *)"Matrix", (const xmlChar *)buf) < 0;
}

static int write_views(xmlTextWriter *w, const rc_geom *g, const spec_rtk_det *det, rc_err *err)
{
	const rc_detector_desc *dd = rc_geom_detector(g);
	int cone = rc_geom_type_of(g) == RC_GEOM_CONE, bad = 0, rc;
	rtk_view base = { 0 };
	if (cone) {
		base.sid = rc_geom_sid(g);
		base.sdd = rc_geom_sdd(g);
		base.px = dd->offset_u - det->origin_u - (dd->nu - 1) / 2.0 * det->du;
		base.py = dd->offset_v - det->origin_v - (dd->nv - 1) / 2.0 * det->dv;
		bad |= put_num(w, "SourceToIsocenterDistance", base.sid) | put_num(w, "SourceToDetectorDistance", base.sdd) |
		       put_num(w, "ProjectionOffsetX", base.px) | put_num(w, "ProjectionOffsetY", base.py);
		if (dd->shape == RC_DETECTOR_CURVED)
			bad |= put_num(w, "RadiusCylindricalDetector", base.sdd);
	}
	for (int k = 0; k < rc_geom_nviews(g) && !bad; k++) {
		rtk_view v = base;
		double M[12];
		if (cone) {
			v.ga = rc_geom_view(g, k)->angle_rad / DEG;
		} else {
			recond_to_rtk(rc_geom_view(g, k)->P, det, M);
			if ((rc = decompose(M, k, &v, err)))
				return rc;
		}
		rtk_matrix(&v, M);
		bad |= xmlTextWriterStartElement(w, (const xmlChar *)"Projection") < 0;
		bad |= put_num(w, "GantryAngle", v.ga);
		if (!cone)
			bad |= put_num(w, "SourceToIsocenterDistance", v.sid) | put_num(w, "SourceToDetectorDistance", v.sdd) |
			       put_num(w, "OutOfPlaneAngle", v.oa) | put_num(w, "InPlaneAngle", v.ia) |
			       put_num(w, "SourceOffsetX", v.sx) | put_num(w, "SourceOffsetY", v.sy) |
			       put_num(w, "ProjectionOffsetX", v.px) | put_num(w, "ProjectionOffsetY", v.py);
		bad |= put_matrix(w, M);
		bad |= xmlTextWriterEndElement(w) < 0;
	}
	return bad ? rc_fail(err, RC_ENOMEM, "", "cannot write the RTK XML (out of memory)") : 0;
}

int spec_rtk_write(const rc_geom *g, const spec_rtk_det *det, char **ret, size_t *len, rc_err *err)
{
	rc_geom_type t = rc_geom_type_of(g);
	if (t == RC_GEOM_HELIX)
		return rc_fail(err, RC_EUNSUPPORTED, "format",
			       "format=rtk: a helix geometry is not written as RTK's geometry file here; download "
			       "the volume in another format");
	if (t != RC_GEOM_CONE && t != RC_GEOM_MATRICES)
		return rc_fail(err, RC_EUNSUPPORTED, "format",
			       "format=rtk: RTK's geometry file is 3-D (cone beam); a %s geometry has no RTK equivalent",
			       t == RC_GEOM_FAN ? "fan" : "parallel");
	/* a cylinder: its offsets go into the stack's origin, the form read back (cylinder()) */
	const rc_detector_desc *dd = rc_geom_detector(g);
	spec_rtk_det cyl = *det;
	if (dd->shape == RC_DETECTOR_CURVED) {
		cyl.origin_u = dd->offset_u - (dd->nu - 1) / 2.0 * det->du;
		cyl.origin_v = dd->offset_v - (dd->nv - 1) / 2.0 * det->dv;
		det = &cyl;
	}
	pthread_once(&xml_once, xml_init);
	xmlBuffer *buf = xmlBufferCreate();
	xmlTextWriter *w = buf ? xmlNewTextWriterMemory(buf, 0) : NULL;
	int rc = 0;
	char comment[400];
	if (!w) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the XML writer");
		goto out;
	}
	snprintf(comment, sizeof comment,
		 " written by recond for a projection stack of Size %d x %d, Spacing %.17g x %.17g mm, Origin %.17g, "
		 "%.17g mm (RTK's frame: (X, Y, Z) = recond's (y, z, x)) ",
		 rc_geom_detector(g)->nu, rc_geom_detector(g)->nv, det->du, det->dv, det->origin_u, det->origin_v);
	int bad = xmlTextWriterSetIndent(w, 1) < 0 || xmlTextWriterSetIndentString(w, (const xmlChar *)"  ") < 0 ||
		  xmlTextWriterStartDocument(w, NULL, NULL, NULL) < 0 ||
		  xmlTextWriterWriteDTD(w, (const xmlChar *)"RTKGEOMETRY", NULL, NULL, NULL) < 0 ||
		  xmlTextWriterStartElement(w, (const xmlChar *)"RTKThreeDCircularGeometry") < 0 ||
		  xmlTextWriterWriteAttribute(w, (const xmlChar *)"version", (const xmlChar *)"3") < 0 ||
		  xmlTextWriterWriteComment(w, (const xmlChar *)comment) < 0;
	if (bad) {
		rc = rc_fail(err, RC_ENOMEM, "", "cannot write the RTK XML (out of memory)");
		goto out;
	}
	if ((rc = write_views(w, g, det, err)))
		goto out;
	if (xmlTextWriterEndDocument(w) < 0) {
		rc = rc_fail(err, RC_ENOMEM, "", "cannot write the RTK XML (out of memory)");
		goto out;
	}
	xmlFreeTextWriter(w);
	w = NULL;
	size_t n = (size_t)xmlBufferLength(buf);
	char *s = malloc(n + 1);
	if (!s) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the RTK XML");
		goto out;
	}
	memcpy(s, xmlBufferContent(buf), n);
	s[n] = '\0';
	*ret = s;
	*len = n;
out:
	xmlFreeTextWriter(w);
	if (buf)
		xmlBufferFree(buf);
	return rc;
}
