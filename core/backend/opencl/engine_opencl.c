/*
 * engine_opencl: an OpenCL device as an engine (engine_opencl.h).
 *
 * Open: find the device, pick the variant, build (or load) the program from
 * the embedded sources with -DRC_GPU/-DRC_IMAGES, allocate the resident
 * buffers, upload the per-view geometry once.  A call: write its input (the
 * volume, or its views of the stack), launch, read its output.  Back
 * projection launches RC_OCL_BP_CHUNK views at a time, accumulating on the
 * device, so that no launch runs long enough to trip a display watchdog.
 */
#include "backend/opencl/engine_opencl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opencl/engine_opencl_impl.h"
#include "backend/opencl/opencl_splat.h"
#include "backend/splat_dev.h"
#include "backend/opencl/opencl_util.h"
#include "projectors/proj_cpu.h"
#include "rc_opencl_kernels.h"
#include "util/rc_clock.h"

/* Views per back-projection launch: 32 keeps a 512^3 launch on a mid-range
 * GPU well under the 2 s display watchdog (ASTRA/TIGRE launch 32 as well). */
#define RC_OCL_BP_CHUNK 32
#define RC_VIEW_FLOATS 26 /* kernels/opencl/common.cl */

enum { K_BP = 0, K_FP, K_BPM, K_ROT, K_PRJ, K_BPP, K_FPP, K_BPT, K_COUNT };
static const char *const kernel_names[K_COUNT] = { "bp_voxel", "fp_raycast", "bp_matched",   "rotate_view",
						   "project_view", "bp_plane", "fp_plane", "bp_plane_t" };
/* only bp and fp are tuned; bp_matched runs fp's shape with fp's groups;
 * the 2-D kernels run with the runtime's groups */
static const char *const kernel_short[K_COUNT] = { "bp", "fp", "bpm", "rot", "prj", "bpp", "fpp", "bpt" };

typedef struct ocl_engine {
	rc_engine base;
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue q;
	cl_program prog;
	cl_kernel k[K_COUNT];
	cl_mem views;      /* RC_VIEW_FLOATS per view */
	cl_mem vol;        /* volume buffer: bp output, fp input without images */
	cl_mem proj;       /* projection buffer: fp output, bp input without images */
	cl_mem vol_img;    /* images variant: fp input */
	cl_mem proj_img;   /* images variant: bp input */
	cl_mem rot;        /* rotated volume of RC_FP_ROTATE, allocated at first use */
	cl_mem pviews;     /* fan/parallel: RC_PLANE_FLOATS per view (proj_cpu.h's
	                      rc_plane_view, read by bp_plane.cl) */
	cl_mem prays;      /* fan/parallel: the Joseph pair's rays (rc_plane_rays) */
	int plane;         /* fan or parallel: the bp_plane.cl kernels, buffers only */
	int fan;           /* fan: FBP's back projection weighs by 1/w^2 */
	int curved;        /* a curved fan: bp_plane.cl maps to the arc with */
	float cu, sdu;     /* these (proj_cpu.h's rc_plane_arc) */
	rc_ocl_splat *splat; /* the splat pair where the geometry suits it (opencl_splat.h) */
	int rot_nmax;      /* grid points per in-plane axis of rot */
	float rot_h;
	cl_float4 ctr;     /* volume centre (mm) */
	int gpu, images, from_cache;
	int fp64;          /* cl_khr_fp64: reductions of elementwise.cl sum in double */
	int bp_add;        /* the back projection being enqueued adds to its
	                      output (engine.h's back_add): set around it only */
	size_t local[K_COUNT][3]; /* 0s: runtime's choice */
	int nx, ny, nz, nu, nv, nviews;
	cl_int4 n;
	cl_float4 org, sp, lo, hi;
	float step;
	unsigned long long dev_hash;
	char cache_dir[1024];
	char variant[16];
} ocl_engine;

void rc_opencl_options_default(rc_opencl_options *o)
{
	memset(o, 0, sizeof *o);
	o->images = -1;
}

/* --- device listing ------------------------------------------------------ */

static void sanitize(char *s)
{
	for (; *s; s++)
		if (*s == ' ' || *s == '/' || *s == ':')
			*s = *s == ':' ? '.' : '_';
}

static void device_info(cl_platform_id plat, cl_device_id d, int pi, int di, rc_opencl_device *o)
{
	memset(o, 0, sizeof *o);
	o->platform = pi;
	o->device = di;
	rc_cl_device_str(d, CL_DEVICE_NAME, o->name, sizeof o->name);
	rc_cl_device_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof o->vendor);
	rc_cl_device_str(d, CL_DEVICE_VERSION, o->version, sizeof o->version);
	rc_cl_device_str(d, CL_DRIVER_VERSION, o->driver, sizeof o->driver);
	if (clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof o->platform_name, o->platform_name, NULL) != CL_SUCCESS)
		o->platform_name[0] = 0;
	o->platform_name[sizeof o->platform_name - 1] = 0;
	cl_device_type t = 0;
	clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
	o->is_cpu = (t & CL_DEVICE_TYPE_CPU) != 0;
	o->is_gpu = (t & CL_DEVICE_TYPE_GPU) != 0;
	cl_bool img = CL_FALSE;
	clGetDeviceInfo(d, CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL);
	o->images = img == CL_TRUE;
	cl_uint cu = 0;
	clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
	o->compute_units = (int)cu;
	cl_ulong mem = 0;
	clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
	o->global_mem = mem;

	char pn[64], dn[128], dv[64];
	snprintf(pn, sizeof pn, "%s", o->platform_name);
	snprintf(dn, sizeof dn, "%s", o->name);
	snprintf(dv, sizeof dv, "%s", o->driver);
	sanitize(pn);
	sanitize(dn);
	sanitize(dv);
	snprintf(o->device_id, sizeof o->device_id, "opencl:%.30s:%.60s:%.24s", pn, dn, dv);
	/* The cpu engine and a CPU OpenCL device run on the same cores. */
	cl_uint bus = 0, slot = 0;
	unsigned char u[16]; /* CL_UUID_SIZE_KHR */
	if (o->is_cpu)
		snprintf(o->hw_group, sizeof o->hw_group, "host-cpu");
	else if (strstr(o->vendor, "NVIDIA") &&
		 clGetDeviceInfo(d, 0x106A /* CL_DEVICE_UUID_KHR */, sizeof u, u, NULL) == CL_SUCCESS)
		/* the CUDA engine's identity (engine_cuda.h): one GPU, one group */
		snprintf(o->hw_group, sizeof o->hw_group,
			 "cuda:GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
			 u[14], u[15]);
	else if (clGetDeviceInfo(d, 0x4008 /* CL_DEVICE_PCI_BUS_ID_NV */, sizeof bus, &bus, NULL) == CL_SUCCESS &&
		 clGetDeviceInfo(d, 0x4009 /* CL_DEVICE_PCI_SLOT_ID_NV */, sizeof slot, &slot, NULL) == CL_SUCCESS)
		snprintf(o->hw_group, sizeof o->hw_group, "pci:0000:%02x:%02x.0", bus & 0xff, (slot >> 3) & 0x1f);
	else
		snprintf(o->hw_group, sizeof o->hw_group, "opencl:%d.%d", pi, di);
}

