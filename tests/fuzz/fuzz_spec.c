/*
 * fuzz_spec: the job spec as POST /v1/jobs takes it: the body through
 * server/worker/spec.c's job_spec_parse (with the daemon's default cap of
 * 64 GiB of projections + volume) and then core's rc_recon_check, as
 * http_jobs.c does, then the job's summary.  Besides the sanitizers, what
 * the daemon builds on is checked for every spec the parser accepts:
 *  - sizes: view_bytes = sample_bytes * nu * rows (4, or 2 for uint16
 *    counts: the input object), proj_bytes = nviews * view_bytes,
 *    vol_bytes = 4 * nx * ny * nz, their sum within the cap;
 *  - the upload layout (http_upload.c writes row j of view k at
 *    job_spec_row_offset): every row lies inside the stack and no two rows
 *    overlap (checked through the strides);
 *  - rc_recon_check answers 0 or RC_EUNSUPPORTED, and an error always comes
 *    with a code, a message and no spec;
 *  - the summary is JSON.
 * Input: the request body, as is.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/recon.h"
#include "spec.h"

#define CAP (64ull << 30) /* config.c: max_job_bytes */

static void check(int ok, const char *what, const char *msg)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz_spec: %s%s%s\n", what, msg ? ": " : "", msg ? msg : "");
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1u << 20))
		return 0;
	job_spec *s = NULL;
	rc_err err;
	rc_err_clear(&err);
	int rc = job_spec_parse((const char *)data, size, CAP, &s, &err);
	if (rc) {
		check(rc < 0 && err.code == rc && err.msg[0], "a refusal without its code or message", err.msg);
		check(!s, "a refusal that still returned a spec", err.msg);
		return 0;
	}
	const rc_volume_desc *v = &s->r.vol;
	check(s->nviews >= 1 && s->nviews <= SPEC_MAX_VIEWS && s->r.geom.nviews == s->nviews, "view count", NULL);
	check(s->nu >= 1 && s->rows >= 1, "detector size", NULL);
	check(s->sample_bytes == (s->in.intensity && s->in.dtype == RC_COUNTS_U16 ? 2u : 4u), "sample_bytes", NULL);
	check(!s->in.intensity || s->in.uploaded[INPUT_FLAT] || s->in.uploaded[INPUT_DARK] || s->in.flat > s->in.dark,
	      "a flat not above the dark", NULL);
	check(s->view_bytes == (uint64_t)s->sample_bytes * (uint64_t)s->nu * (uint64_t)s->rows, "view_bytes", NULL);
	check(s->proj_bytes == s->view_bytes * (uint64_t)s->nviews, "proj_bytes", NULL);
	check(s->vol_bytes == 4ull * (uint64_t)v->nx * (uint64_t)v->ny * (uint64_t)v->nz, "vol_bytes", NULL);
	check(s->proj_bytes + s->vol_bytes <= CAP, "over the byte cap", NULL);
	/* rows of nu floats at k * view_stride + j * row_stride: inside the
	 * stack, and disjoint (one stride spans the whole other axis) */
	uint64_t nu = (uint64_t)s->nu, vs = s->view_stride, rs = s->row_stride;
	uint64_t end = job_spec_row_offset(s, s->nviews - 1, s->rows - 1) + s->sample_bytes * nu;
	check(end <= s->proj_bytes, "a row past the end of the stack", NULL);
	int disjoint = (rs >= nu && (s->nviews == 1 || vs >= rs * (uint64_t)s->rows)) ||
		       (vs >= nu && (s->rows == 1 || rs >= vs * (uint64_t)s->nviews));
	check(disjoint, "rows of the stack overlap", NULL);

	rc = rc_recon_check(&s->r, &err);
	check(rc == 0 || (rc == RC_EUNSUPPORTED && err.code == rc && err.msg[0]), "rc_recon_check", err.msg);
	char *sum = job_spec_summary(s);
	check(sum != NULL, "no summary", NULL);
	json_t *j = json_loads(sum, 0, NULL);
	check(json_is_object(j), "the summary is not a JSON object", sum);
	json_decref(j);
	free(sum);
	job_spec_free(s);
	return 0;
}
