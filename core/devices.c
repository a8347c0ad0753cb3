/*
 * devices: registry, identities, model files, calibration (devices.h).
 */
#include "devices.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_cpu.h"
#include "engine_cuda.h"
#include "engine_opencl.h"
#include "opencl_util.h"

static void sanitize(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '-' || *s == '_' || *s == ':' || *s == '+'))
			*s = '_';
}

static void cpu_identity(rc_device *d)
{
	char model[96] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (f) {
		char line[256];
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "model name", 10)) {
				char *c = strchr(line, ':');
				if (c) {
					c++;
					while (*c == ' ')
						c++;
					c[strcspn(c, "\n")] = 0;
					snprintf(model, sizeof model, "%s", c);
				}
				break;
			}
		fclose(f);
	}
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(d->name, sizeof d->name, "%s (%ld cores)", model, ncpu);
	sanitize(model);
	snprintf(d->device_id, sizeof d->device_id, "cpu:%.96s:%ldc", model, ncpu);
	snprintf(d->hw_group, sizeof d->hw_group, "host-cpu");
}

int rc_devices_enumerate(rc_device *out, int max, int *n, rc_err *err)
{
	*n = 0;
	if (max < 1)
		return rc_fail(err, RC_EINVAL, "", "the device list needs room for at least the CPU");
	rc_device *d = &out[(*n)++];
	memset(d, 0, sizeof *d);
	d->kind = RC_DEVICE_CPU;
	snprintf(d->engine, sizeof d->engine, "cpu");
	snprintf(d->type, sizeof d->type, "cpu");
	cpu_identity(d);

	rc_opencl_device od[RC_OPENCL_MAX_DEVICES];
	int no = 0;
	if (rc_opencl_devices(od, RC_OPENCL_MAX_DEVICES, &no, NULL))
		no = 0; /* a broken ICD loader only hides OpenCL devices */
	for (int i = 0; i < no && *n < max; i++) {
		d = &out[(*n)++];
		memset(d, 0, sizeof *d);
		d->kind = RC_DEVICE_OPENCL;
		d->platform = od[i].platform;
		d->device = od[i].device;
		snprintf(d->engine, sizeof d->engine, "opencl");
		snprintf(d->type, sizeof d->type, "%s", od[i].is_cpu ? "cpu" : od[i].is_gpu ? "gpu" : "other");
		snprintf(d->name, sizeof d->name, "%s", od[i].name);
		snprintf(d->device_id, sizeof d->device_id, "%s", od[i].device_id);
		snprintf(d->hw_group, sizeof d->hw_group, "%s", od[i].hw_group);
	}
	int nc = rc_engine_cuda_count();
	for (int i = 0; i < nc && *n < max; i++) {
		rc_cuda_device_info ci;
		if (rc_engine_cuda_info(i, &ci, NULL))
			continue;
		d = &out[(*n)++];
		memset(d, 0, sizeof *d);
		d->kind = RC_DEVICE_CUDA;
		d->ordinal = i;
		snprintf(d->engine, sizeof d->engine, "cuda");
		snprintf(d->type, sizeof d->type, "gpu");
		snprintf(d->name, sizeof d->name, "%s", ci.name);
		snprintf(d->device_id, sizeof d->device_id, "%s", ci.device_id);
		snprintf(d->hw_group, sizeof d->hw_group, "%.63s", ci.device_id);
	}
	(void)err;
	return 0;
}

int rc_device_open(const rc_device *d, const rc_geom *g, const rc_device_open_opts *o,
		   rc_engine **ret, rc_err *err)
{
	rc_device_open_opts def = { 0, NULL };
	if (!o)
		o = &def;
	rc_engine *e = NULL;
	int rc;
	switch (d->kind) {
	case RC_DEVICE_CPU:
		rc = rc_engine_cpu_new(g, o->threads, &e, err);
		break;
	case RC_DEVICE_OPENCL: {
		rc_opencl_options oo;
		rc_opencl_options_default(&oo);
		oo.platform = d->platform;
		oo.device = d->device;
		oo.cache_dir = o->cache_dir;
		rc = rc_engine_opencl_new(g, &oo, &e, err);
		break;
	}
	case RC_DEVICE_CUDA:
		rc = rc_engine_cuda_new(g, d->ordinal, &e, err);
		break;
	default:
		rc = rc_fail(err, RC_EINTERNAL, "", "unknown device kind %d", (int)d->kind);
	}
	if (rc)
		return rc;
	*ret = e;
	return 0;
}

