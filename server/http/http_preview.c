/*
 * http_preview: GET /v1/jobs/{id}/preview?axis=z|y|x&index=N&format=png
 * &window=CENTER,WIDTH: one slice of the job's current volume as an 8-bit
 * grey PNG (server/live/preview.h renders it; the slice orientation is there).
 * Without window= every slice goes through the volume's window (its 0.5 and
 * 99.5 % points), computed once per volume version and kept in the preview
 * cache by (job, generation); X-Recond-Window names the window used.
 *
 * The volume is the running job's live iterate (runner_live_volume: a
 * descriptor of its memfd and the snapshot's generation) or a succeeded job's
 * volume.f32 ("final"); it is mapped read-only and only the pages of the
 * slice are touched.  Pollers
 * ask for the same slice again and again, so every answer carries an ETag
 * of (job, generation, axis, index, window): If-None-Match gives 304 without
 * touching the volume, and the same key names the PNG in the daemon's
 * preview cache, where one request renders it while the others wait for it.
 * Renders are bounded (preview_concurrency); a request that gets no slot
 * within PREVIEW_WAIT_S answers 503 with Retry-After.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http_routes.h"
#include "live/preview.h"

/* api/openapi.yaml says the same: the largest index (a volume side is at
 * most 65536, spec.c) and the window's bounds. */
#define PREVIEW_INDEX_MAX 65535L
#define PREVIEW_WINDOW_MAX 1e9
/* A poller retries after this; a render of a 1024^2 slice takes ~20 ms. */
#define PREVIEW_WAIT_S 2.0

struct query {
	preview_axis axis;
	long index; /* -1: the middle slice */
	preview_window win;
};

/* A finite decimal number, the whole of s[0..n): digits, sign, point and
 * exponent only (strtod alone would also take blanks, "nan", "inf", hex). */
static int parse_num(const char *s, size_t n, double *out)
{
	char buf[64], *end;
	if (!n || n >= sizeof buf || strspn(s, "0123456789+-.eE") < n)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	double v = strtod(buf, &end);
	if (*end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* The grammar of window=CENTER,WIDTH, word for word the pattern of
 * api/openapi.yaml (POSIX ERE and ECMA regex read it alike), so that the
 * schema says what is accepted: plain decimals, |CENTER| < 1e9 and
 * 0 < WIDTH < 1e9, no exponent. */
#define WINDOW_PATTERN \
	"^-?(0|[1-9][0-9]{0,8})(\\.[0-9]{1,6})?,([1-9][0-9]{0,8}(\\.[0-9]{1,6})?|0?\\.[0-9]{0,5}[1-9][0-9]{0,5})$"

static regex_t window_re;
static int window_re_ok;

static void window_re_compile(void)
{
	window_re_ok = !regcomp(&window_re, WINDOW_PATTERN, REG_EXTENDED | REG_NOSUB);
}

static int parse_window(const char *s, preview_window *w)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, window_re_compile);
	const char *comma = strchr(s, ',');
	double c, wd;
	if (!window_re_ok || regexec(&window_re, s, 0, NULL, 0))
		return -1;
	if (!comma || parse_num(s, (size_t)(comma - s), &c) || parse_num(comma + 1, strlen(comma + 1), &wd))
		return -1;
	if (fabs(c) > PREVIEW_WINDOW_MAX || !(wd > 0) || wd > PREVIEW_WINDOW_MAX)
		return -1;
	*w = (preview_window){ .set = 1, .center = c, .width = wd };
	return 0;
}

/* The query's parameters, each checked on its own (unknown ones are
 * ignored, as on every route); the index's range needs the job. */
