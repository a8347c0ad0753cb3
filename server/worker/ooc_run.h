/*
 * ooc_run: the worker's out-of-core FDK (core/plan/ooc.h, plan from
 * spec.h job_spec_plan): on cone and matrices the stack filtered once,
 * chunk by chunk of views, into a scratch file in the job directory
 * (unlinked as soon as it is open: the process's end removes it), then
 * slab after slab, rows read with pread from that file (else from the
 * job's projections.f32), the slab reconstructed on the job's engine and written
 * with pwrite into the volume's temporary, which is fsynced and renamed to
 * volume.f32 (durable.h) once every slab is in it.  The worker's resident
 * memory holds one slab, its rows and their filtered copy: neither the
 * volume nor the stack is ever mapped or read whole (page cache is not the
 * process's).
 */
#ifndef RC_OOC_RUN_H
#define RC_OOC_RUN_H

#include <stdatomic.h>

#include "plan/ooc.h"
#include "spec.h"

/* Runs plan p (rc_ooc_plan_out_of_core(p)) of spec in job directory dir; slab_done(ud,
 * done, of) after each slab (may be NULL); cancel stops it between slabs
 * and within one (RC_ECANCELLED, no volume written).  rep: the last slab's
 * run, its seconds the whole run's. */
int ooc_run(const job_spec *spec, const char *dir, const rc_ooc_plan *p, const atomic_int *cancel,
	    void (*slab_done)(void *ud, int done, int of), void *ud, rc_recon_report *rep, rc_err *err);

/* CGLS, SIRT, SART or MLEM out of core (core/plan/ooc_iter.h) under plan p in job
 * directory dir: x written into the volume's temporary, renamed to
 * volume.f32 once the iterations are done; the other vectors in two scratch files of the
 * job directory, unlinked once open.  hooks: progress after each iteration,
 * phase around the FDK start, cancel (RC_ECANCELLED, no volume written). */
int ooc_run_iter(const job_spec *spec, const char *dir, const rc_ooc_plan *p, const rc_algo_hooks *hooks,
		 rc_recon_report *rep, rc_err *err);

#endif