void rc_shape_key(const rc_geom *g, rc_bp_kind bp, char *buf, size_t len)
{
	static const char *const types[] = { "cone", "matrices", "fan", "parallel" };
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	int t = (int)rc_geom_type_of(g);
	snprintf(buf, len, "%s-%dx%dx%d-%dx%d-%s", t >= 0 && t < 4 ? types[t] : "other", v->nx, v->ny, v->nz,
		 d->nu, d->nv, bp == RC_BP_MATCHED ? "matched" : "voxel");
}

/* --- model files --------------------------------------------------------- */

static int device_dir(const char *model_dir, const char *device_id, char *buf, size_t len)
{
	char s[128];
	snprintf(s, sizeof s, "%.100s", device_id);
	sanitize(s);
	/* the hash keeps ids that sanitise alike apart */
	unsigned long long h = rc_fnv1a(RC_FNV_INIT, device_id, strlen(device_id));
	return snprintf(buf, len, "%s/%s-%08llx", model_dir, s, h & 0xffffffffULL) >= (int)len ? -1 : 0;
}

struct samples {
	int n[RC_TASK_COUNT];
	double w[RC_TASK_COUNT][RC_MODEL_MAX_SAMPLES];
	double t[RC_TASK_COUNT][RC_MODEL_MAX_SAMPLES];
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
		if (sscanf(line, "sample %d %lf %lf", &task, &w, &t) == 3 && task >= 0 && task < RC_TASK_COUNT &&
		    s->n[task] < RC_MODEL_MAX_SAMPLES && isfinite(w) && isfinite(t) && w > 0 && t >= 0) {
			s->w[task][s->n[task]] = w;
			s->t[task][s->n[task]++] = t;
		}
	}
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

int rc_models_add(const char *model_dir, const char *device_id, const char *shape,
		  rc_task task, const double *w, const double *t, int n, int replace,
		  rc_model *ret, rc_err *err)
{
	char path[4096];
	struct samples s;
	memset(&s, 0, sizeof s);
	int store = model_dir && model_dir[0];
	if (store) {
		if (model_path(model_dir, device_id, shape, path, sizeof path, 1))
			return rc_fail(err, RC_EINVAL, "", "model directory path too long: %s", model_dir);
		read_samples(path, &s);
	}
	if (replace)
		s.n[task] = 0;
	for (int i = 0; i < n; i++) {
		if (!(w[i] > 0 && isfinite(t[i]) && t[i] >= 0))
			continue;
		int j;
		for (j = 0; j < s.n[task] && s.w[task][j] != w[i]; j++)
			;
		if (j < s.n[task]) {
			/* same workload again: follow the device, half old, half new */
			s.t[task][j] = replace ? t[i] : 0.5 * (s.t[task][j] + t[i]);
		} else if (s.n[task] < RC_MODEL_MAX_SAMPLES) {
			s.w[task][s.n[task]] = w[i];
			s.t[task][s.n[task]++] = t[i];
		} else {
			/* full: the new sample takes the oldest slot */
			memmove(s.w[task], s.w[task] + 1, (RC_MODEL_MAX_SAMPLES - 1) * sizeof(double));
			memmove(s.t[task], s.t[task] + 1, (RC_MODEL_MAX_SAMPLES - 1) * sizeof(double));
			s.w[task][RC_MODEL_MAX_SAMPLES - 1] = w[i];
			s.t[task][RC_MODEL_MAX_SAMPLES - 1] = t[i];
		}
	}
	rc_model m[RC_TASK_COUNT];
	fit_samples(&s, m);
	if (store) {
		size_t cap = 256 + (size_t)RC_TASK_COUNT * RC_MODEL_MAX_SAMPLES * 64;
		char *buf = malloc(cap);
		if (!buf)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for a model file");
		size_t len = (size_t)snprintf(buf, cap, "device %s\nshape %s\n", device_id, shape);
		for (int k = 0; k < RC_TASK_COUNT; k++)
			for (int i = 0; i < s.n[k]; i++)
				len += (size_t)snprintf(buf + len, cap - len, "sample %d %.17g %.17g\n", k,
							s.w[k][i], s.t[k][i]);
		int w_rc = rc_write_file_atomic(path, buf, len);
		free(buf);
		if (w_rc)
			return rc_fail(err, RC_EIO, "", "cannot write the model file %s: %s", path, strerror(errno));
	}
	if (ret)
		*ret = m[task];
	return 0;
}