static int parse_query(struct MHD_Connection *c, struct query *q, rc_err *err)
{
	const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
	const char *ax = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "axis");
	const char *win = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "window");
	*q = (struct query){ .axis = PREVIEW_AXIS_Z, .index = -1 };
	if (fmt && strcmp(fmt, "png"))
		return rc_fail(err, RC_EINVAL, "format", "format must be png, the one preview format (got \"%.32s\"); "
			       "GET .../volume downloads the whole volume", fmt);
	if (ax) {
		if (strlen(ax) != 1 || !strchr("xyz", ax[0]))
			return rc_fail(err, RC_EINVAL, "axis", "axis must be x, y or z (got \"%.32s\")", ax);
		q->axis = ax[0] == 'x' ? PREVIEW_AXIS_X : ax[0] == 'y' ? PREVIEW_AXIS_Y : PREVIEW_AXIS_Z;
	}
	if (http_arg_int(c, "index", 0, PREVIEW_INDEX_MAX, &q->index))
		return rc_fail(err, RC_EINVAL, "index", "index must be a whole number from 0 to the job's n%c - 1 "
			       "(at most %ld), or absent for the middle slice", "xyz"[q->axis], PREVIEW_INDEX_MAX);
	if (win && parse_window(win, &q->win))
		return rc_fail(err, RC_EINVAL, "window", "window must be CENTER,WIDTH: two plain decimals (no exponent) "
			       "below %g in magnitude, WIDTH > 0, e.g. window=0.02,0.04 (got \"%.40s\")",
			       PREVIEW_WINDOW_MAX, win);
	return 0;
}

/* nx, ny, nz from the job's summary (written with the row from the parsed
 * spec), checked against its volume_bytes: no parse of a spec that may
 * hold 100k matrices on every poll. */
static int volume_dims(const job_row *row, int dims[3])
{
	json_t *j = row->summary ? json_loads(row->summary, 0, NULL) : NULL;
	json_t *v = json_object_get(j, "volume");
	int ok = json_array_size(v) == 3;
	for (int i = 0; i < 3 && ok; i++) {
		json_int_t n = json_integer_value(json_array_get(v, i));
		ok = n >= 1 && n <= PREVIEW_INDEX_MAX + 1;
		dims[i] = (int)n;
	}
	json_decref(j);
	return ok && (uint64_t)dims[0] * (uint64_t)dims[1] * (uint64_t)dims[2] * 4 == row->vol_bytes ? 0 : -1;
}

struct source {
	int fd;
	char gen[24];  /* X-Recond-Generation: the live generation, or "final" */
	char tag[48];  /* the same in the ETag, with the run's start for live ones */
};

/* The volume of the job in row: live while it runs, volume.f32 once it has
 * succeeded; 409 naming the state otherwise. */
static int open_source(app *a, job_row *row, struct source *s, rc_err *err)
{
	unsigned long g;
	if (row->state == JOB_RUNNING) {
		if (!runner_live_volume(a->run, row->id, &s->fd, &g)) {
			if (!g) { /* the worker has written nothing yet: zeros */
				close(s->fd);
				s->fd = -1;
				return rc_fail(err, RC_ESTATE, "state", "job %s is running but has no volume yet (no "
					       "snapshot so far; a preview SSE event announces the first)", row->id);
			}
			snprintf(s->gen, sizeof s->gen, "%lu", g);
			/* a restart runs the job afresh from generation 0: the
			 * start time keeps its generations apart */
			snprintf(s->tag, sizeof s->tag, "g%lu-%.0f", g, row->started * 1000);
			return 0;
		}
		/* it may have ended between the two looks */
		job_row now;
		if (store_get(a->st, row->id, 0, &now, NULL) == 0) {
			row->state = now.state;
			job_row_clear(&now);
		}
		/* a cluster: the live volume is the running node's memfd */
		if (row->state == JOB_RUNNING && row->node[0] && strcmp(row->node, store_node(a->st)))
			return rc_fail(err, RC_ESTATE, "state", "job %s runs on node %s: its live slices are served there"
				       " (this node has them once it has succeeded)", row->id, row->node);
		if (row->state == JOB_RUNNING)
			return rc_fail(err, RC_ESTATE, "state", "job %s is running but its worker has not started: no "
				       "volume yet; a preview exists while the job runs and after it succeeds", row->id);
	}
	if (row->state != JOB_SUCCEEDED)
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s: %s; a preview exists while the job runs and after "
			       "it succeeds", row->id, job_state_name(row->state),
			       JOB_BIT(row->state) & JOB_FINAL ? "it has no volume" : "no volume yet");
	char path[4200];
	store_job_path(a->st, row->id, "volume.f32", path, sizeof path);
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return rc_fail(err, RC_EIO, "", "the volume file of job %s is missing: %s", row->id, strerror(errno));
	snprintf(s->gen, sizeof s->gen, "final");
	snprintf(s->tag, sizeof s->tag, "final");
	return 0;
}

