/*
 * store: SQLite job table + spool directory (store.h).
 *
 * One connection, one mutex: every call takes the lock, runs its statements
 * (a transaction when there are several) and releases it.  The schema keeps
 * what the HTTP layer shows without opening files: sizes, the presence
 * bitmap, timestamps, the error and the worker's report as JSON text.
 * queue_seq orders the queue among equal priorities (first queued first).
 */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "durable.h"
#include "log.h"
#include "store_internal.h"

static const char *const state_names[JOB_NSTATES] = {
	"created", "receiving", "queued", "running", "succeeded", "failed", "cancelled",
};

const char *job_state_name(job_state s)
{
	return (unsigned)s < JOB_NSTATES ? state_names[s] : "unknown";
}

int job_state_parse(const char *s, job_state *ret)
{
	for (int i = 0; i < JOB_NSTATES; i++)
		if (s && !strcmp(s, state_names[i])) {
			*ret = (job_state)i;
			return 0;
		}
	return RC_EINVAL;
}

double store_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void job_row_clear(job_row *r)
{
	if (!r)
		return;
	free(r->summary);
	free(r->report);
	free(r->present);
	memset(r, 0, sizeof *r);
}

int job_row_uploadable(const job_row *r)
{
	if (JOB_BIT(r->state) & JOB_UPLOADABLE)
		return 1;
	/* a streaming job takes views while it is queued and runs, until it has
	 * them all: from then on its volume is made from exactly those */
	return r->streaming && (JOB_BIT(r->state) & JOB_STREAM_UPLOADABLE) && r->views_present < r->views_expected;
}

const char *store_dir(const store *st) { return st->dir; }

void store_job_path(const store *st, const char *id, const char *name, char *buf, size_t n)
{
	if (name)
		snprintf(buf, n, "%s/jobs/%s/%s", st->dir, id, name);
	else
		snprintf(buf, n, "%s/jobs/%s", st->dir, id);
}

/* snprintf for paths: -1 when the result would not fit (never a cut path). */
static int pathf(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* SQLite tells the errno of a failed write or sync only in its log
 * ("os_unix.c:LINE: (ERRNO) FUNC(PATH) - REASON"): sqlite3_system_errno
 * reads errno later, after the rollback may have changed it.  The log
 * callback keeps it for db_code, per thread (the store's calls run under
 * its lock in the calling thread), and logs the line: an operator sees
 * which file failed and why. */
static _Thread_local int sqlite_io_errno;

static void sqlite_log(void *ud, int code, const char *msg)
{
	(void)ud;
	int prim = code & 0xff;
	if (prim != SQLITE_IOERR && prim != SQLITE_FULL && prim != SQLITE_CANTOPEN && prim != SQLITE_CORRUPT &&
	    prim != SQLITE_NOTICE)
		return;
	const char *p = strstr(msg, "os_unix.c:");
	if (p && (p = strstr(p, ": (")))
		sqlite_io_errno = atoi(p + 3);
	rlog(LOG_P_WARNING, "sqlite", "code=%d msg=\"%s\"", code, msg);
}

static pthread_once_t sqlite_log_once = PTHREAD_ONCE_INIT;

/* Before SQLite initialises (the first open); refused, harmlessly, after. */
static void sqlite_log_setup(void)
{
	sqlite3_config(SQLITE_CONFIG_LOG, sqlite_log, NULL);
}

/* The code and the system's reason of the connection's last error: a full
 * disk (SQLITE_FULL, or an I/O error whose errno is ENOSPC or EDQUOT, as a
 * failed fsync of the WAL gives) is RC_ENOSPACE (507), like a full disk met
 * by the spool files; anything else RC_EIO.  The errno is only looked at
 * after an I/O error, the one case where it belongs to this failure. */
static int db_code(store *st, char *why, size_t n)
{
	int ec = sqlite3_errcode(st->db), se = 0;
	if ((ec & 0xff) == SQLITE_IOERR || ec == SQLITE_FULL)
		se = sqlite_io_errno ? sqlite_io_errno : sqlite3_system_errno(st->db);
	sqlite_io_errno = 0;
	why[0] = '\0';
	if (se)
		snprintf(why, n, " (%s)", strerror(se));
	return ec == SQLITE_FULL || (se && durable_errno_code(se) == RC_ENOSPACE) ? RC_ENOSPACE : RC_EIO;
}

int store_db_fail(store *st, rc_err *err, const char *what)
{
	char why[128];
	int code = db_code(st, why, sizeof why);
	return rc_fail(err, code, "", "store: %s: %s%s", what, sqlite3_errmsg(st->db), why);
}
#define db_fail store_db_fail

static int exec_sql(store *st, const char *sql, rc_err *err)
{
	char *msg = NULL;
	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		char why[128];
		int code = db_code(st, why, sizeof why);
		int rc = rc_fail(err, code, "", "store: %s: %s%s", sql, msg ? msg : "?", why);
		sqlite3_free(msg);
		return rc;
	}
	return 0;
}

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS jobs ("
	" id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state INTEGER NOT NULL,"
	" label TEXT NOT NULL DEFAULT '', priority INTEGER NOT NULL, autostart INTEGER NOT NULL,"
	" cancel_requested INTEGER NOT NULL DEFAULT 0,"
	" created REAL NOT NULL, updated REAL NOT NULL, queued REAL NOT NULL DEFAULT 0,"
	" started REAL NOT NULL DEFAULT 0, finished REAL NOT NULL DEFAULT 0,"
	" queue_seq INTEGER NOT NULL DEFAULT 0,"
	" views_expected INTEGER NOT NULL, views_present INTEGER NOT NULL DEFAULT 0,"
	" nu INTEGER NOT NULL, rows INTEGER NOT NULL, view_stride INTEGER NOT NULL, row_stride INTEGER NOT NULL,"
	" view_bytes INTEGER NOT NULL, proj_bytes INTEGER NOT NULL, vol_bytes INTEGER NOT NULL,"
	" error_code TEXT NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '',"
	" summary TEXT, report TEXT, present BLOB NOT NULL,"
	" stream INTEGER NOT NULL DEFAULT 0, streaming INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(state, priority, queue_seq);"
	"CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq);"
	STORE_PUSH_SCHEMA;

static int mkdir_p(const char *path)
{
	char buf[4200];
	if (pathf(buf, sizeof buf, "%s", path))
		return -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0750) && errno != EEXIST)
				return -1;
			*p = '/';
		}
	}
	if (mkdir(buf, 0750) && errno != EEXIST)
		return -1;
	return 0;
}

