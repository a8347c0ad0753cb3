/*
 * store_sqlite_db: the SQLite connection's errors, statements and log, under
 * store_sqlite.c (the job table) and store_sqlite_push.c (the pushes table),
 * which both call it (store_sqlite.h).
 */
#include "store/store_sqlite.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "durable.h"
#include "base/log.h"

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
	rlog(LOG_P_WARNING, "sqlite", "code=%d msg=\"%s\"", code, rlog_q(msg));
}

static pthread_once_t sqlite_log_once = PTHREAD_ONCE_INIT;

static void sqlite_log_setup(void)
{
	sqlite3_config(SQLITE_CONFIG_LOG, sqlite_log, NULL);
}

void sq_log_setup(void)
{
	pthread_once(&sqlite_log_once, sqlite_log_setup);
}

/* The code and the system's reason of the connection's last error: a full
 * disk (SQLITE_FULL, or an I/O error whose errno is ENOSPC or EDQUOT, as a
 * failed fsync of the WAL gives) is RC_ENOSPACE (507), like a full disk met
 * by the spool files; anything else RC_EIO.  The errno is only looked at
 * after an I/O error, the one case where it belongs to this failure. */
static int db_code(sq_store *st, char *why, size_t n)
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

int store_db_fail(sq_store *st, rc_err *err, const char *what)
{
	char why[128];
	int code = db_code(st, why, sizeof why);
	return rc_fail(err, code, "", "store: %s: %s%s", what, sqlite3_errmsg(st->db), why);
}

int sq_exec(sq_store *st, const char *sql, rc_err *err)
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

int sq_prepare(sq_store *st, const char *sql, sqlite3_stmt **q, const char *what, rc_err *err)
{
	return sqlite3_prepare_v2(st->db, sql, -1, q, NULL) == SQLITE_OK ? 0 : store_db_fail(st, err, what);
}

int sq_step_done(sq_store *st, sqlite3_stmt *q, const char *what, rc_err *err)
{
	int rc = sqlite3_step(q) == SQLITE_DONE ? 0 : store_db_fail(st, err, what);
	sqlite3_finalize(q);
	return rc;
}
