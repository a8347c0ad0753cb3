/*
 * recon: a job from spec to volume (recon.h).  First version: the CPU engine
 * alone; the planner and device engines extend rc_recon_run.
 */
#include "recon.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine_cpu.h"
#include "tensor.h"

void rc_recon_spec_default(rc_recon_spec *s)
{
	memset(s, 0, sizeof *s);
	rc_algo_params_default(&s->algo, RC_ALGO_SART);
	snprintf(s->engine, sizeof s->engine, "auto");
	snprintf(s->precision, sizeof s->precision, "fp32");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rc_recon_run(const rc_recon_spec *s, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err)
{
	rc_geom *g = NULL;
	rc_engine *cpu = NULL;
	rc_exec *x = NULL;
	rc_recon_report local;
	if (!report)
		report = &local;
	memset(report, 0, sizeof *report);
	double t0 = now_s();

	int rc = rc_geom_new(&s->geom, &s->vol, &s->limits, &g, err);
	if (rc)
		goto out;
	/* the tensor path (paper 001): asked for, or a 2-D CGLS job left to auto */
	if (!strcmp(s->engine, "tensor") ||
	    (!strcmp(s->engine, "auto") && rc_geom_is_2d(g) && s->algo.name == RC_ALGO_CGLS)) {
		rc = rc_tensor_run(s, g, proj, vol, hooks, report, err);
		goto out;
	}
	if (strcmp(s->engine, "auto") && strcmp(s->engine, "cpu")) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			     "execution.engine \"%s\" is not available in this build", s->engine);
		goto out;
	}
	rc = rc_engine_cpu_new(g, s->threads, &cpu, err);
	if (rc)
		goto out;
	rc = rc_exec_new(&cpu, 1, &x, err);
	if (rc)
		goto out;
	snprintf(report->engine, sizeof report->engine, "cpu");
	rc = rc_algo_run(&s->algo, x, proj, vol, hooks, err);

	report->ndevices = 1;
	rc_recon_device_report *d = &report->dev[0];
	snprintf(d->name, sizeof d->name, "%s", cpu->name);
	snprintf(d->device_id, sizeof d->device_id, "%s", cpu->device_id);
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		d->views[t] = rc_geom_nviews(g);
		d->predicted_ms[t] = -1;
		long nv = rc_exec_total_views(x, (rc_task)t, 0);
		long calls = nv > 0 ? (nv + rc_geom_nviews(g) - 1) / rc_geom_nviews(g) : 0;
		d->measured_ms[t] = calls ? 1e3 * rc_exec_total_seconds(x, (rc_task)t, 0) / (double)calls : 0;
	}
out:
	report->seconds = now_s() - t0;
	rc_exec_free(x);
	rc_engine_free(cpu);
	rc_geom_free(g);
	return rc;
}
