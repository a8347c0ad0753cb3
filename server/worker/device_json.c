/*
 * device_json: a device's fitted models as JSON (device_json.h).
 */
#include "device_json.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include "plan/devices.h"

static json_t *ms_or_null(int valid, double seconds)
{
	return valid && isfinite(seconds) ? json_real(1e3 * seconds) : json_null();
}

static json_t *utc_or_null(long long t)
{
	if (t <= 0)
		return json_null();
	time_t s = (time_t)t;
	struct tm tm;
	char buf[32];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(buf);
}

json_t *device_models_json(const char *model_dir, const char *device_id)
{
	static const char *const tasks[RC_TASK_COUNT] = { [RC_TASK_FORWARD] = "forward", [RC_TASK_BACK] = "back" };
	json_t *out = json_array();
	rc_device_model m[RC_DEVICES_MAX_MODELS];
	int n = 0;
	if (!model_dir || rc_models_list(model_dir, device_id, m, RC_DEVICES_MAX_MODELS, &n, NULL))
		return out;
	for (int i = 0; i < n; i++)
		for (int t = 0; t < RC_TASK_COUNT; t++) {
			if (!m[i].samples[t])
				continue;
			const rc_model *f = &m[i].model[t];
			json_array_append_new(out, json_pack("{sssssososisisiso}", "shape", m[i].shape, "task", tasks[t],
							     "a", ms_or_null(f->valid, f->a), "b", ms_or_null(f->valid, f->b),
							     "samples", m[i].samples[t], "fitted_samples",
							     f->valid ? f->npoints : 0, "flat_start", f->valid ? f->dropped : 0,
							     "updated", utc_or_null(m[i].updated[t])));
		}
	return out;
}
