/*
 * tv: the total-variation operator out = D^T W(w) D d of
 * core/backend/tv_host.h on device buffers (the OpenCL backend's tv_apply),
 * one work-item per voxel of [z][y][x] volumes.
 *
 * The host computes the weights W once per slice; here each work-item
 * computes the four it needs (its own and its lower neighbours' in x, y
 * and z) from w, which costs reads of w's neighbourhood but no volume of
 * weights.  Every float operation is the host's, in the host's order,
 * with contraction off, so that the two agree to the rounding of sqrt and
 * the division: a border's missing difference is an exact 0 (r - r), and
 * the terms of a voxel without a lower neighbour are (c - c) times its own
 * weight, as in tv_host.c.
 */
#pragma OPENCL FP_CONTRACT OFF

/* W(w) at (ix, iy, iz): 1 / sqrt(|D w|^2 + eps^2) */
static float tv_weight(__global const float *w, int ix, int iy, int iz, int4 n, int planar, float eps2)
{
	const size_t sy = (size_t)n.x, sz = sy * (size_t)n.y;
	const size_t i = (size_t)iz * sz + (size_t)iy * sy + (size_t)ix;
	const float c = w[i];
	const float dx = ix + 1 < n.x ? w[i + 1] - c : 0.0f;
	const float dy = iy + 1 < n.y ? w[i + sy] - c : 0.0f;
	const float dz = !planar && iz + 1 < n.z ? w[i + sz] - c : 0.0f;
	return 1.0f / sqrt(dx * dx + dy * dy + dz * dz + eps2);
}

__kernel void tv_apply(__global float *restrict out, __global const float *w, __global const float *d, int4 n,
		       int planar, float eps2)
{
	const int ix = get_global_id(0), iy = get_global_id(1), iz = get_global_id(2);
	if (ix >= n.x || iy >= n.y || iz >= n.z)
		return;
	const size_t sy = (size_t)n.x, sz = sy * (size_t)n.y;
	const size_t i = (size_t)iz * sz + (size_t)iy * sy + (size_t)ix;
	const int zin = !planar && iz + 1 < n.z, zlo = !planar && iz > 0;
	const float c = d[i];
	const float dx = ix + 1 < n.x ? d[i + 1] - c : 0.0f;
	const float dy1 = iy + 1 < n.y ? d[i + sy] : c, dz1 = zin ? d[i + sz] : c;
	const float dy0 = iy > 0 ? d[i - sy] : c, dz0 = zlo ? d[i - sz] : c;
	const float wc = tv_weight(w, ix, iy, iz, n, planar, eps2);
	const float wy = iy > 0 ? tv_weight(w, ix, iy - 1, iz, n, planar, eps2) : wc;
	const float wz = zlo ? tv_weight(w, ix, iy, iz - 1, n, planar, eps2) : wc;
	float o = -(dx + (dy1 - c) + (dz1 - c)) * wc;
	if (ix > 0)
		o += (c - d[i - 1]) * tv_weight(w, ix - 1, iy, iz, n, planar, eps2);
	o += (c - dy0) * wy;
	o += (c - dz0) * wz;
	out[i] = o;
}
