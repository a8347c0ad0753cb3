/*
 * bp_plane: the projections of a fan or parallel stack ([slice][view][u]
 * projections, one slice per volume z, every slice sharing the view's
 * in-plane matrix A: (u w, w) = A (x, y, 1), w the depth in mm for fan and
 * 1 for parallel).
 *
 * Per-view geometry, RC_PLANE_FLOATS floats per view, written by the host
 * (engine_opencl.c, with core/projectors' rc_plane_view, which the C
 * references read too) from A and the volume grid, so that the kernels
 * work in voxel indices (i, j) of a slice:
 *   [0] c0 = A0 x0 + A1 y0 + A2   [1] d0x = A0 vx   [2] d0y = A1 vy
 *   [3] c1 = A3 x0 + A4 y0 + A5   [4] d1x = A3 vx   [5] d1y = A4 vy
 * with (x0, y0) the centre of voxel (0, 0): u w = c0 + d0x i + d0y j and
 * w = c1 + d1x i + d1y j.
 *
 * A curved (equiangular) fan keeps these rows (A is the flat detector
 * tangent to the arc: rows the C reference's rc_plane_view) and maps
 * h = u w and w to the arc through cu = (nu-1)/2 - offset_u/du and
 * sdu = S/du (proj_cpu.h's rc_plane_arc): y = h - cu w and x = sdu w are
 * the point's side and depth times S/du, its pixel index atan2(y, x) sdu
 * + cu.  curved = 0 takes the flat path, unchanged.
 *
 * Contraction off: the C references (core/projectors/proj_plane.c) are
 * built with -ffp-contract=off, and the engines are compared to 1e-5.
 */
#pragma OPENCL FP_CONTRACT OFF

#define RC_PLANE_FLOATS 6

/* Detector row value at continuous pixel u, linear, zero outside (pixel
 * centres at integers: the pixels -1 and nu count as 0), as proj_plane.c's
 * zero-bordered row reads it. */
static float plane_lerp(__global const float *restrict row, float u, int nu)
{
	u = clamp(u, -1.0f, (float)nu);
	float fl = floor(u), f = u - fl;
	int i = (int)fl;
	float a = i >= 0 && i < nu ? row[i] : 0.0f;
	float b = i + 1 >= 0 && i + 1 < nu ? row[i + 1] : 0.0f;
	return a + f * (b - a);
}


/*
 * bp_plane: RC_BP_VOXEL of a 2-D stack (FBP's back projection, paper 002
 * Eq. 1 in the plane), what proj_plane.c's rc_bp_plane computes:
 *   out[z][j][i] [+]= sum over views k in [first, last) of p[z][k](u) / w^2
 * (w = 1 for parallel: fan = 0; a curved fan's u on the arc and 1/L^2,
 * L the distance from the source, for 1/w^2: rc_plane_fbp_weight's
 * cos^2(gamma) / w^2).  One work-item per voxel, views summed in
 * order; the host launches RC_OCL_BP_CHUNK views at a time with
 * accumulate set after the first launch.
 */
__kernel void bp_plane(__global float *restrict out, __global const float *restrict proj,
		       __global const float *restrict pv, int first, int last, int accumulate, int4 n, int nu,
		       int nviews, int fan, int curved, float cu, float sdu)
{
	int i = get_global_id(0), j = get_global_id(1), z = get_global_id(2);
	if (i >= n.x || j >= n.y || z >= n.z)
		return;
	__global const float *slice = proj + (size_t)z * nviews * nu;
	float acc = 0.0f;
	for (int k = first; k < last; k++) {
		__global const float *V = pv + (size_t)k * RC_PLANE_FLOATS;
		float w = V[3] + V[5] * j + V[4] * i;
		if (curved) {
			float h = V[0] + V[2] * j + V[1] * i;
			float y = h - cu * w, x = sdu * w;
			float val = plane_lerp(slice + (size_t)k * nu, atan2(y, x) * sdu + cu, nu);
			/* 1/L^2 = sdu^2 / (x^2 + y^2): no trigonometry */
			acc += val * (sdu * sdu / (x * x + y * y));
			continue;
		}
		float iw = 1.0f / w;
		float u = (V[0] + V[2] * j + V[1] * i) * iw;
		float val = plane_lerp(slice + (size_t)k * nu, u, nu);
		acc += fan ? val * iw * iw : val;
	}
	size_t idx = ((size_t)z * n.y + j) * n.x + i;
	out[idx] = accumulate ? out[idx] + acc : acc;
}

/*
 * The matched pair of the iterative algorithms on a 2-D stack: Joseph's
 * forward projection (RC_FP_RAYCAST on 2-D) and its exact transpose as a
 * gather (RC_BP_MATCHED on 2-D), each float operation as in
 * core/projectors/proj_joseph.c (its comment has the derivation).  The ray
 * of pixel iu is the line a i + b j + c = 0 in voxel indices of a slice,
 * sampled per column (percol) or per row, ds mm per sample, read from the
 * host's table (both kernels read the same floats).
 */
#define RC_PLANE_RAY_FLOATS 4

typedef struct plane_ray {
	float a, b, c, ds;
	int percol;
} plane_ray;

/* pixel iu's ray of view k from the host's table (core/projectors'
 * rc_plane_rays: a, b, c, ds) */
static plane_ray plane_ray_get(__global const float *restrict rays, int k, int nu, int iu)
{
	__global const float *p = rays + ((size_t)k * nu + iu) * RC_PLANE_RAY_FLOATS;
	plane_ray r;
	r.a = p[0];
	r.b = p[1];
	r.c = p[2];
	r.ds = p[3];
	r.percol = fabs(r.b) >= fabs(r.a);
	return r;
}

