/*
 * durable: writes that are on disk when they return (STYLE.md: temp file,
 * fsync, rename, fsync the directory, as redis' rdbSave does).  Shared by the
 * worker (volume.f32) and the daemon's store (spec.json, the spool
 * directories), so it lives on the worker's floor and needs nothing but libc.
 *
 * A write of DIR/NAME goes through the temporary DIR/.NAME.HOST.PID.RANDOM.tmp
 * (durable_tmp_path: one per process and node, so two writers each rename a
 * whole file into place): a crash leaves either the old file or the new one,
 * never a part, plus perhaps the temporary (store_recover removes those).
 */
#ifndef RC_DURABLE_H
#define RC_DURABLE_H

#include <stddef.h>

#include "util/rc_error.h"

/* The code of a failed file operation's errno: RC_ENOSPACE for a full disk
 * or an exhausted quota (ENOSPC, EDQUOT: 507, the client may retry after
 * space is freed), RC_EIO otherwise. */
int durable_errno_code(int e);

/* fsyncs the directory path (so that a create, rename or unlink in it is on
 * disk).  0, or -1 with errno set. */
int durable_fsync_dir(const char *path);

/* path = dir/.NAME.HOST.PID.RANDOM.tmp, the name of a temporary for
 * dir/name: the host (gethostname, '/' and '.' as '_') and a random part
 * beside the PID, which alone may repeat across nodes sharing a spool (PID
 * namespaces); the store's sweep removes what a crash leaves (.*.tmp,
 * store_spool.c). */
void durable_tmp_path(char *path, size_t len, const char *dir, const char *name);

/* One piece of a file written from several buffers. */
typedef struct durable_part {
	const void *buf;
	size_t len;
} durable_part;

/* durable_write_file of the n parts one after the other (a checkpoint's
 * header, vectors and scalars without one buffer for them all). */
int durable_write_parts(const char *dir, const char *name, const durable_part *parts, int n, rc_err *err);

/* Writes len bytes of buf to dir/name as above.  0, or RC_EIO with the file
 * (RC_ENOSPACE when the disk is full) and the system's reason (the temporary
 * is removed). */
int durable_write_file(const char *dir, const char *name, const void *buf, size_t len, rc_err *err);

#endif
