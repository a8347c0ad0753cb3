/*
 * fuzz_rtkxml: RTK's geometry XML as geometry.xml carries it, through
 * server/worker/spec_rtk.c's spec_rtk_parse (libxml2, entities and network
 * off) for a 16 x 12 stack of 0.5 mm pixels.  Besides the sanitizers,
 * checked for every file the parser accepts:
 *  - 1 to SPEC_RTK_MAX_VIEWS views, a cone geometry with its angles or a
 *    matrices one with its matrices (exactly one of the two owned), every
 *    number finite;
 *  - where rc_geom_new builds it over a small volume, spec_rtk_write writes
 *    it and the written XML parses again to the same number of views;
 *  - an error always comes with a code, the field geometry.xml (or none,
 *    out of memory) and a message, and nothing owned.
 * Input: the XML, as is.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/geometry.h"
#include "spec_rtk.h"

static void check(int ok, const char *what, const char *msg)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz_rtkxml: %s%s%s\n", what, msg ? ": " : "", msg ? msg : "");
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1u << 20))
		return 0;
	spec_rtk_det det = { 16, 12, 0.5, 0.5, -3.75, -2.75 };
	rc_geom_spec gs;
	double *ang = NULL, *mat = NULL;
	rc_err err;
	rc_err_clear(&err);
	int rc = spec_rtk_parse((const char *)data, size, &det, &gs, &ang, &mat, &err);
	if (rc) {
		check(rc < 0 && err.code == rc && err.msg[0], "a refusal without its code or message", err.msg);
		check(!strcmp(err.field, "geometry.xml") || rc == RC_ENOMEM, "a refusal naming another field", err.field);
		check(!ang && !mat, "a refusal that still returned arrays", err.msg);
		return 0;
	}
	check(gs.nviews >= 1 && gs.nviews <= SPEC_RTK_MAX_VIEWS, "view count", NULL);
	check((gs.type == RC_GEOM_CONE && ang && !mat && gs.angles_deg == ang) ||
	      (gs.type == RC_GEOM_MATRICES && mat && !ang && gs.matrices == mat), "type and arrays", NULL);
	for (int k = 0; k < gs.nviews; k++)
		for (int i = 0; i < (ang ? 1 : 12); i++)
			check(isfinite(ang ? ang[k] : mat[12 * k + i]), "a number that is not finite", NULL);
	rc_volume_desc vol = { 8, 8, 8, 0.5, 0.5, 0.5, 0, 0, 0 };
	rc_limits lim = { .max_bytes = 64u << 20 };
	rc_geom *g = NULL;
	if (rc_geom_new(&gs, &vol, &lim, &g, &err) == 0) {
		char *xml = NULL;
		size_t len = 0;
		if (spec_rtk_write(g, &det, &xml, &len, &err) == 0) {
			rc_geom_spec gs2;
			double *a2 = NULL, *m2 = NULL;
			int rc2 = spec_rtk_parse(xml, len, &det, &gs2, &a2, &m2, &err);
			check(rc2 == 0, "the written XML does not parse", err.msg);
			check(gs2.nviews == gs.nviews, "the written XML has another number of views", NULL);
			free(a2);
			free(m2);
			free(xml);
		} else {
			check(err.code == RC_EUNSUPPORTED || err.code == RC_ENOMEM, "a write refusal of another kind", err.msg);
		}
	}
	rc_geom_free(g);
	free(ang);
	free(mat);
	return 0;
}