/* where the ray crosses column (row) idx, in rows (columns) */
static float plane_ray_at(const plane_ray *r, int idx)
{
	return r->percol ? -(r->a * (float)idx + r->c) / r->b : -(r->b * (float)idx + r->c) / r->a;
}

/*
 * fp_plane: out[z][k][iu] = the line integral of slice z along pixel iu's
 * ray of view k, for views first + get_global_id(1); one work-item per
 * (pixel, view, slice).  Every sample along the ray is visited (the C
 * reference narrows the span in double; the samples it skips add zero), so
 * no sample the gather counts is missed.
 */
__kernel void fp_plane(__global float *restrict out, __global const float *restrict vol,
		       __global const float *restrict rays, int first, int last, int4 n, int nu, int nviews)
{
	int iu = get_global_id(0), k = first + (int)get_global_id(1), z = get_global_id(2);
	if (iu >= nu || k >= last || z >= n.z)
		return;
	plane_ray r = plane_ray_get(rays, k, nu, iu);
	__global const float *slice = vol + (size_t)z * n.y * n.x;
	int ns = r.percol ? n.x : n.y, m = r.percol ? n.y : n.x;
	float sum = 0.0f;
	for (int s = 0; s < ns; s++) {
		float t = plane_ray_at(&r, s);
		float fl = floor(t);
		if (fl < -1.0f || fl >= (float)m)
			continue;
		int c0 = (int)fl;
		for (int c = c0; c <= c0 + 1; c++) {
			if (c < 0 || c >= m)
				continue;
			float wgt = 1.0f - fabs(t - (float)c);
			sum += wgt * (r.percol ? slice[(size_t)c * n.x + s] : slice[(size_t)s * n.x + c]);
		}
	}
	out[((size_t)z * nviews + k) * nu + iu] = sum * r.ds;
}

/* detector position of voxel index point (p, q) in view V */
static float plane_u_of(__global const float *restrict V, float p, float q)
{
	return (V[0] + V[1] * p + V[2] * q) / (V[3] + V[4] * p + V[5] * q);
}

/* a curved fan: the tangent of the point's fan angle, side / depth; the
 * arc index atan(t) sdu + cu is monotone in it and along a line that
 * misses the source, so the search below holds on the arc with one atan
 * for each of the extreme tangents (proj_joseph.c's tan_arc) */
static float plane_tan_arc(__global const float *restrict V, float p, float q, float cu, float sdu)
{
	float h = V[0] + V[1] * p + V[2] * q, w = V[3] + V[4] * p + V[5] * q;
	return (h - cu * w) / (sdu * w);
}

/*
 * bp_plane_t: out[z][j][i] [+]= the transpose of fp_plane over views
 * [first, last): one work-item per voxel, gathering from each view the
 * pixels between the projections of the ends of the voxel's two segments
 * (one voxel either side across each sampling direction) and keeping those
 * whose ray weighs it, with fp_plane's own expression for the weight.
 */
__kernel void bp_plane_t(__global float *restrict out, __global const float *restrict proj,
			 __global const float *restrict pv, __global const float *restrict rays, int first, int last,
			 int accumulate, int4 n, int nu, int nviews, int curved, float cu, float sdu)
{
	int i = get_global_id(0), j = get_global_id(1), z = get_global_id(2);
	if (i >= n.x || j >= n.y || z >= n.z)
		return;
	__global const float *slice = proj + (size_t)z * nviews * nu;
	float fi = (float)i, fj = (float)j;
	float acc = 0.0f;
	for (int k = first; k < last; k++) {
		__global const float *V = pv + (size_t)k * RC_PLANE_FLOATS;
		__global const float *row = slice + (size_t)k * nu;
		float e0, e1, e2, e3;
		if (curved) {
			e0 = plane_tan_arc(V, fi, fj - 1.0f, cu, sdu);
			e1 = plane_tan_arc(V, fi, fj + 1.0f, cu, sdu);
			e2 = plane_tan_arc(V, fi - 1.0f, fj, cu, sdu);
			e3 = plane_tan_arc(V, fi + 1.0f, fj, cu, sdu);
		} else {
			e0 = plane_u_of(V, fi, fj - 1.0f);
			e1 = plane_u_of(V, fi, fj + 1.0f);
			e2 = plane_u_of(V, fi - 1.0f, fj);
			e3 = plane_u_of(V, fi + 1.0f, fj);
		}
		float umin = fmin(fmin(e0, e1), fmin(e2, e3)), umax = fmax(fmax(e0, e1), fmax(e2, e3));
		if (curved) {
			umin = atan(umin) * sdu + cu;
			umax = atan(umax) * sdu + cu;
		}
		if (!(umax >= 0.0f && umin <= (float)(nu - 1)))
			continue;
		int lo = umin <= 0.0f ? 0 : (int)floor(umin);
		int hi = umax >= (float)(nu - 1) ? nu - 1 : (int)ceil(umax);
		for (int iu = lo; iu <= hi; iu++) {
			plane_ray r = plane_ray_get(rays, k, nu, iu);
			float d = r.percol ? fabs(plane_ray_at(&r, i) - fj) : fabs(plane_ray_at(&r, j) - fi);
			if (d < 1.0f)
				acc += (1.0f - d) * r.ds * row[iu];
		}
	}
	size_t idx = ((size_t)z * n.y + j) * n.x + i;
	out[idx] = accumulate ? out[idx] + acc : acc;
}
