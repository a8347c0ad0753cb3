/*
 * opencl_util: error names, program build and binary cache (opencl_util.h).
 */
#include "backend/opencl/opencl_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *rc_cl_strerror(cl_int code)
{
	switch (code) {
	case CL_SUCCESS: return "CL_SUCCESS";
	case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
	case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
	case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
	case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
	case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
	case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
	case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
	case CL_IMAGE_FORMAT_NOT_SUPPORTED: return "CL_IMAGE_FORMAT_NOT_SUPPORTED";
	case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
	case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
	case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
	case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
	case CL_INVALID_PROGRAM_EXECUTABLE: return "CL_INVALID_PROGRAM_EXECUTABLE";
	case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
	case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
	case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
	case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
	case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
	case CL_INVALID_WORK_DIMENSION: return "CL_INVALID_WORK_DIMENSION";
	case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
	case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
	case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
	case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
	case CL_INVALID_IMAGE_SIZE: return "CL_INVALID_IMAGE_SIZE";
	case CL_INVALID_IMAGE_FORMAT_DESCRIPTOR: return "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR";
	case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
	case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
	case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
	case CL_INVALID_OPERATION: return "CL_INVALID_OPERATION";
	case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
	case CL_PLATFORM_NOT_FOUND_KHR: return "CL_PLATFORM_NOT_FOUND_KHR";
	default: return "unknown OpenCL error";
	}
}

int rc_cl_fail(rc_err *err, cl_int code, const char *what)
{
	return rc_fail(err, RC_EDEVICE, "", "OpenCL %s failed: %s (%d)", what, rc_cl_strerror(code), (int)code);
}

unsigned long long rc_fnv1a(unsigned long long h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

void rc_cl_device_str(cl_device_id dev, cl_device_info what, char *buf, size_t len)
{
	buf[0] = 0;
	if (clGetDeviceInfo(dev, what, len, buf, NULL) != CL_SUCCESS)
		buf[0] = 0;
	buf[len - 1] = 0;
	size_t n = strlen(buf);
	while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\n'))
		buf[--n] = 0;
}

int rc_write_file_atomic(const char *path, const void *data, size_t n)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
		return -1;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	const char *p = data;
	size_t done = 0;
	while (done < n) {
		ssize_t w = write(fd, p + done, n - done);
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			return -1;
		}
		done += (size_t)w;
	}
	if (fsync(fd) || close(fd) || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static unsigned long long program_key(cl_device_id dev, const char *const *src, int n, const char *options)
{
	unsigned long long h = RC_FNV_INIT;
	for (int i = 0; i < n; i++)
		h = rc_fnv1a(h, src[i], strlen(src[i]));
	h = rc_fnv1a(h, options, strlen(options) + 1);
	static const cl_device_info ids[] = { CL_DEVICE_NAME, CL_DEVICE_VENDOR, CL_DEVICE_VERSION,
					      CL_DRIVER_VERSION };
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		char buf[256];
		rc_cl_device_str(dev, ids[i], buf, sizeof buf);
		h = rc_fnv1a(h, buf, strlen(buf) + 1);
	}
	return h;
}

static int load_cached(cl_context ctx, cl_device_id dev, const char *path, const char *options,
		       cl_program *ret)
{
	FILE *f = fopen(path, "rbe");
	if (!f)
		return -1;
	unsigned char *bin = NULL;
	long len = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		len = ftell(f);
	int rc = -1;
	if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (bin = malloc((size_t)len)) &&
	    fread(bin, 1, (size_t)len, f) == (size_t)len) {
		size_t sz = (size_t)len;
		const unsigned char *bp = bin;
		cl_int st, e;
		cl_program p = clCreateProgramWithBinary(ctx, 1, &dev, &sz, &bp, &st, &e);
		if (e == CL_SUCCESS && st == CL_SUCCESS &&
		    clBuildProgram(p, 1, &dev, options, NULL, NULL) == CL_SUCCESS) {
			*ret = p;
			rc = 0;
		} else if (p) {
			clReleaseProgram(p);
		}
	}
	free(bin);
	fclose(f);
	return rc;
}

static void store_binary(cl_program p, const char *path)
{
	size_t sz = 0;
	if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL) != CL_SUCCESS || sz == 0)
		return;
	unsigned char *bin = malloc(sz);
	if (!bin)
		return;
	/* a cache that cannot be written only costs a rebuild next time */
	if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
		(void)rc_write_file_atomic(path, bin, sz);
	free(bin);
}

int rc_cl_program(cl_context ctx, cl_device_id dev, const char *const *sources, int n,
		  const char *options, const char *cache_dir, cl_program *ret,
		  int *from_cache, rc_err *err)
{
	char path[4096] = "";
	*from_cache = 0;
	if (cache_dir && cache_dir[0]) {
		mkdir(cache_dir, 0755);
		snprintf(path, sizeof path, "%s/ocl-%016llx.bin", cache_dir,
			 program_key(dev, sources, n, options));
		if (load_cached(ctx, dev, path, options, ret) == 0) {
			*from_cache = 1;
			return 0;
		}
	}
	cl_int e;
	cl_program p = clCreateProgramWithSource(ctx, (cl_uint)n, (const char **)sources, NULL, &e);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clCreateProgramWithSource");
	e = clBuildProgram(p, 1, &dev, options, NULL, NULL);
	if (e != CL_SUCCESS) {
		size_t len = 0;
		char *log = NULL;
		if (clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) == CL_SUCCESS &&
		    len > 0 && (log = calloc(1, len + 1)) &&
		    clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, len, log, NULL) != CL_SUCCESS)
			log[0] = 0;
		clReleaseProgram(p);
		int rc = rc_fail(err, RC_EDEVICE, "", "OpenCL program build failed (%s, options \"%s\"): %s",
				 rc_cl_strerror(e), options, log ? log : "(no build log)");
		free(log);
		return rc;
	}
	if (path[0])
		store_binary(p, path);
	*ret = p;
	return 0;
}
