/*
 * ocl_testutil: shared by the OpenCL and trigeneous tests: a small cone
 * geometry, double precision references of RC_BP_VOXEL and RC_FP_RAYCAST
 * written from their definitions (engine.h, kernels/opencl/common.cl), and
 * the relative L2 difference.  Header-only: each test is one binary.
 */
#ifndef RC_OCL_TESTUTIL_H
#define RC_OCL_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/opencl/engine_opencl.h"
#include "geometry/geometry.h"

static inline rc_geom *tu_cone(int nvol, int nu, int nv, int nviews)
{
	double *ang = malloc((size_t)nviews * sizeof *ang);
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews + 3.0;
	rc_geom_spec s = { .type = RC_GEOM_CONE, .nviews = nviews,
			   .det = { .nu = nu, .nv = nv, .du = 1.2 * 64.0 / nu, .dv = 1.2 * 64.0 / nv,
				    .offset_u = 0.3, .offset_v = -0.2 },
			   .source_isocenter_mm = 300, .source_detector_mm = 500, .angles_deg = ang };
	rc_volume_desc v = { .nx = nvol, .ny = nvol + 2, .nz = nvol - 2, .vx = 32.0 / nvol, .vy = 32.0 / nvol,
			     .vz = 36.0 / nvol, .cx = 0.5, .cy = -0.25, .cz = 0.3 };
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s, &v, NULL, &g, &err)) {
		fprintf(stderr, "geometry: %s\n", err.msg);
		g = NULL;
	}
	free(ang);
	return g;
}

static inline double tu_proj_at(const float *p, int k, int i, int j, int nu, int nv)
{
	if (i < 0 || j < 0 || i >= nu || j >= nv)
		return 0;
	return p[((size_t)k * nv + j) * nu + i];
}

/* RC_BP_VOXEL in double precision, voxel by voxel. */
static inline void tu_ref_bp(const rc_geom *g, const float *proj, double *vol, int first, int last)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	for (int z = 0; z < v->nz; z++)
		for (int y = 0; y < v->ny; y++)
			for (int x = 0; x < v->nx; x++) {
				double pos[3], u, vv, w, acc = 0;
				rc_volume_voxel_pos(v, x, y, z, pos);
				for (int k = first; k < last; k++) {
					rc_view_project(rc_geom_view(g, k), pos, &u, &vv, &w);
					double fu = floor(u), fv = floor(vv), a = u - fu, b = vv - fv;
					int i = (int)fu, j = (int)fv;
					double s = (1 - b) * ((1 - a) * tu_proj_at(proj, k, i, j, d->nu, d->nv) +
							      a * tu_proj_at(proj, k, i + 1, j, d->nu, d->nv)) +
						   b * ((1 - a) * tu_proj_at(proj, k, i, j + 1, d->nu, d->nv) +
							a * tu_proj_at(proj, k, i + 1, j + 1, d->nu, d->nv));
					acc += s / (w * w);
				}
				vol[((size_t)z * v->ny + y) * v->nx + x] = acc;
			}
}

static inline double tu_vol_at(const float *f, const rc_volume_desc *v, int x, int y, int z)
{
	if (x < 0 || y < 0 || z < 0 || x >= v->nx || y >= v->ny || z >= v->nz)
		return 0;
	return f[((size_t)z * v->ny + y) * v->nx + x];
}

/* RC_FP_RAYCAST in double precision: clip to the trilinear support, sample
 * at (m + 1/2) h, h = half the smallest voxel, trilinear, times h.  With
 * bpm != NULL it runs the transpose instead: bpm (the volume, zeroed by the
 * caller) += h * pin(ray) * weight for every sample and corner. */
