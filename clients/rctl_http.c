/*
 * rctl_http: see rctl_http.h.  Each call resets the shared easy handle, sets
 * the common options (URL, token, timeouts) and its own, performs, then turns
 * the outcome into 0 or an rctl_fail.  Answer bodies of JSON calls and of
 * errors are collected in a capped buffer (a server cannot make the client
 * grow without bound); downloads go straight to the caller's FILE.
 */
#include "rctl_http.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#define BODY_CAP (64u << 20) /* JSON answers; a job list is far smaller */

struct rctl_conn {
	CURL *curl;
	char *base;
	struct curl_slist *auth; /* "Authorization: Bearer ..." or NULL */
};

typedef struct membuf {
	char *p;
	size_t len, cap;
	int overflow;
} membuf;

static void membuf_free(membuf *m)
{
	free(m->p);
	m->p = NULL;
	m->len = m->cap = 0;
}

static size_t membuf_add(membuf *m, const char *data, size_t n)
{
	if (m->len + n + 1 > BODY_CAP) {
		m->overflow = 1;
		return 0; /* aborts the transfer */
	}
	if (m->len + n + 1 > m->cap) {
		size_t ncap = m->cap ? m->cap : 4096;
		while (ncap < m->len + n + 1)
			ncap *= 2;
		char *np = realloc(m->p, ncap);
		if (!np)
			return 0;
		m->p = np;
		m->cap = ncap;
	}
	memcpy(m->p + m->len, data, n);
	m->len += n;
	m->p[m->len] = '\0';
	return n;
}

static size_t write_mem(char *data, size_t size, size_t nmemb, void *ud)
{
	return membuf_add(ud, data, size * nmemb);
}

void rctl_fail_set(rctl_fail *f, long status, const char *code, const char *fmt, ...)
{
	if (!f)
		return;
	f->status = status;
	snprintf(f->code, sizeof f->code, "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof f->msg, fmt, ap);
	va_end(ap);
}

int rctl_fail_exit(const rctl_fail *f)
{
	if (f->status >= 400 && f->status < 500)
		return RCTL_EXIT_CLIENT;
	return RCTL_EXIT_SERVER;
}

void rctl_fail_print(const rctl_fail *f)
{
	if (f->status)
		fprintf(stderr, "reconctl: server answered %ld %s: %s\n", f->status, f->code, f->msg);
	else
		fprintf(stderr, "reconctl: %s: %s\n", f->code, f->msg);
}

int rctl_conn_new(const char *base_url, const char *token, rctl_conn **ret)
{
	rctl_conn *c = calloc(1, sizeof *c);
	if (!c)
		return -1;
	size_t n = strlen(base_url);
	while (n > 0 && base_url[n - 1] == '/')
		n--; /* "http://h:8080/" and "http://h:8080" mean the same */
	c->base = strndup(base_url, n);
	if (!c->base)
		goto out_free;
	if (token && *token) {
		size_t hl = strlen(token) + 32;
		char *h = malloc(hl);
		if (!h)
			goto out_free;
		snprintf(h, hl, "Authorization: Bearer %s", token);
		c->auth = curl_slist_append(NULL, h);
		free(h);
		if (!c->auth)
			goto out_free;
	}
	c->curl = curl_easy_init();
	if (!c->curl)
		goto out_free;
	*ret = c;
	return 0;
out_free:
	rctl_conn_free(c);
	return -1;
}

void rctl_conn_free(rctl_conn *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->auth);
	free(c->base);
	free(c);
}

/* Common options; hdrs is the request's header list (auth plus extras). */
static int setup(rctl_conn *c, const char *method, const char *path,
		 struct curl_slist *hdrs, rctl_fail *f)
{
	size_t ul = strlen(c->base) + strlen(path) + 1;
	char *url = malloc(ul);
	if (!url) {
		rctl_fail_set(f, 0, "out_of_memory", "no memory for the URL");
		return -1;
	}
	snprintf(url, ul, "%s%s", c->base, path);
	CURL *h = c->curl;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url); /* libcurl copies it */
	free(url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "reconctl/1");
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	return 0;
}

/* Turns an error answer (status >= 300) into f, from its JSON error body if any. */
static void fail_from_body(rctl_fail *f, long status, const membuf *body)
{
	json_t *j = body->p ? json_loads(body->p, 0, NULL) : NULL;
	json_t *e = j ? json_object_get(j, "error") : NULL;
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	if (!msg && json_is_string(e))
		msg = json_string_value(e);
	if (msg)
		rctl_fail_set(f, status, code ? code : "error", "%s", msg);
	else
		rctl_fail_set(f, status, "http_error", "%.200s",
			      body->len ? body->p : "(no body)");
	json_decref(j);
}

