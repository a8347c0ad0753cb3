/*
 * http_upload: PUT /v1/jobs/{id}/projections (the whole stack) and
 * PUT /v1/jobs/{id}/projections/{k} (one view).
 *
 * Bytes go straight from MHD's connection buffer to the preallocated spool
 * file with pwrite at their final offset, so memory does not grow with the
 * upload.  A whole stack lands contiguously; one view of a cone/matrices
 * geometry too; one view of fan/parallel is scattered into its rows
 * ([slice][view][u]).  Before any byte is written the declared length is
 * checked against the spec (413 longer, 422 shorter, 411 none) and the
 * views about to be overwritten are marked absent (committed), so a crash
 * mid-upload never leaves a half-written view marked present.  At the end:
 * fdatasync, then the views are marked present (committed), then 200.
 * While the body arrives, write-back of the spool file is started every
 * FLUSH_EVERY bytes (Linux), so that fdatasync finds little left to write.
 *
 * Two uploads that would write the same view at once are refused (409): the
 * in-flight table below holds (job, view) pairs, view -1 for a whole stack.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "durable.h"
#include "http/http_routes.h"
#include "base/log.h"
#include "util/rc_clock.h"

struct upload {
	int fd;
	int k;                /* -1 = whole stack */
	uint64_t expected, got;
	uint64_t row_bytes;   /* nu * sample */
	uint64_t sample;      /* bytes of a sample: 4 (float32), 2 (uint16 counts) */
	uint64_t view_stride, row_stride; /* the job's strides (floats) */
	int views_expected;
	int io_errno;
	int too_long;         /* more bytes arrived than the views hold: 413 at the end */
	int registered;
	double t0;            /* headers checked: the body starts */
	uint64_t flushed;     /* got when write-back was last started */
};

/* Write-back of the spool file is started (sync_file_range, no waiting)
 * each time this many more bytes have arrived, so the disk writes while
 * the body still arrives instead of all in the fdatasync before the answer:
 * that fdatasync took 0.6-0.95 s of a 2.38 GB upload (1.6-2.4 s in all),
 * 0.01 s with this (docs/server.md, "Upload speed"; 8 to 128 MiB measured
 * alike: this VM's noise is larger than their difference).  Only a head
 * start: the fdatasync still decides what is acknowledged, and a
 * write-back error is still reported by it (SYNC_FILE_RANGE_WRITE alone
 * does not consume the descriptor's error state). */
#define FLUSH_EVERY (16u << 20)

#define MAX_INFLIGHT 1024
static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { char id[37]; int k; int used; } inflight[MAX_INFLIGHT];

/* 0 = registered; -1 = conflicts with an upload in flight; -2 = table full. */
static int inflight_add(const char *id, int k)
{
	int rc = 0, slot = -1;
	pthread_mutex_lock(&inflight_lock);
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (!inflight[i].used) {
			if (slot < 0)
				slot = i;
			continue;
		}
		if (!strcmp(inflight[i].id, id) && (k < 0 || inflight[i].k < 0 || inflight[i].k == k)) {
			rc = -1;
			break;
		}
	}
	if (!rc && slot < 0)
		rc = -2;
	if (!rc) {
		snprintf(inflight[slot].id, sizeof inflight[slot].id, "%s", id);
		inflight[slot].k = k;
		inflight[slot].used = 1;
	}
	pthread_mutex_unlock(&inflight_lock);
	return rc;
}

static void inflight_del(const char *id, int k)
{
	pthread_mutex_lock(&inflight_lock);
	for (int i = 0; i < MAX_INFLIGHT; i++)
		if (inflight[i].used && inflight[i].k == k && !strcmp(inflight[i].id, id)) {
			inflight[i].used = 0;
			break;
		}
	pthread_mutex_unlock(&inflight_lock);
}

/* The likeliest cause of a body exactly twice the size: float64 samples.
 * Appended to the 413's message ("" otherwise). */
static const char *float64_hint(uint64_t got, uint64_t expected, uint64_t sample)
{
	if (!(expected > 0 && got / 2 == expected && got % 2 == 0))
		return "";
	return sample == 2 ? " (twice the expected bytes: float32 data? this job's input.dtype is uint16)"
			   : " (twice the expected bytes: float64 data? recond takes float32)";
}

