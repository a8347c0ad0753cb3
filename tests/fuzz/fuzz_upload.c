/*
 * fuzz_upload: the view-upload path of the running daemon, over HTTP.
 * LLVMFuzzerInitialize starts the daemon in-process (daemon_start, as
 * tests/unit/test_http_api.c does: a free loopback port, a store under
 * /dev/shm so that fsync costs nothing, a stand-in worker that never runs)
 * and creates three jobs of 12 views, a cone one (8 rows of 16 pixels per view),
 * a fan one (4 slices of 16) and a fan one of uint16 counts (http_calib.c's
 * flat, dark and bad-pixel uploads).  Each input is one request to them over a
 * loopback socket; MHD's threads are in this process, so libFuzzer sees the
 * coverage of route_of (the view index), upload_begin (Content-Length
 * against the spec, the index against views_expected), upload_data (the
 * row scatter of fan views) and upload_end.
 *
 * Input, line by line ('\n'; a '\r' before it is dropped):
 *   line 1:  JOB METHOD SUFFIX
 *            JOB: "fan" or "cone" (the default) names the job; "counts" a
 *            fan job of uint16 detector counts (flat and bad pixels
 *            uploaded: its SUFFIX follows /v1/jobs/{id}, e.g. "/flat",
 *            "/bad-pixels", "/projections/3"); "gone" a
 *            well-formed id of no job; "raw" puts SUFFIX right after
 *            /v1/jobs/ (any id, any route; the method is then always PUT).
 *            METHOD: letters only (else PUT).
 *            SUFFIX follows /v1/jobs/{id}/projections, e.g. "/7", "/0012",
 *            "/-1", "" (whole stack); blanks and control bytes are
 *            %-escaped, so MHD hands the handler any byte.
 *   then:    header lines, up to an empty line
 *   then:    the body, at most 64 KiB.
 * Content-Length: when the headers name none (nor Transfer-Encoding), the
 * body's length is sent; when they declare more than the body holds (up to
 * 64 KiB), the body is padded with zeros, so a stated length is a real one.
 * The body goes after MHD's "100 Continue" (the request carries Expect, as
 * curl -T sends it), so an early refusal is read before any body is sent.
 *
 * Checked: a request whose framing is ambiguous (Transfer-Encoding with
 * Content-Length, Content-Lengths that differ) and a chunked upload (no
 * Content-Length) are never acknowledged (MHD follows Transfer-Encoding, so
 * a chunked 2x body declared as one view was stored in part and answered
 * 200); the daemon answers every request (a connection closed without
 * an answer is allowed only after the harness gave up, 2 s after the whole
 * request, as when a chunked body is cut short), then closes within 10 s, with a 2xx or 4xx or 503/507, never
 * another 5xx; its JSON errors have a code and a message; a 200 is the job.
 * After a 200 the job's views are marked absent again, so each input starts
 * from the same state.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "jobs/runner.h"

#define BODY_MAX (64u << 10)
#define NVIEWS 12

static app A;
static config C;
static int port;
static char dir[128];
static char job_id[3][37]; /* cone, fan, counts */
static int started;

static int err_fd = 2; /* stderr as it was at start: libFuzzer's -close_fd_mask=2 closes fd 2 */

