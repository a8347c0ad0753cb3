/*
 * iofault: an LD_PRELOAD shim that makes chosen file operations fail with a
 * chosen errno, for the tests of how recond reports I/O faults
 * (tests/integration/test_iofault.py, docs/server.md "I/O faults").
 *
 *   LD_PRELOAD=build/lib/iofault.so IOFAULT_CTL=/tmp/ctl recond ...
 *
 * A rule is one line of words
 *
 *   op=fsync,fdatasync errno=ENOSPC path=*projections.f32 after=0 count=0
 *
 * op      which calls fail (comma-separated): open (open, open64, openat,
 *         openat64, creat, __open_2, ...), write, pwrite (pwrite, pwrite64),
 *         fsync, fdatasync, rename (rename, renameat, renameat2), fallocate
 *         (fallocate, posix_fallocate and their 64 forms), ftruncate, mkdir
 *         (mkdir, mkdirat); "sync" = fsync,fdatasync; "all" = every one.
 * errno   ENOSPC, EDQUOT, EIO, EROFS, EACCES, ENOMEM, or a number.
 * path    an fnmatch(3) glob matched against the file's path (the absolute
 *         path of an fd from /proc/self/fd; either path of a rename); '*'
 *         crosses '/'.  Without * ? [ it is a substring.  Empty: any file.
 * after   the first N matching calls succeed (default 0).
 * count   at most M calls fail, then the rule is spent (default 0: all).
 *
 * Where the rule comes from: with IOFAULT_CTL=FILE, from FILE while it
 * exists (an empty FILE means the IOFAULT_OP, IOFAULT_ERRNO, IOFAULT_PATH,
 * IOFAULT_AFTER, IOFAULT_COUNT variables); no FILE, no faults.  So a test
 * arms and clears faults in a running daemon, and in the workers it forks,
 * by writing and removing one file.  Without IOFAULT_CTL the variables
 * alone arm the rule for the life of the process.  The counters are per
 * process and start again whenever FILE changes (inode, size or mtime).
 *
 * IOFAULT_LOG=FILE appends "pid op errno path" per injected fault, so a
 * test can tell that its fault did happen.
 *
 * The shim's own file access goes through syscall(2), never through the
 * wrappers below, so it cannot recurse.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
	OP_OPEN = 1 << 0, OP_WRITE = 1 << 1, OP_PWRITE = 1 << 2, OP_FSYNC = 1 << 3, OP_FDATASYNC = 1 << 4,
	OP_RENAME = 1 << 5, OP_FALLOCATE = 1 << 6, OP_FTRUNCATE = 1 << 7, OP_MKDIR = 1 << 8,
};

static const struct { const char *name; unsigned bits; } op_names[] = {
	{ "open", OP_OPEN }, { "write", OP_WRITE }, { "pwrite", OP_PWRITE }, { "fsync", OP_FSYNC },
	{ "fdatasync", OP_FDATASYNC }, { "rename", OP_RENAME }, { "fallocate", OP_FALLOCATE },
	{ "ftruncate", OP_FTRUNCATE }, { "mkdir", OP_MKDIR }, { "sync", OP_FSYNC | OP_FDATASYNC },
	{ "all", ~0u },
};

static const struct { const char *name; int e; } errno_names[] = {
	{ "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT }, { "EIO", EIO }, { "EROFS", EROFS },
	{ "EACCES", EACCES }, { "ENOMEM", ENOMEM }, { "EFBIG", EFBIG },
};

struct rule {
	unsigned ops;
	int err;
	char path[1024];
	long after, count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int configured = -1;   /* -1 unknown, 0 inert, 1 IOFAULT_CTL, 2 environment only */
static const char *ctl_path, *log_path;
static struct rule rule;      /* the rule in force; ops == 0: none */
static struct stat ctl_seen;  /* the control file the rule came from */
static int ctl_exists;
static long matched, injected;

static const char *op_name(unsigned op)
{
	for (size_t i = 0; i < sizeof op_names / sizeof op_names[0]; i++)
		if (op_names[i].bits == op)
			return op_names[i].name;
	return "?";
}