enum MHD_Result http_upload_begin(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	unsigned long long len;
	enum MHD_Result ret;
	if (http_content_length(c, r, ": the length is checked against the spec first", &len, &ret))
		return ret;
	job_row row;
	rc_err err;
	/* no bitmap: the store_views_clear below decides which views were present */
	if (store_get(a->st, r->id, 0, &row, &err))
		return http_error_rc(c, r, &err);
	if (!http_may_act(r, row.owner)) { /* submit uploads to its own jobs only (http_owner.c) */
		ret = http_refuse_act(c, r, row.owner);
		goto out;
	}
	if (!job_row_uploadable(&row)) {
		job_row_upload_refused(&row, &err);
		ret = http_error_rc(c, r, &err);
		goto out;
	}
	/* a job that starts by itself once its views are in takes them only
	 * after its uploaded flat, dark and bad pixels (http_calib.c) */
	if (row.autostart || row.stream == STREAM_ON) {
		const char *missing = NULL;
		if (http_input_missing(a, r->id, &missing, &err)) {
			ret = http_error_rc(c, r, &err);
			goto out;
		}
		if (missing) {
			ret = http_input_refuse(c, r, missing, "this job starts by itself once its views are in, so its "
							      "fields come before them");
			goto out;
		}
	}
	if (r->k >= row.views_expected) {
		ret = http_fail(c, r, RC_EINVAL, "k", "view %d does not exist: the job has views 0..%d",
				r->k, row.views_expected - 1);
		goto out;
	}
	uint64_t expected = r->k < 0 ? row.proj_bytes : row.view_bytes;
	/* the sample size follows the spec's input.dtype: view_bytes / pixels */
	uint64_t pix = (uint64_t)row.rows * (uint64_t)row.nu;
	uint64_t sample = pix ? row.view_bytes / pix : 4;
	const char *dtype = sample == 2 ? "uint16" : "float32";
	if (len != expected) {
		rc_code code = len > expected ? RC_EBODYTOOBIG : RC_EWRONGLEN;
		const char *hint = float64_hint(len, expected, sample);
		if (r->k < 0)
			ret = http_fail(c, r, code, "Content-Length",
					"the whole stack is %llu bytes (%d views x %d rows x %d pixels x %llu bytes of %s); "
					"got Content-Length %llu%s",
					(unsigned long long)expected, row.views_expected, row.rows, row.nu,
					(unsigned long long)sample, dtype, len, hint);
		else
			ret = http_fail(c, r, code, "Content-Length",
					"one view is %llu bytes (%d rows x %d pixels x %llu bytes of %s); got Content-Length %llu%s",
					(unsigned long long)expected, row.rows, row.nu, (unsigned long long)sample, dtype, len,
					hint);
		goto out;
	}
	int ir = inflight_add(r->id, r->k);
	if (ir) {
		ret = ir == -1 ? http_fail(c, r, RC_ESTATE, "", "another upload to %s of job %s is in progress",
					   r->k < 0 ? "the views" : "this view", r->id)
			       : http_fail(c, r, RC_EUNAVAIL, "", "too many uploads in progress; retry shortly");
		goto out;
	}
	struct upload *up = calloc(1, sizeof *up);
	if (!up) {
		inflight_del(r->id, r->k);
		ret = MHD_NO;
		goto out;
	}
	up->registered = 1;
	up->fd = -1;
	up->k = r->k;
	up->expected = expected;
	up->t0 = rc_now_s();
	up->sample = sample;
	up->row_bytes = sample * (uint64_t)row.nu;
	r->up = up;
	/* Views about to be overwritten stop being "present" first.  The store
	 * decides which are present now that the upload holds its views: the
	 * row read above may predate the 200 of an upload that ended since
	 * (and left the in-flight table after setting its bit). */
	if (store_views_clear(a->st, r->id, r->k < 0 ? 0 : r->k, r->k < 0 ? row.views_expected : r->k + 1, &err)) {
		ret = http_error_rc(c, r, &err);
		goto out;
	}
	/* a streaming worker that used these views must know they change */
	runner_views(a->run, r->id, r->k < 0 ? 0 : r->k, r->k < 0 ? row.views_expected : r->k + 1, 0);
	char path[4200];
	store_job_path(a->st, r->id, "projections.f32", path, sizeof path);
	up->fd = open(path, O_WRONLY | O_CLOEXEC);
	if (up->fd < 0) {
		ret = http_fail(c, r, durable_errno_code(errno), "", "cannot open the spool file: %s", strerror(errno));
		goto out;
	}
	up->view_stride = row.view_stride;
	up->row_stride = row.row_stride;
	up->views_expected = row.views_expected;
	ret = MHD_YES;
out:
	job_row_clear(&row);
	return ret;
}

