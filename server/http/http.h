/*
 * http: the HTTP/JSON API of api/openapi.yaml on libmicrohttpd.
 *
 * Threading: one thread per connection (MHD_USE_THREAD_PER_CONNECTION),
 * bounded by the connection limit.  Event streams wait on the hub and
 * uploads fsync; a shared pool thread blocked in either would stall every
 * other connection on it, so each connection gets its own.
 */
#ifndef RC_HTTP_H
#define RC_HTTP_H

#include "jobs/app.h"

typedef struct http http;

/* Binds and starts serving; *ret_port gets the bound port (for port 0). */
int http_start(app *a, http **ret, int *ret_port, rc_err *err);
/* Stops accepting, lets requests in flight finish for up to grace_s seconds,
 * then closes the rest (an unfinished upload is never acknowledged: its
 * views stay absent). */
void http_stop(http *h, double grace_s);

#endif
