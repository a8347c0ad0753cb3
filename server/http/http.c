/*
 * http: the daemon's MHD instance, routing and authentication (http.h), on
 * top of http/: it calls the routes (http_routes.h), which answer through
 * http_owner.c, http_error.c and http_reply.c and never call back here.
 * The access handler is called once with the headers (first
 * call: route, authenticate, and for bodies check the declared length before
 * a byte is stored), then once per body chunk, then once more at the end.
 * Errors found on the first call are answered at once; MHD then closes the
 * connection without reading the body, so a client that sent
 * "Expect: 100-continue" (curl -T does) never sends it.
 *
 * A request without a body is answered on its last call, never its first:
 * MHD 0.9.75 takes an answer queued on the first call as an early refusal
 * (MHD_queue_response in HEADERS_PROCESSED sets discard_request) and closes
 * the connection after it, which dropped every pipelined request behind it.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "http/http_routes.h"
#include "base/log.h"
#include "live/preview.h"
#include "util/rc_clock.h"

/* One open connection, for the header deadline (conn_*, below). */
struct conn {
	struct conn *prev, *next;
	int fd;
	int in_request; /* headers complete, request not yet ended */
	int shut;       /* shutdown() done: the deadline passed */
	double since;   /* connected, or its last request ended */
};

struct http {
	app *a;
	struct MHD_Daemon *d;
	char *cert, *key;
	preview_cache *previews; /* the last rendered slice previews (http_preview.c) */
	/* Header deadline: MHD 0.9.75's timeout closes only silent connections,
	 * so a client that trickles header bytes held its thread for ever. */
	pthread_mutex_t conns_lock; /* conns; taken by MHD's threads and the watchdog */
	pthread_cond_t wake;
	struct conn *conns;
	pthread_t watchdog;
	int watchdog_running, stop_watchdog;
	double header_timeout_s;
};

/* PNGs kept for pollers: a few slices of the running job's current
 * generation and of finished jobs (at least preview_concurrency). */
#define PREVIEW_CACHE_ENTRIES 8

/* A canonical lower-case UUID, as libuuid writes them. */
static int valid_uuid(const char *s, size_t n)
{
	char buf[37], back[37];
	uuid_t u;
	if (n != 36)
		return 0;
	memcpy(buf, s, 36);
	buf[36] = '\0';
	if (uuid_parse(buf, u))
		return 0;
	uuid_unparse_lower(u, back);
	return !strcmp(back, buf);
}

/* Splits the path into the route; returns 0, or a status with the answer
 * already queued. */
