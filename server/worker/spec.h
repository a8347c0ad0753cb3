/*
 * spec: the job spec (JSON, api/openapi.yaml JobSpec) parsed and validated
 * into rc_recon_spec plus what the server needs around it (label, priority,
 * autostart, byte sizes of a view, the stack and the volume).
 *
 * Invariants of a parsed job_spec: every field was type- and range-checked
 * with a message naming it, unknown keys were rejected, and rc_geom_new
 * accepted the geometry under the memory cap.  r.geom.angles_deg and
 * r.geom.matrices point into storage owned by the job_spec.
 *
 * This is the one parser of a job spec: the daemon (POST /v1/jobs, and the
 * volume grid of a download), the worker and the job's stored summary all
 * read a spec through it, so they agree on every field and size.  The stored
 * form is the body as posted (STORE/jobs/{id}/spec.json); job_spec_load reads
 * it back.  Nothing else looks into the spec's JSON.
 */
#ifndef RC_SPEC_H
#define RC_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "plan/memory.h"
#include "plan/ooc.h"
#include "plan/recon.h"
#include "spec_dicom.h"
#include "spec_input.h"

#define SPEC_LABEL_MAX 128 /* characters, as api/openapi.yaml's maxLength counts; up to 4 bytes each */
#define SPEC_MAX_VIEWS 100000

/* execution.stream: FDK back-projects each view as it arrives (runner.h) */
#define STREAM_OFF 0   /* false: wait for the whole stack */
#define STREAM_AUTO 1  /* absent: stream an autostart FDK job whose views come one by one */
#define STREAM_ON 2    /* true */

/* execution.checkpoint_s: its default and largest value (a day) */
#define SPEC_CHECKPOINT_DEFAULT_S 60.0
#define SPEC_CHECKPOINT_MAX_S 86400.0

/* execution.ranks: the most any spec may ask for (the daemon's
 * mpi_max_ranks bounds it further, docs/cluster.md) */
#define SPEC_MAX_RANKS 4096

typedef struct job_spec {
	rc_recon_spec r;
	int stream;            /* STREAM_OFF, STREAM_AUTO, STREAM_ON (STREAM_OFF unless fdk streams here) */
	int ranks;             /* execution.ranks: processes under mpirun (docs/cluster.md), 1 = none */
	double checkpoint_s;   /* execution.checkpoint_s: seconds between an iterative run's
	                          checkpoints (checkpoint.h), 0 = none; SPEC_CHECKPOINT_DEFAULT_S */
	char label[4 * SPEC_LABEL_MAX + 1];
	int priority;          /* 0..9, higher first */
	int autostart;
	int nviews;
	int displaced;         /* fdk weighs a displaced detector (rc_fdk_displaced): +1, -1; else 0 */
	int rows;              /* detector rows per view: nv, or nz for fan/parallel */
	int nu;
	uint64_t view_stride;  /* floats between views k and k+1 (geometry.h layout) */
	uint64_t row_stride;   /* floats between rows j and j+1 of one view */
	unsigned sample_bytes; /* bytes of one projection sample: 4, or 2 for uint16 counts (input) */
	uint64_t view_bytes;   /* bytes of one view upload: rows * nu * sample_bytes */
	uint64_t proj_bytes;   /* bytes of the whole stack */
	uint64_t vol_bytes;    /* bytes of the raw volume */
	job_input in;
	job_output out;
	job_dicom dicom;
	int rtk;               /* geometry.type "rtk": r.geom came from RTK's XML */
	double rtk_origin[2];  /* its geometry.detector.origin_u_mm, origin_v_mm */
	double *angles;        /* owned */
	double *matrices;      /* owned */
} job_spec;

/* Parses and validates len bytes of JSON.  max_bytes caps projections +
 * volume (0 = no cap).  Errors: RC_EBADJSON (not JSON, duplicate keys, not
 * an object), RC_EINVAL (the field is named), RC_ETOOBIG (over max_bytes). */
int job_spec_parse(const char *buf, size_t len, uint64_t max_bytes,
		   job_spec **ret, rc_err *err);
void job_spec_free(job_spec *s);

