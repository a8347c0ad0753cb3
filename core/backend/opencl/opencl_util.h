/*
 * opencl_util: what the OpenCL engine needs around the API: error names,
 * checked calls with a context string, and programs built once per device
 * and cached as binaries (keyed by a hash of the sources, the build options
 * and the device and driver identity, so a driver update rebuilds).
 */
#ifndef RC_OPENCL_UTIL_H
#define RC_OPENCL_UTIL_H

#include <CL/cl.h>
#include <CL/cl_ext.h>

#include "util/rc_error.h"

const char *rc_cl_strerror(cl_int code);

/* rc_fail with RC_EDEVICE and "OpenCL <what> failed: <name> (<code>)". */
int rc_cl_fail(rc_err *err, cl_int code, const char *what);

/* 64-bit FNV-1a, chained through h (start with RC_FNV_INIT). */
#define RC_FNV_INIT 1469598103934665603ULL
unsigned long long rc_fnv1a(unsigned long long h, const void *p, size_t n);

/* Builds the program from sources (n strings) with options for dev, or
 * loads it from cache_dir (may be NULL) when a binary for the same key is
 * there; stores a fresh build there.  *from_cache says which happened.  On a
 * build error the message carries the start of the build log. */
int rc_cl_program(cl_context ctx, cl_device_id dev, const char *const *sources, int n,
		  const char *options, const char *cache_dir, cl_program *ret,
		  int *from_cache, rc_err *err);

/* A string device info (trimmed) into buf. */
void rc_cl_device_str(cl_device_id dev, cl_device_info what, char *buf, size_t len);

/* Writes data to path atomically (temp file, fsync, rename). */
int rc_write_file_atomic(const char *path, const void *data, size_t n);

#endif
