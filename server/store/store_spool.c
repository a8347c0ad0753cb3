/*
 * store_spool: the spool directory {dir}/jobs/{id}/ of every backend
 * (store_backend.h).  Files and their directories are fsynced before the
 * backend commits the row that refers to them; a row goes before its files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "durable.h"
#include "store/store.h"
#include "store/store_backend.h"

/* The wall clock, as store_now's (store.c sits above this file: it calls
 * the spool, the spool does not call it). */
static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int store_pathf(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

static int mkdir_p(const char *path)
{
	char buf[4200];
	if (store_pathf(buf, sizeof buf, "%s", path))
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

int store_spool_init(const char *dir, rc_err *err)
{
	char path[4200];
	if (store_pathf(path, sizeof path, "%s/jobs", dir) || mkdir_p(path))
		return rc_fail(err, RC_EIO, "store", "cannot create the store directory %s/jobs: %s", dir,
			       strerror(errno));
	return 0;
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
		if (store_pathf(p, sizeof p, "%s/%s", path, e->d_name))
			continue;
		if (unlink(p) && errno == EISDIR)
			rm_rf(p);
	}
	closedir(d);
	return rmdir(path);
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

/* A job whose projections and volume together exceed the store's free space
 * is the client's to resize (400 too_big, naming the room there is), not a
 * disk that filled (507): that stays for writes that fail later. */
static int check_room(const char *sdir, const job_spec *spec, rc_err *err)
{
	struct statvfs vfs;
	if (statvfs(sdir, &vfs))
		return 0; /* unknown: the writes will tell */
	unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
	unsigned long long total = (unsigned long long)vfs.f_blocks * vfs.f_frsize;
	unsigned long long need = (unsigned long long)spec->proj_bytes + spec->vol_bytes;
	if (need <= avail)
		return 0;
	return rc_fail(err, RC_ETOOBIG, "volume",
		       "this job needs %llu bytes on the store's disk (projections %llu + volume %llu), and it has "
		       "%llu bytes free of %llu: make the volume or the stack smaller, or free space in the store",
		       need, (unsigned long long)spec->proj_bytes, (unsigned long long)spec->vol_bytes, avail, total);
}

int store_spool_create(const char *sdir, const char *id, const job_spec *spec, const char *spec_json,
		       size_t spec_len, rc_err *err)
{
	char dir[4200], path[4300];
	int rc, fd;
	if (store_pathf(dir, sizeof dir, "%s/jobs/%s", sdir, id))
		return rc_fail(err, RC_EINVAL, "", "the store's path is too long");
	if ((rc = check_room(sdir, spec, err)))
		return rc;
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
	snprintf(path, sizeof path, "%s/jobs", sdir);
	if (durable_fsync_dir(path)) {
		rc = rc_fail(err, durable_errno_code(errno), "", "cannot fsync %s: %s", path, strerror(errno));
		goto out_rm;
	}
	return 0;
out_rm:
	rm_rf(dir);
	return rc;
}

void store_spool_remove(const char *sdir, const char *id)
{
	char dir[4200];
	if (store_pathf(dir, sizeof dir, "%s/jobs/%s", sdir, id))
		return;
	rm_rf(dir);
	snprintf(dir, sizeof dir, "%s/jobs", sdir);
	durable_fsync_dir(dir);
}

/* The durable writes' temporaries (.NAME.HOST.PID.RANDOM.tmp, durable.c) left in job
 * id's directory by writes cut short; returns how many were removed. */
static int remove_temporaries(const char *sdir, const char *id)
{
	char path[4200];
	int n = 0;
	if (store_pathf(path, sizeof path, "%s/jobs/%s", sdir, id))
		return 0;
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char file[4400];
		if (e->d_name[0] != '.' || len < 6 || strcmp(e->d_name + len - 4, ".tmp") ||
		    store_pathf(file, sizeof file, "%s/%s", path, e->d_name))
			continue;
		if (unlink(file) == 0)
			n++;
	}
	closedir(d);
	return n;
}

int store_spool_sweep(store *st, double min_age_s)
{
	char path[4200];
	int norph = 0;
	snprintf(path, sizeof path, "%s/jobs", st->dir);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		int state = st->ops->state_of(st, e->d_name);
		if (state == JOB_RUNNING)
			continue;
		/* A shared spool (min_age_s > 0): a queued job may be taken by
		 * another node between this look and the unlink, so only a job
		 * that has finished is swept; the runner clears a queued job's
		 * leftovers before it runs it. */
		if (state >= 0 && min_age_s > 0 && state != JOB_SUCCEEDED && state != JOB_FAILED &&
		    state != JOB_CANCELLED)
			continue;
		if (state >= 0) {
			/* Temporaries of writes cut short (durable writes rename into
			 * place), and a volume that no succeeded run wrote: a worker
			 * that finished as the daemon died (its job is queued again
			 * and runs afresh), or one of a job that failed or was
			 * cancelled (the runner removes those; this catches a crash
			 * in between). */
			norph += remove_temporaries(st->dir, e->d_name);
			if (state != JOB_SUCCEEDED &&
			    store_pathf(path, sizeof path, "%s/jobs/%s/volume.f32", st->dir, e->d_name) == 0 &&
			    unlink(path) == 0)
				norph++;
			continue;
		}
		/* No row: a create that died before its commit, or a delete that
		 * died after it. */
		if (store_pathf(path, sizeof path, "%s/jobs/%s", st->dir, e->d_name))
			continue;
		struct stat sb;
		if (min_age_s > 0 && (stat(path, &sb) || (double)sb.st_mtime > wall_now() - min_age_s))
			continue;
		if (rm_rf(path) == 0)
			norph++;
	}
	closedir(d);
	snprintf(path, sizeof path, "%s/jobs", st->dir);
	durable_fsync_dir(path);
	return norph;
}