static inline void tu_ref_ray(const rc_geom *g, const float *f, double *proj, int first, int last,
			      const float *pin, double *bpm)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	double o[3], lo[3], hi[3], sp[3] = { v->vx, v->vy, v->vz };
	int n[3] = { v->nx, v->ny, v->nz };
	rc_volume_voxel_pos(v, 0, 0, 0, o);
	for (int a = 0; a < 3; a++) { /* the trilinear support: index -1 .. n */
		lo[a] = o[a] - sp[a];
		hi[a] = o[a] + n[a] * sp[a];
	}
	double h = 0.5 * fmin(v->vx, fmin(v->vy, v->vz));
	for (int k = first; k < last; k++)
		for (int j = 0; j < d->nv; j++)
			for (int i = 0; i < d->nu; i++) {
				double s[3], dir[3], t0 = 0, t1 = INFINITY, sum = 0;
				rc_geom_ray(g, k, i, j, 0, s, dir);
				for (int a = 0; a < 3; a++) {
					if (fabs(dir[a]) < 1e-12) {
						if (s[a] < lo[a] || s[a] > hi[a])
							t1 = -1;
						continue;
					}
					double ta = (lo[a] - s[a]) / dir[a], tb = (hi[a] - s[a]) / dir[a];
					t0 = fmax(t0, fmin(ta, tb));
					t1 = fmin(t1, fmax(ta, tb));
				}
				if (t1 > t0) {
					int m = (int)ceil((t1 - t0) / h);
					for (int q = 0; q < m; q++) {
						double t = t0 + (q + 0.5) * h, c[3];
						for (int a = 0; a < 3; a++)
							c[a] = (s[a] + t * dir[a] - o[a]) / sp[a];
						double fx = floor(c[0]), fy = floor(c[1]), fz = floor(c[2]);
						int x = (int)fx, y = (int)fy, z = (int)fz;
						double dx = c[0] - fx, dy = c[1] - fy, dz = c[2] - fz, acc = 0;
						for (int b = 0; b < 8; b++) {
							int bx = b & 1, by = (b >> 1) & 1, bz = b >> 2;
							double wgt = (bx ? dx : 1 - dx) * (by ? dy : 1 - dy) * (bz ? dz : 1 - dz);
							if (bpm) {
								int X = x + bx, Y = y + by, Z = z + bz;
								if (X >= 0 && Y >= 0 && Z >= 0 && X < v->nx && Y < v->ny && Z < v->nz)
									bpm[((size_t)Z * v->ny + Y) * v->nx + X] +=
										h * wgt * pin[((size_t)k * d->nv + j) * d->nu + i];
							} else {
								acc += wgt * tu_vol_at(f, v, x + bx, y + by, z + bz);
							}
						}
						sum += acc;
					}
				}
				if (!bpm)
					proj[((size_t)k * d->nv + j) * d->nu + i] = sum * h;
			}
}

static inline void tu_ref_fp(const rc_geom *g, const float *f, double *proj, int first, int last)
{
	tu_ref_ray(g, f, proj, first, last, NULL, NULL);
}

static inline void tu_ref_bpm(const rc_geom *g, const float *p, double *vol, int first, int last)
{
	size_t n = rc_volume_count(rc_geom_volume(g));
	for (size_t i = 0; i < n; i++)
		vol[i] = 0;
	tu_ref_ray(g, NULL, NULL, first, last, p, vol);
}

/* ||a - b|| / ||b|| over n elements. */
static inline double tu_rel_f_d(const float *a, const double *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += (a[i] - b[i]) * (a[i] - b[i]);
		den += b[i] * b[i];
	}
	return sqrt(num / den);
}

static inline double tu_rel_f_f(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return sqrt(num / den);
}

/* A ball of attenuation mu and radius r mm at c, sampled at voxel centres. */
static inline void tu_ball(const rc_volume_desc *v, const double c[3], double r, float mu, float *f)
{
	for (int z = 0; z < v->nz; z++)
		for (int y = 0; y < v->ny; y++)
			for (int x = 0; x < v->nx; x++) {
				double p[3];
				rc_volume_voxel_pos(v, x, y, z, p);
				double d2 = (p[0] - c[0]) * (p[0] - c[0]) + (p[1] - c[1]) * (p[1] - c[1]) +
					    (p[2] - c[2]) * (p[2] - c[2]);
				f[((size_t)z * v->ny + y) * v->nx + x] = d2 <= r * r ? mu : 0.0f;
			}
}

#if defined(__SANITIZE_ADDRESS__)
/* PoCL compiles each kernel with LLVM at its first launch for a work size
 * and never frees part of what LLVM allocates; with a cold PoCL kernel
 * cache (POCL_CACHE_DIR) LeakSanitizer reports it at exit (2.8 MB in 4900
 * allocations for test_engine_opencl), with a warm one nothing.  Every
 * reported stack starts in libpocl or libLLVM right after the allocator, so
 * exactly those two libraries' leaks are ignored (this also hides a leaked
 * cl_mem, which PoCL allocates: the OpenCL code releases through one
 * cleanup path per function instead). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libpocl.so\nleak:libLLVM\n";
}
#endif

/* Exit 77 with a message when there is no OpenCL device. */
static inline void tu_need_opencl(void)
{
	rc_opencl_device d[RC_OPENCL_MAX_DEVICES];
	int n = 0;
	rc_err err;
	if (rc_opencl_devices(d, RC_OPENCL_MAX_DEVICES, &n, &err) || n == 0) {
		printf("no OpenCL platform or device found: skipped\n");
		exit(77);
	}
}

/* The guarded inverse's cases (rc_vinv_guarded, ew_inv_guarded) written
 * over a: zeros, negatives, values under a 1e-3 guard, one far maximum. */
static inline void tu_guard_cases(float *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i % 11 == 3)
			a[i] = 0.0f;
		else if (i % 13 == 4)
			a[i] = -a[i];
		else if (i % 17 == 5)
			a[i] *= 1e-4f;
	}
	if (n > 2)
		a[n / 2] = 50.0f;
}

#endif