static void parse_word(struct rule *r, const char *key, const char *val)
{
	if (!strcmp(key, "op")) {
		char buf[256], *save = NULL;
		snprintf(buf, sizeof buf, "%s", val);
		r->ops = 0;
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
			for (size_t i = 0; i < sizeof op_names / sizeof op_names[0]; i++)
				if (!strcmp(t, op_names[i].name))
					r->ops |= op_names[i].bits;
	} else if (!strcmp(key, "errno")) {
		r->err = atoi(val);
		for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
			if (!strcmp(val, errno_names[i].name))
				r->err = errno_names[i].e;
	} else if (!strcmp(key, "path")) {
		snprintf(r->path, sizeof r->path, "%s", val);
	} else if (!strcmp(key, "after")) {
		r->after = atol(val);
	} else if (!strcmp(key, "count")) {
		r->count = atol(val);
	}
}

static void rule_from_env(struct rule *r)
{
	static const char *const keys[] = { "op", "errno", "path", "after", "count" };
	static const char *const vars[] = { "IOFAULT_OP", "IOFAULT_ERRNO", "IOFAULT_PATH", "IOFAULT_AFTER",
					    "IOFAULT_COUNT" };
	memset(r, 0, sizeof *r);
	r->err = EIO;
	for (int i = 0; i < 5; i++) {
		const char *v = getenv(vars[i]);
		if (v)
			parse_word(r, keys[i], v);
	}
}

