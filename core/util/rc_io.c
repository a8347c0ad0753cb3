/* rc_io: whole reads and writes (rc_io.h). */
#include "util/rc_io.h"

#include <errno.h>
#include <unistd.h>

/* at most 1 GiB a call: some kernels cap a transfer below SSIZE_MAX */
#define RC_IO_STEP ((size_t)1 << 30)

ssize_t rc_io_read_full(int fd, void *p, size_t n, off_t off)
{
	char *c = p;
	size_t got = 0;
	while (got < n) {
		size_t step = n - got < RC_IO_STEP ? n - got : RC_IO_STEP;
		ssize_t r = off < 0 ? read(fd, c + got, step) : pread(fd, c + got, step, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int rc_io_write_full(int fd, const void *p, size_t n, off_t off)
{
	const char *c = p;
	size_t done = 0;
	while (done < n) {
		size_t step = n - done < RC_IO_STEP ? n - done : RC_IO_STEP;
		ssize_t w = off < 0 ? write(fd, c + done, step) : pwrite(fd, c + done, step, off + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = ENOSPC;
			return -1;
		}
		done += (size_t)w;
	}
	return 0;
}