static int get_device(int pi, int di, cl_platform_id *rp, cl_device_id *rd, rc_err *err)
{
	cl_uint np = 0;
	cl_int e = clGetPlatformIDs(0, NULL, &np);
	if (e == CL_PLATFORM_NOT_FOUND_KHR || np == 0)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine", "no OpenCL platform is installed");
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clGetPlatformIDs");
	cl_platform_id plats[16];
	if (np > 16)
		np = 16;
	clGetPlatformIDs(np, plats, NULL);
	if (pi < 0 || pi >= (int)np)
		return rc_fail(err, RC_ENOTFOUND, "execution.device", "no OpenCL platform %d (there are %u)", pi, np);
	cl_uint nd = 0;
	cl_device_id devs[RC_OPENCL_MAX_DEVICES];
	if (clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, RC_OPENCL_MAX_DEVICES, devs, &nd) != CL_SUCCESS)
		nd = 0;
	if (di < 0 || di >= (int)nd || di >= RC_OPENCL_MAX_DEVICES)
		return rc_fail(err, RC_ENOTFOUND, "execution.device", "no OpenCL device %d on platform %d", di, pi);
	*rp = plats[pi];
	*rd = devs[di];
	return 0;
}

int rc_opencl_devices(rc_opencl_device *out, int max, int *n, rc_err *err)
{
	*n = 0;
	cl_uint np = 0;
	cl_int e = clGetPlatformIDs(0, NULL, &np);
	if (e == CL_PLATFORM_NOT_FOUND_KHR || np == 0)
		return 0;
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clGetPlatformIDs");
	cl_platform_id plats[16];
	if (np > 16)
		np = 16;
	clGetPlatformIDs(np, plats, NULL);
	for (cl_uint p = 0; p < np; p++) {
		cl_uint nd = 0;
		cl_device_id devs[RC_OPENCL_MAX_DEVICES];
		if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, RC_OPENCL_MAX_DEVICES, devs, &nd) != CL_SUCCESS)
			continue;
		for (cl_uint d = 0; d < nd && d < RC_OPENCL_MAX_DEVICES && *n < max; d++)
			device_info(plats[p], devs[d], (int)p, (int)d, &out[(*n)++]);
	}
	return 0;
}

/* --- work-group size cache ----------------------------------------------- */

static void wg_path(const ocl_engine *x, char *buf, size_t len)
{
	snprintf(buf, len, "%s/wg-%016llx-%s.txt", x->cache_dir, x->dev_hash, x->variant);
}

static void wg_load(ocl_engine *x)
{
	if (!x->cache_dir[0])
		return;
	char path[1200];
	wg_path(x, path, sizeof path);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char name[16];
	size_t l[3];
	while (fscanf(f, "%15s %zu %zu %zu", name, &l[0], &l[1], &l[2]) == 4)
		for (int k = 0; k < K_COUNT; k++)
			if (!strcmp(name, kernel_short[k]))
				memcpy(x->local[k], l, sizeof l);
	fclose(f);
}

static void wg_store(const ocl_engine *x)
{
	if (!x->cache_dir[0])
		return;
	char path[1200], buf[256];
	int len = 0;
	for (int k = 0; k < K_COUNT; k++)
		len += snprintf(buf + len, sizeof buf - (size_t)len, "%s %zu %zu %zu\n", kernel_short[k],
				x->local[k][0], x->local[k][1], x->local[k][2]);
	wg_path(x, path, sizeof path);
	(void)rc_write_file_atomic(path, buf, (size_t)len); /* only a cache */
}

/* --- launches ---------------------------------------------------------------- */

static size_t round_up(size_t v, size_t m) { return m ? (v + m - 1) / m * m : v; }