static enum MHD_Result route_of(struct MHD_Connection *c, req *r, const char *url, int *answered)
{
	*answered = 0;
	r->k = -1;
	if (!strcmp(url, "/healthz")) { r->rt = R_HEALTHZ; return MHD_YES; }
	if (!strcmp(url, "/readyz")) { r->rt = R_READYZ; return MHD_YES; }
	if (!strcmp(url, "/metrics")) { r->rt = R_METRICS; return MHD_YES; }
	if (!strcmp(url, "/v1/devices")) { r->rt = R_DEVICES; return MHD_YES; }
	if (!strcmp(url, "/v1/nodes")) { r->rt = R_NODES; return MHD_YES; }
	if (!strcmp(url, "/v1/destinations")) { r->rt = R_DESTINATIONS; return MHD_YES; }
	if (!strcmp(url, "/") || !strncmp(url, "/ui/", 4)) { r->rt = R_WWW; return MHD_YES; }
	if (!strcmp(url, "/v1/jobs") || !strcmp(url, "/v1/jobs/")) { /* labels may name patients */
		r->rt = R_JOBS;
		r->audit = 1;
		return MHD_YES;
	}
	if (strncmp(url, "/v1/jobs/", 9)) {
		*answered = 1;
		return http_fail(c, r, RC_ENOTFOUND, "", "no such endpoint: %.200s (api/openapi.yaml lists them)", url);
	}
	const char *id = url + 9;
	const char *slash = strchr(id, '/');
	size_t idlen = slash ? (size_t)(slash - id) : strlen(id);
	if (!valid_uuid(id, idlen)) {
		*answered = 1;
		return http_fail(c, r, RC_EBADID, "id", "job ids are lower-case UUIDs such as "
				 "0b4f9c1e-5a8d-4f7e-9c2b-1d3e5f7a9b0c (got \"%.*s\")", (int)(idlen > 64 ? 64 : idlen), id);
	}
	memcpy(r->id, id, 36);
	r->id[36] = '\0';
	r->audit = 1;
	if (!slash || !slash[1]) { r->rt = R_JOB; return MHD_YES; }
	const char *rest = slash + 1;
	if (!strcmp(rest, "projections")) { r->rt = R_PROJ; return MHD_YES; }
	if (!strcmp(rest, "start")) { r->rt = R_START; return MHD_YES; }
	if (!strcmp(rest, "events")) { r->rt = R_EVENTS; return MHD_YES; }
	if (!strcmp(rest, "volume")) { r->rt = R_VOLUME; return MHD_YES; }
	if (!strcmp(rest, "geometry")) { r->rt = R_GEOMETRY; return MHD_YES; }
	if (!strcmp(rest, "push")) { r->rt = R_PUSH; return MHD_YES; }
	if (!strcmp(rest, "cancel")) { r->rt = R_CANCEL; return MHD_YES; }
	if (!strcmp(rest, "preview")) { r->rt = R_PREVIEW; return MHD_YES; }
	if (!strcmp(rest, "flat")) { r->rt = R_CALIB; r->k = 0; return MHD_YES; }
	if (!strcmp(rest, "dark")) { r->rt = R_CALIB; r->k = 1; return MHD_YES; }
	if (!strcmp(rest, "bad-pixels")) { r->rt = R_CALIB; r->k = 2; return MHD_YES; }
	if (!strncmp(rest, "projections/", 12)) {
		const char *ks = rest + 12;
		size_t n = strlen(ks);
		int ok = n >= 1 && n <= 9;
		for (size_t i = 0; i < n && ok; i++)
			ok = ks[i] >= '0' && ks[i] <= '9';
		if (!ok) {
			*answered = 1;
			return http_fail(c, r, RC_EINVAL, "k",
					 "the view index must be a whole number 0 <= k < views_expected (got \"%.32s\")", ks);
		}
		r->k = atoi(ks);
		r->rt = R_VIEW;
		return MHD_YES;
	}
	*answered = 1;
	return http_fail(c, r, RC_ENOTFOUND, "", "no such endpoint: %.200s", url);
}

/* Minimum role of each route and method; -1 = method not allowed. */
static int needed_role(route rt, const char *m, const char **allow)
{
	int get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
	switch (rt) {
	case R_HEALTHZ: case R_READYZ: case R_METRICS: case R_WWW:
		*allow = "GET, HEAD";
		return get ? ROLE_NONE : -1;
	case R_DEVICES: case R_NODES: case R_EVENTS: case R_VOLUME: case R_DESTINATIONS: case R_PREVIEW:
	case R_GEOMETRY:
		*allow = "GET, HEAD";
		return get ? ROLE_READ : -1;
	case R_JOBS:
		*allow = "GET, HEAD, POST";
		return get ? ROLE_READ : !strcmp(m, "POST") ? ROLE_SUBMIT : -1;
	case R_JOB:
		*allow = "GET, HEAD, PATCH, DELETE";
		return get ? ROLE_READ : !strcmp(m, "DELETE") || !strcmp(m, "PATCH") ? ROLE_SUBMIT : -1;
	case R_PROJ: case R_VIEW: case R_CALIB:
		*allow = "PUT";
		return !strcmp(m, "PUT") ? ROLE_SUBMIT : -1;
	case R_START: case R_PUSH: case R_CANCEL:
		*allow = "POST";
		return !strcmp(m, "POST") ? ROLE_SUBMIT : -1;
	default:
		*allow = "";
		return -1;
	}
}

