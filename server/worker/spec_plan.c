/* spec_plan: a job's memory plan (spec.h, job_spec_plan). */
#include <string.h>

#include "plan/ooc_iter.h"
#include "spec.h"


/* Why the job cannot run out of core, or NULL when it can (FDK, CGLS,
 * SIRT, SART or MLEM of line integrals in one process, not a helix; a streaming FDK
 * waits for its whole stack, then runs from it). */
static const char *not_out_of_core(const job_spec *s)
{
	if (s->r.algo.name != RC_ALGO_FDK && s->r.algo.name != RC_ALGO_CGLS && s->r.algo.name != RC_ALGO_SIRT &&
	    s->r.algo.name != RC_ALGO_MLEM && s->r.algo.name != RC_ALGO_SART)
		return "out of core, only fdk, cgls, sirt, sart and mlem run";
	if (s->in.intensity)
		return "out of core, fdk and the iterative methods run from line integrals only";
	if (s->r.geom.type == RC_GEOM_HELIX) /* its own slabs hold only the views each needs */
		return "out of core, a helix is not planned (its helical fdk already holds only the views a slab needs)";
	if (s->ranks > 1) /* each rank runs its share in core (docs/cluster.md) */
		return job_spec_slabs(s) ? "across MPI ranks, each rank's z-slab must fit in core: ask for more ranks"
					 : "across MPI ranks, every rank holds the whole job (its views split): run it "
					   "with execution.ranks 1, out of core";
	return NULL;
}

int job_spec_plan(const job_spec *s, uint64_t budget, const char *why_budget, rc_ooc_plan *p, rc_err *err)
{
	uint64_t need = job_spec_memory(s);
	memset(p, 0, sizeof *p);
	p->slabs = 1;
	p->slab_nz = s->r.vol.nz;
	p->rows = s->rows;
	p->chunks = 1;
	p->predicted_bytes = need;
	p->budget_bytes = budget;
	if (!budget || need <= budget)
		return 0;
	const char *why = not_out_of_core(s);
	rc_geom *g = NULL;
	rc_err e;
	rc_err_clear(&e);
	int rc = RC_EUNSUPPORTED;
	char least[sizeof e.msg + 8] = "";
	if (!why && rc_geom_new(&s->r.geom, &s->r.vol, NULL, &g, &e) == 0) {
		int cgls = s->r.algo.name != RC_ALGO_FDK;
		/* cgls, sirt, sart, mlem: slabs and chunks (or blocks) of views (core/plan/ooc_iter.h),
		 * where their parameters allow */
		why = cgls ? rc_ooc_iter_refusal(&s->r, g) : NULL;
		rc = why ? RC_EUNSUPPORTED
			 : cgls ? rc_ooc_plan_iter(&s->r, g, budget, p, &e) : rc_ooc_plan_fdk(&s->r, g, budget, p, &e);
		rc_geom_free(g);
		if (!rc)
			return 0;
		if (why)
			p->predicted_bytes = need;
		else if (cgls)
			snprintf(least, sizeof least, "; %s", e.msg);
		else
			snprintf(least, sizeof least, "; one slice at a time out of core needs about %llu bytes",
				 (unsigned long long)p->predicted_bytes);
		p->predicted_bytes = need < p->predicted_bytes ? need : p->predicted_bytes;
	} else if (!why) {
		why = e.msg;
	}
	/* the long object's extension (bounded from the spec) may be what does
	 * not fit: say what the asked volume alone needs (in place of the
	 * figures' detail, for room in the message) */
	if (s->r.algo.name != RC_ALGO_FDK && s->r.algo.extend != RC_EXTEND_OFF) {
		job_spec off = *s;
		off.r.algo.extend = RC_EXTEND_OFF;
		uint64_t n_off = job_spec_memory(&off);
		if (n_off < need && n_off <= budget)
			return rc_fail(err, RC_EUNSUPPORTED, "volume",
				       "the job needs about %llu bytes in core, %llu with algorithm.extend \"off\"%s%s%s; a "
				       "job may take %llu bytes (%s): ask for a smaller volume or fewer views, or raise "
				       "--memory-limit",
				       (unsigned long long)need, (unsigned long long)n_off, least, why ? "; " : "",
				       why ? why : "", (unsigned long long)budget, why_budget ? why_budget : "the budget");
	}
	return rc_fail(err, RC_EUNSUPPORTED, "volume",
		       "the job needs about %llu bytes in core (stack %llu, volume %llu bytes and the algorithm's "
		       "vectors)%s%s%s; a job may take %llu bytes (%s): ask for a smaller volume or fewer views, or raise "
		       "--memory-limit",
		       (unsigned long long)need, (unsigned long long)s->proj_bytes, (unsigned long long)s->vol_bytes, least,
		       why ? "; " : "", why ? why : "", (unsigned long long)budget, why_budget ? why_budget : "the budget");
}

json_t *job_plan_json(const rc_ooc_plan *p)
{
	return json_pack("{sssisisisisIso}", "mode", rc_ooc_plan_out_of_core(p) ? "out_of_core" : "in_core", "slabs", p->slabs,
			 "slab_nz", p->slab_nz, "rows", p->rows, "chunks", p->chunks, "predicted_bytes",
			 (json_int_t)p->predicted_bytes, "budget_bytes",
			 p->budget_bytes ? json_integer((json_int_t)p->budget_bytes) : json_null());
}
