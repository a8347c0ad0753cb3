/*
 * models: the performance model store (models.h).
 */
#include "plan/models.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/opencl/opencl_util.h" /* rc_fnv1a, rc_write_file_atomic: no OpenCL calls */

static void sanitize(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '-' || *s == '_' || *s == ':' || *s == '+'))
			*s = '_';
}

static int device_dir(const char *model_dir, const char *device_id, char *buf, size_t len)
{
	char s[128];
	snprintf(s, sizeof s, "%.100s", device_id);
	sanitize(s);
	unsigned long long h = rc_fnv1a(RC_FNV_INIT, device_id, strlen(device_id));
	return snprintf(buf, len, "%s/%s-%08llx", model_dir, s, h & 0xffffffffULL) >= (int)len ? -1 : 0;
}

static int model_path(const char *model_dir, const char *device_id, const char *shape,
		      char *buf, size_t len, int make_dirs)
{
	char dir[2048];
	if (device_dir(model_dir, device_id, dir, sizeof dir))
		return -1;
	if (make_dirs) {
		mkdir(model_dir, 0755);
		mkdir(dir, 0755);
	}
	char sh[64];
	snprintf(sh, sizeof sh, "%s", shape);
	sanitize(sh);
	return snprintf(buf, len, "%s/%s.model", dir, sh) >= (int)len ? -1 : 0;
}

struct samples {
	char shape[64];
	int n[RC_TASK_COUNT];
	double w[RC_TASK_COUNT][RC_MODEL_MAX_SAMPLES];
	double t[RC_TASK_COUNT][RC_MODEL_MAX_SAMPLES];
	long long updated[RC_TASK_COUNT];
};

static void read_samples(const char *path, struct samples *s)
{
	memset(s, 0, sizeof *s);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		int task;
		double w, t;
		long long u;
		if (sscanf(line, "sample %d %lf %lf", &task, &w, &t) == 3 && task >= 0 && task < RC_TASK_COUNT &&
		    s->n[task] < RC_MODEL_MAX_SAMPLES && isfinite(w) && isfinite(t) && w > 0 && t >= 0) {
			s->w[task][s->n[task]] = w;
			s->t[task][s->n[task]++] = t;
		} else if (sscanf(line, "updated %d %lld", &task, &u) == 2 && task >= 0 && task < RC_TASK_COUNT) {
			s->updated[task] = u;
		} else if (!strncmp(line, "shape ", 6)) {
			snprintf(s->shape, sizeof s->shape, "%.63s", line + 6);
			s->shape[strcspn(s->shape, "\n")] = 0;
		}
	}
	/* files written before "updated" lines: the file's time */
	struct stat sb;
	for (int k = 0; k < RC_TASK_COUNT; k++)
		if (s->n[k] && !s->updated[k] && fstat(fileno(f), &sb) == 0)
			s->updated[k] = (long long)sb.st_mtime;
	fclose(f);
}

static void fit_samples(const struct samples *s, rc_model out[RC_TASK_COUNT])
{
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		out[t] = (rc_model){ .valid = 0 };
		if (s->n[t] >= 2 && rc_model_fit(s->w[t], s->t[t], s->n[t], 0, &out[t], NULL))
			out[t] = (rc_model){ .valid = 0 };
	}
}

int rc_models_load(const char *model_dir, const char *device_id, const char *shape,
		   rc_model out[RC_TASK_COUNT], rc_err *err)
{
	for (int t = 0; t < RC_TASK_COUNT; t++)
		out[t] = (rc_model){ .valid = 0 };
	if (!model_dir || !model_dir[0])
		return 0;
	char path[4096];
	if (model_path(model_dir, device_id, shape, path, sizeof path, 0))
		return rc_fail(err, RC_EINVAL, "", "model directory path too long: %s", model_dir);
	struct samples s;
	read_samples(path, &s);
	fit_samples(&s, out);
	return 0;
}

