/*
 * bytebuf: a growable byte buffer, and a whole file appended to one.  What
 * the DICOM download (http_dicom.c) and the STOW-RS sender (push_send.c)
 * assemble one instance at a time.
 */
#ifndef RC_BYTEBUF_H
#define RC_BYTEBUF_H

#include <stddef.h>
#include <time.h>

typedef struct bytebuf {
	char *p;
	size_t len, cap;
} bytebuf;

/* Room for more bytes after len.  0, or -1 when out of memory. */
int bytebuf_reserve(bytebuf *b, size_t more);
/* Appends n bytes.  0, or -1 when out of memory. */
int bytebuf_add(bytebuf *b, const void *p, size_t n);
/* Appends the whole file at path; *mtime (may be NULL) gets its modification
 * time.  0, or -1 (cannot read it, or out of memory: b keeps what it had). */
int bytebuf_add_file(bytebuf *b, const char *path, time_t *mtime);
void bytebuf_free(bytebuf *b);

#endif
