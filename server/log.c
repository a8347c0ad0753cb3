/* log: journald-friendly lines on stderr (log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void rlog(int prio, const char *event, const char *fmt, ...)
{
	char line[2048];
	int n = snprintf(line, sizeof line, "<%d>event=%s ", prio, event);
	if (n < 0 || (size_t)n >= sizeof line)
		return;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = m < 0 ? (size_t)n : strnlen(line, sizeof line - 1);
	/* One event, one line: a newline inside a message would split it. */
	for (size_t i = (size_t)n; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
