/*
 * app_ts: the API's date-time (app.h), under the Job resource (app_job.c,
 * app_push.c) and /v1/nodes.
 */
#include <jansson.h>
#include <stdio.h>
#include <time.h>

#include "jobs/app.h"

json_t *app_ts_json(double t)
{
	if (t <= 0)
		return json_null();
	char buf[40];
	time_t s = (time_t)t;
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof buf - n, ".%03dZ", (int)((t - (double)s) * 1000.0) % 1000);
	return json_string(buf);
}