static long long query_ll(store *st, const char *sql)
{
	sqlite3_stmt *q;
	long long v = 0;
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return 0;
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

/* A store made before streaming FDK lacks its two columns: add them. */
static int add_stream_columns(store *st, rc_err *err)
{
	if (query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='streaming'"))
		return 0;
	return exec_sql(st, "ALTER TABLE jobs ADD COLUMN stream INTEGER NOT NULL DEFAULT 0;"
			    "ALTER TABLE jobs ADD COLUMN streaming INTEGER NOT NULL DEFAULT 0;", err);
}

int store_open(const char *dir, store **ret, rc_err *err)
{
	store *st = calloc(1, sizeof *st);
	char path[4200];
	int rc;
	if (!st)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	pthread_mutex_init(&st->lock, NULL);
	snprintf(st->dir, sizeof st->dir, "%s", dir);
	snprintf(path, sizeof path, "%s/jobs", dir);
	if (mkdir_p(path)) {
		rc = rc_fail(err, RC_EIO, "store", "cannot create the store directory %s: %s", path, strerror(errno));
		goto out_free;
	}
	snprintf(path, sizeof path, "%s/recond.db", dir);
	pthread_once(&sqlite_log_once, sqlite_log_setup);
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK) {
		rc = rc_fail(err, RC_EIO, "store", "cannot open %s: %s", path,
			     st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto out_free;
	}
	sqlite3_busy_timeout(st->db, 5000);
	if ((rc = exec_sql(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", err)) ||
	    (rc = exec_sql(st, schema, err)) || (rc = add_stream_columns(st, err)))
		goto out_free;
	st->seq = query_ll(st, "SELECT COALESCE(MAX(seq),0) FROM jobs");
	st->queue_seq = query_ll(st, "SELECT COALESCE(MAX(queue_seq),0) FROM jobs");
	*ret = st;
	return 0;
out_free:
	store_close(st);
	return rc;
}

void store_close(store *st)
{
	if (!st)
		return;
	sqlite3_close(st->db);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

static int rm_rf(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	struct dirent *e;
	char p[4400];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (pathf(p, sizeof p, "%s/%s", path, e->d_name))
			continue;
		if (unlink(p) && errno == EISDIR)
			rm_rf(p);
	}
	closedir(d);
	return rmdir(path);
}

/* The state of job id, -1 when there is no such row.  When unsure (the
 * query fails) it says succeeded: the files are kept. */
static int job_state_of(store *st, const char *id)
{
	sqlite3_stmt *q;
	int state = -1;
	if (sqlite3_prepare_v2(st->db, "SELECT state FROM jobs WHERE id=?", -1, &q, NULL) != SQLITE_OK)
		return JOB_SUCCEEDED;
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int s = sqlite3_step(q);
	if (s == SQLITE_ROW)
		state = sqlite3_column_int(q, 0);
	else if (s != SQLITE_DONE)
		state = JOB_SUCCEEDED;
	sqlite3_finalize(q);
	return state;
}

int store_recover(store *st, int *requeued, int *orphans, rc_err *err)
{
	int rc = 0, nre = 0, norph = 0;
	char path[4200];
	pthread_mutex_lock(&st->lock);
	sqlite3_stmt *q;
	/* A running job whose cancel was acknowledged (202) ends cancelled, as
	 * it would have had the daemon lived; the other running jobs go back to
	 * the front of their priority class. */
	if (sqlite3_prepare_v2(st->db, "UPDATE jobs SET state=?1, updated=?2, finished=?2, error_code='cancelled',"
			       " error_message='cancelled by request' WHERE state=?3 AND cancel_requested=1",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "recover");
		goto out;
	}
	sqlite3_bind_int(q, 1, JOB_CANCELLED);
	sqlite3_bind_double(q, 2, store_now());
	sqlite3_bind_int(q, 3, JOB_RUNNING);
	int s = sqlite3_step(q);
	sqlite3_finalize(q);
	if (s != SQLITE_DONE) {
		rc = db_fail(st, err, "recover");
		goto out;
	}
	if (sqlite3_prepare_v2(st->db, "UPDATE jobs SET state=?, updated=?, started=0, cancel_requested=0 WHERE state=?",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "recover");
		goto out;
	}
	sqlite3_bind_int(q, 1, JOB_QUEUED);
	sqlite3_bind_double(q, 2, store_now());
	sqlite3_bind_int(q, 3, JOB_RUNNING);
	if (sqlite3_step(q) != SQLITE_DONE) {
		sqlite3_finalize(q);
		rc = db_fail(st, err, "recover");
		goto out;
	}
	sqlite3_finalize(q);
	nre = sqlite3_changes(st->db);
	if ((rc = store_push_recover_locked(st, err)))
		goto out;

	/* Spool directories without a row: a create that died before its commit,
	 * or a delete that died after it. */
	snprintf(path, sizeof path, "%s/jobs", st->dir);
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			int state = job_state_of(st, e->d_name);
			if (state >= 0) {
				/* Temporaries of writes cut short (durable writes rename into
				 * place), and a volume that no succeeded run wrote: a worker
				 * that finished as the daemon died (its job is queued again
				 * and runs afresh), or one of a job that failed or was
				 * cancelled (the runner removes those; this catches a crash
				 * in between). */
				static const char *const tmps[] = { ".volume.f32.tmp", ".spec.json.tmp", "volume.f32" };
				for (int i = 0; i < 3; i++)
					if ((i < 2 || state != JOB_SUCCEEDED) &&
					    pathf(path, sizeof path, "%s/jobs/%s/%s", st->dir, e->d_name, tmps[i]) == 0 &&
					    unlink(path) == 0)
						norph++;
				continue;
			}
			if (pathf(path, sizeof path, "%s/jobs/%s", st->dir, e->d_name) == 0 && rm_rf(path) == 0)
				norph++;
		}
		closedir(d);
	}
	snprintf(path, sizeof path, "%s/jobs", st->dir);
	durable_fsync_dir(path);
out:
	pthread_mutex_unlock(&st->lock);
	if (requeued)
		*requeued = nre;
	if (orphans)
		*orphans = norph;
	return rc;
}

static int prealloc(int fd, uint64_t len)
{
	if (len == 0)
		return 0;
	if (fallocate(fd, 0, 0, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -1;
	return ftruncate(fd, (off_t)len);
}

int store_create(store *st, const char *id, const job_spec *spec, const char *spec_json,
		 size_t spec_len, const char *summary, rc_err *err)
{
	char dir[4200], path[4300];
	int rc, fd;
	store_job_path(st, id, NULL, dir, sizeof dir);
	if (mkdir(dir, 0750))
		return rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", dir, strerror(errno));
	if ((rc = durable_write_file(dir, "spec.json", spec_json, spec_len, err)))
		goto out_rm;
	snprintf(path, sizeof path, "%s/projections.f32", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0) {
		rc = rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", path, strerror(errno));
		goto out_rm;
	}
	if (prealloc(fd, spec->proj_bytes)) {
		int e = errno;
		close(fd);
		rc = rc_fail(err, durable_errno_code(e), "",
			     "cannot reserve %llu bytes for the projections: %s",
			     (unsigned long long)spec->proj_bytes, strerror(e));
		goto out_rm;
	}
	{
		/* close even when fsync failed; the first failure is reported */
		int bad = fsync(fd), e = errno;
		if (close(fd) && !bad)
			bad = 1, e = errno;
		if (!bad && durable_fsync_dir(dir))
			bad = 1, e = errno;
		if (bad) {
			rc = rc_fail(err, durable_errno_code(e), "", "cannot fsync %s: %s", path, strerror(e));
			goto out_rm;
		}
	}
	/* The job's directory entry too: the row must never outlive a power
	 * cut that its directory did not survive. */
	snprintf(path, sizeof path, "%s/jobs", st->dir);
	if (durable_fsync_dir(path)) {
		rc = rc_fail(err, durable_errno_code(errno), "", "cannot fsync %s: %s", path, strerror(errno));
		goto out_rm;
	}

	size_t nbits = ((size_t)spec->nviews + 7) / 8;
	uint8_t *bits = calloc(1, nbits);
	if (!bits) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto out_rm;
	}
	pthread_mutex_lock(&st->lock);
	sqlite3_stmt *q;
	rc = 0;
	if ((rc = exec_sql(st, "BEGIN IMMEDIATE", err))) {
		/* nothing written */
	} else if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO jobs (id, seq, state, label, priority, autostart, created, updated,"
			       " views_expected, nu, rows, view_stride, row_stride, view_bytes, proj_bytes, vol_bytes,"
			       " summary, present, stream) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "insert");
		exec_sql(st, "ROLLBACK", NULL);
	} else {
		double now = store_now();
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 2, st->seq + 1);
		sqlite3_bind_int(q, 3, JOB_CREATED);
		sqlite3_bind_text(q, 4, spec->label, -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 5, spec->priority);
		sqlite3_bind_int(q, 6, spec->autostart);
		sqlite3_bind_double(q, 7, now);
		sqlite3_bind_double(q, 8, now);
		sqlite3_bind_int(q, 9, spec->nviews);
		sqlite3_bind_int(q, 10, spec->nu);
		sqlite3_bind_int(q, 11, spec->rows);
		sqlite3_bind_int64(q, 12, (sqlite3_int64)spec->view_stride);
		sqlite3_bind_int64(q, 13, (sqlite3_int64)spec->row_stride);
		sqlite3_bind_int64(q, 14, (sqlite3_int64)spec->view_bytes);
		sqlite3_bind_int64(q, 15, (sqlite3_int64)spec->proj_bytes);
		sqlite3_bind_int64(q, 16, (sqlite3_int64)spec->vol_bytes);
		sqlite3_bind_text(q, 17, summary, -1, SQLITE_STATIC);
		sqlite3_bind_blob(q, 18, bits, (int)nbits, SQLITE_STATIC);
		sqlite3_bind_int(q, 19, spec->stream);
		if (sqlite3_step(q) != SQLITE_DONE)
			rc = db_fail(st, err, "insert");
		sqlite3_finalize(q);
		if (!rc && spec->out.npush)
			rc = store_push_insert_locked(st, id, spec, err);
		if (!rc)
			rc = exec_sql(st, "COMMIT", err);
		if (rc)
			exec_sql(st, "ROLLBACK", NULL);
		else
			st->seq++;
	}
	pthread_mutex_unlock(&st->lock);
	free(bits);
	if (rc)
		goto out_rm;
	return 0;
out_rm:
	rm_rf(dir);
	return rc;
}

#define ROW_COLS "id, state, label, priority, autostart, cancel_requested, created, updated, queued," \
	" started, finished, views_expected, views_present, nu, rows, view_stride, row_stride," \
	" view_bytes, proj_bytes, vol_bytes, error_code, error_message, summary, report, present," \
	" stream, streaming"

static char *dup_col(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? strdup((const char *)t) : NULL;
}

static void read_row(sqlite3_stmt *q, int with_bitmap, job_row *r)
{
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", (const char *)sqlite3_column_text(q, 0));
	r->state = (job_state)sqlite3_column_int(q, 1);
	snprintf(r->label, sizeof r->label, "%s", (const char *)sqlite3_column_text(q, 2));
	r->priority = sqlite3_column_int(q, 3);
	r->autostart = sqlite3_column_int(q, 4);
	r->cancel_requested = sqlite3_column_int(q, 5);
	r->created = sqlite3_column_double(q, 6);
	r->updated = sqlite3_column_double(q, 7);
	r->queued = sqlite3_column_double(q, 8);
	r->started = sqlite3_column_double(q, 9);
	r->finished = sqlite3_column_double(q, 10);
	r->views_expected = sqlite3_column_int(q, 11);
	r->views_present = sqlite3_column_int(q, 12);
	r->nu = sqlite3_column_int(q, 13);
	r->rows = sqlite3_column_int(q, 14);
	r->view_stride = (uint64_t)sqlite3_column_int64(q, 15);
	r->row_stride = (uint64_t)sqlite3_column_int64(q, 16);
	r->view_bytes = (uint64_t)sqlite3_column_int64(q, 17);
	r->proj_bytes = (uint64_t)sqlite3_column_int64(q, 18);
	r->vol_bytes = (uint64_t)sqlite3_column_int64(q, 19);
	snprintf(r->error_code, sizeof r->error_code, "%s", (const char *)sqlite3_column_text(q, 20));
	snprintf(r->error_message, sizeof r->error_message, "%s", (const char *)sqlite3_column_text(q, 21));
	r->summary = dup_col(q, 22);
	r->report = dup_col(q, 23);
	r->stream = sqlite3_column_int(q, 25);
	r->streaming = sqlite3_column_int(q, 26);
	if (with_bitmap) {
		int n = sqlite3_column_bytes(q, 24);
		r->present = calloc(1, (size_t)n + 1);
		if (r->present && n)
			memcpy(r->present, sqlite3_column_blob(q, 24), (size_t)n);
	}
}

/* Caller holds the lock. */
static int get_locked(store *st, const char *id, int with_bitmap, job_row *out, rc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, "SELECT " ROW_COLS " FROM jobs WHERE id=?", -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "select");
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int s = sqlite3_step(q), rc = 0;
	if (s == SQLITE_ROW)
		read_row(q, with_bitmap, out);
	else if (s == SQLITE_DONE)
		rc = rc_fail(err, RC_ENOTFOUND, "id", "no job with id %s", id);
	else
		rc = db_fail(st, err, "select");
	sqlite3_finalize(q);
	return rc;
}

int store_get(store *st, const char *id, int with_bitmap, job_row *out, rc_err *err)
{
	pthread_mutex_lock(&st->lock);
	int rc = get_locked(st, id, with_bitmap, out, err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_list(store *st, int state, int limit, int offset, job_row **rows, int *n,
	       int *total, rc_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = 0, cnt = 0;
	job_row *out = calloc((size_t)(limit > 0 ? limit : 1), sizeof *out);
	if (!out)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	pthread_mutex_lock(&st->lock);
	const char *sql = state < 0
		? "SELECT " ROW_COLS " FROM jobs ORDER BY seq DESC LIMIT ? OFFSET ?"
		: "SELECT " ROW_COLS " FROM jobs WHERE state=?3 ORDER BY seq DESC LIMIT ?1 OFFSET ?2";
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "list");
		goto out;
	}
	sqlite3_bind_int(q, 1, limit);
	sqlite3_bind_int(q, 2, offset);
	if (state >= 0)
		sqlite3_bind_int(q, 3, state);
	int s;
	while (cnt < limit && (s = sqlite3_step(q)) == SQLITE_ROW)
		read_row(q, 1, &out[cnt++]); /* the bitmap: views_missing is part of every Job */
	sqlite3_finalize(q);
	q = NULL;
	if (sqlite3_prepare_v2(st->db, state < 0 ? "SELECT COUNT(*) FROM jobs" : "SELECT COUNT(*) FROM jobs WHERE state=?",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "count");
		goto out;
	}
	if (state >= 0)
		sqlite3_bind_int(q, 1, state);
	*total = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int(q, 0) : 0;
out:
	sqlite3_finalize(q);
	pthread_mutex_unlock(&st->lock);
	if (rc) {
		for (int i = 0; i < cnt; i++)
			job_row_clear(&out[i]);
		free(out);
		return rc;
	}
	*rows = out;
	*n = cnt;
	return 0;
}

int store_counts(store *st, int counts[JOB_NSTATES], rc_err *err)
{
	sqlite3_stmt *q;
	memset(counts, 0, sizeof(int) * JOB_NSTATES);
	pthread_mutex_lock(&st->lock);
	int rc = 0;
	if (sqlite3_prepare_v2(st->db, "SELECT state, COUNT(*) FROM jobs GROUP BY state", -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "counts");
	} else {
		while (sqlite3_step(q) == SQLITE_ROW) {
			int s = sqlite3_column_int(q, 0);
			if (s >= 0 && s < JOB_NSTATES)
				counts[s] = sqlite3_column_int(q, 1);
		}
		sqlite3_finalize(q);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_queue_depth(store *st)
{
	int c[JOB_NSTATES];
	if (store_counts(st, c, NULL))
		return 0;
	return c[JOB_QUEUED];
}

int job_row_upload_refused(const job_row *r, rc_err *err)
{
	if (r->streaming && !(JOB_BIT(r->state) & JOB_FINAL))
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s with every view: its volume is made from the views "
			       "it has, so it takes no more uploads", r->id, job_state_name(r->state));
	return rc_fail(err, RC_ESTATE, "state", "job %s is %s and no longer accepts projections", r->id,
		       job_state_name(r->state));
}

static int popcount_bits(const uint8_t *b, int nbits)
{
	int n = 0;
	for (int i = 0; i < nbits; i++)
		n += (b[i >> 3] >> (i & 7)) & 1;
	return n;
}

/* Caller holds the lock.  Runs one UPDATE with the given bindings; the
 * statement must mention each parameter it binds. */
static int update_views(store *st, const char *id, int first, int last, int set,
			job_state *ret_state, rc_err *err)
{
	job_row r;
	int rc = get_locked(st, id, 1, &r, err);
	if (rc)
		return rc;
	if (!job_row_uploadable(&r)) {
		rc = job_row_upload_refused(&r, err);
		goto out;
	}
	if (first < 0 || last > r.views_expected || first >= last) {
		rc = rc_fail(err, RC_EINVAL, "k", "views [%d, %d) are outside 0..%d", first, last, r.views_expected - 1);
		goto out;
	}
	int changed = 0;
	for (int k = first; k < last; k++) {
		changed |= ((r.present[k >> 3] >> (k & 7)) & 1) != set;
		if (set)
			r.present[k >> 3] |= (uint8_t)(1u << (k & 7));
		else
			r.present[k >> 3] &= (uint8_t)~(1u << (k & 7));
	}
	if (!set && !changed)
		goto out; /* none of them is present: nothing to commit */
	int npresent = popcount_bits(r.present, r.views_expected);
	job_state ns = r.state;
	double now = store_now();
	if (set && ns == JOB_CREATED)
		ns = JOB_RECEIVING;
	int waiting = ns == JOB_RECEIVING; /* not queued yet */
	int queue = waiting && set && r.autostart && npresent == r.views_expected;
	/* a streaming FDK job runs from its first views on */
	int stream = waiting && set && !queue && (r.stream == STREAM_ON || (r.stream == STREAM_AUTO && r.autostart));
	if (queue || stream)
		ns = JOB_QUEUED;
	queue |= stream;
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db,
			       "UPDATE jobs SET present=?1, views_present=?2, state=?3, updated=?4,"
			       " queued=CASE WHEN ?5 THEN ?4 ELSE queued END,"
			       " queue_seq=CASE WHEN ?5 THEN ?6 ELSE queue_seq END,"
			       " streaming=CASE WHEN ?8 THEN 1 ELSE streaming END WHERE id=?7",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "update views");
		goto out;
	}
	sqlite3_bind_blob(q, 1, r.present, (r.views_expected + 7) / 8, SQLITE_STATIC);
	sqlite3_bind_int(q, 2, npresent);
	sqlite3_bind_int(q, 3, ns);
	sqlite3_bind_double(q, 4, now);
	sqlite3_bind_int(q, 5, queue);
	sqlite3_bind_int64(q, 6, st->queue_seq + 1);
	sqlite3_bind_text(q, 7, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 8, stream);
	if (sqlite3_step(q) != SQLITE_DONE)
		rc = db_fail(st, err, "update views");
	else if (queue)
		st->queue_seq++;
	sqlite3_finalize(q);
	if (!rc && ret_state)
		*ret_state = ns;
out:
	job_row_clear(&r);
	return rc;
}