static enum MHD_Result first_call(struct MHD_Connection *c, req *r, const char *url, const char *method)
{
	int answered;
	enum MHD_Result ret = route_of(c, r, url, &answered);
	if (answered)
		return ret;
	const char *allow = "";
	int need = needed_role(r->rt, method, &allow);
	if (need < 0) {
		rc_err e;
		rc_fail(&e, RC_EMETHOD, "", "%.16s is not allowed here; the Allow header lists what is", method);
		return http_error_rc_hdr(c, r, &e, "Allow", allow);
	}
	if (atomic_load(&r->a->stopping) && r->rt != R_HEALTHZ)
		return http_fail(c, r, RC_EUNAVAIL, "", "recond is shutting down; retry shortly");
	if (need > ROLE_NONE && auth_count(r->a->auth) > 0) {
		const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
		int arc = auth_check(r->a->auth, h, &r->role, r->who, &r->phi);
		if (arc)
			return http_fail(c, r, RC_EUNAUTH, "", "%s",
					 !h ? "this endpoint needs an Authorization: Bearer TOKEN header"
					 : arc == RC_EINVAL ? "the Authorization header must read \"Authorization: Bearer TOKEN\""
							      " (the word Bearer, a space, then the token)"
							    : "the bearer token is not known");
		if ((int)r->role < need)
			return http_fail(c, r, RC_EFORBIDDEN, "", "the token \"%s\" has role %s; this needs %s", r->who,
					 auth_role_name(r->role), auth_role_name((auth_role)need));
	} else {
		r->role = ROLE_ADMIN; /* no tokens: loopback only, everything allowed */
		r->phi = 1;
		snprintf(r->who, sizeof r->who, "-");
	}
	switch (r->rt) {
	case R_HEALTHZ: return http_misc_health(c, r, 0);
	case R_READYZ: return http_misc_health(c, r, 1);
	case R_METRICS: return http_misc_metrics(c, r);
	case R_DEVICES: return http_misc_devices(c, r);
	case R_NODES: return http_misc_nodes(c, r);
	case R_JOBS:
		if (!strcmp(method, "POST")) {
			r->audit = 1;
			return http_jobs_create_begin(c, r);
		}
		return http_jobs_list(c, r);
	case R_JOB:
		if (!strcmp(method, "PATCH"))
			return http_jobs_patch_begin(c, r);
		return !strcmp(method, "DELETE") ? http_jobs_delete(c, r) : http_jobs_get(c, r);
	case R_PREVIEW: return http_preview_get(c, r);
	case R_GEOMETRY: return http_geometry_get(c, r);
	case R_PROJ: case R_VIEW: return http_upload_begin(c, r);
	case R_CALIB: return http_calib_begin(c, r, r->k);
	case R_START: return http_jobs_start(c, r);
	case R_CANCEL: return http_jobs_cancel(c, r);
	case R_EVENTS: return http_sse_events(c, r);
	case R_VOLUME: return http_download_volume(c, r);
	case R_DESTINATIONS: return http_push_destinations(c, r);
	case R_PUSH: return http_push_post(c, r);
	case R_WWW: return http_www_get(c, r);
	default: return http_fail(c, r, RC_ENOTFOUND, "", "no such endpoint");
	}
}

/* ---- header deadline ------------------------------------------------------
 * MHD tells conn_notify of each connection it opens and closes; on_request's
 * first call (the headers are complete) and on_completed (the request ended:
 * a keep-alive connection waits for the next head) move it in and out of a
 * request.  The watchdog shuts down (shutdown(2), never close) the socket of
 * a connection whose head has not arrived header_timeout_s after `since`;
 * MHD's thread then sees the end of the stream and closes it.  All under
 * conns_lock, and MHD 0.9.75 notifies MHD_CONNECTION_NOTIFY_CLOSED before it
 * closes the socket (daemon.c, MHD_cleanup_connections and the failure path
 * of new_connection_process_), so no fd is touched once it may be reused. */

static void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	http *h = cls;
	struct conn *k = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		k = calloc(1, sizeof *k);
		if (!k || !ci) { /* untracked: MHD's own timeout still applies */
			free(k);
			return;
		}
		k->fd = ci->connect_fd;
		k->since = rc_now_s();
		pthread_mutex_lock(&h->conns_lock);
		k->next = h->conns;
		if (h->conns)
			h->conns->prev = k;
		h->conns = k;
		pthread_mutex_unlock(&h->conns_lock);
		*socket_context = k;
		return;
	}
	if (!k)
		return;
	pthread_mutex_lock(&h->conns_lock);
	if (k->prev)
		k->prev->next = k->next;
	else
		h->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&h->conns_lock);
	free(k);
	*socket_context = NULL;
}