static int launch(ocl_engine *x, int k, int dims, const size_t *global, const size_t *local_try,
		  rc_err *err)
{
	size_t g[3], l[3];
	int use_local = local_try && local_try[0];
	for (int d = 0; d < dims; d++) {
		l[d] = use_local ? local_try[d] : 0;
		g[d] = use_local ? round_up(global[d], l[d]) : global[d];
	}
	cl_int e = clEnqueueNDRangeKernel(x->q, x->k[k], (cl_uint)dims, NULL, g, use_local ? l : NULL, 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_fail(err, RC_EDEVICE, "", "OpenCL launch of %s failed: %s (%d)", kernel_names[k],
			       rc_cl_strerror(e), (int)e);
	return 0;
}

#define SETARG(kern, i, v) e |= clSetKernelArg(kern, i, sizeof(v), &(v))

/* out views [first, last) = A in; in is the volume image with images, else a buffer */
static int fp_raycast(ocl_engine *x, cl_mem out, cl_mem in, int first, int last, const size_t *local,
		      rc_err *err)
{
	cl_kernel kk = x->k[K_FP];
	cl_int e = 0;
	SETARG(kk, 0, out);
	SETARG(kk, 1, in);
	SETARG(kk, 2, x->views);
	SETARG(kk, 3, first);
	SETARG(kk, 4, x->n);
	SETARG(kk, 5, x->org);
	SETARG(kk, 6, x->sp);
	SETARG(kk, 7, x->lo);
	SETARG(kk, 8, x->hi);
	SETARG(kk, 9, x->step);
	SETARG(kk, 10, x->nu);
	SETARG(kk, 11, x->nv);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (fp_raycast)");
	size_t g[3] = { (size_t)x->nu, (size_t)x->nv, (size_t)(last - first) };
	return launch(x, K_FP, 3, g, local, err);
}

/* out = B_voxel in over views [first, last); in: the projection image with images */
static int bp_voxel(ocl_engine *x, cl_mem out, cl_mem in, int first, int last, const size_t *local,
		    rc_err *err)
{
	cl_kernel kk = x->k[K_BP];
	for (int c = first; c < last; c += RC_OCL_BP_CHUNK) {
		int cl = c + RC_OCL_BP_CHUNK < last ? c + RC_OCL_BP_CHUNK : last;
		int acc = x->bp_add || c > first;
		cl_int e = 0;
		SETARG(kk, 0, out);
		SETARG(kk, 1, in);
		SETARG(kk, 2, x->views);
		SETARG(kk, 3, c);
		SETARG(kk, 4, cl);
		SETARG(kk, 5, acc);
		SETARG(kk, 6, x->n);
		SETARG(kk, 7, x->org);
		SETARG(kk, 8, x->sp);
		SETARG(kk, 9, x->nu);
		SETARG(kk, 10, x->nv);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "clSetKernelArg (bp_voxel)");
		int rc;
		if (x->gpu) {
			size_t g[3] = { (size_t)x->nx, (size_t)x->ny, (size_t)x->nz };
			rc = launch(x, K_BP, 3, g, local, err);
		} else {
			size_t g[2] = { (size_t)x->ny, (size_t)x->nz };
			rc = launch(x, K_BP, 2, g, local, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* out = A^T in over views [first, last) (in and out buffers) */
static int bp_matched(ocl_engine *x, cl_mem out, cl_mem in, int first, int last, const size_t *local,
		      rc_err *err)
{
	float zero = 0.0f;
	cl_int e = x->bp_add ? CL_SUCCESS
			     : clEnqueueFillBuffer(x->q, out, &zero, sizeof zero, 0,
						   (size_t)x->nx * x->ny * x->nz * sizeof(float), 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clEnqueueFillBuffer (volume)");
	cl_kernel kk = x->k[K_BPM];
	for (int c = first; c < last; c += RC_OCL_BP_CHUNK) {
		int cl = c + RC_OCL_BP_CHUNK < last ? c + RC_OCL_BP_CHUNK : last;
		e = 0;
		SETARG(kk, 0, out);
		SETARG(kk, 1, in);
		SETARG(kk, 2, x->views);
		SETARG(kk, 3, c);
		SETARG(kk, 4, x->n);
		SETARG(kk, 5, x->org);
		SETARG(kk, 6, x->sp);
		SETARG(kk, 7, x->lo);
		SETARG(kk, 8, x->hi);
		SETARG(kk, 9, x->step);
		SETARG(kk, 10, x->nu);
		SETARG(kk, 11, x->nv);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "clSetKernelArg (bp_matched)");
		size_t g[3] = { (size_t)x->nu, (size_t)x->nv, (size_t)(cl - c) };
		int rc = launch(x, K_BPM, 3, g, local, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* RC_FP_ROTATE, view by view: the grid sizes of core/proj_rotate.c. */
static int fp_rotate(ocl_engine *x, const float *vol, float *proj, int first, int last, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(x->base.geom);
	double h = fmin(v->vx, v->vy);
	double hx = (v->nx + 1) * v->vx / 2, hy = (v->ny + 1) * v->vy / 2;
	cl_int e;
	if (!x->rot) {
		x->rot_nmax = 2 * (int)ceil(sqrt(hx * hx + hy * hy) / h) + 3;
		x->rot_h = (float)h;
		x->rot = clCreateBuffer(x->ctx, CL_MEM_READ_WRITE,
					(size_t)x->rot_nmax * x->rot_nmax * x->nz * sizeof(float), NULL, &e);
		if (e != CL_SUCCESS)
			return rc_fail(err, RC_ETOOBIG, "", "OpenCL device cannot hold the rotated volume (%s)",
				       rc_cl_strerror(e));
	}
	e = clEnqueueWriteBuffer(x->q, x->vol, CL_FALSE, 0, (size_t)x->nx * x->ny * x->nz * sizeof(float),
				 vol, 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "write of the volume");
	for (int k = first; k < last; k++) {
		double t = rc_geom_view(x->base.geom, k)->angle_rad;
		double ca = cos(t), sa = sin(t);
		double ea = hx * fabs(ca) + hy * fabs(sa), eb = hx * fabs(sa) + hy * fabs(ca);
		int na = 2 * (int)ceil(ea / h) + 3, nb = 2 * (int)ceil(eb / h) + 3;
		if (na > x->rot_nmax)
			na = x->rot_nmax;
		if (nb > x->rot_nmax)
			nb = x->rot_nmax;
		float fca = (float)ca, fsa = (float)sa;
		cl_kernel kr = x->k[K_ROT], kp = x->k[K_PRJ];
		e = 0;
		SETARG(kr, 0, x->rot);
		SETARG(kr, 1, x->vol);
		SETARG(kr, 2, x->n);
		SETARG(kr, 3, fca);
		SETARG(kr, 4, fsa);
		SETARG(kr, 5, na);
		SETARG(kr, 6, nb);
		SETARG(kr, 7, x->sp);
		SETARG(kr, 8, x->rot_h);
		SETARG(kp, 0, x->proj);
		SETARG(kp, 1, x->rot);
		SETARG(kp, 2, x->views);
		SETARG(kp, 3, k);
		SETARG(kp, 4, x->n);
		SETARG(kp, 5, fca);
		SETARG(kp, 6, fsa);
		SETARG(kp, 7, na);
		SETARG(kp, 8, nb);
		SETARG(kp, 9, x->sp);
		SETARG(kp, 10, x->ctr);
		SETARG(kp, 11, x->rot_h);
		SETARG(kp, 12, x->nu);
		SETARG(kp, 13, x->nv);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "clSetKernelArg (rotate_view/project_view)");
		size_t gr[3] = { (size_t)na, (size_t)nb, (size_t)x->nz }, gp[2] = { (size_t)x->nu, (size_t)x->nv };
		int rc = launch(x, K_ROT, 3, gr, NULL, err);
		if (!rc)
			rc = launch(x, K_PRJ, 2, gp, NULL, err);
		if (rc)
			return rc;
	}
	size_t vsz = (size_t)x->nu * x->nv;
	e = clEnqueueReadBuffer(x->q, x->proj, CL_TRUE, (size_t)first * vsz * sizeof(float),
				(size_t)(last - first) * vsz * sizeof(float), proj + (size_t)first * vsz, 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "read of the projections");
	return 0;
}

/* --- fan and parallel stacks (kernels/opencl/bp_plane.cl) -------------------- */

/* The views [first, last) of every slice of a [slice][view][u] stack are
 * one rectangle: a run of (last - first) * nu floats per slice, a slice
 * nviews * nu floats apart.  Rectangle copies move just those (the other
 * views of the caller's stack stay as they are: engine.h). */
static void plane_rect(const ocl_engine *x, int first, int last, size_t org[3], size_t region[3], size_t *pitch)
{
	org[0] = (size_t)first * x->nu * sizeof(float);
	org[1] = org[2] = 0;
	region[0] = (size_t)(last - first) * x->nu * sizeof(float);
	region[1] = (size_t)x->nz;
	region[2] = 1;
	*pitch = (size_t)x->nviews * x->nu * sizeof(float);
}

static int plane_write_views(ocl_engine *x, const float *proj, int first, int last, rc_err *err)
{
	size_t org[3], region[3], pitch;
	plane_rect(x, first, last, org, region, &pitch);
	cl_int e = clEnqueueWriteBufferRect(x->q, x->proj, CL_FALSE, org, org, region, pitch, 0, pitch, 0, proj, 0,
					    NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clEnqueueWriteBufferRect (views of the stack)");
}

/* out = B in over views [first, last), RC_OCL_BP_CHUNK views per launch as
 * bp_voxel: RC_BP_VOXEL is FBP's back projection (bp_plane), RC_BP_MATCHED
 * the transpose of fp_plane (bp_plane_t). */
static int bp_plane(ocl_engine *x, rc_bp_kind kind, cl_mem out, cl_mem in, int first, int last, rc_err *err)
{
	const int K = kind == RC_BP_MATCHED ? K_BPT : K_BPP;
	cl_kernel kk = x->k[K];
	for (int c = first; c < last; c += RC_OCL_BP_CHUNK) {
		int cl = c + RC_OCL_BP_CHUNK < last ? c + RC_OCL_BP_CHUNK : last;
		int acc = x->bp_add || c > first;
		cl_int e = 0;
		int a = 0; /* bp_plane_t reads the rays after the views */
		SETARG(kk, a++, out);
		SETARG(kk, a++, in);
		SETARG(kk, a++, x->pviews);
		if (K == K_BPT)
			SETARG(kk, a++, x->prays);
		SETARG(kk, a++, c);
		SETARG(kk, a++, cl);
		SETARG(kk, a++, acc);
		SETARG(kk, a++, x->n);
		SETARG(kk, a++, x->nu);
		SETARG(kk, a++, x->nviews);
		if (K == K_BPP)
			SETARG(kk, a++, x->fan);
		SETARG(kk, a++, x->curved);
		SETARG(kk, a++, x->cu);
		SETARG(kk, a++, x->sdu);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "clSetKernelArg (bp_plane)");
		size_t g[3] = { (size_t)x->nx, (size_t)x->ny, (size_t)x->nz };
		int rc = launch(x, K, 3, g, NULL, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* engine.h's back on a 2-D stack: write the views, project, read the volume */
static int plane_back(ocl_engine *x, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
		      rc_err *err)
{
	if (kind != RC_BP_VOXEL && kind != RC_BP_MATCHED)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			       "the OpenCL engine back-projects fan and parallel stacks voxel-driven or matched");
	int rc = plane_write_views(x, proj, first, last, err);
	if (!rc)
		rc = bp_plane(x, kind, x->vol, x->proj, first, last, err);
	if (rc)
		return rc;
	cl_int ce = clEnqueueReadBuffer(x->q, x->vol, CL_TRUE, 0, (size_t)x->nx * x->ny * x->nz * sizeof(float), vol,
					0, NULL, NULL);
	return ce == CL_SUCCESS ? 0 : rc_cl_fail(err, ce, "read of the volume");
}

/* Views [first, last) of every slice of the stack out = Joseph's forward
 * projection of vol (fp_plane), both device buffers; enqueued only. */
static int fp_plane(ocl_engine *x, cl_mem out, cl_mem vol, int first, int last, rc_err *err)
{
	cl_kernel kk = x->k[K_FPP];
	cl_int e = 0;
	SETARG(kk, 0, out);
	SETARG(kk, 1, vol);
	SETARG(kk, 2, x->prays);
	SETARG(kk, 3, first);
	SETARG(kk, 4, last);
	SETARG(kk, 5, x->n);
	SETARG(kk, 6, x->nu);
	SETARG(kk, 7, x->nviews);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (fp_plane)");
	size_t g[3] = { (size_t)x->nu, (size_t)(last - first), (size_t)x->nz };
	return launch(x, K_FPP, 3, g, NULL, err);
}

/* engine.h's forward on a 2-D stack (RC_FP_RAYCAST: Joseph's, fp_plane):
 * write the volume, project, read views [first, last) of every slice */
static int plane_forward(ocl_engine *x, rc_fp_kind kind, const float *vol, float *proj, int first, int last,
			 rc_err *err)
{
	if (kind != RC_FP_RAYCAST)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			       "the OpenCL engine forward-projects fan and parallel stacks by ray casting (Joseph)");
	cl_int e = clEnqueueWriteBuffer(x->q, x->vol, CL_FALSE, 0, (size_t)x->nx * x->ny * x->nz * sizeof(float), vol,
					0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "write of the volume");
	int rc = fp_plane(x, x->proj, x->vol, first, last, err);
	if (rc)
		return rc;
	size_t org[3], region[3], pitch;
	plane_rect(x, first, last, org, region, &pitch);
	e = clEnqueueReadBufferRect(x->q, x->proj, CL_TRUE, org, org, region, pitch, 0, pitch, 0, proj, 0, NULL,
				    NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clEnqueueReadBufferRect (views of the stack)");
}

/* RC_PLANE_FLOATS per view and the rays' table (proj_cpu.h's
 * rc_plane_view and rc_plane_rays: the C reference reads the same floats). */
static int upload_plane_views(ocl_engine *x, const rc_geom *g, rc_err *err)
{
	size_t nv = (size_t)x->nviews * RC_PLANE_FLOATS, nr = (size_t)x->nviews * x->nu * RC_PLANE_RAY_FLOATS;
	float *h = malloc((nv > nr ? nv : nr) * sizeof(float));
	if (!h)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d views' rays", x->nviews);
	for (int k = 0; k < x->nviews; k++)
		rc_plane_view(g, k, h + (size_t)k * RC_PLANE_FLOATS);
	cl_int e;
	x->pviews = clCreateBuffer(x->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nv * sizeof(float), h, &e);
	if (e == CL_SUCCESS) {
		rc_plane_rays(g, h);
		x->prays = clCreateBuffer(x->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nr * sizeof(float), h, &e);
	}
	free(h);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clCreateBuffer (in-plane views and rays)");
}

/* --- the splat pair (opencl_splat.c) on the engine's buffers ------------------ */

static int splat_forward(ocl_engine *x, const float *vol, float *proj, int first, int last, rc_err *err)
{
	size_t vsz = (size_t)x->nu * x->nv;
	cl_int ce = clEnqueueWriteBuffer(x->q, x->vol, CL_FALSE, 0, (size_t)x->nx * x->ny * x->nz * sizeof(float), vol,
					 0, NULL, NULL);
	if (ce != CL_SUCCESS)
		return rc_cl_fail(err, ce, "write of the volume");
	int rc = rc_ocl_splat_fp(x->splat, x->vol, x->proj, first, last, err);
	if (rc) {
		clFinish(x->q); /* the write still reads the caller's volume */
		return rc;
	}
	ce = clEnqueueReadBuffer(x->q, x->proj, CL_TRUE, (size_t)first * vsz * sizeof(float),
				 (size_t)(last - first) * vsz * sizeof(float), proj + (size_t)first * vsz, 0, NULL, NULL);
	return ce == CL_SUCCESS ? 0 : rc_cl_fail(err, ce, "read of the projections");
}

static int splat_back(ocl_engine *x, const float *proj, float *vol, int first, int last, rc_err *err)
{
	size_t vsz = (size_t)x->nu * x->nv;
	cl_int ce = clEnqueueWriteBuffer(x->q, x->proj, CL_FALSE, (size_t)first * vsz * sizeof(float),
					 (size_t)(last - first) * vsz * sizeof(float), proj + (size_t)first * vsz, 0,
					 NULL, NULL);
	if (ce != CL_SUCCESS)
		return rc_cl_fail(err, ce, "write of the projections");
	int rc = rc_ocl_splat_bp(x->splat, x->proj, x->vol, first, last, x->bp_add, err);
	if (rc) {
		clFinish(x->q); /* the write still reads the caller's views */
		return rc;
	}
	ce = clEnqueueReadBuffer(x->q, x->vol, CL_TRUE, 0, (size_t)x->nx * x->ny * x->nz * sizeof(float), vol, 0, NULL,
				 NULL);
	return ce == CL_SUCCESS ? 0 : rc_cl_fail(err, ce, "read of the volume");
}

/* --- engine ops ---------------------------------------------------------------- */

static int check_range(ocl_engine *x, int first, int last, rc_err *err)
{
	if (first < 0 || last > x->nviews || first > last)
		return rc_fail(err, RC_EINVAL, "", "view range [%d, %d) is outside 0..%d", first, last, x->nviews);
	return 0;
}

static int ocl_forward(rc_engine *e, rc_fp_kind kind, const float *vol, float *proj,
		       int first, int last, rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	int rc = check_range(x, first, last, err);
	if (rc)
		return rc;
	if (x->plane)
		return first == last ? 0 : plane_forward(x, kind, vol, proj, first, last, err);
	if (kind == RC_FP_ROTATE && rc_geom_type_of(e->geom) != RC_GEOM_CONE)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			       "the rotation forward projector (RC_FP_ROTATE) needs a cone geometry");
	if (kind != RC_FP_RAYCAST && kind != RC_FP_ROTATE && kind != RC_FP_SPLAT)
		return rc_fail(err, RC_EINVAL, "", "unknown forward projector %d", (int)kind);
	if (first == last)
		return 0;
	cl_int ce;
	if (kind == RC_FP_SPLAT)
		return splat_forward(x, vol, proj, first, last, err);
	if (kind == RC_FP_ROTATE)
		return fp_rotate(x, vol, proj, first, last, err);
	if (x->images) {
		size_t o[3] = { 0, 0, 0 }, r[3] = { (size_t)x->nx, (size_t)x->ny, (size_t)x->nz };
		ce = clEnqueueWriteImage(x->q, x->vol_img, CL_FALSE, o, r, 0, 0, vol, 0, NULL, NULL);
	} else {
		ce = clEnqueueWriteBuffer(x->q, x->vol, CL_FALSE, 0,
					  (size_t)x->nx * x->ny * x->nz * sizeof(float), vol, 0, NULL, NULL);
	}
	if (ce != CL_SUCCESS)
		return rc_cl_fail(err, ce, "write of the volume");
	rc = fp_raycast(x, x->proj, x->images ? x->vol_img : x->vol, first, last, x->local[K_FP], err);
	if (rc)
		return rc;
	size_t vsz = (size_t)x->nu * x->nv;
	ce = clEnqueueReadBuffer(x->q, x->proj, CL_TRUE, (size_t)first * vsz * sizeof(float),
				 (size_t)(last - first) * vsz * sizeof(float), proj + (size_t)first * vsz,
				 0, NULL, NULL);
	if (ce != CL_SUCCESS)
		return rc_cl_fail(err, ce, "read of the projections");
	return 0;
}

static int ocl_back(rc_engine *e, rc_bp_kind kind, const float *proj, float *vol,
		    int first, int last, rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	int rc = check_range(x, first, last, err);
	if (rc)
		return rc;
	if (kind != RC_BP_VOXEL && kind != RC_BP_MATCHED && kind != RC_BP_SPLAT)
		return rc_fail(err, RC_EINVAL, "", "unknown back projector %d", (int)kind);
	size_t nvox = (size_t)x->nx * x->ny * x->nz;
	if (first == last) {
		if (!x->bp_add)
			memset(vol, 0, nvox * sizeof(float));
		return 0;
	}
	/* adding: the device's volume starts as the caller's */
	if (x->bp_add) {
		cl_int ce = clEnqueueWriteBuffer(x->q, x->vol, CL_FALSE, 0, nvox * sizeof(float), vol, 0, NULL, NULL);
		if (ce != CL_SUCCESS)
			return rc_cl_fail(err, ce, "write of the volume");
	}
	if (x->plane)
		return plane_back(x, kind, proj, vol, first, last, err);
	if (kind == RC_BP_SPLAT)
		return splat_back(x, proj, vol, first, last, err);
	size_t vsz = (size_t)x->nu * x->nv;
	cl_int ce;
	if (kind == RC_BP_MATCHED) {
		ce = clEnqueueWriteBuffer(x->q, x->proj, CL_FALSE, (size_t)first * vsz * sizeof(float),
					  (size_t)(last - first) * vsz * sizeof(float), proj + (size_t)first * vsz,
					  0, NULL, NULL);
		if (ce != CL_SUCCESS)
			return rc_cl_fail(err, ce, "write of the projections");
		rc = bp_matched(x, x->vol, x->proj, first, last, x->local[K_FP], err);
	} else if (x->images) {
		size_t o[3] = { 0, 0, (size_t)first }, r[3] = { (size_t)x->nu, (size_t)x->nv, (size_t)(last - first) };
		ce = clEnqueueWriteImage(x->q, x->proj_img, CL_FALSE, o, r, 0, 0, proj + (size_t)first * vsz,
					 0, NULL, NULL);
	} else {
		ce = clEnqueueWriteBuffer(x->q, x->proj, CL_FALSE, (size_t)first * vsz * sizeof(float),
					  (size_t)(last - first) * vsz * sizeof(float), proj + (size_t)first * vsz,
					  0, NULL, NULL);
	}
	if (ce != CL_SUCCESS)
		return rc_cl_fail(err, ce, "write of the projections");
	if (kind == RC_BP_VOXEL)
		rc = bp_voxel(x, x->vol, x->images ? x->proj_img : x->proj, first, last, x->local[K_BP], err);
	if (rc)
		return rc;
	ce = clEnqueueReadBuffer(x->q, x->vol, CL_TRUE, 0, nvox * sizeof(float), vol, 0, NULL, NULL);
	if (ce != CL_SUCCESS)
		return rc_cl_fail(err, ce, "read of the volume");
	return 0;
}

static void ocl_free(rc_engine *e)
{
	ocl_engine *x = (ocl_engine *)e;
	if (!x)
		return;
	rc_ocl_splat_free(x->splat);
	cl_mem mems[] = { x->views, x->vol, x->proj, x->vol_img, x->proj_img, x->rot, x->pviews, x->prays };
	for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
		if (mems[i])
			clReleaseMemObject(mems[i]);
	for (int k = 0; k < K_COUNT; k++)
		if (x->k[k])
			clReleaseKernel(x->k[k]);
	if (x->prog)
		clReleaseProgram(x->prog);
	if (x->q)
		clReleaseCommandQueue(x->q);
	if (x->ctx)
		clReleaseContext(x->ctx);
	free(x);
}

/* engine.h's back_add: the volume goes to the device and comes back (the
 * resident backend adds on the device without either: rc_ocl_back_dev_add) */
static int ocl_back_add(rc_engine *e, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
			rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	x->bp_add = 1;
	int rc = ocl_back(e, kind, proj, vol, first, last, err);
	x->bp_add = 0;
	return rc;
}

static const rc_engine_ops ocl_ops = { ocl_forward, ocl_back, ocl_free, ocl_back_add };

/* --- device-buffer access for the resident runs (engine_opencl_impl.h) ---- */

int rc_ocl_engine_handles(rc_engine *e, rc_ocl_handles *h)
{
	if (!e || e->ops != &ocl_ops)
		return RC_EINVAL;
	ocl_engine *x = (ocl_engine *)e;
	h->ctx = x->ctx;
	h->q = x->q;
	h->dev = x->dev;
	h->prog = x->prog;
	h->vol = x->vol;
	h->proj = x->proj;
	h->fp64 = x->fp64;
	h->gpu = x->gpu;
	return 0;
}

rc_ocl_splat *rc_ocl_engine_splat(rc_engine *e)
{
	return e && e->ops == &ocl_ops ? ((ocl_engine *)e)->splat : NULL;
}

int rc_ocl_forward_dev(rc_engine *e, cl_mem vol, cl_mem proj, int first, int last, rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	int rc = check_range(x, first, last, err);
	if (rc || first == last)
		return rc;
	if (x->plane) /* a fan or parallel stack: buffers only */
		return fp_plane(x, proj, vol, first, last, err);
	if (x->images) {
		size_t o[3] = { 0, 0, 0 }, r[3] = { (size_t)x->nx, (size_t)x->ny, (size_t)x->nz };
		cl_int ce = clEnqueueCopyBufferToImage(x->q, vol, x->vol_img, 0, o, r, 0, NULL, NULL);
		if (ce != CL_SUCCESS)
			return rc_cl_fail(err, ce, "clEnqueueCopyBufferToImage (volume)");
		vol = x->vol_img;
	}
	return fp_raycast(x, proj, vol, first, last, x->local[K_FP], err);
}

int rc_ocl_back_dev(rc_engine *e, rc_bp_kind kind, cl_mem proj, cl_mem vol, int first, int last,
		    rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	int rc = check_range(x, first, last, err);
	if (rc)
		return rc;
	if (kind == RC_BP_SPLAT)
		return rc_ocl_splat_bp(x->splat, proj, vol, first, last, x->bp_add, err);
	if (kind != RC_BP_VOXEL && kind != RC_BP_MATCHED)
		return rc_fail(err, RC_EINVAL, "", "unknown back projector %d", (int)kind);
	if (first == last) {
		if (x->bp_add)
			return 0;
		float zero = 0.0f;
		cl_int ce = clEnqueueFillBuffer(x->q, vol, &zero, sizeof zero, 0,
						(size_t)x->nx * x->ny * x->nz * sizeof(float), 0, NULL, NULL);
		return ce == CL_SUCCESS ? 0 : rc_cl_fail(err, ce, "clEnqueueFillBuffer (volume)");
	}
	if (x->plane) /* FBP's back projection or fp_plane's transpose */
		return bp_plane(x, kind, vol, proj, first, last, err);
	if (kind == RC_BP_MATCHED)
		return bp_matched(x, vol, proj, first, last, x->local[K_FP], err);
	if (x->images) {
		size_t vsz = (size_t)x->nu * x->nv;
		size_t o[3] = { 0, 0, (size_t)first }, r[3] = { (size_t)x->nu, (size_t)x->nv, (size_t)(last - first) };
		cl_int ce = clEnqueueCopyBufferToImage(x->q, proj, x->proj_img, (size_t)first * vsz * sizeof(float),
						       o, r, 0, NULL, NULL);
		if (ce != CL_SUCCESS)
			return rc_cl_fail(err, ce, "clEnqueueCopyBufferToImage (projections)");
		proj = x->proj_img;
	}
	return bp_voxel(x, vol, proj, first, last, x->local[K_BP], err);
}

/* --- open ---------------------------------------------------------------------- */

static int image_fits(cl_device_id d, int w, int h, int depth)
{
	size_t mw = 0, mh = 0, md = 0;
	clGetDeviceInfo(d, CL_DEVICE_IMAGE3D_MAX_WIDTH, sizeof mw, &mw, NULL);
	clGetDeviceInfo(d, CL_DEVICE_IMAGE3D_MAX_HEIGHT, sizeof mh, &mh, NULL);
	clGetDeviceInfo(d, CL_DEVICE_IMAGE3D_MAX_DEPTH, sizeof md, &md, NULL);
	return (size_t)w <= mw && (size_t)h <= mh && (size_t)depth <= md;
}

static int make_image(ocl_engine *x, int w, int h, int d, cl_mem *ret, rc_err *err)
{
	cl_image_format fmt = { CL_R, CL_FLOAT };
	cl_image_desc desc;
	memset(&desc, 0, sizeof desc);
	desc.image_type = CL_MEM_OBJECT_IMAGE3D;
	desc.image_width = (size_t)w;
	desc.image_height = (size_t)h;
	desc.image_depth = (size_t)d;
	cl_int e;
	*ret = clCreateImage(x->ctx, CL_MEM_READ_ONLY, &fmt, &desc, NULL, &e);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clCreateImage (3-D, CL_R/CL_FLOAT)");
	return 0;
}

static int upload_views(ocl_engine *x, const rc_geom *g, rc_err *err)
{
	float *h = malloc((size_t)x->nviews * RC_VIEW_FLOATS * sizeof(float));
	if (!h)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d view matrices", x->nviews);
	for (int k = 0; k < x->nviews; k++) {
		const rc_view *vw = rc_geom_view(g, k);
		float *o = h + (size_t)k * RC_VIEW_FLOATS;
		for (int i = 0; i < 12; i++)
			o[i] = (float)vw->P[i];
		for (int i = 0; i < 9; i++)
			o[12 + i] = (float)vw->Minv[i];
		for (int i = 0; i < 3; i++)
			o[21 + i] = (float)vw->src[i];
		o[24] = (float)cos(vw->angle_rad);
		o[25] = (float)sin(vw->angle_rad);
	}
	cl_int e;
	x->views = clCreateBuffer(x->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
				  (size_t)x->nviews * RC_VIEW_FLOATS * sizeof(float), h, &e);
	free(h);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clCreateBuffer (view matrices)");
	return 0;
}

int rc_engine_opencl_new(const rc_geom *g, const rc_opencl_options *o, rc_engine **ret, rc_err *err)
{
	rc_opencl_options def;
	if (!o) {
		rc_opencl_options_default(&def);
		o = &def;
	}
	/* the kernels map points through a flat P (the CPU engine runs it) */
	if (g && rc_geom_type_of(g) == RC_GEOM_CONE && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			       "the OpenCL engine does not run a cone geometry with a curved detector; use the CPU engine");
	cl_platform_id plat = NULL;
	cl_device_id dev = NULL;
	int rc = get_device(o->platform, o->device, &plat, &dev, err);
	if (rc)
		return rc;
	ocl_engine *x = calloc(1, sizeof *x);
	if (!x)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the OpenCL engine");
	x->base.ops = &ocl_ops;
	x->base.geom = g;
	x->dev = dev;
	x->plane = rc_geom_is_2d(g);
	x->fan = rc_geom_type_of(g) == RC_GEOM_FAN;
	x->curved = rc_plane_arc(g, &x->cu, &x->sdu);
	rc_opencl_device info;
	device_info(plat, dev, o->platform, o->device, &info);
	snprintf(x->base.name, sizeof x->base.name, "opencl");
	snprintf(x->base.device_id, sizeof x->base.device_id, "%s", info.device_id);
	snprintf(x->base.hw_group, sizeof x->base.hw_group, "%s", info.hw_group);
	x->dev_hash = rc_fnv1a(RC_FNV_INIT, info.device_id, strlen(info.device_id));
	if (o->cache_dir)
		snprintf(x->cache_dir, sizeof x->cache_dir, "%s", o->cache_dir);

	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *det = rc_geom_detector(g);
	x->nx = v->nx, x->ny = v->ny, x->nz = v->nz;
	x->nu = det->nu, x->nv = det->nv;
	x->nviews = rc_geom_nviews(g);
	x->n = (cl_int4){ { x->nx, x->ny, x->nz, 0 } };
	double o0[3];
	rc_volume_voxel_pos(v, 0, 0, 0, o0);
	x->org = (cl_float4){ { (float)o0[0], (float)o0[1], (float)o0[2], 0 } };
	x->sp = (cl_float4){ { (float)v->vx, (float)v->vy, (float)v->vz, 0 } };
	/* rays are clipped to the trilinear support, voxel index -1 .. n */
	x->lo = (cl_float4){ { (float)(o0[0] - v->vx), (float)(o0[1] - v->vy), (float)(o0[2] - v->vz), 0 } };
	x->hi = (cl_float4){ { (float)(o0[0] + x->nx * v->vx), (float)(o0[1] + x->ny * v->vy),
			       (float)(o0[2] + x->nz * v->vz), 0 } };
	x->ctr = (cl_float4){ { (float)v->cx, (float)v->cy, (float)v->cz, 0 } };
	/* half the smallest voxel: the step of paper 002 Alg. 2 */
	x->step = (float)(0.5 * fmin(v->vx, fmin(v->vy, v->vz)));

	x->gpu = o->variant == RC_OPENCL_VARIANT_GPU || (o->variant == RC_OPENCL_VARIANT_AUTO && !info.is_cpu);
	int can_img = info.images && image_fits(dev, x->nu, x->nv, x->nviews) && image_fits(dev, x->nx, x->ny, x->nz);
	if (o->images == 1 && !can_img) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "execution.device",
			     "OpenCL device \"%s\" cannot hold this job's projections and volume as 3-D images", info.name);
		goto fail;
	}
	/* the 2-D kernels read buffers: a stack's rows are short, its slices
	 * many, and its views not contiguous (no 3-D image of them) */
	if (x->plane && o->images == 1) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "execution.device",
			     "the OpenCL engine reads fan and parallel stacks from buffers, not images");
		goto fail;
	}
	x->images = !x->plane && (o->images == 1 || (o->images < 0 && x->gpu && can_img));
	if (x->images)
		x->gpu = 1; /* the CPU variant reads buffers */
	snprintf(x->variant, sizeof x->variant, "%s", x->images ? "gpu+images" : x->gpu ? "gpu" : "cpu");

	cl_int e;
	cl_context_properties props[] = { CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0 };
	x->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
	if (e != CL_SUCCESS) {
		rc = rc_cl_fail(err, e, "clCreateContext");
		goto fail;
	}
	x->q = clCreateCommandQueue(x->ctx, dev, 0, &e);
	if (e != CL_SUCCESS) {
		rc = rc_cl_fail(err, e, "clCreateCommandQueue");
		goto fail;
	}
	cl_device_fp_config dfp = 0;
	if (clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dfp, &dfp, NULL) != CL_SUCCESS)
		dfp = 0;
	x->fp64 = dfp != 0;
	char opts[192];
	snprintf(opts, sizeof opts, "-DRC_GPU=%d -DRC_IMAGES=%d -DRC_FP64=%d -DRC_SPLAT_TAB_HEAD=%d -DRC_SPLAT_VIEW_REALS=%d",
		 x->gpu, x->images, x->fp64, RC_SPLAT_DEV_HEAD, RC_SPLAT_DEV_VIEW);
	rc = rc_cl_program(x->ctx, dev, rc_opencl_sources,
			   (int)(sizeof rc_opencl_sources / sizeof rc_opencl_sources[0]), opts,
			   x->cache_dir[0] ? x->cache_dir : NULL, &x->prog, &x->from_cache, err);
	if (rc)
		goto fail;
	for (int k = 0; k < K_COUNT; k++) {
		x->k[k] = clCreateKernel(x->prog, kernel_names[k], &e);
		if (e != CL_SUCCESS) {
			rc = rc_cl_fail(err, e, "clCreateKernel");
			goto fail;
		}
	}
	size_t nvox = (size_t)x->nx * x->ny * x->nz, nproj = rc_geom_proj_count(g);
	x->vol = clCreateBuffer(x->ctx, CL_MEM_READ_WRITE, nvox * sizeof(float), NULL, &e);
	if (e == CL_SUCCESS)
		x->proj = clCreateBuffer(x->ctx, CL_MEM_READ_WRITE, nproj * sizeof(float), NULL, &e);
	if (e != CL_SUCCESS) {
		rc = rc_fail(err, RC_ETOOBIG, "", "OpenCL device \"%s\" cannot hold the volume and projections (%s)",
			     info.name, rc_cl_strerror(e));
		goto fail;
	}
	if (x->images && ((rc = make_image(x, x->nx, x->ny, x->nz, &x->vol_img, err)) ||
			  (rc = make_image(x, x->nu, x->nv, x->nviews, &x->proj_img, err))))
		goto fail;
	rc = upload_views(x, g, err);
	if (!rc && x->plane)
		rc = upload_plane_views(x, g, err);
	/* the matched pair of the iterative algorithms where voxels project at
	 * most a pixel apart, as on the CPU engine (engine.h's splat) */
	if (!rc && rc_dev_splat_suits(g)) {
		/* its gain buffer (32 views) is not in the run's memory plan: where
		 * it does not fit, the engine runs ray casting's pair instead */
		rc_err e1;
		if (rc_ocl_splat_new(x->ctx, x->q, x->prog, x->fp64, x->gpu, g, &x->splat, &e1) == 0)
			x->base.splat = 1;
		else
			fprintf(stderr, "opencl: the splat pair is off (ray casting's pair runs): %s\n", e1.msg);
	}
	if (rc)
		goto fail;
	wg_load(x);
	*ret = &x->base;
	return 0;
fail:
	ocl_free(&x->base);
	return rc;
}

/* --- tuning ------------------------------------------------------------------ */

static int fits_device(ocl_engine *x, int k, const size_t *l, int dims)
{
	size_t maxwg = 0, kwg = 0, items[3] = { 0, 0, 0 };
	clGetDeviceInfo(x->dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
	clGetKernelWorkGroupInfo(x->k[k], x->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
	clGetDeviceInfo(x->dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
	size_t tot = 1;
	for (int d = 0; d < dims; d++) {
		if (l[d] > items[d])
			return 0;
		tot *= l[d];
	}
	return tot <= maxwg && (kwg == 0 || tot <= kwg);
}

int rc_engine_opencl_tune(rc_engine *e, rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	if (x->plane) /* the 2-D kernels run with the runtime's work-groups */
		return 0;
	/* Candidates: warp/wavefront multiples along x for GPUs; for CPUs PoCL
	 * and Intel pack work-items of a group into SIMD lanes, so small groups. */
	static const size_t gpu3[][3] = { { 0, 0, 0 }, { 32, 4, 1 }, { 64, 4, 1 }, { 16, 16, 1 },
					  { 128, 1, 1 }, { 256, 1, 1 }, { 8, 8, 4 } };
	static const size_t cpu2[][3] = { { 0, 0, 0 }, { 1, 1, 0 }, { 4, 1, 0 }, { 16, 1, 0 }, { 8, 8, 0 } };
	static const size_t fp3[][3] = { { 0, 0, 0 }, { 16, 1, 1 }, { 64, 1, 1 }, { 32, 4, 1 },
					 { 8, 8, 1 }, { 128, 1, 1 } };
	int nb = x->nviews < 4 ? x->nviews : 4;
	int nf = x->nviews < 2 ? x->nviews : 2;
	for (int k = K_BP; k <= K_FP; k++) {
		const size_t (*cand)[3] = k == K_FP ? fp3 : x->gpu ? gpu3 : cpu2;
		int nc = k == K_FP ? (int)(sizeof fp3 / sizeof fp3[0])
			 : x->gpu ? (int)(sizeof gpu3 / sizeof gpu3[0]) : (int)(sizeof cpu2 / sizeof cpu2[0]);
		int dims = k == K_BP && !x->gpu ? 2 : 3;
		double best_t = INFINITY;
		int best = 0;
		for (int c = 0; c < nc; c++) {
			if (cand[c][0] && !fits_device(x, k, cand[c], dims))
				continue;
			double t = INFINITY;
			for (int rep = 0; rep < 2; rep++) { /* the first run warms caches */
				double t0 = rc_now_s();
				int rc = k == K_FP ? fp_raycast(x, x->proj, x->images ? x->vol_img : x->vol, 0, nf, cand[c], err)
						   : bp_voxel(x, x->vol, x->images ? x->proj_img : x->proj, 0, nb, cand[c], err);
				if (rc)
					return rc;
				cl_int ce = clFinish(x->q);
				if (ce != CL_SUCCESS)
					return rc_cl_fail(err, ce, "clFinish (work-group search)");
				t = fmin(t, rc_now_s() - t0);
			}
			if (t < best_t) {
				best_t = t;
				best = c;
			}
		}
		memcpy(x->local[k], cand[best], sizeof x->local[k]);
	}
	wg_store(x);
	return 0;
}

const char *rc_engine_opencl_variant(const rc_engine *e) { return ((const ocl_engine *)e)->variant; }
int rc_engine_opencl_from_cache(const rc_engine *e) { return ((const ocl_engine *)e)->from_cache; }

void rc_engine_opencl_wg(const rc_engine *e, const char *kernel, size_t local[3])
{
	const ocl_engine *x = (const ocl_engine *)e;
	memset(local, 0, 3 * sizeof local[0]);
	for (int k = 0; k < K_COUNT; k++)
		if (!strcmp(kernel, kernel_short[k]))
			memcpy(local, x->local[k], sizeof x->local[k]);
}

int rc_ocl_back_dev_add(rc_engine *e, rc_bp_kind kind, cl_mem proj, cl_mem vol, int first, int last,
			rc_err *err)
{
	ocl_engine *x = (ocl_engine *)e;
	x->bp_add = 1;
	int rc = rc_ocl_back_dev(e, kind, proj, vol, first, last, err);
	x->bp_add = 0;
	return rc;
}