int store_views_clear(store *st, const char *id, int first, int last, rc_err *err)
{
	pthread_mutex_lock(&st->lock);
	int rc = update_views(st, id, first, last, 0, NULL, err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_views_set(store *st, const char *id, int first, int last, job_state *ret_state, rc_err *err)
{
	pthread_mutex_lock(&st->lock);
	int rc = update_views(st, id, first, last, 1, ret_state, err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* Caller holds the lock: UPDATE ... SET state=to WHERE id AND state=from. */
static int transition(store *st, const char *id, job_state from, job_state to, const char *extra, rc_err *err)
{
	char sql[512];
	sqlite3_stmt *q;
	snprintf(sql, sizeof sql, "UPDATE jobs SET state=?1, updated=?2%s WHERE id=?3 AND state=?4", extra ? extra : "");
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "transition");
	sqlite3_bind_int(q, 1, to);
	sqlite3_bind_double(q, 2, store_now());
	sqlite3_bind_text(q, 3, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 4, from);
	sqlite3_bind_int64(q, 5, st->queue_seq + 1);
	int rc = sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "transition");
	if (!rc && sqlite3_changes(st->db) != 1)
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is not %s any more", id, job_state_name(from));
	sqlite3_finalize(q);
	return rc;
}

int store_start(store *st, const char *id, int *ret_changed, rc_err *err)
{
	job_row r;
	pthread_mutex_lock(&st->lock);
	int rc = get_locked(st, id, 0, &r, err);
	if (rc)
		goto out_unlock;
	*ret_changed = 0;
	if (r.state == JOB_QUEUED || r.state == JOB_RUNNING)
		goto out;
	if (!(JOB_BIT(r.state) & JOB_UPLOADABLE)) {
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is %s and cannot be started", id, job_state_name(r.state));
		goto out;
	}
	if (r.views_present != r.views_expected) {
		rc = rc_fail(err, RC_ESTATE, "views", "job %s has %d of %d views; upload the missing %d before starting it",
			     id, r.views_present, r.views_expected, r.views_expected - r.views_present);
		goto out;
	}
	rc = transition(st, id, r.state, JOB_QUEUED, ", queued=?2, queue_seq=?5", err);
	if (!rc) {
		st->queue_seq++;
		*ret_changed = 1;
	}
out:
	job_row_clear(&r);
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_take_next(store *st, char id[37], rc_err *err)
{
	sqlite3_stmt *q;
	pthread_mutex_lock(&st->lock);
	int rc;
	if (sqlite3_prepare_v2(st->db, "SELECT id FROM jobs WHERE state=? ORDER BY priority DESC, queue_seq ASC LIMIT 1",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "queue");
		goto out;
	}
	sqlite3_bind_int(q, 1, JOB_QUEUED);
	if (sqlite3_step(q) != SQLITE_ROW) {
		sqlite3_finalize(q);
		rc = rc_fail(err, RC_ENOTFOUND, "", "the queue is empty");
		goto out;
	}
	snprintf(id, 37, "%s", (const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	rc = transition(st, id, JOB_QUEUED, JOB_RUNNING, ", started=?2, cancel_requested=0", err);
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_cancel(store *st, const char *id, job_state *ret_state, rc_err *err)
{
	job_row r;
	pthread_mutex_lock(&st->lock);
	int rc = get_locked(st, id, 0, &r, err);
	if (rc)
		goto out_unlock;
	if (JOB_BIT(r.state) & JOB_FINAL) {
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is already %s; there is nothing to cancel (DELETE removes it)",
			     id, job_state_name(r.state));
	} else if (r.state == JOB_RUNNING) {
		sqlite3_stmt *q;
		if (sqlite3_prepare_v2(st->db, "UPDATE jobs SET cancel_requested=1, updated=? WHERE id=?", -1, &q, NULL)) {
			rc = db_fail(st, err, "cancel");
		} else {
			sqlite3_bind_double(q, 1, store_now());
			sqlite3_bind_text(q, 2, id, -1, SQLITE_STATIC);
			rc = sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "cancel");
			sqlite3_finalize(q);
		}
		if (!rc)
			*ret_state = JOB_RUNNING;
	} else {
		rc = transition(st, id, r.state, JOB_CANCELLED, ", finished=?2, error_code='cancelled',"
				" error_message='cancelled by request'", err);
		if (!rc)
			*ret_state = JOB_CANCELLED;
	}
	job_row_clear(&r);
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_finish(store *st, const char *id, job_state state, const char *err_code,
		 const char *err_msg, const char *report, rc_err *err)
{
	sqlite3_stmt *q;
	pthread_mutex_lock(&st->lock);
	int rc = 0;
	const char *sql = state == JOB_QUEUED
		? "UPDATE jobs SET state=?1, updated=?2, started=0, cancel_requested=0 WHERE id=?6 AND state=?7"
		: "UPDATE jobs SET state=?1, updated=?2, finished=?2, error_code=?3, error_message=?4,"
		  " report=COALESCE(?5, report) WHERE id=?6 AND state=?7";
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "finish");
		goto out;
	}
	sqlite3_bind_int(q, 1, state);
	sqlite3_bind_double(q, 2, store_now());
	if (state != JOB_QUEUED) {
		sqlite3_bind_text(q, 3, err_code ? err_code : "", -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 4, err_msg ? err_msg : "", -1, SQLITE_STATIC);
		if (report)
			sqlite3_bind_text(q, 5, report, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(q, 5);
	}
	sqlite3_bind_text(q, 6, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 7, JOB_RUNNING);
	if (sqlite3_step(q) != SQLITE_DONE)
		rc = db_fail(st, err, "finish");
	else if (sqlite3_changes(st->db) != 1)
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is not running", id);
	sqlite3_finalize(q);
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* Caller holds the lock. */
static int delete_locked(store *st, const char *id, rc_err *err)
{
	sqlite3_stmt *q;
	char dir[4200];
	int rc = exec_sql(st, "BEGIN IMMEDIATE", err); /* the row and its pushes together */
	if (rc)
		return rc;
	if (sqlite3_prepare_v2(st->db, "DELETE FROM jobs WHERE id=?", -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "delete");
	} else {
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		rc = sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "delete");
		sqlite3_finalize(q);
	}
	if (!rc)
		rc = store_push_delete_locked(st, id, err);
	if (!rc)
		rc = exec_sql(st, "COMMIT", err);
	if (rc) {
		exec_sql(st, "ROLLBACK", NULL);
		return rc;
	}
	/* The row is gone first: a crash here leaves an orphan directory that
	 * store_recover removes, never a row without its files. */
	store_job_path(st, id, NULL, dir, sizeof dir);
	rm_rf(dir);
	snprintf(dir, sizeof dir, "%s/jobs", st->dir);
	durable_fsync_dir(dir);
	return 0;
}

int store_stream_pause(store *st, const char *id, rc_err *err)
{
	pthread_mutex_lock(&st->lock);
	int rc = transition(st, id, JOB_RUNNING, JOB_RECEIVING, ", streaming=0", err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_delete(store *st, const char *id, rc_err *err)
{
	job_row r;
	pthread_mutex_lock(&st->lock);
	int rc = get_locked(st, id, 0, &r, err);
	if (rc)
		goto out;
	if (!(JOB_BIT(r.state) & JOB_FINAL))
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is %s; cancel it first", id, job_state_name(r.state));
	else
		rc = delete_locked(st, id, err);
	job_row_clear(&r);
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int store_expire(store *st, double retention_s, int *ret_n, rc_err *err)
{
	sqlite3_stmt *q;
	char ids[64][37];
	int n = 0, total = 0, rc = 0;
	pthread_mutex_lock(&st->lock);
	for (;;) {
		n = 0;
		if (sqlite3_prepare_v2(st->db, "SELECT id FROM jobs WHERE state IN (?,?,?) AND finished > 0 AND finished < ? LIMIT 64",
				       -1, &q, NULL) != SQLITE_OK) {
			rc = db_fail(st, err, "expire");
			break;
		}
		sqlite3_bind_int(q, 1, JOB_SUCCEEDED);
		sqlite3_bind_int(q, 2, JOB_FAILED);
		sqlite3_bind_int(q, 3, JOB_CANCELLED);
		sqlite3_bind_double(q, 4, store_now() - retention_s);
		while (n < 64 && sqlite3_step(q) == SQLITE_ROW)
			snprintf(ids[n++], 37, "%s", (const char *)sqlite3_column_text(q, 0));
		sqlite3_finalize(q);
		for (int i = 0; i < n && !rc; i++)
			rc = delete_locked(st, ids[i], err);
		total += n;
		if (rc || n < 64)
			break;
	}
	pthread_mutex_unlock(&st->lock);
	if (ret_n)
		*ret_n = total;
	return rc;
}

int store_set_priority(store *st, const char *id, int priority, job_state *ret_state, rc_err *err)
{
	sqlite3_stmt *q;
	job_row r;
	if (priority < 0 || priority > 9)
		return rc_fail(err, RC_EINVAL, "priority", "priority must be an integer from 0 to 9 (got %d)", priority);
	pthread_mutex_lock(&st->lock);
	int rc = get_locked(st, id, 0, &r, err);
	if (rc)
		goto out_unlock;
	/* Under the lock the state cannot move (store_take_next takes it too),
	 * so a job checked here is not running when the row changes. */
	if (!(JOB_BIT(r.state) & (JOB_UPLOADABLE | JOB_BIT(JOB_QUEUED)))) {
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is %s: the priority orders the queue, so it changes only "
			     "before the job runs (created, receiving or queued)", id, job_state_name(r.state));
		goto out;
	}
	if (sqlite3_prepare_v2(st->db, "UPDATE jobs SET priority=?, updated=? WHERE id=?", -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "priority");
		goto out;
	}
	sqlite3_bind_int(q, 1, priority);
	sqlite3_bind_double(q, 2, store_now());
	sqlite3_bind_text(q, 3, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(q) == SQLITE_DONE ? 0 : db_fail(st, err, "priority");
	sqlite3_finalize(q);
	if (!rc && ret_state)
		*ret_state = r.state;
out:
	job_row_clear(&r);
out_unlock:
	pthread_mutex_unlock(&st->lock);
	return rc;
}