/* The request's head is in (in = 1), or the request ended (in = 0). */
static void conn_request(http *h, struct MHD_Connection *c, int in)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *k = ci ? ci->socket_context : NULL;
	if (!k)
		return;
	pthread_mutex_lock(&h->conns_lock);
	k->in_request = in;
	k->since = rc_now_s();
	pthread_mutex_unlock(&h->conns_lock);
}

static void *watchdog_main(void *arg)
{
	http *h = arg;
	pthread_mutex_lock(&h->conns_lock);
	while (!h->stop_watchdog) {
		double now = rc_now_s();
		for (struct conn *k = h->conns; k; k = k->next)
			if (!k->in_request && !k->shut && now - k->since > h->header_timeout_s) {
				shutdown(k->fd, SHUT_RDWR);
				k->shut = 1;
			}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000L; /* a quarter second: the deadline's resolution */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->wake, &h->conns_lock, &ts);
	}
	pthread_mutex_unlock(&h->conns_lock);
	return NULL;
}

/* The request's framing headers, gathered by framing_iter. */
struct framing {
	int n_cl, n_te, bad_cl, differ, te_other;
	unsigned long long cl;
};

static enum MHD_Result framing_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	struct framing *f = cls;
	const char *v = value ? value : "";
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		size_t n = strlen(v);
		unsigned long long x = strtoull(v, NULL, 10);
		if (!n || n > 19 || strspn(v, "0123456789") != n) /* no sign, blank, list or overflow */
			f->bad_cl = 1;
		else if (f->n_cl && x != f->cl)
			f->differ = 1;
		f->cl = x;
		f->n_cl++;
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->n_te++;
		f->te_other |= strcasecmp(v, "chunked") != 0;
	}
	return MHD_YES;
}

/* Why the request's body framing is refused (RFC 9112 6.1, 6.3), or NULL.
 * MHD 0.9.75 follows Transfer-Encoding over Content-Length and takes the
 * first of several Content-Lengths; a message that two parsers (a proxy and
 * this) could frame differently is refused instead (400, connection closed). */
static const char *framing_refused(struct MHD_Connection *c)
{
	struct framing f = { 0 };
	MHD_get_connection_values(c, MHD_HEADER_KIND, framing_iter, &f);
	if (f.n_te && f.n_cl)
		return "a request may not carry both Transfer-Encoding and Content-Length";
	if (f.bad_cl)
		return "Content-Length must be one decimal number";
	if (f.differ)
		return "the request carries Content-Length headers that differ";
	if (f.n_te > 1 || f.te_other)
		return "the only Transfer-Encoding accepted is a single \"chunked\"";
	return NULL;
}

/* Whether the request announces a body (RFC 9112 6.3: Transfer-Encoding or
 * a Content-Length other than 0). */
