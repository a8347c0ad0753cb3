/*
 * proj_footprint_col: the column loops of the separable-footprint pair
 * (proj_footprint.c), included once per ISA file with RC_FPF_SUFFIX naming
 * them, so the same C is compiled for baseline x86-64, AVX2 and AVX-512
 * (the row loops below vectorise; the rest is the same code on each path).
 *
 * On a cone view (P[2] = P[10] = 0) a voxel column has one depth w and one
 * u footprint (the trapezoid of proj_footprint.c, weights wu on detector
 * columns ja .. ja + nwu - 1, 1/w^2 folded in), and its voxels' axial
 * rectangles tile the detector column: voxel m (in increasing v) covers
 * [B + m S, B + (m + 1) S] in pixel units (S = |dv/dz| vz > 0), row k
 * covers [k - 1/2, k + 1/2], and the weight of the pair (m, k) is their
 * overlap over S.  So the column's contribution is one 1-D
 * distance-driven pass along v (about nz + rows steps) and one outer
 * product with wu, and its transpose the same steps in reverse order:
 *     forward  t_k = sum_m a_m ov(m, k) / S,  img[j][k] += wu_j t_k
 *     back     t_k = sum_j wu_j img[j][k],    a_m += sum_k ov(m, k) / S t_k
 * Both sides call col_weights below for the overlaps, so the weights are
 * the same floats: the pair is the exact transpose up to the order of the
 * float sums.
 */
#ifndef RC_PROJ_FOOTPRINT_COL_H
#define RC_PROJ_FOOTPRINT_COL_H

#include <math.h>
#include <stddef.h>

/* A column's axial set-up: rectangles from B, S each (pixel units); rev:
 * the volume's z runs against v (voxel m is z = nz - 1 - m); rows k0..k1
 * (clipped to the detector) are the ones it touches. */
typedef struct rc_fpf_col {
	double B, S;
	int nz, rev, k0, k1;
} rc_fpf_col;

/* Returns 0 when the column misses the detector's rows 0..nv-1. */
static inline int rc_fpf_col_init(rc_fpf_col *c, double V0, double dv, int nz, int nv)
{
	c->nz = nz;
	c->rev = dv < 0;
	c->S = fabs(dv);
	/* lower edge of the lowest voxel (v_z = V0 + z dv at the centres) */
	c->B = V0 + (c->rev ? (nz - 1) * dv : 0.0) - 0.5 * c->S;
	double top = c->B + nz * c->S;
	if (!(c->S > 0) || top <= -0.5 || c->B >= nv - 0.5)
		return 0;
	c->k0 = c->B <= -0.5 ? 0 : (int)floor(c->B + 0.5);
	c->k1 = top >= nv - 0.5 ? nv - 1 : (int)floor(top + 0.5);
	return c->k0 <= c->k1;
}

void rc_fpf_fwd_col_baseline(const float *restrict a, const rc_fpf_col *c, const float *restrict wu, int nwu,
			     float *restrict img, int nv, float *restrict t);
void rc_fpf_fwd_col_avx2(const float *restrict a, const rc_fpf_col *c, const float *restrict wu, int nwu,
			 float *restrict img, int nv, float *restrict t);
void rc_fpf_fwd_col_avx512(const float *restrict a, const rc_fpf_col *c, const float *restrict wu, int nwu,
			   float *restrict img, int nv, float *restrict t);
void rc_fpf_bwd_col_baseline(float *restrict acc, const rc_fpf_col *c, const float *restrict wu, int nwu,
			     const float *restrict img, int nv, float *restrict t);
void rc_fpf_bwd_col_avx2(float *restrict acc, const rc_fpf_col *c, const float *restrict wu, int nwu,
			 const float *restrict img, int nv, float *restrict t);
void rc_fpf_bwd_col_avx512(float *restrict acc, const rc_fpf_col *c, const float *restrict wu, int nwu,
			   const float *restrict img, int nv, float *restrict t);

#endif

#ifdef RC_FPF_SUFFIX
#define RC_FPF_CAT2(a, b) a##_##b
#define RC_FPF_CAT(a, b) RC_FPF_CAT2(a, b)