/* Maps the pages slice index of axis reads (not the volume) and renders. */
static int render(int fd, uint64_t vol_bytes, const int dims[3], const struct query *q, bytebuf *png, rc_err *err)
{
	uint64_t first, count;
	struct stat sb;
	preview_span(dims, q->axis, (int)q->index, &first, &count);
	/* a file shorter than the volume would fault (SIGBUS) under the map */
	if (fstat(fd, &sb) || (uint64_t)sb.st_size < vol_bytes)
		return rc_fail(err, RC_EIO, "", "the volume file is shorter than the volume's %llu bytes",
			       (unsigned long long)vol_bytes);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), off = first * sizeof(float);
	uint64_t moff = off - off % page, mlen = off + count * sizeof(float) - moff;
	void *m = mmap(NULL, (size_t)mlen, PROT_READ, MAP_SHARED, fd, (off_t)moff);
	if (m == MAP_FAILED)
		return rc_fail(err, RC_EIO, "", "cannot map the volume: %s", strerror(errno));
	int rc = preview_render((const float *)((const char *)m + (off - moff)), first, dims, q->axis, (int)q->index,
			       &q->win, png, err);
	munmap(m, (size_t)mlen);
	return rc;
}

/* The window of the whole volume (preview_volume_window): the default, one
 * for every slice of this volume version.  Maps the volume once (a big one
 * is only sampled: the pages of the sample are read). */
