/* job_row: states, their names and a row's own rules (job_row.h). */
#include "job_row.h"

#include <stdlib.h>
#include <string.h>

static const char *const state_names[JOB_NSTATES] = {
	"created", "receiving", "queued", "running", "succeeded", "failed", "cancelled",
};

const char *job_state_name(job_state s)
{
	return (unsigned)s < JOB_NSTATES ? state_names[s] : "unknown";
}

int job_state_parse(const char *s, job_state *ret)
{
	for (int i = 0; i < JOB_NSTATES; i++)
		if (s && !strcmp(s, state_names[i])) {
			*ret = (job_state)i;
			return 0;
		}
	return RC_EINVAL;
}

void job_row_clear(job_row *r)
{
	if (!r)
		return;
	free(r->summary);
	free(r->report);
	free(r->present);
	free(r->progress);
	free(r->lease_log);
	memset(r, 0, sizeof *r);
}

int job_row_uploadable(const job_row *r)
{
	if (JOB_BIT(r->state) & JOB_UPLOADABLE)
		return 1;
	/* a streaming job takes views while it is queued and runs, until it has
	 * them all: from then on its volume is made from exactly those */
	return r->streaming && (JOB_BIT(r->state) & JOB_STREAM_UPLOADABLE) && r->views_present < r->views_expected;
}

int job_row_upload_refused(const job_row *r, rc_err *err)
{
	if (r->streaming && !(JOB_BIT(r->state) & JOB_FINAL))
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s with every view: its volume is made from the views "
			       "it has, so it takes no more uploads", r->id, job_state_name(r->state));
	return rc_fail(err, RC_ESTATE, "state", "job %s is %s and no longer accepts projections", r->id,
		       job_state_name(r->state));
}
