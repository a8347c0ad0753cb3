/*
 * audit: an append-only log of requests that touch patient data (creating a
 * job, uploading projections, reading a job, its events or its volume,
 * cancelling or deleting it): time, client address, token name, method,
 * path, status.  One line per request, written with O_APPEND so lines never
 * interleave.  Failing to write is logged, never fatal to the request.
 */
#ifndef RC_AUDIT_H
#define RC_AUDIT_H

typedef struct audit audit;

int audit_open(const char *path, audit **ret);
void audit_close(audit *a);
void audit_log(audit *a, const char *client, const char *who, const char *method,
	       const char *path, unsigned status);

#endif