/* --- calibration ------------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rc_devices_calibrate(rc_engine *e, rc_bp_kind bp, const char *model_dir, const char *device_id,
			 const char *shape, float *vol, float *proj, rc_model out[RC_TASK_COUNT],
			 rc_err *err)
{
	const rc_geom *g = e->geom;
	int nviews = rc_geom_nviews(g);
	/* 1/16 .. 1/2 of the views: past a GPU's flat start on large jobs,
	 * and cheap (1.3 times one full task per device and task) */
	static const double frac[] = { 1.0 / 16, 1.0 / 8, 3.0 / 16, 1.0 / 4, 3.0 / 8, 1.0 / 2 };
	enum { NW = sizeof frac / sizeof frac[0] };
	double w[NW], t[NW];
	int nw = 0;
	for (int i = 0; i < NW; i++) {
		int v = (int)lround(frac[i] * nviews);
		if (v < i + 1)
			v = i + 1;
		if (v > nviews)
			break;
		if (nw && v <= w[nw - 1])
			v = (int)w[nw - 1] + 1;
		if (v > nviews)
			break;
		w[nw++] = v;
	}
	size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	for (size_t i = 0; i < nvox; i++)
		vol[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
	for (size_t i = 0; i < np; i++)
		proj[i] = (float)((i * 40503u) % 1000) * 1e-3f;
	for (int task = 0; task < RC_TASK_COUNT; task++) {
		int rc = task == RC_TASK_FORWARD ? rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, 0, (int)w[0], err)
						 : rc_engine_back(e, bp, proj, vol, 0, (int)w[0], err);
		if (rc)
			return rc;
		for (int i = 0; i < nw; i++) {
			t[i] = INFINITY;
			for (int rep = 0; rep < 2; rep++) { /* the faster of two: less noise from other load */
				double t0 = now_s();
				rc = task == RC_TASK_FORWARD ? rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, 0, (int)w[i], err)
							     : rc_engine_back(e, bp, proj, vol, 0, (int)w[i], err);
				if (rc)
					return rc;
				t[i] = fmin(t[i], now_s() - t0);
			}
		}
		rc_model m;
		rc = rc_model_fit(w, t, nw, nw >= RC_PLAN_MIN_WORKLOADS, &m, err);
		if (rc)
			return rc;
		if (model_dir && model_dir[0]) {
			rc = rc_models_add(model_dir, device_id, shape, (rc_task)task, w, t, nw, 1, NULL, err);
			if (rc)
				return rc;
		}
		out[task] = m;
	}
	return 0;
}

/* --- listing ------------------------------------------------------------------ */

int rc_devices_list(const char *model_dir, rc_device_listing *out, int max, int *n, rc_err *err)
{
	rc_device devs[RC_DEVICES_MAX];
	int nd = 0;
	int rc = rc_devices_enumerate(devs, RC_DEVICES_MAX, &nd, err);
	if (rc)
		return rc;
	*n = 0;
	for (int i = 0; i < nd && *n < max; i++) {
		rc_device_listing *l = &out[(*n)++];
		memset(l, 0, sizeof *l);
		l->dev = devs[i];
		if (!model_dir || !model_dir[0])
			continue;
		char dir[2048];
		if (device_dir(model_dir, devs[i].device_id, dir, sizeof dir))
			continue;
		DIR *dp = opendir(dir);
		if (!dp)
			continue;
		struct dirent *de;
		while ((de = readdir(dp)) && l->nmodels < RC_DEVICES_MAX_MODELS) {
			size_t len = strlen(de->d_name);
			if (len < 7 || strcmp(de->d_name + len - 6, ".model"))
				continue;
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			rc_device_model *m = &l->models[l->nmodels++];
			snprintf(m->shape, sizeof m->shape, "%.*s", (int)(len - 6), de->d_name);
			struct samples s;
			read_samples(path, &s);
			fit_samples(&s, m->model);
			for (int t = 0; t < RC_TASK_COUNT; t++)
				m->samples[t] = s.n[t];
		}
		closedir(dp);
	}
	return 0;
}
