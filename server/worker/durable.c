/* durable: writes that are on disk when they return (durable.h). */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
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

void durable_tmp_path(char *path, size_t len, const char *dir, const char *name)
{
	char host[65] = "host";
	unsigned int r = 0;
	if (gethostname(host, sizeof host - 1) || !host[0])
		snprintf(host, sizeof host, "host");
	host[sizeof host - 1] = 0;
	for (char *c = host; *c; c++)
		if (*c == '/' || *c == '.')
			*c = '_';
	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = (unsigned int)ts.tv_nsec ^ (unsigned int)ts.tv_sec;
	}
	snprintf(path, len, "%s/.%s.%s.%ld.%08x.tmp", dir, name, host, (long)getpid(), r);
}

int durable_write_parts(const char *dir, const char *name, const durable_part *parts, int n, rc_err *err)
{
	char tmp[4400], path[4200];
	/* named per process and node: two writers of one file (two nodes' runs
	 * of a job whose lease changed hands) each rename a whole file into place */
	durable_tmp_path(tmp, sizeof tmp, dir, name);
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
