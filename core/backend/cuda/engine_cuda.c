/*
 * engine_cuda: device discovery and the no-CUDA branch (engine_cuda.h).
 *
 * Builds with nvcc define RC_HAVE_CUDA and get the real engine from
 * engine_cuda_ops.c and the resident runs from backend_cuda.c (the CUDA
 * backend under the shared algorithms); without it every entry point stays,
 * answering "no CUDA in this build" (rc_backend_cuda_new's in
 * backend_cuda.c).
 */
#include "backend/cuda/engine_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rc_cuda_options_default(rc_cuda_options *o)
{
	memset(o, 0, sizeof *o);
	o->fp_interp = RC_CUDA_INTERP_AUTO;
	o->bp_interp = RC_CUDA_INTERP_AUTO;
	o->views_per_launch = 32;
}

#ifndef RC_HAVE_CUDA

void *rc_cuda_host_alloc(size_t bytes) { return malloc(bytes); }
void rc_cuda_host_free(void *p) { free(p); }

static int no_cuda(rc_err *err)
{
	return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
		       "this build of recond has no CUDA support (nvcc was not found at build time); "
		       "choose execution.engine \"cpu\" or \"opencl\", or rebuild with the CUDA toolkit");
}

int rc_engine_cuda_built(void) { return 0; }
int rc_engine_cuda_count(void) { return 0; }

int rc_engine_cuda_info(int ordinal, rc_cuda_device_info *info, rc_err *err)
{
	(void)ordinal; (void)info;
	return no_cuda(err);
}

int rc_engine_cuda_new(const rc_geom *g, int ordinal, rc_engine **ret, rc_err *err)
{
	(void)g; (void)ordinal; (void)ret;
	return no_cuda(err);
}

int rc_engine_cuda_new_opts(const rc_geom *g, const rc_cuda_options *o,
			    rc_engine **ret, rc_err *err)
{
	(void)g; (void)o; (void)ret;
	return no_cuda(err);
}

int rc_engine_cuda_last_slabs(const rc_engine *e) { (void)e; return 0; }

#else /* RC_HAVE_CUDA */

#include <cuda_runtime_api.h>

int rc_engine_cuda_built(void) { return 1; }

/* A small header in front of the block says how it was allocated, so that
 * rc_cuda_host_free needs no bookkeeping (64 bytes keep the alignment). */
#define HOST_HDR 64

void *rc_cuda_host_alloc(size_t bytes)
{
	unsigned char *p = NULL;
	int pinned = 0;
	if (bytes > SIZE_MAX - HOST_HDR)
		return NULL;
	if (rc_engine_cuda_count() > 0 && cudaMallocHost((void **)&p, bytes + HOST_HDR) == cudaSuccess)
		pinned = 1;
	else
		(void)cudaGetLastError();
	if (!pinned && !(p = aligned_alloc(HOST_HDR, (bytes + 2 * HOST_HDR - 1) / HOST_HDR * HOST_HDR)))
		return NULL;
	p[0] = (unsigned char)pinned;
	return p + HOST_HDR;
}

void rc_cuda_host_free(void *q)
{
	if (!q)
		return;
	unsigned char *p = (unsigned char *)q - HOST_HDR;
	if (p[0])
		(void)cudaFreeHost(p);
	else
		free(p);
}

int rc_engine_cuda_count(void)
{
	int n = 0;
	/* No driver, no device, or a driver too old for this runtime: all mean
	 * "no usable GPU", never an error for the caller. */
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

int rc_engine_cuda_info(int ordinal, rc_cuda_device_info *info, rc_err *err)
{
	int n = rc_engine_cuda_count();
	if (ordinal < 0 || ordinal >= n)
		return rc_fail(err, RC_ENOTFOUND, "device",
			       "no CUDA device %d (this machine has %d)", ordinal, n);
	struct cudaDeviceProp prop;
	cudaError_t ce = cudaGetDeviceProperties(&prop, ordinal);
	if (ce != cudaSuccess)
		return rc_fail(err, RC_EDEVICE, "device", "cudaGetDeviceProperties(%d): %s",
			       ordinal, cudaGetErrorString(ce));
	memset(info, 0, sizeof *info);
	snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof info->name - 1, prop.name);
	const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
	snprintf(info->device_id, sizeof info->device_id,
		 "cuda:GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
		 u[12], u[13], u[14], u[15]);
	info->total_bytes = prop.totalGlobalMem;
	info->cc_major = prop.major;
	info->cc_minor = prop.minor;
	info->multiprocessors = prop.multiProcessorCount;
	int clock_khz = 0, bus_bits = 0;
	if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal) == cudaSuccess &&
	    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal) == cudaSuccess)
		info->mem_bandwidth_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
	if (info->mem_bandwidth_gbs <= 0) /* attributes some drivers leave 0: the data sheets' figures */
		info->mem_bandwidth_gbs = strstr(prop.name, "H200") ? 4800 : strstr(prop.name, "H100") ? 3350 : 0;
	(void)cudaGetLastError();
	size_t fr = 0, tot = 0;
	int prev = -1;
	if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(ordinal) == cudaSuccess &&
	    cudaMemGetInfo(&fr, &tot) == cudaSuccess)
		info->free_bytes = fr;
	if (prev >= 0)
		(void)cudaSetDevice(prev);
	(void)cudaGetLastError();
	return 0;
}

#endif /* RC_HAVE_CUDA */