/* "op=... errno=... path=..." words separated by blanks or newlines. */
static void rule_from_text(struct rule *r, char *text)
{
	char *save = NULL;
	memset(r, 0, sizeof *r);
	r->err = EIO;
	for (char *w = strtok_r(text, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
		char *eq = strchr(w, '=');
		if (eq) {
			*eq = '\0';
			parse_word(r, w, eq + 1);
		}
	}
}

/* Caller holds lock.  Brings the rule up to date with the control file. */
static void refresh_locked(void)
{
	if (configured < 0) {
		ctl_path = getenv("IOFAULT_CTL");
		log_path = getenv("IOFAULT_LOG");
		int c = ctl_path && *ctl_path ? 1 : getenv("IOFAULT_OP") ? 2 : 0;
		__atomic_store_n(&configured, c, __ATOMIC_RELAXED);
		if (configured == 2) {
			rule_from_env(&rule);
			matched = injected = 0;
		}
	}
	if (configured != 1)
		return;
	struct stat sb;
	if (stat(ctl_path, &sb)) {
		ctl_exists = 0;
		rule.ops = 0;
		return;
	}
	if (ctl_exists && sb.st_ino == ctl_seen.st_ino && sb.st_size == ctl_seen.st_size &&
	    sb.st_mtim.tv_sec == ctl_seen.st_mtim.tv_sec && sb.st_mtim.tv_nsec == ctl_seen.st_mtim.tv_nsec)
		return;
	ctl_exists = 1;
	ctl_seen = sb;
	matched = injected = 0;
	char text[2048];
	long fd = syscall(SYS_openat, AT_FDCWD, ctl_path, O_RDONLY | O_CLOEXEC);
	long n = fd >= 0 ? syscall(SYS_read, (int)fd, text, sizeof text - 1) : -1;
	if (fd >= 0)
		syscall(SYS_close, (int)fd);
	text[n > 0 ? n : 0] = '\0';
	if (n > 0 && strspn(text, " \t\r\n") < (size_t)n)
		rule_from_text(&rule, text);
	else
		rule_from_env(&rule);
}

/* Whether op could fail now (cheap: no path is looked up when it cannot). */
static int op_armed(unsigned op)
{
	if (__atomic_load_n(&configured, __ATOMIC_RELAXED) == 0)
		return 0; /* no IOFAULT_ variables: inert, one load per call */
	pthread_mutex_lock(&lock);
	refresh_locked();
	int armed = (rule.ops & op) != 0;
	pthread_mutex_unlock(&lock);
	return armed;
}

static int path_matches(const char *pat, const char *path)
{
	if (!pat[0])
		return 1;
	if (!path)
		return 0;
	if (!strpbrk(pat, "*?["))
		return strstr(path, pat) != NULL;
	return fnmatch(pat, path, 0) == 0;
}

static void log_fault(unsigned op, int e, const char *path)
{
	if (!log_path || !*log_path)
		return;
	char line[PATH_MAX + 96];
	int n = snprintf(line, sizeof line, "%d %s %d %s\n", (int)getpid(), op_name(op), e, path ? path : "-");
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof line)
		n = (int)sizeof line - 1;
	long fd = syscall(SYS_openat, AT_FDCWD, log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	syscall(SYS_write, (int)fd, line, (size_t)n);
	syscall(SYS_close, (int)fd);
}

/* The errno to fail op on path (or path2) with, or 0 to let it through. */
static int decide(unsigned op, const char *path, const char *path2)
{
	int e = 0;
	pthread_mutex_lock(&lock);
	refresh_locked();
	if ((rule.ops & op) && (path_matches(rule.path, path) || (path2 && path_matches(rule.path, path2)))) {
		matched++;
		if (matched > rule.after && (rule.count <= 0 || injected < rule.count)) {
			injected++;
			e = rule.err ? rule.err : EIO;
		}
	}
	pthread_mutex_unlock(&lock);
	if (e)
		log_fault(op, e, path);
	return e;
}

static void fd_path(int fd, char *buf, size_t n)
{
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t r = readlink(link, buf, n - 1);
	buf[r > 0 ? r : 0] = '\0';
}

/* The absolute form of dirfd + path, as well as it can be had. */
static void at_path(int dirfd, const char *path, char *buf, size_t n)
{
	if (!path) {
		buf[0] = '\0';
		return;
	}
	if (path[0] == '/') {
		snprintf(buf, n, "%s", path);
		return;
	}
	char base[PATH_MAX];
	if (dirfd == AT_FDCWD) {
		if (!getcwd(base, sizeof base))
			base[0] = '\0';
	} else {
		fd_path(dirfd, base, sizeof base);
	}
	snprintf(buf, n, "%s/%s", base, path);
}

static int fd_fault(unsigned op, int fd)
{
	if (!op_armed(op))
		return 0;
	char p[PATH_MAX];
	fd_path(fd, p, sizeof p);
	return decide(op, p, NULL);
}

static int at_fault(unsigned op, int dirfd, const char *path, int dirfd2, const char *path2)
{
	if (!op_armed(op))
		return 0;
	char p[PATH_MAX], p2[PATH_MAX];
	at_path(dirfd, path, p, sizeof p);
	if (path2)
		at_path(dirfd2, path2, p2, sizeof p2);
	return decide(op, p, path2 ? p2 : NULL);
}

#define REAL(ret, name, ...)                                                  \
	static ret (*real_##name)(__VA_ARGS__);                               \
	if (!real_##name)                                                      \
		real_##name = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

#define FAIL_WITH(e, val) do { errno = (e); return (val); } while (0)

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = open_mode(flags, ap);
	va_end(ap);
	REAL(int, open, const char *, int, ...);
	int e = at_fault(OP_OPEN, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_open(path, flags, m);
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = open_mode(flags, ap);
	va_end(ap);
	REAL(int, open64, const char *, int, ...);
	int e = at_fault(OP_OPEN, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_open64(path, flags, m);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = open_mode(flags, ap);
	va_end(ap);
	REAL(int, openat, int, const char *, int, ...);
	int e = at_fault(OP_OPEN, dirfd, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_openat(dirfd, path, flags, m);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = open_mode(flags, ap);
	va_end(ap);
	REAL(int, openat64, int, const char *, int, ...);
	int e = at_fault(OP_OPEN, dirfd, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_openat64(dirfd, path, flags, m);
}

/* What _FORTIFY_SOURCE builds call for open without a mode. */
int __open_2(const char *path, int flags)
{
	REAL(int, __open_2, const char *, int);
	int e = at_fault(OP_OPEN, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real___open_2(path, flags);
}

int __open64_2(const char *path, int flags)
{
	REAL(int, __open64_2, const char *, int);
	int e = at_fault(OP_OPEN, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real___open64_2(path, flags);
}

int __openat_2(int dirfd, const char *path, int flags)
{
	REAL(int, __openat_2, int, const char *, int);
	int e = at_fault(OP_OPEN, dirfd, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real___openat_2(dirfd, path, flags);
}

int creat(const char *path, mode_t mode)
{
	REAL(int, creat, const char *, mode_t);
	int e = at_fault(OP_OPEN, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_creat(path, mode);
}

int creat64(const char *path, mode_t mode)
{
	REAL(int, creat64, const char *, mode_t);
	int e = at_fault(OP_OPEN, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_creat64(path, mode);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(ssize_t, write, int, const void *, size_t);
	int e = fd_fault(OP_WRITE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
	int e = fd_fault(OP_PWRITE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	REAL(ssize_t, pwrite64, int, const void *, size_t, off64_t);
	int e = fd_fault(OP_PWRITE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_pwrite64(fd, buf, n, off);
}

int fsync(int fd)
{
	REAL(int, fsync, int);
	int e = fd_fault(OP_FSYNC, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(int, fdatasync, int);
	int e = fd_fault(OP_FDATASYNC, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_fdatasync(fd);
}

int rename(const char *from, const char *to)
{
	REAL(int, rename, const char *, const char *);
	int e = at_fault(OP_RENAME, AT_FDCWD, from, AT_FDCWD, to);
	if (e)
		FAIL_WITH(e, -1);
	return real_rename(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to)
{
	REAL(int, renameat, int, const char *, int, const char *);
	int e = at_fault(OP_RENAME, fromfd, from, tofd, to);
	if (e)
		FAIL_WITH(e, -1);
	return real_renameat(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
	REAL(int, renameat2, int, const char *, int, const char *, unsigned);
	int e = at_fault(OP_RENAME, fromfd, from, tofd, to);
	if (e)
		FAIL_WITH(e, -1);
	return real_renameat2(fromfd, from, tofd, to, flags);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	REAL(int, fallocate, int, int, off_t, off_t);
	int e = fd_fault(OP_FALLOCATE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_fallocate(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	REAL(int, fallocate64, int, int, off64_t, off64_t);
	int e = fd_fault(OP_FALLOCATE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_fallocate64(fd, mode, off, len);
}

/* posix_fallocate returns the error number instead of setting errno. */
int posix_fallocate(int fd, off_t off, off_t len)
{
	REAL(int, posix_fallocate, int, off_t, off_t);
	int e = fd_fault(OP_FALLOCATE, fd);
	return e ? e : real_posix_fallocate(fd, off, len);
}

int posix_fallocate64(int fd, off64_t off, off64_t len)
{
	REAL(int, posix_fallocate64, int, off64_t, off64_t);
	int e = fd_fault(OP_FALLOCATE, fd);
	return e ? e : real_posix_fallocate64(fd, off, len);
}

int ftruncate(int fd, off_t len)
{
	REAL(int, ftruncate, int, off_t);
	int e = fd_fault(OP_FTRUNCATE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_ftruncate(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	REAL(int, ftruncate64, int, off64_t);
	int e = fd_fault(OP_FTRUNCATE, fd);
	if (e)
		FAIL_WITH(e, -1);
	return real_ftruncate64(fd, len);
}

int mkdir(const char *path, mode_t mode)
{
	REAL(int, mkdir, const char *, mode_t);
	int e = at_fault(OP_MKDIR, AT_FDCWD, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_mkdir(path, mode);
}

int mkdirat(int dirfd, const char *path, mode_t mode)
{
	REAL(int, mkdirat, int, const char *, mode_t);
	int e = at_fault(OP_MKDIR, dirfd, path, 0, NULL);
	if (e)
		FAIL_WITH(e, -1);
	return real_mkdirat(dirfd, path, mode);
}