/* Performs the prepared transfer and classifies its outcome. */
static int perform(rctl_conn *c, membuf *errbody, rctl_fail *f, long *ret_status)
{
	char ebuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, ebuf);
	CURLcode cr = curl_easy_perform(c->curl);
	long status = 0;
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	*ret_status = status;
	if (status >= 300) {
		fail_from_body(f, status, errbody);
		return -1;
	}
	if (cr != CURLE_OK) {
		rctl_fail_set(f, 0, "network", "%s", ebuf[0] ? ebuf : curl_easy_strerror(cr));
		return -1;
	}
	return 0;
}

static struct curl_slist *headers(rctl_conn *c, const char *extra1, const char *extra2)
{
	struct curl_slist *h = NULL, *t;
	for (const struct curl_slist *a = c->auth; a; a = a->next) {
		if (!(t = curl_slist_append(h, a->data)))
			goto fail;
		h = t;
	}
	const char *ex[2] = { extra1, extra2 };
	for (int i = 0; i < 2; i++) {
		if (!ex[i])
			continue;
		if (!(t = curl_slist_append(h, ex[i])))
			goto fail;
		h = t;
	}
	return h;
fail:
	curl_slist_free_all(h);
	return NULL;
}

static int parse_answer(const membuf *body, json_t **ret, rctl_fail *f)
{
	if (!ret)
		return 0;
	*ret = NULL;
	if (!body->len)
		return 0;
	json_error_t je;
	json_t *j = json_loads(body->p, 0, &je);
	if (!j) {
		rctl_fail_set(f, 0, "bad_answer", "the server's answer is not JSON: %s", je.text);
		return -1;
	}
	*ret = j;
	return 0;
}

int rctl_request(rctl_conn *c, const char *method, const char *path,
		 const char *body, json_t **ret, rctl_fail *f)
{
	int rc = -1;
	long status;
	membuf mb = { 0 };
	struct curl_slist *h = headers(c, body ? "Content-Type: application/json" : NULL,
				       "Accept: application/json");
	if (!h) {
		rctl_fail_set(f, 0, "out_of_memory", "no memory for headers");
		return -1;
	}
	if (setup(c, method, path, h, f) < 0)
		goto out_free_headers;
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, write_mem);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &mb);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 120L);
	if (body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	if (perform(c, &mb, f, &status) < 0)
		goto out_free_body;
	rc = parse_answer(&mb, ret, f);
out_free_body:
	membuf_free(&mb);
out_free_headers:
	curl_slist_free_all(h);
	return rc;
}

typedef struct upload_ctx {
	FILE *fp;
	uint64_t left;
	rctl_progress *pb;
	int read_error;
} upload_ctx;

static size_t read_file(char *buf, size_t size, size_t nmemb, void *ud)
{
	upload_ctx *u = ud;
	size_t want = size * nmemb;
	if (want > u->left)
		want = (size_t)u->left;
	size_t got = fread(buf, 1, want, u->fp);
	if (got < want && ferror(u->fp)) {
		u->read_error = 1;
		return CURL_READFUNC_ABORT;
	}
	u->left -= got;
	return got;
}

static int xfer_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
			 curl_off_t ultotal, curl_off_t ulnow)
{
	rctl_progress *pb = ud;
	if (ultotal > 0)
		rctl_progress_bytes(pb, (uint64_t)ulnow, (uint64_t)ultotal);
	else if (dlnow > 0)
		rctl_progress_bytes(pb, (uint64_t)dlnow, (uint64_t)(dltotal > 0 ? dltotal : 0));
	return 0;
}

int rctl_upload(rctl_conn *c, const char *path, FILE *fp, uint64_t size,
		rctl_progress *pb, json_t **ret, rctl_fail *f)
{
	int rc = -1;
	long status;
	membuf mb = { 0 };
	upload_ctx u = { .fp = fp, .left = size, .pb = pb };
	struct curl_slist *h = headers(c, "Content-Type: application/octet-stream",
				       "Accept: application/json");
	if (!h) {
		rctl_fail_set(f, 0, "out_of_memory", "no memory for headers");
		return -1;
	}
	if (setup(c, "PUT", path, h, f) < 0)
		goto out_free_headers;
	curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, read_file);
	curl_easy_setopt(c->curl, CURLOPT_READDATA, &u);
	curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, write_mem);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &mb);
	/* A stalled server, not a slow big upload, is the failure to catch. */
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, 60L);
	if (pb && pb->enabled) {
		curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, xfer_progress);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, pb);
		curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	}
	if (perform(c, &mb, f, &status) < 0) {
		if (u.read_error)
			rctl_fail_set(f, 0, "read_error", "reading the projection file failed");
		goto out_free_body;
	}
	rc = parse_answer(&mb, ret, f);
