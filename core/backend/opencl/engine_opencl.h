/*
 * engine_opencl: every OpenCL device found through the ICD loader as an
 * engine (engine.h), running the kernels of kernels/opencl/ (embedded at
 * build time).
 *
 * Variants (paper 002): a CPU device gets the CPU variant (a row of voxels
 * per work-item, float4 arithmetic); a GPU (or accelerator) gets the GPU
 * variant (one voxel or pixel per work-item, x fastest), with projections and
 * volume read through image3d_t where the device supports images of the
 * job's size.  Programs are built once per device and options and cached as
 * binaries in cache_dir; work-group sizes come from a short search
 * (rc_engine_opencl_tune) and are cached per device in the same directory.
 * Build failures carry the build log in the error message.
 *
 * Buffers (volume, projection stack, per-view geometry) are allocated on the
 * device when the engine opens and stay there for the whole job; each call
 * moves only its input and its output views.
 *
 * Supported: cone and matrices geometries, every projector of engine.h
 * with the CPU engine's definitions: RC_FP_RAYCAST, RC_FP_ROTATE (cone
 * only), RC_BP_VOXEL, and RC_BP_MATCHED as a scatter with compare-and-swap
 * float atomics (order-free, so equal to the CPU engine within float
 * rounding, not bit for bit).  Fan and parallel stacks (kernels/opencl/
 * bp_plane.cl, buffers only): RC_BP_VOXEL, FBP's back projection, as the
 * CPU engine's rc_bp_plane computes it; RC_FP_RAYCAST, Joseph's forward
 * projection, and RC_BP_MATCHED, its exact transpose as a per-voxel gather
 * (no atomics), as the CPU engine's proj_joseph.c computes them.
 */
#ifndef RC_ENGINE_OPENCL_H
#define RC_ENGINE_OPENCL_H

#include "backend/backend.h"
#include "backend/engine.h"

#define RC_OPENCL_MAX_DEVICES 16

typedef enum rc_opencl_variant {
	RC_OPENCL_VARIANT_AUTO = 0, /* by device type */
	RC_OPENCL_VARIANT_CPU,
	RC_OPENCL_VARIANT_GPU,
} rc_opencl_variant;

/* One OpenCL device as the ICD loader lists it. */
typedef struct rc_opencl_device {
	int platform, device;   /* indices in clGetPlatformIDs / clGetDeviceIDs order */
	char name[128];
	char vendor[64];
	char platform_name[64];
	char version[64];       /* CL_DEVICE_VERSION */
	char driver[64];        /* CL_DRIVER_VERSION */
	int is_cpu, is_gpu;
	int images;             /* CL_DEVICE_IMAGE_SUPPORT */
	int compute_units;
	unsigned long long global_mem;
	char device_id[128];    /* "opencl:<platform>:<device>:<driver>", for model storage */
	char hw_group[64];      /* "host-cpu" for CPU devices, "pci:..." or "opencl:<p>.<d>" */
} rc_opencl_device;

/* Lists every device of every platform.  No platform is not an error: *n = 0.
 * out may hold max entries; *n is the number found (at most max). */
int rc_opencl_devices(rc_opencl_device *out, int max, int *n, rc_err *err);

typedef struct rc_opencl_options {
	int platform, device;      /* which device (rc_opencl_devices indices) */
	const char *cache_dir;     /* program binaries, work-group sizes; NULL = no cache */
	rc_opencl_variant variant; /* AUTO: by device type */
	int images;                /* -1: where supported (GPU variant), 0: never, 1: required */
} rc_opencl_options;

void rc_opencl_options_default(rc_opencl_options *o);

/* Opens the device for geometry g (borrowed), builds or loads the program,
 * allocates the job's buffers.  RC_EUNSUPPORTED when images are required
 * but unsupported (always on fan/parallel geometries); RC_EDEVICE for OpenCL
 * failures (the message names the call, the error and, for builds, the log). */
int rc_engine_opencl_new(const rc_geom *g, const rc_opencl_options *o,
			 rc_engine **ret, rc_err *err);

/* Times each kernel at a few work-group sizes on a few views, keeps the
 * fastest and stores them in cache_dir (if any) for this device. */
int rc_engine_opencl_tune(rc_engine *e, rc_err *err);

/* "cpu", "gpu" or "gpu+images": the variant the engine runs. */
const char *rc_engine_opencl_variant(const rc_engine *e);
/* 1 when the program came from the binary cache. */
int rc_engine_opencl_from_cache(const rc_engine *e);
/* Work-group size chosen for "bp" or "fp" (0s = the runtime's choice). */
void rc_engine_opencl_wg(const rc_engine *e, const char *kernel, size_t local[3]);

/* The backend (backend.h) whose vectors are buffers on e's device, with the
 * engine's projectors and the element-wise kernels of elementwise.cl.
 * Borrows e; every geometry the engine takes (a fan or parallel stack with
 * bp_plane.cl's kernels on the same buffers, one batch). */
int rc_backend_opencl_new(rc_engine *e, rc_backend **ret, rc_err *err);

/* 0 when nvol volume and nproj projection vectors fit e's device beside the
 * engine's own buffers (its global memory); RC_ETOOBIG otherwise (run the
 * job through the engine path). */
int rc_backend_opencl_fits(rc_engine *e, int nvol, int nproj, rc_err *err);

#endif
