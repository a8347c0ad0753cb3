/*
 * devices: registry, identities, model files, calibration (devices.h).
 */
#include "plan/devices.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/engine_cpu.h"
#include "backend/cuda/engine_cuda.h"
#include "backend/opencl/engine_opencl.h"
#include "algo/names.h"
#include "backend/opencl/opencl_util.h"
#include "util/rc_clock.h"

void rc_devices_cpu(rc_device *d)
{
	memset(d, 0, sizeof *d);
	d->kind = RC_DEVICE_CPU;
	snprintf(d->engine, sizeof d->engine, "%s", rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_CPU));
	snprintf(d->type, sizeof d->type, "cpu");
	rc_cpu_identity(d->device_id, sizeof d->device_id, d->name, sizeof d->name);
	snprintf(d->hw_group, sizeof d->hw_group, "host-cpu");
}

int rc_devices_enumerate(rc_device *out, int max, int *n, rc_err *err)
{
	*n = 0;
	if (max < 1)
		return rc_fail(err, RC_EINVAL, "", "the device list needs room for at least the CPU");
	rc_device *d = &out[(*n)++];
	rc_devices_cpu(d);

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
		snprintf(d->engine, sizeof d->engine, "%s", rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_OPENCL));
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
		snprintf(d->engine, sizeof d->engine, "%s", rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_CUDA));
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
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	const char *type = rc_name_str(RC_NAMES_GEOMETRY, (int)rc_geom_type_of(g));
	snprintf(buf, len, "%s-%dx%dx%d-%dx%d-%s", type ? type : "other", v->nx, v->ny, v->nz,
		 d->nu, d->nv, bp == RC_BP_MATCHED ? "matched" : "voxel");
}

/* --- calibration ------------------------------------------------------------ */

int rc_devices_calibrate(rc_engine *e, rc_fp_kind fp, rc_bp_kind bp, const char *model_dir, const char *device_id,
			 const char *shape, float *vol, float *proj, rc_model out[RC_TASK_COUNT],
			 rc_err *err)
{
	const rc_geom *g = e->geom;
	int nviews = rc_geom_nviews(g);
	/* 1/16 .. 1/2 of the views: past a GPU's flat start on large jobs,
	 * and cheap (about 4 full tasks per device and task with the ranges
	 * below; 1.5 of them before the first is timed is not) */
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
		int rc = task == RC_TASK_FORWARD ? rc_engine_forward(e, fp, vol, proj, 0, (int)w[0], err)
						 : rc_engine_back(e, bp, proj, vol, 0, (int)w[0], err);
		if (rc)
			return rc;
		for (int i = 0; i < nw; i++) {
			/* A view's cost depends on its angle (rays through a cube
			 * are longest at 45 degrees), so one range at the start
			 * of the orbit would fit the cost of its first few
			 * degrees.  Each workload is timed at m ranges spread
			 * over the orbit (their starts fall at different phases
			 * of a 90-degree period) and the mean is kept. */
			int wi = (int)w[i], m = 4 * wi <= nviews ? 4 : 2;
			double sum = 0;
			for (int r = 0; r < m; r++) {
				int first = (int)((long)r * (nviews - wi) / (m - 1));
				double t0 = rc_now_s();
				rc = task == RC_TASK_FORWARD
					     ? rc_engine_forward(e, fp, vol, proj, first, first + wi, err)
					     : rc_engine_back(e, bp, proj, vol, first, first + wi, err);
				if (rc)
					return rc;
				sum += rc_now_s() - t0;
			}
			t[i] = sum / m;
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
		/* a store that cannot be read lists the device without models */
		if (rc_models_list(model_dir, devs[i].device_id, l->models, RC_DEVICES_MAX_MODELS, &l->nmodels, NULL))
			l->nmodels = 0;
	}
	return 0;
}
