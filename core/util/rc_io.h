/*
 * rc_io: whole reads and writes of a file descriptor, the loop every
 * caller of read/write/pread/pwrite needs (short transfers, EINTR).
 */
#ifndef RC_IO_H
#define RC_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Reads n bytes into p at off (pread), or at the file position when
 * off < 0 (read).  Returns n, fewer at the end of the file (the bytes
 * read), or -1 with errno set. */
ssize_t rc_io_read_full(int fd, void *p, size_t n, off_t off);

/* Writes all n bytes of p at off (pwrite), or at the file position when
 * off < 0 (write): 0, or -1 with errno set (ENOSPC where a write took
 * nothing). */
int rc_io_write_full(int fd, const void *p, size_t n, off_t off);

#endif
