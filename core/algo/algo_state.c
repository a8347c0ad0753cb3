/* algo_state: the shape of an iterative run's checkpoint (algo.h's
 * rc_algo_state) and the checks a resume passes before a run uses it. */
#include "algo/algo_util.h"

#include <string.h>

void rc_algo_state_shape(const rc_algo_params *p, const rc_backend *b, rc_algo_state *s)
{
	memset(s, 0, sizeof *s);
	s->name = p->name;
	s->nvec = 1;
	s->space[0] = RC_SPACE_VOLUME;
	s->nscal = 1;
	if (p->name == RC_ALGO_CGLS) {
		s->nvec = 3;
		s->space[1] = RC_SPACE_PROJ;
		s->space[2] = RC_SPACE_VOLUME;
		s->nscal = 3 + 2 * b->nbatch;
	}
}

int rc_algo_resume_check(const rc_algo_params *p, const rc_backend *b, const rc_algo_state *r, rc_err *err)
{
	rc_algo_state want;
	rc_algo_state_shape(p, b, &want);
	if (r->name != want.name || r->nvec != want.nvec || r->nscal != want.nscal || !r->scal)
		return rc_fail(err, RC_EINVAL, "checkpoint", "the checkpoint is not of this method's state (%s)",
			       rc_algo_name_str(p->name));
	for (int i = 0; i < r->nvec; i++)
		if (r->space[i] != want.space[i] || !r->host[i])
			return rc_fail(err, RC_EINVAL, "checkpoint", "the checkpoint's vector %d does not fit", i);
	if (r->iteration < 1 || r->iteration >= p->iterations)
		return rc_fail(err, RC_EINVAL, "checkpoint", "the checkpoint's iteration %d is not within 1..%d",
			       r->iteration, p->iterations - 1);
	return 0;
}

int rc_algo_checkpoint(const rc_algo_hooks *h, rc_backend *b, rc_algo_state *s, rc_err *err)
{
	if (!h || !h->checkpoint)
		return 0;
	int rc = rc_bk_finish(b, err);
	return rc ? rc : h->checkpoint(h->ud, b, s, err);
}
