/* audit: append-only request log (audit.h). */
#include "base/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "util/rc_error.h"

struct audit { int fd; };

int audit_open(const char *path, audit **ret)
{
	audit *a = calloc(1, sizeof *a);
	if (!a)
		return RC_ENOMEM;
	a->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (a->fd < 0) {
		free(a);
		return RC_EIO;
	}
	*ret = a;
	return 0;
}

void audit_close(audit *a)
{
	if (!a)
		return;
	close(a->fd);
	free(a);
}

/* Writes one line of text (the time stamp first, fields after); a line
 * longer than the buffer is cut and still ends in a newline. */
static void audit_write(audit *a, const char *fields)
{
	char ts[32], line[1400];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	int n = snprintf(line, sizeof line, "%s %s\n", ts, fields);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line) {
		n = sizeof line - 1;
		line[n - 1] = '\n';
	}
	if (write(a->fd, line, (size_t)n) != n)
		rlog(LOG_P_WARNING, "audit_write_failed", "error=\"%s\"", errno ? "write" : "short");
}

void audit_log(audit *a, const char *client, const char *who, const char *method,
	       const char *path, unsigned status)
{
	if (!a)
		return;
	char f[1400];
	snprintf(f, sizeof f, "client=%s token=%s method=%s path=\"%s\" status=%u", client ? client : "-",
		 who ? who : "-", rlog_q(method), rlog_q(path), status);
	audit_write(a, f);
}

void audit_phi(audit *a, const char *client, const char *who, const char *method, const char *path,
	       const char *jobs)
{
	if (!a)
		return;
	char f[1400];
	snprintf(f, sizeof f, "client=%s token=%s method=%s path=\"%s\" phi_jobs=%.1000s", client ? client : "-",
		 who ? who : "-", rlog_q(method), rlog_q(path), jobs);
	audit_write(a, f);
}
