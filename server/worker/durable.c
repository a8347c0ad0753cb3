/* durable: writes that are on disk when they return (durable.h). */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int durable_errno_code(int e)
{
	return e == ENOSPC || e == EDQUOT ? RC_ENOSPACE : RC_EIO;
}

int durable_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

int durable_write_file(const char *dir, const char *name, const void *buf, size_t len, rc_err *err)
{
	durable_part one = { buf, len };
	return durable_write_parts(dir, name, &one, 1, err);
}

int durable_write_parts(const char *dir, const char *name, const durable_part *parts, int n, rc_err *err)
{
	char tmp[4200], path[4200];
	/* named per process: two writers of one file (two nodes' runs of a job
	 * whose lease changed hands) each rename a whole file into place */
	snprintf(tmp, sizeof tmp, "%s/.%s.%ld.tmp", dir, name, (long)getpid());
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", tmp, strerror(errno));
	for (int i = 0; i < n; i++) {
		const char *p = parts[i].buf;
		size_t left = parts[i].len;
		while (left) {
			ssize_t w = write(fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				int e = errno;
				close(fd);
				unlink(tmp);
				return rc_fail(err, durable_errno_code(e), "", "cannot write %s: %s", tmp, strerror(e));
			}
			p += w;
			left -= (size_t)w;
		}
	}
	/* close even when fsync failed; the first failure is the one reported */
	int bad = fsync(fd), e = errno;
	if (close(fd) && !bad)
		bad = 1, e = errno;
	if (bad) {
		unlink(tmp);
		return rc_fail(err, durable_errno_code(e), "", "cannot fsync %s: %s", tmp, strerror(e));
	}
	if (rename(tmp, path)) {
		e = errno;
		unlink(tmp);
		return rc_fail(err, durable_errno_code(e), "", "cannot rename %s into place: %s", path, strerror(e));
	}
	if (durable_fsync_dir(dir))
		return rc_fail(err, durable_errno_code(errno), "", "cannot fsync the directory of %s: %s", path,
			       strerror(errno));
	return 0;
}
