/*
 * rctl_cmd: reconctl's commands.  main_reconctl.c parses the command line
 * into rctl_args (every option in one table, so global options may come
 * before or after the command), checks which options the command accepts,
 * opens the connection and calls the command, whose return value is the
 * process's exit code (RCTL_EXIT_* in rctl_http.h).  A command prints its
 * result on stdout (JSON with --json) and everything else on stderr.
 */
#ifndef RCTL_CMD_H
#define RCTL_CMD_H

#include "rctl_http.h"

typedef struct rctl_args {
	const char *url, *token;
	int json, quiet;
	const char *projections; /* submit */
	int no_start;            /* submit */
	const char *flat, *dark, *bad_pixels; /* submit: a job of counts' uploaded fields */
	int watch;               /* submit: then watch the job */
	const char *output;      /* get */
	const char *format;      /* get */
	const char *state;       /* list */
	long limit;              /* list; 0 = server default */
	long idle_s;             /* watch: reconnect after this many quiet seconds */
	int npos;
	char **pos;              /* positional arguments after the command */
} rctl_args;

int rctl_cmd_submit(rctl_conn *c, const rctl_args *a);
int rctl_cmd_watch(rctl_conn *c, const rctl_args *a);
int rctl_cmd_get(rctl_conn *c, const rctl_args *a);
int rctl_cmd_list(rctl_conn *c, const rctl_args *a);
int rctl_cmd_status(rctl_conn *c, const rctl_args *a);
int rctl_cmd_cancel(rctl_conn *c, const rctl_args *a);
int rctl_cmd_priority(rctl_conn *c, const rctl_args *a);
int rctl_cmd_delete(rctl_conn *c, const rctl_args *a);
int rctl_cmd_devices(rctl_conn *c, const rctl_args *a);
int rctl_cmd_nodes(rctl_conn *c, const rctl_args *a);
int rctl_cmd_push(rctl_conn *c, const rctl_args *a);
int rctl_cmd_destinations(rctl_conn *c, const rctl_args *a);

/* Watches job id until it ends; the exit code of its final state.  The
 * final `ID STATE` line goes to stdout (watch: the state is its result), or
 * to stderr as `reconctl: job ID STATE` when state_to_stderr is set (submit
 * --watch, whose stdout is the id alone, so `id=$(reconctl submit --watch
 * ...)` captures one line). */
int rctl_watch_job(rctl_conn *c, const rctl_args *a, const char *id, int state_to_stderr);

/* Shared by the commands: the progress bar is shown when stderr is a
 * terminal and neither --quiet nor --json was given. */
int rctl_show_progress(const rctl_args *a);
/* Prints j on stdout, indented, with a newline. */
void rctl_print_json(json_t *j);
/* The "dicom:", "delivery:" and "push:" lines of a job (status, push); none
 * for a job without a DICOM series or destinations. */
void rctl_print_delivery(json_t *job);

#endif
