/*
 * rctl_http: reconctl's requests to recond over libcurl.
 *
 * One rctl_conn holds the base URL, the bearer token and one curl easy
 * handle that is reused (keep-alive) for every request of a command.  Every
 * call either succeeds (2xx) or fills an rctl_fail: the HTTP status (0 when
 * no answer came: refused, timed out, reset) and the server's
 * {"error": {"code", "message"}} or, for a body that is not such JSON, its
 * first bytes.  rctl_fail_exit maps a failure to reconctl's exit codes.
 *
 * Life cycle: rctl_conn_new (once curl_global_init ran), calls,
 * rctl_conn_free (NULL is fine).
 */
#ifndef RCTL_HTTP_H
#define RCTL_HTTP_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "rctl_progress.h"
#include "rctl_sse.h"

/* reconctl's exit codes: stable, documented in docs/clients.md. */
enum {
	RCTL_EXIT_OK = 0,
	RCTL_EXIT_USAGE = 1,
	RCTL_EXIT_CLIENT = 2,    /* the server answered 4xx */
	RCTL_EXIT_SERVER = 3,    /* 5xx, network, or a malformed answer */
	RCTL_EXIT_FAILED = 4,    /* the job failed */
	RCTL_EXIT_CANCELLED = 5, /* the job was cancelled */
};

typedef struct rctl_fail {
	long status;   /* HTTP status; 0 = no (usable) answer */
	char code[64]; /* error.code of the body, or a client-side code */
	char msg[512];
} rctl_fail;

typedef struct rctl_conn rctl_conn;

int rctl_conn_new(const char *base_url, const char *token, rctl_conn **ret);
void rctl_conn_free(rctl_conn *c);

/* A JSON exchange.  body may be NULL (no body).  On success *ret (may be
 * NULL) gets the parsed answer, or NULL for an empty one; the caller
 * json_decref()s it. */
int rctl_request(rctl_conn *c, const char *method, const char *path,
		 const char *body, json_t **ret, rctl_fail *f);

/* PUT the size bytes of fp (read from its current position) to path,
 * streaming; pb (may be NULL) shows the upload. */
int rctl_upload(rctl_conn *c, const char *path, FILE *fp, uint64_t size,
		rctl_progress *pb, json_t **ret, rctl_fail *f);

/* GET path into out, streaming; *ret_bytes (may be NULL) gets the count. */
int rctl_download(rctl_conn *c, const char *path, FILE *out,
		  rctl_progress *pb, uint64_t *ret_bytes, rctl_fail *f);

/* GET a text/event-stream and feed it to fn until fn returns nonzero
 * (returns 1), the server ends the stream (returns 0), or no byte came for
 * idle_s seconds (returns 0 as well: the caller re-checks the job and
 * reconnects).  -1 with f filled on failure. */
int rctl_events(rctl_conn *c, const char *path, long idle_s,
		rctl_event_fn fn, void *ctx, rctl_fail *f);

int rctl_fail_exit(const rctl_fail *f);
/* "reconctl: 404 not_found: no job 1234..." on stderr. */
void rctl_fail_print(const rctl_fail *f);
void rctl_fail_set(rctl_fail *f, long status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
