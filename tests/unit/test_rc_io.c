/*
 * test_rc_io: whole reads and writes (core/util/rc_io.h) on a temporary
 * file: at offsets and at the file position, a read past the end returns
 * the bytes there are, an error is -1 with errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/rc_io.h"

static void test_round_trip(void **state)
{
	(void)state;
	char path[] = "/tmp/test_rc_io_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	enum { N = 3 << 20 };
	unsigned char *a = malloc(N), *b = malloc(N + 10);
	assert_true(a && b);
	for (size_t i = 0; i < N; i++)
		a[i] = (unsigned char)(i * 131 + 7);
	/* at an offset past the end (a hole before it), then at the position */
	assert_int_equal(rc_io_write_full(fd, a, N, 1000), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(rc_io_write_full(fd, a, 1000, -1), 0);
	assert_int_equal(rc_io_read_full(fd, b, N, 1000), N);
	assert_memory_equal(a, b, N);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(rc_io_read_full(fd, b, 1000, -1), 1000);
	assert_memory_equal(a, b, 1000);
	/* past the end: what there is */
	assert_int_equal(rc_io_read_full(fd, b, N + 10, 1000), N);
	assert_int_equal(rc_io_read_full(fd, b, 10, 1000 + N), 0);
	close(fd);
	/* errors: -1 with errno */
	errno = 0;
	assert_int_equal(rc_io_read_full(fd, b, 10, 0), -1);
	assert_int_equal(errno, EBADF);
	int ro = open("/dev/null", O_RDONLY);
	assert_true(ro >= 0);
	assert_int_equal(rc_io_write_full(ro, a, 10, -1), -1);
	assert_int_equal(errno, EBADF);
	close(ro);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_round_trip) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