static void fail(const char *fmt, const char *detail)
{
	dprintf(err_fd, "fuzz_upload: ");
	dprintf(err_fd, fmt, detail);
	dprintf(err_fd, "\n");
	abort();
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- a minimal HTTP/1.1 client ------------------------------------------ */

typedef struct buf {
	char *p;
	size_t len, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np)
			fail("%s", "out of memory");
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

typedef struct answer {
	int status;          /* 0: none (closed or timed out) */
	int timed_out;
	buf head, body;
	char ctype[64];
} answer;

/* Reads one response (interim 1xx ones included) into a; waits at most
 * wait_ms for its first byte, then 10 s for the rest.  Returns 0 when a whole
 * response was read. */
static int read_answer(int fd, answer *a, int head_only, int wait_ms)
{
	buf in = { 0 };
	size_t hend = 0, need = 0;
	int have_head = 0, rc = -1;
	double t0 = now_ms();
	memset(a, 0, sizeof *a);
	for (;;) {
		if (have_head && in.len >= hend + need) {
			rc = 0;
			break;
		}
		double left = (in.len ? 10000 : wait_ms) - (now_ms() - t0);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			a->timed_out = 1;
			break;
		}
		char tmp[16384];
		ssize_t r = recv(fd, tmp, sizeof tmp, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		put(&in, tmp, (size_t)r);
		if (!have_head) {
			char *e = strstr(in.p, "\r\n\r\n");
			if (!e)
				continue;
			hend = (size_t)(e - in.p) + 4;
			if (sscanf(in.p, "HTTP/1.%*d %d", &a->status) != 1 || a->status < 100 || a->status > 999)
				fail("an answer that does not start with a status line: %.200s", in.p);
			if (a->status < 200) { /* interim: 100 Continue */
				rc = 0;
				break;
			}
			have_head = 1;
			const char *cl = strcasestr(in.p, "\r\ncontent-length:");
			need = cl && !head_only && a->status != 204 && a->status != 304 ? strtoull(cl + 17, NULL, 10) : 0;
			const char *ct = strcasestr(in.p, "\r\ncontent-type:");
			if (ct && ct < in.p + hend)
				sscanf(ct + 15, " %63[^\r;]", a->ctype);
		}
	}
	if (!rc) {
		put(&a->head, in.p, hend ? hend : in.len);
		if (have_head)
			put(&a->body, in.p + hend, in.len - hend);
	}
	free(in.p);
	return rc;
}

static void answer_free(answer *a)
{
	free(a->head.p);
	free(a->body.p);
	memset(a, 0, sizeof *a);
}

/* Sends head (ending with the blank line), then the body after a 100
 * Continue (or after 200 ms without one: an Expect the daemon did not
 * honour), and reads the final answer into a (status 0: none). */
static void roundtrip(const buf *head, const char *body, size_t blen, int head_only, answer *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
		fail("cannot connect to the daemon: %s", strerror(errno));
	memset(a, 0, sizeof *a);
	if (send_all(fd, head->p, head->len))
		fail("%s", "the daemon closed the connection while the request head was sent");
	if (blen) {
		int rc = read_answer(fd, a, head_only, 200);
		if (!rc && a->status >= 200)
			goto out; /* refused before the body */
		if (rc && !a->timed_out)
			fail("the connection closed after the request head, without an answer: %.300s", head->p);
		answer_free(a);
		if (send_all(fd, body, blen))
			fail("%s", "the daemon closed the connection while the body was sent, without an answer");
	}
	for (;;) {
		int rc = read_answer(fd, a, head_only, 2000);
		if (!rc && a->status >= 200)
			goto out;
		if (!rc) { /* an interim answer */
			answer_free(a);
			continue;
		}
		if (!a->timed_out)
			fail("the connection closed without an answer to a whole request: %.300s", head->p);
		/* The daemon still waits for body bytes this request does not have
		 * (a chunked body cut short): stop as a client that gives up does;
		 * the daemon must then close. */
		shutdown(fd, SHUT_WR);
		answer_free(a);
		rc = read_answer(fd, a, head_only, 10000);
		if (rc && a->timed_out)
			fail("the daemon neither answered nor closed 10 s after the client stopped sending: %.300s", head->p);
		if (rc)
			a->status = 0;
		goto out;
	}
out:
	close(fd);
}

/* ---- the daemon and its jobs ------------------------------------------- */

static const char fake_worker[] =
	"#!/bin/sh\n"
	"# stand-in recond-worker for fuzz_upload: lists one device, runs nothing\n"
	"[ \"$1\" = --devices ] && { echo '{\"devices\":[{\"name\":\"fake\",\"engine\":\"cpu\",\"device_id\":\"fake:0\"}]}'; exit 0; }\n"
	"exit 1\n";

static const char *const specs[3] = {
	"{\"label\": \"fuzz-cone\", \"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000,"
	" \"source_detector_mm\": 1500, \"angles\": {\"start_deg\": 0, \"step_deg\": 30, \"count\": 12},"
	" \"detector\": {\"nu\": 16, \"nv\": 8, \"du_mm\": 1, \"dv_mm\": 1}},"
	" \"volume\": {\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": [1, 1, 2]},"
	" \"algorithm\": {\"name\": \"sirt\", \"iterations\": 3}}",
	"{\"label\": \"fuzz-fan\", \"geometry\": {\"type\": \"fan\", \"source_isocenter_mm\": 500,"
	" \"source_detector_mm\": 900, \"angles\": {\"start_deg\": 0, \"step_deg\": 30, \"count\": 12},"
	" \"slices\": 4, \"detector\": {\"nu\": 16, \"du_mm\": 1}},"
	" \"volume\": {\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": 1},"
	" \"algorithm\": {\"name\": \"sirt\", \"iterations\": 3}}",
	"{\"label\": \"fuzz-counts\", \"geometry\": {\"type\": \"fan\", \"source_isocenter_mm\": 500,"
	" \"source_detector_mm\": 900, \"angles\": {\"start_deg\": 0, \"step_deg\": 30, \"count\": 12},"
	" \"slices\": 4, \"detector\": {\"nu\": 16, \"du_mm\": 1}},"
	" \"volume\": {\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": 1},"
	" \"algorithm\": {\"name\": \"sirt\", \"iterations\": 3},"
	" \"input\": {\"kind\": \"intensity\", \"dtype\": \"uint16\", \"flat\": \"uploaded\", \"dark\": 100,"
	" \"bad_pixels\": \"uploaded\"}}",
};