static int volume_window(int fd, uint64_t vol_bytes, double *lo, double *hi, rc_err *err)
{
	struct stat sb;
	if (fstat(fd, &sb) || (uint64_t)sb.st_size < vol_bytes)
		return rc_fail(err, RC_EIO, "", "the volume file is shorter than the volume's %llu bytes",
			       (unsigned long long)vol_bytes);
	void *m = mmap(NULL, (size_t)vol_bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return rc_fail(err, RC_EIO, "", "cannot map the volume: %s", strerror(errno));
	int rc = preview_volume_window(m, vol_bytes / sizeof(float), lo, hi, err);
	munmap(m, (size_t)vol_bytes);
	return rc;
}

/* The shortest of %.15g and %.17g that reads back as v: one spelling per
 * double, so window=40,400 and window=40.0,400 share an ETag. */
static void fmt_num(char *buf, size_t n, double v)
{
	snprintf(buf, n, "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, n, "%.17g", v);
}

static struct MHD_Response *with_tags(struct MHD_Response *resp, const char *etag, const char *gen)
{
	if (resp) {
		MHD_add_response_header(resp, "ETag", etag);
		MHD_add_response_header(resp, "X-Recond-Generation", gen);
	}
	return resp;
}

enum MHD_Result http_preview_get(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	struct query q;
	rc_err err;
	job_row row;
	if (parse_query(c, &q, &err))
		return http_error_rc(c, r, &err);
	if (store_get(a->st, r->id, 0, &row, &err))
		return http_error_rc(c, r, &err);
	struct source s = { .fd = -1 };
	int dims[3], w, h, n, rc = 0;
	uint64_t vol_bytes = row.vol_bytes;
	if (volume_dims(&row, dims))
		rc = rc_fail(&err, RC_EINTERNAL, "", "job %s has no volume size on record", r->id);
	if (!rc) {
		preview_geometry(dims, q.axis, &w, &h, &n);
		if (q.index < 0)
			q.index = n / 2;
		else if (q.index >= n)
			rc = rc_fail(&err, RC_EINVAL, "index", "index must be a whole number from 0 to %d for axis %c of "
				     "this job (n%c = %d; got %ld)", n - 1, "xyz"[q.axis], "xyz"[q.axis], n, q.index);
	}
	if (!rc)
		rc = open_source(a, &row, &s, &err);
	job_row_clear(&row);
	if (rc)
		return http_error_rc(c, r, &err);

	/* "vol": the volume's window (before it, "auto" named the slice's own) */
	char win[64] = "vol", wc[32], ww[32], etag[PREVIEW_KEY_MAX + 1], vkey[PREVIEW_KEY_MAX + 1];
	if (q.win.set) {
		fmt_num(wc, sizeof wc, q.win.center);
		fmt_num(ww, sizeof ww, q.win.width);
		snprintf(win, sizeof win, "%s_%s", wc, ww);
	}
	snprintf(etag, sizeof etag, "\"%s.%s.%c%ld.%s\"", r->id, s.tag, "xyz"[q.axis], q.index, win);
	if (http_etag_matches(c, etag)) {
		close(s.fd);
		return http_answer(c, r, 304, with_tags(MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT),
							 etag, s.gen));
	}
	bytebuf png = { 0 };
	preview_cache *cache = r->previews;
	double lo = 0, hi = 0;
	snprintf(vkey, sizeof vkey, "%s.%s", r->id, s.tag);
	int have_win = q.win.set || preview_cache_window_get(cache, vkey, &lo, &hi);
	int got = preview_cache_get(cache, etag, PREVIEW_WAIT_S, &png);
	if (got == PREVIEW_RENDER) {
		/* the volume's window is computed in a render slot: it reads the whole volume */
		if (!have_win && !(rc = volume_window(s.fd, vol_bytes, &lo, &hi, &err))) {
			preview_cache_window_put(cache, vkey, lo, hi);
			have_win = 1;
		}
		if (!q.win.set && !rc)
			q.win = (preview_window){ .set = 1, .center = 0.5 * (lo + hi), .width = hi - lo };
		if (!rc)
			rc = render(s.fd, vol_bytes, dims, &q, &png, &err);
		preview_cache_put(cache, etag, rc ? NULL : png.p, png.len);
	} else if (got == PREVIEW_BUSY) {
		rc = rc_fail(&err, RC_EUNAVAIL, "", "every preview slot (preview_concurrency = %d) stayed busy for %.0f s; "
			     "retry in a second", a->cfg->preview_concurrency, PREVIEW_WAIT_S);
	} else if (got < 0) {
		rc = rc_fail(&err, RC_ENOMEM, "", "out of memory for a preview");
	}
	close(s.fd);
	if (rc) {
		bytebuf_free(&png);
		return got == PREVIEW_BUSY ? http_error_rc_hdr(c, r, &err, "Retry-After", "1") : http_error_rc(c, r, &err);
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(png.len, png.p, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		bytebuf_free(&png);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "image/png");
	if (have_win) { /* the window the slice went through, as window=CENTER,WIDTH spells it */
		char hdr[80];
		fmt_num(wc, sizeof wc, q.win.set ? q.win.center : 0.5 * (lo + hi));
		fmt_num(ww, sizeof ww, q.win.set ? q.win.width : hi - lo);
		snprintf(hdr, sizeof hdr, "%s,%s", wc, ww);
		MHD_add_response_header(resp, "X-Recond-Window", hdr);
	}
	return http_answer(c, r, 200, with_tags(resp, etag, s.gen));
}
