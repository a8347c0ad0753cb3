/*
 * audit: an append-only log of requests that touch patient data (creating a
 * job, uploading projections, reading a job, its events or its volume,
 * cancelling or deleting it): time, client address, token name, method,
 * path, status; and a line naming the jobs whose patient fields an answer
 * shows (audit_phi).  One line per request, written with O_APPEND so lines never
 * interleave.  Failing to write is logged, never fatal to the request.
 */
#ifndef RC_AUDIT_H
#define RC_AUDIT_H

typedef struct audit audit;

int audit_open(const char *path, audit **ret);
void audit_close(audit *a);
void audit_log(audit *a, const char *client, const char *who, const char *method,
	       const char *path, unsigned status);
/* One answer of the request (method, path) shows the patient fields of
 * jobs (an id, or ids separated by commas) to the token who: a line of its
 * own ("phi_jobs=ID,ID"), written before the answer. */
void audit_phi(audit *a, const char *client, const char *who, const char *method, const char *path,
	       const char *jobs);

#endif