static void stop_daemon(void)
{
	if (!started)
		return;
	started = 0;
	daemon_stop(&A, 1.0);
	config_clear(&C);
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_upload: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
	if (fd >= 0)
		err_fd = fd;
	snprintf(dir, sizeof dir, "/dev/shm/fuzz_upload.XXXXXX");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof dir, "/tmp/fuzz_upload.XXXXXX");
		if (!mkdtemp(dir))
			fail("mkdtemp: %s", strerror(errno));
	}
	config_default(&C);
	snprintf(C.store, sizeof C.store, "%s/store", dir);
	snprintf(C.worker, sizeof C.worker, "%s/fake-worker", dir);
	snprintf(C.probe_worker, sizeof C.probe_worker, "%s/fake-worker", dir);
	C.audit_log[0] = '\0'; /* no audit file growing with every input */
	C.listen_port = 0;
	C.max_body = 4096;
	C.conn_timeout_s = 30;
	FILE *f = fopen(C.worker, "w");
	if (!f || fputs(fake_worker, f) < 0 || fclose(f))
		fail("cannot write the stand-in worker: %s", strerror(errno));
	chmod(C.worker, 0755);
	rc_err err;
	if (daemon_start(&A, &C, &port, &err))
		fail("daemon_start: %s", err.msg);
	started = 1;
	atexit(stop_daemon);
	for (int i = 0; i < 100 && !runner_probed(A.run); i++)
		usleep(20000);
	for (int j = 0; j < 3; j++) {
		buf h = { 0 };
		char line[160];
		snprintf(line, sizeof line,
			 "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 strlen(specs[j]));
		puts_(&h, line);
		puts_(&h, specs[j]);
		answer a;
		roundtrip(&h, NULL, 0, 0, &a);
		json_t *o = a.status == 201 ? json_loadb(a.body.p, a.body.len, 0, NULL) : NULL;
		const char *id = json_string_value(json_object_get(o, "id"));
		if (!id || strlen(id) != 36)
			fail("creating a job failed: %s", a.body.p ? a.body.p : "(no answer)");
		memcpy(job_id[j], id, 37);
		json_decref(o);
		answer_free(&a);
		free(h.p);
	}
	return 0;
}

/* ---- one input ------------------------------------------------------------ */

/* The next line of [*p, end): returned NUL-terminated in a new string. */
static char *next_line(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
	const char *e = nl ? nl : end;
	*p = nl ? nl + 1 : end;
	size_t n = (size_t)(e - s);
	if (n && s[n - 1] == '\r')
		n--;
	char *l = malloc(n + 1);
	if (!l)
		fail("%s", "out of memory");
	memcpy(l, s, n);
	l[n] = '\0';
	*len = n;
	return l;
}

static int header_named(const char *line, const char *name)
{
	size_t n = strlen(name);
	return !strncasecmp(line, name, n) && line[n] == ':';
}

