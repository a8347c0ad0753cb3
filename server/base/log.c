/* log: journald-friendly lines on stderr (log.h). */
#include "base/log.h"

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

#define RLOG_Q_RING 4
#define RLOG_Q_MAX 400

const char *rlog_q(const char *s)
{
	static _Thread_local char ring[RLOG_Q_RING][RLOG_Q_MAX * 4 + 8];
	static _Thread_local unsigned next;
	char *out = ring[next++ % RLOG_Q_RING];
	size_t o = 0;
	for (size_t i = 0; s && s[i] && i < RLOG_Q_MAX; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, 5, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
	return out;
}
