/*
 * rctl_job: what reconctl reads out of recond's JSON: a job's state and
 * progress (from GET /v1/jobs/{id} or from an event's data, which carry the
 * same fields), the meaning of a state for exit codes, and the check of a job
 * id before it goes into a URL.
 */
#ifndef RCTL_JOB_H
#define RCTL_JOB_H

#include <jansson.h>
#include <stdio.h>

typedef struct rctl_job_view {
	const char *id;       /* borrowed from the JSON; NULL when absent */
	const char *state;
	const char *label;
	const char *error;    /* error.message (or error as a string) */
	double fraction;      /* < 0: unknown */
	long iteration, of;   /* done, asked ("iterations"); < 0: unknown */
	const char *stopped;  /* why it ended before them ("stagnation", "cancelled", ...); NULL: it did not */
	const char *phase;    /* "pending", "preparing", "loading_matrix", "building_matrix", "fdk_start", "iterating", "fdk", "writing", "done"; NULL */
	double eta_s;         /* < 0: unknown */
	long views_done, views_expected; /* a streaming FDK's views; views_expected 0: not streaming */
} rctl_job_view;

void rctl_job_view_of(json_t *j, rctl_job_view *v);

/* True for succeeded, failed and cancelled. */
int rctl_state_terminal(const char *state);
/* The exit code a finished job maps to: 0, RCTL_EXIT_FAILED, RCTL_EXIT_CANCELLED. */
int rctl_state_exit(const char *state);
/* "running, iteration 3 of 10, ETA 12 s", "succeeded, iteration 6 of 10,
 * stopped: stagnation (the residual stopped falling)", "running,
 * computing the FDK start" into buf (the API's words, docs/api.md). */
void rctl_job_progress_text(const rctl_job_view *v, char *buf, size_t n);

/* True when id is a UUID in its 8-4-4-4-12 hex form. */
int rctl_valid_id(const char *id);

/* The job's warnings ("warning:  code: message", one a line) and its
 * relative residual ("residual: ...") to out; nothing before it ran. */
void rctl_print_warnings(json_t *job, FILE *out);

/* The string member key of j, or dflt when it is absent or no string. */
const char *rctl_str_or(json_t *j, const char *key, const char *dflt);

/* The array of a list answer: either the body itself or its member `key`. */
json_t *rctl_list_items(json_t *body, const char *key);

#endif