out_free_body:
	if (pb)
		rctl_progress_end(pb);
	membuf_free(&mb);
out_free_headers:
	curl_slist_free_all(h);
	return rc;
}

typedef struct download_ctx {
	CURL *curl;
	FILE *out;
	membuf err; /* the body of an error answer */
	uint64_t bytes;
	int write_error;
} download_ctx;

static size_t write_download(char *data, size_t size, size_t nmemb, void *ud)
{
	download_ctx *d = ud;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 300)
		return membuf_add(&d->err, data, n);
	if (fwrite(data, 1, n, d->out) != n) {
		d->write_error = 1;
		return 0;
	}
	d->bytes += n;
	return n;
}

int rctl_download(rctl_conn *c, const char *path, FILE *out,
		  rctl_progress *pb, uint64_t *ret_bytes, rctl_fail *f)
{
	int rc = -1;
	long status;
	download_ctx d = { .curl = c->curl, .out = out };
	struct curl_slist *h = headers(c, NULL, NULL);
	if (c->auth && !h) {
		rctl_fail_set(f, 0, "out_of_memory", "no memory for headers");
		return -1;
	}
	if (setup(c, "GET", path, h, f) < 0)
		goto out_free_headers;
	curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, write_download);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &d);
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, 60L);
	if (pb && pb->enabled) {
		curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, xfer_progress);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, pb);
		curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	}
	if (perform(c, &d.err, f, &status) < 0) {
		if (d.write_error)
			rctl_fail_set(f, 0, "write_error", "writing the output file failed");
		goto out_free;
	}
	if (ret_bytes)
		*ret_bytes = d.bytes;
	rc = 0;
out_free:
	if (pb)
		rctl_progress_end(pb);
	membuf_free(&d.err);
out_free_headers:
	curl_slist_free_all(h);
	return rc;
}

typedef struct events_ctx {
	CURL *curl;
	rctl_sse *sse;
	membuf err;
	int stopped, parse_error;
	time_t last_byte;
	long idle_s;
	int idled;
} events_ctx;

static size_t write_events(char *data, size_t size, size_t nmemb, void *ud)
{
	events_ctx *e = ud;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 300)
		return membuf_add(&e->err, data, n);
	e->last_byte = time(NULL);
	int rc = rctl_sse_feed(e->sse, data, n);
	if (rc == 1) {
		e->stopped = 1;
		return 0;
	}
	if (rc < 0) {
		e->parse_error = 1;
		return 0;
	}
	return n;
}

static int events_tick(void *ud, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
	(void)a; (void)b; (void)c2; (void)d;
	events_ctx *e = ud;
	if (time(NULL) - e->last_byte > e->idle_s) {
		e->idled = 1;
		return 1; /* abort: the caller polls the job and reconnects */
	}
	return 0;
}

int rctl_events(rctl_conn *c, const char *path, long idle_s,
		rctl_event_fn fn, void *ctx, rctl_fail *f)
{
	int rc = -1;
	long status;
	events_ctx e = { .curl = c->curl, .last_byte = time(NULL), .idle_s = idle_s };
	struct curl_slist *h = headers(c, "Accept: text/event-stream", NULL);
	if (!h) {
		rctl_fail_set(f, 0, "out_of_memory", "no memory for headers");
		return -1;
	}
	e.sse = rctl_sse_new(fn, ctx);
	if (!e.sse) {
		rctl_fail_set(f, 0, "out_of_memory", "no memory for the event parser");
		goto out_free_headers;
	}
	if (setup(c, "GET", path, h, f) < 0)
		goto out_free_sse;
	curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, write_events);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &e);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, events_tick);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, &e);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	if (perform(c, &e.err, f, &status) < 0) {
		if (e.stopped)
			rc = 1;
		else if (e.idled)
			rc = 0;
		else if (e.parse_error)
			rctl_fail_set(f, 0, "bad_answer", "the event stream has a line over %u bytes",
				      RCTL_SSE_MAX);
		goto out_free_sse;
	}
	rc = 0;
out_free_sse:
	rctl_sse_free(e.sse);
	membuf_free(&e.err);
out_free_headers:
	curl_slist_free_all(h);
	return rc;
}