static int has_body(struct MHD_Connection *c)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return 1;
	return cl && strspn(cl, "0") != strlen(cl);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *data, size_t *data_size, void **con_cls)
{
	(void)version;
	http *h = cls;
	app *a = h->a;
	req *r = *con_cls;
	if (!r) {
		conn_request(h, c, 1);
		r = calloc(1, sizeof *r);
		if (!r)
			return MHD_NO;
		*con_cls = r;
		r->a = a;
		r->previews = h->previews;
		snprintf(r->method, sizeof r->method, "%s", method);
		snprintf(r->path, sizeof r->path, "%s", url);
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		snprintf(r->client, sizeof r->client, "-");
		if (ci && ci->client_addr) {
			const struct sockaddr *sa = ci->client_addr;
			if (sa->sa_family == AF_INET)
				inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, r->client, sizeof r->client);
			else if (sa->sa_family == AF_INET6)
				inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, r->client, sizeof r->client);
		}
		const char *bad = framing_refused(c);
		if (bad)
			return http_fail(c, r, RC_EINVAL, "", "%s", bad);
		if (!has_body(c)) {
			r->deferred = 1; /* answered on the last call: keeps the connection (file comment) */
			return MHD_YES;
		}
		return first_call(c, r, url, method);
	}
	if (r->deferred) {
		r->deferred = 0;
		if (*data_size) /* cannot happen: MHD reads no body it was not told of */
			return MHD_NO;
		return first_call(c, r, url, method);
	}
	if (*data_size) {
		size_t n = *data_size;
		*data_size = 0;
		if (r->answered)
			return MHD_YES;
		if (r->rt == R_JOBS || r->rt == R_JOB) /* POST a spec, PATCH a job */
			return http_jobs_create_body(r, data, n);
		if (r->up)
			return http_upload_data(r, data, n);
		if (r->cal)
			return http_calib_data(r, data, n);
		return MHD_YES;
	}
	if (r->answered)
		return MHD_YES;
	if (r->rt == R_JOBS)
		return http_jobs_create_end(c, r);
	if (r->rt == R_JOB)
		return http_jobs_patch_end(c, r);
	if (r->up)
		return http_upload_end(c, r);
	if (r->cal)
		return http_calib_end(c, r);
	return http_fail(c, r, RC_EINTERNAL, "", "request ended without an answer");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	http *h = cls;
	app *a = h->a;
	req *r = *con_cls;
	conn_request(h, c, 0); /* keep-alive: the next head's deadline starts now */
	if (!r)
		return;
	unsigned status = r->answered ? r->status : 0;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->up && !r->answered)
		rlog(LOG_P_WARNING, "upload_aborted", "id=%s k=%d client=%s (not acknowledged; its views stay absent)",
		     r->id, r->k, r->client);
	metrics_request(a->met, status);
	if (r->audit)
		audit_log(a->audit, r->client, r->who, r->method, r->path, status);
	http_upload_free(r);
	http_calib_free(r);
	free(r->body);
	free(r);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	rlog(LOG_P_WARNING, "http", "msg=\"%s\"", rlog_q(msg));
}

static char *slurp(const char *path, rc_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) || sb.st_size > (1 << 20)) {
		if (fd >= 0)
			close(fd);
		rc_fail(err, RC_EIO, "tls", "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	char *b = calloc(1, (size_t)sb.st_size + 1);
	if (b && read(fd, b, (size_t)sb.st_size) != sb.st_size) {
		free(b);
		b = NULL;
		rc_fail(err, RC_EIO, "tls", "cannot read %s", path);
	}
	close(fd);
	return b;
}

static int is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
	return 0;
}

/* Unless configured, one address gets at most a quarter of the connections,
 * so that two (or three) clients cannot take every thread. */
static int per_ip_limit(const config *cfg)
{
	int quarter = cfg->threads / 4 > 0 ? cfg->threads / 4 : 1;
	if (cfg->max_per_ip_set || cfg->max_per_ip < quarter)
		return cfg->max_per_ip;
	return quarter;
}

static int watchdog_start(http *h, double timeout_s, rc_err *err)
{
	h->header_timeout_s = timeout_s;
	pthread_mutex_init(&h->conns_lock, NULL);
	pthread_cond_init(&h->wake, NULL);
	if (pthread_create(&h->watchdog, NULL, watchdog_main, h)) {
		pthread_cond_destroy(&h->wake);
		pthread_mutex_destroy(&h->conns_lock);
		return rc_fail(err, RC_ENOMEM, "", "cannot start the header watchdog thread");
	}
	h->watchdog_running = 1;
	return 0;
}

/* After MHD has stopped: no connection is left to watch. */
static void watchdog_stop(http *h)
{
	if (!h->watchdog_running)
		return;
	pthread_mutex_lock(&h->conns_lock);
	h->stop_watchdog = 1;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->conns_lock);
	pthread_join(h->watchdog, NULL);
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->conns_lock);
	h->watchdog_running = 0;
}

