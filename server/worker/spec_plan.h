/*
 * spec_plan: a job's memory plan under the worker's budget (docs/server.md,
 * "Memory"): in core where its predicted peak (job_spec_memory) fits, else
 * FDK in z-slabs out of core (core/plan/ooc.h), else a refusal naming the
 * memory it needs.  The daemon plans at POST /v1/jobs (422 when nothing
 * fits, summary.memory_plan otherwise), the worker again when it runs,
 * with the budget it is given (--memory-limit), and runs the plan.
 */
#ifndef RC_SPEC_PLAN_H
#define RC_SPEC_PLAN_H

#include <jansson.h>
#include <stdint.h>

#include "plan/ooc.h"
#include "spec.h"

/* The plan of s under budget bytes (0: no budget, in core).  RC_EUNSUPPORTED
 * (field "volume") when neither the job nor its slabs fit, or it cannot run
 * out of core (an iterative method, counts): the message names the
 * bytes the job needs, the budget (whose is why_budget: "the operator's
 * --memory-limit", ...) and what to change; p then holds the least the job
 * needs in predicted_bytes. */
int job_spec_plan(const job_spec *s, uint64_t budget, const char *why_budget, rc_ooc_plan *p, rc_err *err);

/* {"mode": "in_core" | "out_of_core", "slabs", "slab_nz", "rows",
 * "chunks", "predicted_bytes", "budget_bytes"} (budget null when none). */
json_t *job_plan_json(const rc_ooc_plan *p);

#endif