static int pwrite_all(int fd, const char *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Bytes past the views that are still read (and dropped) so that the 413
 * reaches the client; past them the connection is closed. */
#define EXCESS_DRAIN (16u << 20)

enum MHD_Result http_upload_data(req *r, const char *data, size_t len)
{
	struct upload *up = r->up;
	/* Counted here whatever the headers said: MHD follows Transfer-Encoding
	 * over Content-Length, so the declared length alone is no bound. */
	if (up->too_long || up->got + len > up->expected) {
		up->too_long = 1;
		up->got += len; /* nothing more is written */
		return up->got - up->expected > EXCESS_DRAIN ? MHD_NO : MHD_YES;
	}
	if (up->io_errno || up->fd < 0)
		return MHD_YES;
	if (up->k < 0) {
		if (pwrite_all(up->fd, data, len, up->got))
			up->io_errno = errno ? errno : EIO;
	} else {
		/* Row by row: row j of view k lives at row_offset(k, j). */
		size_t done = 0;
		while (done < len) {
			uint64_t pos = up->got + done;
			uint64_t j = pos / up->row_bytes, within = pos % up->row_bytes;
			size_t n = (size_t)(up->row_bytes - within);
			if (n > len - done)
				n = len - done;
			uint64_t off = up->sample * ((uint64_t)up->k * up->view_stride + j * up->row_stride) + within;
			if (pwrite_all(up->fd, data + done, n, off)) {
				up->io_errno = errno ? errno : EIO;
				return MHD_YES;
			}
			done += n;
		}
	}
	up->got += len;
	metrics_bytes_received(r->a->met, len);
#ifdef SYNC_FILE_RANGE_WRITE
	if (up->got - up->flushed >= FLUSH_EVERY) {
		up->flushed = up->got;
		/* The whole file (0, 0 = to its end): a view of a fan job lands
		 * row by row, and pages already written back are skipped. */
		if (sync_file_range(up->fd, 0, 0, SYNC_FILE_RANGE_WRITE) &&
		    (errno == EIO || errno == ENOSPC || errno == EDQUOT))
			up->io_errno = errno; /* other errors (EINVAL: not supported here) leave it to fdatasync */
	}
#endif
	return MHD_YES;
}

/* Closes the spool file and frees the upload's slot; idempotent. */
static void upload_release(req *r)
{
	struct upload *up = r->up;
	if (up->fd >= 0)
		close(up->fd);
	up->fd = -1;
	if (up->registered)
		inflight_del(r->id, up->k);
	up->registered = 0;
}

static enum MHD_Result upload_finish(struct MHD_Connection *c, req *r);

/* The slot is freed before the answer leaves (MHD sends the queued response
 * after this returns): a client that uploads again as soon as it has its
 * 200 must not find its own finished upload still "in progress". */
enum MHD_Result http_upload_end(struct MHD_Connection *c, req *r)
{
	enum MHD_Result ret = upload_finish(c, r);
	upload_release(r);
	return ret;
}

static enum MHD_Result upload_finish(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	struct upload *up = r->up;
	rc_err err;
	if (up->too_long)
		return http_fail(c, r, RC_EBODYTOOBIG, "",
				 "the body is longer than the %llu bytes of %s%s; nothing was stored and the views stay absent",
				 (unsigned long long)up->expected, up->k < 0 ? "the whole stack" : "one view",
				 float64_hint(up->got, up->expected, up->sample));
	if (up->io_errno)
		return http_fail(c, r, durable_errno_code(up->io_errno), "",
				 "writing the projections failed: %s; nothing was acknowledged, upload again",
				 strerror(up->io_errno));
	if (up->got != up->expected)
		return http_fail(c, r, RC_EWRONGLEN, "", "received %llu of %llu bytes",
				 (unsigned long long)up->got, (unsigned long long)up->expected);
	double t_recv = rc_now_s();
	if (fdatasync(up->fd)) {
		int e = errno; /* ENOSPC here too: write-back may find the disk full */
		return http_fail(c, r, durable_errno_code(e), "", "fsync of the projections failed: %s",
				 strerror(e));
	}
	double t_synced = rc_now_s();
	job_state ns;
	int first = up->k < 0 ? 0 : up->k, last = up->k < 0 ? up->views_expected : up->k + 1;
	if (store_views_set(a->st, r->id, first, last, &ns, &err))
		return http_error_rc(c, r, &err);
	runner_views(a->run, r->id, first, last, 1);
	rlog(LOG_P_INFO, "views_stored", "id=%s first=%d last=%d bytes=%llu state=%s receive_s=%.3f fsync_s=%.3f",
	     r->id, first, last - 1, (unsigned long long)up->got, job_state_name(ns), t_recv - up->t0, t_synced - t_recv);
	app_job_changed(a, r->id);
	if (ns == JOB_QUEUED)
		runner_kick(a->run);
	return http_job(c, r, 200, r->id);
}

void http_upload_free(req *r)
{
	struct upload *up = r->up;
	if (!up)
		return;
	upload_release(r);
	free(up);
	r->up = NULL;
}