int http_start(app *a, http **ret, int *ret_port, rc_err *err)
{
	const config *cfg = a->cfg;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	char port[16];
	snprintf(port, sizeof port, "%d", cfg->listen_port);
	const char *host = cfg->listen_host;
	char h6[256];
	if (host[0] == '[') { /* [::1]:8080 */
		snprintf(h6, sizeof h6, "%s", host + 1);
		h6[strcspn(h6, "]")] = '\0';
		host = h6;
	}
	int e = getaddrinfo(host, port, &hints, &ai);
	if (e)
		return rc_fail(err, RC_EINVAL, "listen", "cannot resolve listen address %s: %s", cfg->listen_host, gai_strerror(e));
	struct sockaddr_storage ss;
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (auth_count(a->auth) == 0 && !is_loopback(&ss))
		return rc_fail(err, RC_EINVAL, "listen",
			       "refusing to listen on %s without tokens: anyone on the network could read patient data. "
			       "Configure bearer tokens (\"tokens\" or --token-file) or listen on 127.0.0.1", cfg->listen_host);
	http *h = calloc(1, sizeof *h);
	if (!h)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	h->a = a;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			 MHD_USE_ERROR_LOG | MHD_USE_ITC;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	int tls = cfg->tls_cert[0] || cfg->tls_key[0];
	if (tls) {
		if (!cfg->tls_cert[0] || !cfg->tls_key[0]) {
			free(h);
			return rc_fail(err, RC_EINVAL, "tls", "HTTPS needs both tls_cert and tls_key");
		}
		if (!(h->cert = slurp(cfg->tls_cert, err)) || !(h->key = slurp(cfg->tls_key, err))) {
			free(h->cert);
			free(h);
			return err->code;
		}
		flags |= MHD_USE_TLS;
	}
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL },
		{ MHD_OPTION_SOCK_ADDR, 0, &ss },
		{ MHD_OPTION_CONNECTION_LIMIT, cfg->threads, NULL },
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit(cfg), NULL },
		{ MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout_s, NULL },
		/* The pool of each connection.  MHD 0.9.75 reads into half of it:
		 * the upload handler gets about 128 KiB per call (18 500 pwrite
		 * calls for 2.38 GB).  A bigger pool is not worth it: uploads with
		 * 1 or 4 MiB were faster only within this VM's noise, but MHD
		 * zeroes the whole pool before every keep-alive request: 32 status
		 * pollers got 470 answers/s with 4 MiB, 1000 with 1 MiB, 1300-1600
		 * with this (docs/server.md, "Upload speed"). */
		{ MHD_OPTION_CONNECTION_MEMORY_LIMIT, 256 * 1024, NULL },
		{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, h },
		{ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)conn_notify, h },
		{ tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, h->cert },
		{ tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, h->key },
		{ MHD_OPTION_END, 0, NULL },
	};
	/* Before MHD starts: a request may arrive at once. */
	int prc = preview_cache_new(cfg->preview_concurrency > PREVIEW_CACHE_ENTRIES ? cfg->preview_concurrency
										     : PREVIEW_CACHE_ENTRIES,
				    cfg->preview_concurrency, &h->previews, err);
	if (!prc)
		prc = watchdog_start(h, cfg->header_timeout_s, err);
	if (prc) {
		preview_cache_free(h->previews);
		free(h->cert);
		free(h->key);
		free(h);
		return prc;
	}
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!h->d) {
		watchdog_stop(h);
		preview_cache_free(h->previews);
		free(h->cert);
		free(h->key);
		free(h);
		return rc_fail(err, RC_EIO, "listen", "cannot listen on %s:%d (in use, or not an address of this host)",
			       cfg->listen_host, cfg->listen_port);
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	*ret_port = di ? di->port : cfg->listen_port;
	*ret = h;
	return 0;
}

void http_stop(http *h, double grace_s)
{
	if (!h)
		return;
	MHD_quiesce_daemon(h->d);
	double t0 = rc_now_s();
	for (;;) {
		const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		if (!di || di->num_connections == 0 || rc_now_s() - t0 > grace_s)
			break;
		usleep(50000);
	}
	MHD_stop_daemon(h->d);
	watchdog_stop(h);
	preview_cache_free(h->previews);
	free(h->cert);
	free(h->key);
	free(h);
}
