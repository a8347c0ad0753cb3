/*
 * matrix_cache: the directory's bound (matrix_cache.h).
 */
#include "projectors/matrix_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/rc_error.h"

int rc_mcache_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_SH) && errno == EINTR)
		;
	/* the LRU order: atime now, mtime kept (best effort: a read-only
	 * directory still serves its files) */
	const struct timespec ts[2] = { { .tv_nsec = UTIME_NOW }, { .tv_nsec = UTIME_OMIT } };
	(void)futimens(fd, ts);
	return fd;
}

struct entry {
	char name[256];
	int64_t bytes;
	struct timespec used;
};

static int older(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* A cache file: NAME.bin; a writer's temporary file: NAME.bin.tmp.PID. */
static int is_tmp(const char *n) { return strstr(n, ".bin.tmp.") != NULL; }

static int is_cache(const char *n)
{
	size_t l = strlen(n);
	return n[0] != '.' && l > 4 && !strcmp(n + l - 4, ".bin");
}

/* Deletes dir/name when no one holds a lock on it (and it is still the
 * file that was listed): 0 when deleted. */
static int delete_unlocked(int dfd, const char *name, const struct stat *listed)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	struct stat sb;
	int rc = -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &sb) == 0 && sb.st_ino == listed->st_ino &&
	    sb.st_dev == listed->st_dev)
		rc = unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
	close(fd); /* drops the lock */
	return rc;
}

int rc_mcache_prune(const char *dir, int64_t bound, int64_t reserve, int64_t *ret_left)
{
	int64_t left = 0;
	struct entry *e = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	DIR *d = opendir(dir);
	if (!d) {
		rc = errno == ENOENT ? 0 : RC_EIO;
		goto out;
	}
	int dfd = dirfd(d);
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat sb;
		int tmp = is_tmp(de->d_name);
		if ((!tmp && !is_cache(de->d_name)) || strlen(de->d_name) >= sizeof e->name ||
		    fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode))
			continue;
		if (tmp) {
			/* a live writer's file is recent: only a crashed one's ages */
			if (now - sb.st_mtime > RC_MCACHE_TMP_AGE_S)
				(void)delete_unlocked(dfd, de->d_name, &sb);
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct entry *ne = realloc(e, nc * sizeof *e);
			if (!ne) {
				rc = RC_ENOMEM;
				goto out;
			}
			e = ne;
			cap = nc;
		}
		snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
		e[n].bytes = (int64_t)sb.st_size;
		e[n].used = sb.st_atim;
		left += e[n].bytes;
		n++;
	}
	if (bound >= 0 && n) {
		int64_t target = bound - (reserve > 0 ? reserve : 0);
		qsort(e, n, sizeof *e, older);
		for (size_t i = 0; i < n && left > target; i++) {
			struct stat sb;
			if (fstatat(dfd, e[i].name, &sb, AT_SYMLINK_NOFOLLOW))
				continue;
			if (delete_unlocked(dfd, e[i].name, &sb) == 0)
				left -= e[i].bytes;
		}
	}
out:
	if (d)
		closedir(d);
	free(e);
	if (ret_left)
		*ret_left = left;
	return rc;
}

int rc_mcache_admit(const char *dir, int64_t bound, int64_t bytes, const char *name)
{
	if (bound >= 0 && bytes > bound) {
		fprintf(stderr, "matrix cache: %s (%lld bytes) is larger than the cache's bound (%lld bytes): not cached\n",
			name, (long long)bytes, (long long)bound);
		return RC_ETOOBIG;
	}
	(void)rc_mcache_prune(dir, bound, bytes, NULL);
	return 0;
}

int rc_mcache_make_dir(const char *dir, rc_err *err)
{
	if (mkdir(dir, 0755) && errno != EEXIST)
		return rc_fail(err, RC_EIO, "cache_dir", "cannot create the matrix cache directory %s: %s", dir,
			       strerror(errno));
	return 0;
}

int rc_mcache_tmp(const char *path, char *tmp, size_t cap)
{
	int n = snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int rc_mcache_publish(const char *dir, int64_t bound, const char *tmp, const char *path, rc_err *err)
{
	if (rename(tmp, path)) {
		int rc = rc_fail(err, RC_EIO, "cache_dir", "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		unlink(tmp);
		return rc;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	(void)rc_mcache_prune(dir, bound, 0, NULL);
	return 0;
}