/* Reads the stored spec at path (a job directory's spec.json) and parses it
 * as job_spec_parse does, without a byte cap (the spec was capped when the
 * job was created).  Errors: RC_EIO (cannot read the file), else those of
 * job_spec_parse. */
int job_spec_load(const char *path, job_spec **ret, rc_err *err);

/* Only the stored spec's output and dicom objects, by the same parsers,
 * without building the geometry: what GET /v1/jobs/{id} shows of a job's
 * DICOM fields on every poll. */
int job_spec_load_output(const char *path, job_output *out, job_dicom *d, rc_err *err);

/* The job's geometry as RTK's geometry XML (GET /v1/jobs/{id}/geometry?
 * format=rtk; spec_rtk.h): malloc'd, NUL-terminated, *len bytes.  The
 * projection stack is the job's, with RTK's Origin as given for a `rtk`
 * geometry and centred (-(n - 1)/2 spacing) otherwise; a `matrices` job's
 * pixels are 1 mm (its du, dv).  RC_EUNSUPPORTED (field "format") for fan,
 * parallel, curved detectors and matrices with no RTK equivalent. */
int job_spec_rtk_xml(const job_spec *s, char **ret, size_t *len, rc_err *err);

/* Whether the job, run across ranks, splits its volume into z-slabs, one
 * per rank (a cone or matrices FDK), rather than its views
 * (docs/cluster.md). */
int job_spec_slabs(const job_spec *s);

/* The worker's predicted peak resident memory for the job, bytes
 * (core/plan/memory.h rc_plan_memory; a job that may stream counts its
 * scratch volume).  Across ranks, one rank's, Open MPI's libraries
 * included: in z-slabs (a cone or matrices FDK of line integrals) the
 * largest of the ranks' slabs with the detector rows it reads, as the
 * rank runs it (rc_ooc_fdk_slab); otherwise the whole job's. */
uint64_t job_spec_memory(const job_spec *s);

/* spec_plan.c: a job's memory plan under the worker's budget (docs/server.md,
 * "Memory"): in core where its predicted peak (job_spec_memory) fits, else
 * FDK in z-slabs out of core (core/plan/ooc.h), or CGLS, SIRT, SART and MLEM in z-slabs and chunks
 * of views (core/plan/ooc_iter.h), else a refusal naming the
 * memory it needs.  The daemon plans at POST /v1/jobs (422 when nothing
 * fits, summary.memory_plan otherwise), the worker again when it runs, with
 * the budget it is given (--memory-limit), and runs the plan. */
/* The plan of s under budget bytes (0: no budget, in core).  RC_EUNSUPPORTED
 * (field "volume") when neither the job nor its slabs fit, or it cannot run
 * out of core (SART, OS-EM, counts, ...: rc_ooc_iter_refusal): the message names the
 * bytes the job needs, the budget (whose is why_budget: "the operator's
 * --memory-limit", ...) and what to change; p then holds the least the job
 * needs in predicted_bytes. */
int job_spec_plan(const job_spec *s, uint64_t budget, const char *why_budget, rc_ooc_plan *p, rc_err *err);

/* {"mode": "in_core" | "out_of_core", "slabs", "slab_nz", "rows",
 * "chunks", "predicted_bytes", "budget_bytes"} (budget null when none). */
json_t *job_plan_json(const rc_ooc_plan *p);

/* Only the stored spec's input object, by spec_parse_input: what the daemon
 * checks before a job of counts starts (its flat and dark are there). */
int job_spec_load_input(const char *path, job_input *in, rc_err *err);

/* The Job resource's `summary` (api/openapi.yaml) as compact JSON text,
 * malloc'd (NULL when out of memory): geometry type, detector (nu, rows),
 * volume, voxel_mm, algorithm, iterations, engine,
 * plan_memory_bytes (job_spec_memory).  Kept with the job row. */
char *job_spec_summary(const job_spec *s);

/* File offset (bytes) of row j of view k in the stack (samples of
 * sample_bytes). */
static inline uint64_t job_spec_row_offset(const job_spec *s, int k, int j)
{
	return s->sample_bytes * ((uint64_t)k * s->view_stride + (uint64_t)j * s->row_stride);
}

#endif