/* The voxels m_lo..m_hi whose rectangles reach rows k0..k1, in order,
 * calling body(m, k, weight) for every overlapping pair: the rows of
 * voxel m are those whose pixel [k - 1/2, k + 1/2] meets [B + m S, B +
 * (m + 1) S]; the boundaries walk in float from one start so that the
 * forward and the back pass see identical weights. */
#define RC_FPF_WALK(c, BODY)                                                                                  \
	do {                                                                                                  \
		const double iS_ = 1.0 / (c)->S;                                                              \
		int m_lo_ = (int)floor(((c)->k0 - 0.5 - (c)->B) * iS_);                                      \
		int m_hi_ = (int)floor(((c)->k1 + 0.5 - (c)->B) * iS_);                                      \
		m_lo_ = m_lo_ < 0 ? 0 : m_lo_;                                                                \
		m_hi_ = m_hi_ > (c)->nz - 1 ? (c)->nz - 1 : m_hi_;                                            \
		const float fiS_ = (float)iS_;                                                                \
		int k_ = (c)->k0;                                                                             \
		float lo_ = (float)((c)->B + m_lo_ * (c)->S - k_);                                            \
		const float fS_ = (float)(c)->S;                                                              \
		for (int m_ = m_lo_; m_ <= m_hi_; m_++) {                                                     \
			/* voxel m spans [lo, lo + S] relative to row k's centre */                          \
			float hi_ = lo_ + fS_;                                                                \
			const int z_ = (c)->rev ? (c)->nz - 1 - m_ : m_;                                      \
			for (;;) {                                                                            \
				float a_ = lo_ > -0.5f ? lo_ : -0.5f, b_ = hi_ < 0.5f ? hi_ : 0.5f;         \
				if (b_ > a_) {                                                                \
					const float w_ = (b_ - a_) * fiS_;                                    \
					const int kk_ = k_;                                                   \
					BODY(z_, kk_, w_);                                                    \
				}                                                                             \
				/* the voxel goes on past this row: next row */                              \
				if (hi_ > 0.5f && k_ < (c)->k1) {                                             \
					k_++;                                                                 \
					lo_ -= 1.0f;                                                          \
					hi_ -= 1.0f;                                                          \
					continue;                                                             \
				}                                                                             \
				break;                                                                        \
			}                                                                                     \
			lo_ = hi_;                                                                            \
		}                                                                                             \
	} while (0)

void RC_FPF_CAT(rc_fpf_fwd_col, RC_FPF_SUFFIX)(const float *restrict a, const rc_fpf_col *c,
						const float *restrict wu, int nwu, float *restrict img, int nv,
						float *restrict t)
{
	const int k0 = c->k0, n = c->k1 - c->k0 + 1;
	for (int k = k0; k <= c->k1; k++)
		t[k] = 0.0f;
#define RC_FPF_FWD_BODY(z, k, w) t[k] += (w) * a[z]
	RC_FPF_WALK(c, RC_FPF_FWD_BODY);
#undef RC_FPF_FWD_BODY
	for (int j = 0; j < nwu; j++) {
		float *restrict col = img + (size_t)j * (size_t)nv + k0;
		const float wj = wu[j];
		const float *restrict tt = t + k0;
		for (int k = 0; k < n; k++)
			col[k] += wj * tt[k];
	}
}

void RC_FPF_CAT(rc_fpf_bwd_col, RC_FPF_SUFFIX)(float *restrict acc, const rc_fpf_col *c, const float *restrict wu,
						int nwu, const float *restrict img, int nv, float *restrict t)
{
	const int k0 = c->k0, n = c->k1 - c->k0 + 1;
	float *restrict tt = t + k0;
	for (int k = 0; k < n; k++)
		tt[k] = 0.0f;
	for (int j = 0; j < nwu; j++) {
		const float *restrict col = img + (size_t)j * (size_t)nv + k0;
		const float wj = wu[j];
		for (int k = 0; k < n; k++)
			tt[k] += wj * col[k];
	}
#define RC_FPF_BWD_BODY(z, k, w) acc[z] += (w) * t[k]
	RC_FPF_WALK(c, RC_FPF_BWD_BODY);
#undef RC_FPF_BWD_BODY
}

#endif
