/*
 * tensor_otf: the on-the-fly distance-driven baseline of paper 001 Table 4:
 * the weights of core/dd_matrix.c's rc_dd_row recomputed in every product
 * (same geometry, same double-precision boundary intersections), so the
 * baseline trades the matrix's memory traffic for arithmetic.
 *
 * One thread per (natural row, 32 slices).  Forward keeps 32 sums in
 * registers and writes its row once; backward scatters w * y into the
 * pixels with atomics (the transpose of a row walk).
 */
#include "backend/tensor/tensor_kernels.cuh"

/* Calls f(pixel, weight) for the pixels of row (view k, bin u), as
 * rc_dd_row does. */
template <typename F>
__device__ void dd_row_visit(const rc_dgeom &g, int k, int u, F f)
{
	const double *A = g.A + 6 * k;
	double e0 = u - 0.5, e1 = u + 0.5, ec = u;
	double a0 = A[0] - e0 * A[3], b0 = A[1] - e0 * A[4], c0 = A[2] - e0 * A[5];
	double a1 = A[0] - e1 * A[3], b1 = A[1] - e1 * A[4], c1 = A[2] - e1 * A[5];
	double ac = A[0] - ec * A[3], bc = A[1] - ec * A[4];
	double nn = sqrt(ac * ac + bc * bc);
	double x0 = g.cx - g.nx * g.vx / 2, y0 = g.cy - g.ny * g.vy / 2;
	if (!(nn > 0))
		return;
	int rows_mode = fabs(ac) >= fabs(bc);
	double pa0 = rows_mode ? a0 : b0, pa1 = rows_mode ? a1 : b1;
	if (fabs(pa0) < 1e-12 * nn || fabs(pa1) < 1e-12 * nn)
		return;
	int nline = rows_mode ? g.ny : g.nx, nalong = rows_mode ? g.nx : g.ny;
	double sline = rows_mode ? g.vy : g.vx, salong = rows_mode ? g.vx : g.vy;
	double lo0 = rows_mode ? y0 : x0, p0 = rows_mode ? x0 : y0;
	double L = sline * nn / fabs(rows_mode ? ac : bc);
	for (int j = 0; j < nline; j++) {
		double t = lo0 + (j + 0.5) * sline;
		double pa, pb, depth;
		if (rows_mode) {
			pa = -(b0 * t + c0) / a0;
			pb = -(b1 * t + c1) / a1;
			depth = A[3] * 0.5 * (pa + pb) + A[4] * t + A[5];
		} else {
			pa = -(a0 * t + c0) / b0;
			pb = -(a1 * t + c1) / b1;
			depth = A[3] * t + A[4] * 0.5 * (pa + pb) + A[5];
		}
		if (depth <= 0)
			continue;
		if (pa > pb) {
			double s = pa;
			pa = pb;
			pb = s;
		}
		double width = pb - pa, p1 = p0 + nalong * salong;
		if (!(width > 0) || pb <= p0 || pa >= p1)
			continue;
		int ia = (int)floor((pa - p0) / salong), ib = (int)floor((pb - p0) / salong);
		if (ia < 0)
			ia = 0;
		if (ib > nalong - 1)
			ib = nalong - 1;
		for (int i = ia; i <= ib; i++) {
			double lo = p0 + i * salong, hi = lo + salong;
			if (pa > lo)
				lo = pa;
			if (pb < hi)
				hi = pb;
			if (hi <= lo)
				continue;
			int pix = rows_mode ? j * g.nx + i : i * g.nx + j;
			f(pix, (float)((hi - lo) / width * L));
		}
	}
}

__global__ void k_otf_fwd(rc_dgeom g, const float *x, float *y, int nc)
{
	int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	int c0 = blockIdx.y * 32;
	if (row >= (int64_t)g.nviews * g.nu)
		return;
	float acc[32];
#pragma unroll
	for (int j = 0; j < 32; j++)
		acc[j] = 0;
	const int *cperm = g.cperm;
	dd_row_visit(g, (int)(row / g.nu), (int)(row % g.nu), [&](int pix, float w) {
		const float *xr = x + (int64_t)(cperm ? cperm[pix] : pix) * nc + c0;
#pragma unroll
		for (int j = 0; j < 32; j++)
			acc[j] += w * xr[j];
	});
	float *yr = y + (int64_t)(g.rperm ? g.rperm[row] : row) * nc + c0;
#pragma unroll
	for (int j = 0; j < 32; j++)
		yr[j] = acc[j];
}

__global__ void k_otf_back(rc_dgeom g, const float *y, float *x, int nc)
{
	int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	int c0 = blockIdx.y * 32;
	if (row >= (int64_t)g.nviews * g.nu)
		return;
	float yv[32];
	const float *yr = y + (int64_t)(g.rperm ? g.rperm[row] : row) * nc + c0;
#pragma unroll
	for (int j = 0; j < 32; j++)
		yv[j] = yr[j];
	const int *cperm = g.cperm;
	dd_row_visit(g, (int)(row / g.nu), (int)(row % g.nu), [&](int pix, float w) {
		float *xr = x + (int64_t)(cperm ? cperm[pix] : pix) * nc + c0;
#pragma unroll
		for (int j = 0; j < 32; j++)
			atomicAdd(&xr[j], w * yv[j]);
	});
}

void rc_tk_otf_fwd(const rc_dgeom *g, const float *x, float *y, int nc, cudaStream_t st)
{
	int64_t rows = (int64_t)g->nviews * g->nu;
	dim3 grid((unsigned)((rows + 127) / 128), nc / 32);
	k_otf_fwd<<<grid, 128, 0, st>>>(*g, x, y, nc);
}

void rc_tk_otf_back(const rc_dgeom *g, const float *y, float *x, int nc, cudaStream_t st)
{
	int64_t rows = (int64_t)g->nviews * g->nu;
	dim3 grid((unsigned)((rows + 127) / 128), nc / 32);
	k_otf_back<<<grid, 128, 0, st>>>(*g, y, x, nc);
}
