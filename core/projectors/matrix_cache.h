/*
 * matrix_cache: the bound on a directory of cached system matrices
 * (dd_matrix.h's dd-<hash>.bin, bsr_cpu_cache.h's nz-<hash>.bin).
 *
 * One file per geometry ever seen would fill the disk, so the directory is
 * kept under a number of bytes: the least recently used files (by atime,
 * set explicitly on every hit, so noatime/relatime mounts do not matter)
 * are deleted first.  A reader holds a shared flock on the file while it
 * uses it (a mapped layout: until it is unmapped); pruning takes a
 * non-blocking exclusive flock before it deletes, so a file a running job
 * uses is skipped, never deleted.  Temporary files of writers (NAME.tmp.PID)
 * older than an hour are from crashed writers and are deleted too.
 * A bound < 0 is none; 0 keeps nothing.
 */
#ifndef RC_MATRIX_CACHE_H
#define RC_MATRIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rc_error.h"

/* Temporary files older than this are a crashed writer's. */
#define RC_MCACHE_TMP_AGE_S 3600

/* Opens path for reading under a shared lock and marks it used now:
 * the fd (closing it drops the lock), or -1 (no such file: a miss). */
int rc_mcache_open(const char *path);

/* Deletes unlocked cache files of dir, least recently used first, until
 * the others hold at most bound - reserve bytes, and crashed writers'
 * temporary files.  *ret_left (may be NULL): the bytes the cache files
 * left hold.  0, or RC_EIO when dir cannot be read (none: 0). */
int rc_mcache_prune(const char *dir, int64_t bound, int64_t reserve, int64_t *ret_left);

/* Before a file of `bytes` is written in dir: 0 = write it (room made by
 * rc_mcache_prune); RC_ETOOBIG = it is larger than the bound, not to be
 * written (a line on stderr says so). */
int rc_mcache_admit(const char *dir, int64_t bound, int64_t bytes, const char *name);

/* The directory, made where it is not there yet: 0 or RC_EIO. */
int rc_mcache_make_dir(const char *dir, rc_err *err);

/* The writers' protocol: write NAME.tmp.PID (rc_mcache_tmp), fill it
 * (util/rc_io.h) and fsync it (the CPU layout's file instead carries a
 * digest its load checks: bsr_cpu_cache.c), then rc_mcache_publish, so a
 * reader sees a whole file or none. */
/* path.tmp.PID into tmp of cap bytes: 0, or -1 when it does not fit. */
int rc_mcache_tmp(const char *path, char *tmp, size_t cap);
/* Renames the written tmp to path (tmp deleted when that fails: a file the
 * bound does not count), syncs dir and prunes it to the bound (another
 * writer's file may have landed meanwhile).  0 or RC_EIO. */
int rc_mcache_publish(const char *dir, int64_t bound, const char *tmp, const char *path, rc_err *err);

#endif
