/* bytebuf: a growable byte buffer (bytebuf.h). */
#include "base/bytebuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int bytebuf_reserve(bytebuf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 1 << 16;
	while (cap < b->len + more)
		cap *= 2;
	char *np = realloc(b->p, cap);
	if (!np)
		return -1;
	b->p = np;
	b->cap = cap;
	return 0;
}

int bytebuf_add(bytebuf *b, const void *p, size_t n)
{
	if (bytebuf_reserve(b, n))
		return -1;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

int bytebuf_add_file(bytebuf *b, const char *path, time_t *mtime)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	int rc = fd < 0 || fstat(fd, &sb) ? -1 : 0;
	size_t want = rc ? 0 : (size_t)sb.st_size, done = 0;
	if (!rc)
		rc = bytebuf_reserve(b, want);
	while (!rc && done < want) {
		ssize_t r = read(fd, b->p + b->len + done, want - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			rc = -1;
		else
			done += (size_t)r;
	}
	if (fd >= 0)
		close(fd);
	if (rc)
		return rc;
	b->len += want;
	if (mtime)
		*mtime = sb.st_mtime;
	return 0;
}

void bytebuf_free(bytebuf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}