static void merge(struct samples *s, rc_task task, const double *w, const double *t, int n, int replace)
{
	if (replace)
		s->n[task] = 0;
	for (int i = 0; i < n; i++) {
		if (!(w[i] > 0 && isfinite(w[i]) && isfinite(t[i]) && t[i] >= 0))
			continue;
		int j;
		for (j = 0; j < s->n[task] && s->w[task][j] != w[i]; j++)
			;
		if (j < s->n[task]) {
			/* same workload again: follow the device, half old, half new */
			s->t[task][j] = replace ? t[i] : 0.5 * (s->t[task][j] + t[i]);
		} else if (s->n[task] < RC_MODEL_MAX_SAMPLES) {
			s->w[task][s->n[task]] = w[i];
			s->t[task][s->n[task]++] = t[i];
		} else {
			/* full: the new sample takes the oldest slot */
			memmove(s->w[task], s->w[task] + 1, (RC_MODEL_MAX_SAMPLES - 1) * sizeof(double));
			memmove(s->t[task], s->t[task] + 1, (RC_MODEL_MAX_SAMPLES - 1) * sizeof(double));
			s->w[task][RC_MODEL_MAX_SAMPLES - 1] = w[i];
			s->t[task][RC_MODEL_MAX_SAMPLES - 1] = t[i];
		}
	}
}

static int write_samples(const char *path, const char *device_id, const char *shape, const struct samples *s,
			 rc_err *err)
{
	size_t cap = 512 + (size_t)RC_TASK_COUNT * RC_MODEL_MAX_SAMPLES * 64;
	char *buf = malloc(cap);
	if (!buf)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a model file");
	size_t len = (size_t)snprintf(buf, cap, "device %s\nshape %s\n", device_id, shape);
	for (int k = 0; k < RC_TASK_COUNT; k++) {
		if (s->updated[k])
			len += (size_t)snprintf(buf + len, cap - len, "updated %d %lld\n", k, s->updated[k]);
		for (int i = 0; i < s->n[k]; i++)
			len += (size_t)snprintf(buf + len, cap - len, "sample %d %.17g %.17g\n", k, s->w[k][i],
						s->t[k][i]);
	}
	int rc = rc_write_file_atomic(path, buf, len);
	free(buf);
	if (rc)
		return rc_fail(err, RC_EIO, "", "cannot write the model file %s: %s", path, strerror(errno));
	return 0;
}

int rc_models_add(const char *model_dir, const char *device_id, const char *shape,
		  rc_task task, const double *w, const double *t, int n, int replace,
		  rc_model *ret, rc_err *err)
{
	if ((int)task < 0 || task >= RC_TASK_COUNT)
		return rc_fail(err, RC_EINVAL, "", "unknown task %d for a performance model", (int)task);
	char path[4096];
	struct samples s;
	memset(&s, 0, sizeof s);
	int store = model_dir && model_dir[0];
	if (store) {
		if (model_path(model_dir, device_id, shape, path, sizeof path, 1))
			return rc_fail(err, RC_EINVAL, "", "model directory path too long: %s", model_dir);
		read_samples(path, &s);
	}
	merge(&s, task, w, t, n, replace);
	s.updated[task] = (long long)time(NULL);
	rc_model m[RC_TASK_COUNT];
	fit_samples(&s, m);
	if (store) {
		int rc = write_samples(path, device_id, shape, &s, err);
		if (rc)
			return rc;
	}
	if (ret)
		*ret = m[task];
	return 0;
}

static int by_shape(const void *a, const void *b)
{
	return strcmp(((const rc_device_model *)a)->shape, ((const rc_device_model *)b)->shape);
}

int rc_models_list(const char *model_dir, const char *device_id, rc_device_model *out, int max,
		   int *n, rc_err *err)
{
	*n = 0;
	if (!model_dir || !model_dir[0])
		return 0;
	char dir[2048];
	if (device_dir(model_dir, device_id, dir, sizeof dir))
		return rc_fail(err, RC_EINVAL, "", "model directory path too long: %s", model_dir);
	DIR *dp = opendir(dir);
	if (!dp)
		return 0;
	struct dirent *de;
	while ((de = readdir(dp)) && *n < max) {
		size_t len = strlen(de->d_name);
		if (len < 7 || strcmp(de->d_name + len - 6, ".model"))
			continue;
		char path[4096];
		if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
			continue;
		struct samples s;
		read_samples(path, &s);
		rc_device_model *m = &out[(*n)++];
		memset(m, 0, sizeof *m);
		if (s.shape[0])
			snprintf(m->shape, sizeof m->shape, "%s", s.shape);
		else
			snprintf(m->shape, sizeof m->shape, "%.*s", (int)(len - 6), de->d_name);
		fit_samples(&s, m->model);
		for (int t = 0; t < RC_TASK_COUNT; t++) {
			m->samples[t] = s.n[t];
			m->updated[t] = s.updated[t];
		}
	}
	closedir(dp);
	qsort(out, (size_t)*n, sizeof *out, by_shape);
	return 0;
}
