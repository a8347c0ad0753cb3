/*
 * Tests of server/base/log.c: rlog writes one line per event, and rlog_q makes
 * any text safe inside a quoted value, so that text from outside (a label,
 * an error message echoing a request) can neither close its quotes to add
 * fields nor start a line of its own.  The line is read back from stderr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"

/* rlog's output for one call, read back through a temporary file. */
static void capture(const char *hostile, char *out, size_t n)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fileno(f), STDERR_FILENO), STDERR_FILENO);
	rlog(LOG_P_INFO, "test", "id=1 error=\"%s\" after=2", rlog_q(hostile));
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	rewind(f);
	size_t got = fread(out, 1, n - 1, f);
	out[got] = '\0';
	fclose(f);
}

static int unescaped_quotes(const char *s)
{
	int n = 0;
	for (size_t i = 0; s[i]; i++)
		if (s[i] == '"' && (i == 0 || s[i - 1] != '\\'))
			n++;
	return n;
}

static void quotes_and_newlines_cannot_forge(void **state)
{
	(void)state;
	char line[4096];
	capture("x\" token=admin\n<2>event=forged id=1", line, sizeof line);
	/* one line, ending in the caller's own field */
	assert_non_null(strstr(line, "after=2\n"));
	assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1);
	/* the value's own quote is escaped: only the caller's two are bare */
	assert_int_equal(unescaped_quotes(line), 2);
	assert_non_null(strstr(line, "error=\"x\\\" token=admin\\x0a<2>event=forged id=1\""));
}

static void backslash_before_quote_stays_escaped(void **state)
{
	(void)state;
	char line[4096];
	/* a trailing backslash must not escape the closing quote */
	capture("a\\\" b=\\", line, sizeof line);
	assert_non_null(strstr(line, "error=\"a\\\\\\\" b=\\\\\" after=2"));
}

static void control_bytes_and_length(void **state)
{
	(void)state;
	assert_string_equal(rlog_q("\r\t\x7f"), "\\x0d\\x09\\x7f");
	assert_string_equal(rlog_q(NULL), "");
	char big[2000];
	memset(big, '"', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	const char *q = rlog_q(big);
	assert_int_equal(strlen(q), 800); /* 400 bytes kept, each escaped */
	/* the ring: four results stay valid together */
	const char *a = rlog_q("one"), *b = rlog_q("two"), *c = rlog_q("three"), *d = rlog_q("four");
	assert_string_equal(a, "one");
	assert_string_equal(b, "two");
	assert_string_equal(c, "three");
	assert_string_equal(d, "four");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(quotes_and_newlines_cannot_forge),
		cmocka_unit_test(backslash_before_quote_stays_escaped),
		cmocka_unit_test(control_bytes_and_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