static void check_answer(const answer *a, const char *method, int job)
{
	int s = a->status;
	if (s == 0)
		return; /* closed without an answer after the harness gave up (see roundtrip) */
	if (!((s >= 200 && s < 300) || (s >= 400 && s < 500) || s == 503 || s == 507))
		fail("status outside 2xx, 4xx, 503, 507: %s", a->head.p);
	int json = !strcasecmp(a->ctype, "application/json");
	if (json && strcmp(method, "HEAD")) {
		json_t *o = json_loadb(a->body.p ? a->body.p : "", a->body.len, 0, NULL);
		if (!o)
			fail("a JSON answer that is not JSON: %s", a->head.p);
		if (s >= 400) {
			json_t *e = json_object_get(o, "error");
			if (!json_string_value(json_object_get(e, "code")) || !json_string_value(json_object_get(e, "message")))
				fail("an error answer without code and message: %s", a->body.p);
		} else if (job >= 0 && s == 200) {
			const char *id = json_string_value(json_object_get(o, "id"));
			if (!id || strcmp(id, job_id[job]))
				fail("a 200 that is not the job: %s", a->body.p);
		}
		json_decref(o);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	size_t n;
	char *first = next_line(&p, end, &n);
	char jobw[8] = "", method[16] = "";
	int off = 0;
	sscanf(first, "%7s %15s %n", jobw, method, &off);
	const char *suffix = off ? first + off : "";
	int raw = !strcmp(jobw, "raw"), job = !strcmp(jobw, "fan") ? 1 : !strcmp(jobw, "counts") ? 2
						     : !strcmp(jobw, "gone") ? -1 : 0;
	/* a method is a token; MHD drops a request line with anything else */
	int token = method[0] != '\0';
	for (const char *m = method; *m; m++)
		token &= (*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z');
	if (raw || !token)
		snprintf(method, sizeof method, "PUT");
	if (raw)
		job = -1;

	buf h = { 0 };
	puts_(&h, method);
	puts_(&h, " /v1/jobs/");
	if (!raw) {
		puts_(&h, job >= 0 ? job_id[job] : "0b4f9c1e-5a8d-4f7e-9c2b-1d3e5f7a9b0c");
		if (job != 2) /* the counts job: any route of the job ("/flat", "/projections/3", ...) */
			puts_(&h, "/projections");
	}
	for (const unsigned char *s = (const unsigned char *)suffix; *s; s++) {
		char esc[4];
		if (*s <= ' ' || *s >= 0x7f || *s == '%') {
			snprintf(esc, sizeof esc, "%%%02X", *s);
			puts_(&h, esc);
		} else {
			put(&h, s, 1);
		}
	}
	puts_(&h, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
	int declared = 0, lines = 0, n_cl = 0, n_te = 0, cl_differ = 0, mhd_head_over = 0;
	unsigned long long want = 0, first_cl = 0;
	for (;;) {
		if (p >= end)
			break;
		char *l = next_line(&p, end, &n);
		if (!n || ++lines > 64 || n > 8192) {
			free(l);
			break;
		}
		if (header_named(l, "content-length") || header_named(l, "transfer-encoding"))
			declared = 1;
		if (header_named(l, "content-length")) { /* pad to the largest, whichever one MHD takes */
			unsigned long long v = strtoull(l + 15, NULL, 10);
			want = v > want ? v : want;
			if (!mhd_head_over) {
				cl_differ |= n_cl && v != first_cl;
				first_cl = n_cl++ ? first_cl : v;
			}
		}
		n_te += !mhd_head_over && header_named(l, "transfer-encoding");
		/* MHD 0.9.75 takes a line that starts with NUL for the blank line:
		 * what follows is body to it, not headers */
		mhd_head_over |= l[0] == '\0';
		put(&h, l, n); /* as is, NUL bytes too */
		puts_(&h, "\r\n");
		free(l);
	}
	size_t blen = (size_t)(end - p);
	if (blen > BODY_MAX)
		blen = BODY_MAX;
	char *body = NULL;
	if (want > blen && want <= BODY_MAX) {
		body = calloc(1, (size_t)want);
		if (!body)
			fail("%s", "out of memory");
		memcpy(body, p, blen);
		blen = (size_t)want;
	}
	if (!declared && blen) {
		char cl[48];
		snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", blen);
		puts_(&h, cl);
	}
	if (blen)
		puts_(&h, "Expect: 100-continue\r\n");
	puts_(&h, "\r\n");

	answer a;
	roundtrip(&h, body ? body : p, blen, !strcmp(method, "HEAD"), &a);
	check_answer(&a, method, raw ? -1 : job);
	if (a.status >= 200 && a.status < 300 && (n_te || cl_differ))
		fail("an upload with ambiguous framing or without Content-Length was acknowledged: %.300s", h.p);
	if (a.status == 200 && job >= 0) { /* back to no views present */
		rc_err err;
		if (store_views_clear(A.st, job_id[job], 0, NVIEWS, &err))
			fail("store_views_clear: %s", err.msg);
	}
	answer_free(&a);
	free(body);
	free(h.p);
	free(first);
	return 0;
}
