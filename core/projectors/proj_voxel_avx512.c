/* The voxel back projector's tile loops compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_voxel_tile.h); called only when the CPU has them.
 *
 * The cone path's column loop is replaced by one without gathers (a gather
 * costs ~30 cycles on the Xeons measured, docs/cpu-engine.md).  A voxel
 * column reads one pair of detector columns c0, c1 at v = v0 + z dv, so 16
 * consecutive z fall in a window of at most 15 |dv| + 3 consecutive rows.
 * The window of both columns is loaded with plain vector loads and blended,
 * T = c0 + fu (c1 - c0); each voxel's two samples T[iv], T[iv + 1] are
 * picked out of registers with two-source permutes (vpermt2ps, 32 entries
 * each; the window is the fewest vectors of 16 rows, 2 to 8, that hold it,
 * one permute per 32-row part masked to its lanes).  Voxels whose v
 * is off the detector are dropped before the loop (they add zero), so no
 * chunk clamps.  Columns whose window is wider than 128 rows (voxels much
 * larger than pixels), or with dv < 0, take the portable loop.  The
 * arithmetic is the portable loop's (plus one FMA for v). */
#pragma GCC target("tune=skylake-avx512,prefer-vector-width=512")
#include <immintrin.h>
#include <math.h>

#include "projectors/proj_avx512_pick.h"
#include "projectors/proj_voxel_tile.h"

/* rc_avx512_pick (proj_avx512_pick.h, shared with the footprint pair's
 * taps) for the general loop's windows of 64 or 128 rows */
static inline __m512 pick64(const __m512 *t, __m512i rel) { return rc_avx512_pick(4, t, rel); }
static inline __m512 pick128(const __m512 *t, __m512i rel) { return rc_avx512_pick(8, t, rel); }

/* A chunk of 16 voxels z .. z+15: the fraction of v = v0 + zw dv, the
 * window's first row ivmin (lane 0: v grows with z) and each lane's row in
 * the window, rel (and rel + 1).  No clamping: the caller keeps v in
 * [0, vmax] for every voxel it adds. */
struct chunk_idx {
	__m512 fv;
	__m512i rel, rel1;
	int ivmin;
};

static inline struct chunk_idx chunk_idx(const float *zw, __m512 dvv, __m512 v0v)
{
	struct chunk_idx c;
	__m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(zw), dvv, v0v);
	__m512i iv = _mm512_cvttps_epi32(v);
	c.fv = _mm512_sub_ps(v, _mm512_cvtepi32_ps(iv));
	c.ivmin = _mm_cvtsi128_si32(_mm512_castsi512_si128(iv));
	c.rel = _mm512_sub_epi32(iv, _mm512_set1_epi32(c.ivmin));
	c.rel1 = _mm512_add_epi32(c.rel, _mm512_set1_epi32(1));
	return c;
}

/* One chunk's value top + fv (bot - top) for a window of NV vectors (16 NV
 * rows): the window of both detector columns is blended,
 * T = c0 + fu (c1 - c0), and T[iv], T[iv + 1] are picked.  HAT: the splat
 * footprint's weights instead, h0 top + h1 bot with h0 = max(0, 1 - fv sv),
 * h1 = max(0, 1 - (1 - fv) sv) (the portable loop's). */
static inline __attribute__((always_inline)) __m512 chunk_val(int NV, int HAT, const struct chunk_idx *c,
							      const float *restrict c0, const float *restrict c1,
							      __m512 fuv, __m512 svv)
{
	__m512 t[8];
	for (int j = 0; j < NV; j++) {
		__m512 a = _mm512_loadu_ps(c0 + c->ivmin + 16 * j), b = _mm512_loadu_ps(c1 + c->ivmin + 16 * j);
		t[j] = _mm512_fmadd_ps(fuv, _mm512_sub_ps(b, a), a);
	}
	__m512 top = rc_avx512_pick(NV, t, c->rel), bot = rc_avx512_pick(NV, t, c->rel1);
	if (HAT) {
		/* h1 = max(0, fv sv + (1 - sv)) */
		const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
		__m512 h0 = _mm512_max_ps(_mm512_fnmadd_ps(c->fv, svv, one), zero);
		__m512 h1 = _mm512_max_ps(_mm512_fmadd_ps(c->fv, svv, _mm512_sub_ps(one, svv)), zero);
		return _mm512_fmadd_ps(h0, top, _mm512_mul_ps(h1, bot));
	}
	return _mm512_fmadd_ps(c->fv, _mm512_sub_ps(bot, top), top);
}

/* acc[0 .. n) += wt val, n <= 16 */
static inline void chunk_add(float *acc, int n, __m512 wtv, __m512 val)
{
	__mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
	_mm512_mask_storeu_ps(acc, m, _mm512_fmadd_ps(wtv, val, _mm512_maskz_loadu_ps(m, acc)));
}

/* The column loop for a window of NV vectors, two chunks per iteration.
 * The indices of the next two chunks are computed before this pair's picks
 * (software pipelining): the chain from v to the window's address is long.
 * Pipelining measured 1.1-1.4x in the column loop alone (more when the
 * machine is shared), the second chunk per iteration another 2-5 % in the
 * whole back projection (docs/cpu-engine.md). */
static inline __attribute__((always_inline)) void cone_col_win(int NV, int HAT, int n, float *restrict acc,
							       const float *restrict c0,
							       const float *restrict c1,
							       const float *restrict zw, float v0,
							       float dv, float fu, float wt, float sv)
{
	if (n <= 0)
		return;
	const __m512 v0v = _mm512_set1_ps(v0), dvv = _mm512_set1_ps(dv);
	const __m512 fuv = _mm512_set1_ps(fu), wtv = _mm512_set1_ps(wt), svv = _mm512_set1_ps(sv);
	struct chunk_idx na = chunk_idx(zw, dvv, v0v), nb = na;
	if (n > 16)
		nb = chunk_idx(zw + 16, dvv, v0v);
	int z = 0;
	for (; z + 32 <= n; z += 32) {
		struct chunk_idx a = na, b = nb;
		if (z + 32 < n)
			na = chunk_idx(zw + z + 32, dvv, v0v);
		if (z + 48 < n)
			nb = chunk_idx(zw + z + 48, dvv, v0v);
		__m512 va = chunk_val(NV, HAT, &a, c0, c1, fuv, svv), vb = chunk_val(NV, HAT, &b, c0, c1, fuv, svv);
		_mm512_storeu_ps(acc + z, _mm512_fmadd_ps(wtv, va, _mm512_loadu_ps(acc + z)));
		_mm512_storeu_ps(acc + z + 16, _mm512_fmadd_ps(wtv, vb, _mm512_loadu_ps(acc + z + 16)));
	}
	/* the last one or two chunks: na holds z's indices, nb z + 16's */
	if (z < n)
		chunk_add(acc + z, n - z, wtv, chunk_val(NV, HAT, &na, c0, c1, fuv, svv));
	if (z + 16 < n)
		chunk_add(acc + z + 16, n - z - 16, wtv, chunk_val(NV, HAT, &nb, c0, c1, fuv, svv));
}

static inline void cone_col_c_avx512(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				     const float *restrict zw, float v0, float dv, float fu, float wt, float vmax,
				     float sv);

/* zw holds at least n rounded up to 16 increasing positions. */
static inline void cone_col_avx512(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				   const float *restrict zw, float v0, float dv, float fu, float wt, float vmax, float sv)
{
	/* rows spanned by 16 voxels, +1 for floor, +1 for the second sample,
	 * +1 for rounding of v */
	float span = dv * (zw[15] - zw[0]) + 3.0f;
	/* the splat footprint (sv != 1: voxels under a pixel apart) on a
	 * window of two vectors, else the portable loop */
	if (!(dv >= 0) || !(span <= 128.0f) || (sv != 1.0f && !(span <= 32.0f))) {
		cone_col_c_avx512(n, acc, c0, c1, zw, v0, dv, fu, wt, vmax, sv);
		return;
	}
	n = rc_bpv_drop_off_detector(n, &zw, &acc, v0, dv, vmax);
	if (sv != 1.0f) {
		cone_col_win(2, 1, n, acc, c0, c1, zw, v0, dv, fu, wt, sv);
		return;
	}
	/* the narrowest window of whole vectors that holds span rows (rounded
	 * up: a span just over 16 NV needs NV + 1 vectors): each vector is two
	 * loads, a subtract and an FMA per chunk, each pair of vectors a
	 * permute */
	switch ((int)ceilf(span * (1.0f / 16.0f))) {
	case 0:
	case 1:
	case 2: cone_col_win(2, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	case 3: cone_col_win(3, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	case 4: cone_col_win(4, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	case 5: cone_col_win(5, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	case 6: cone_col_win(6, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	case 7: cone_col_win(7, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	default: cone_col_win(8, 0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f); break;
	}
}

/* proj_voxel_tile.h's cone_rows, 8 columns per vector, with the same double
 * operations in the same order (no FMA), so the same set-up bit for bit.
 * GCC does not vectorise the C (control flow); per column and view it was
 * about a tenth of the 256^3 back projection. */
static void cone_setup_avx512(const struct rc_bpv_job *J, const double *P, double yw, int x0, int n, int nzt,
			     float zw0, float *restrict fu, float *restrict v0, float *restrict dv, float *restrict wt,
			     int32_t *restrict col, int32_t *restrict za, int32_t *restrict zb)
{
	const double rp6 = P[6] != 0 && isfinite(1.0 / P[6]) ? 1.0 / P[6] : 0;
	const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0), nztv = _mm512_set1_pd(nzt);
	const __m512d umax = _mm512_set1_pd(J->nu), vmax = _mm512_set1_pd(J->nv + 1), zinv = _mm512_set1_pd(1.0 / J->s[2]);
	const __m512d rp6v = _mm512_set1_pd(rp6), zw0v = _mm512_set1_pd(zw0);
	/* the terms in y of w, u w and v w, each added as the C adds them */
	const __m512d wy = _mm512_set1_pd(P[9] * yw), uy = _mm512_set1_pd(P[1] * yw), vy = _mm512_set1_pd(P[5] * yw);
	const __m512d lane = _mm512_set_pd(7, 6, 5, 4, 3, 2, 1, 0);
	for (int i = 0; i < n; i += 8) {
		__mmask8 live = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1);
		__m512d xi = _mm512_add_pd(_mm512_set1_pd(x0 + i), lane);
		__m512d xw = _mm512_add_pd(_mm512_set1_pd(J->x0[0]), _mm512_mul_pd(xi, _mm512_set1_pd(J->s[0])));
		__m512d w = _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(P[8]), xw), wy),
					  _mm512_set1_pd(P[11]));
		__mmask8 ok = _mm512_cmp_pd_mask(w, zero, _CMP_GT_OQ);
		__m512d iw = _mm512_div_pd(one, _mm512_mask_blend_pd(ok, one, w));
		__m512d uw = _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(P[0]), xw), uy),
					   _mm512_set1_pd(P[3]));
		__m512d u = _mm512_mul_pd(uw, iw);
		ok = _mm512_mask_cmp_pd_mask(ok, u, _mm512_set1_pd(-1.0), _CMP_GT_OQ);
		ok = _mm512_mask_cmp_pd_mask(ok, u, umax, _CMP_LT_OQ);
		u = _mm512_maskz_mov_pd(ok, u);
		__m512d fl = _mm512_roundscale_pd(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
		__m512d vw = _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(P[4]), xw), vy),
					   _mm512_set1_pd(P[7]));
		__m512d v = _mm512_add_pd(_mm512_mul_pd(vw, iw), one);
		__m512d lo = zero, hi = nztv;
		if (rp6 != 0) {
			__m512d z1 = _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(zero, v), w), rp6v);
			__m512d z2 = _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(vmax, v), w), rp6v);
			__mmask8 lt = _mm512_cmp_pd_mask(z1, z2, _CMP_LT_OQ);
			lo = _mm512_sub_pd(_mm512_mask_blend_pd(lt, z2, z1), zw0v);
			hi = _mm512_sub_pd(_mm512_mask_blend_pd(lt, z1, z2), zw0v);
			lo = _mm512_sub_pd(_mm512_mul_pd(lo, zinv), one);
			hi = _mm512_add_pd(_mm512_mul_pd(hi, zinv), _mm512_set1_pd(2.0));
		}
		/* lo < 0 ? 0 : lo > nzt ? nzt : lo (NaN stays: cvtt gives INT_MIN, then not ok) */
		lo = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(lo, nztv, _CMP_GT_OQ), lo, nztv);
		lo = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(lo, zero, _CMP_LT_OQ), lo, zero);
		hi = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(hi, nztv, _CMP_GT_OQ), hi, nztv);
		hi = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(hi, zero, _CMP_LT_OQ), hi, zero);
		__m256i cl = _mm256_maskz_add_epi32(ok, _mm512_cvttpd_epi32(fl), _mm256_set1_epi32(1));
		_mm256_mask_storeu_epi32(col + i, live, cl);
		__m256 f = _mm512_cvtpd_ps(_mm512_sub_pd(u, fl)), wtf = _mm512_cvtpd_ps(_mm512_mul_pd(iw, iw));
		if (J->hat) {
			/* proj_voxel_tile.h's hat_rows (rc_splat_hat_u), 8 columns at once */
			const __m256 onef = _mm256_set1_ps(1.0f), zerof = _mm256_setzero_ps();
			__m512d a = _mm512_mul_pd(_mm512_mul_pd(_mm512_abs_pd(_mm512_sub_pd(_mm512_set1_pd(P[0]),
									_mm512_mul_pd(u, _mm512_set1_pd(P[8])))), iw),
						  _mm512_set1_pd(J->s[0]));
			__m512d b = _mm512_mul_pd(_mm512_mul_pd(_mm512_abs_pd(_mm512_sub_pd(_mm512_set1_pd(P[1]),
									_mm512_mul_pd(u, _mm512_set1_pd(P[9])))), iw),
						  _mm512_set1_pd(J->s[1]));
			__m512d m = _mm512_max_pd(a, b);
			__m256 su = _mm512_cvtpd_ps(_mm512_mask_div_pd(one, _mm512_cmp_pd_mask(m, one, _CMP_LT_OQ), one, m));
			__m256 w0 = _mm256_mul_ps(_mm256_max_ps(_mm256_sub_ps(onef, _mm256_mul_ps(f, su)), zerof), su);
			__m256 w1 = _mm256_mul_ps(
				_mm256_max_ps(_mm256_sub_ps(onef, _mm256_mul_ps(_mm256_sub_ps(onef, f), su)), zerof), su);
			__m256 sum = _mm256_add_ps(w0, w1);
			f = _mm256_maskz_div_ps(_mm256_cmp_ps_mask(sum, zerof, _CMP_GT_OQ), w1, sum);
			wtf = _mm256_mul_ps(wtf, sum);
		}
		_mm256_mask_storeu_ps(fu + i, live, f);
		_mm256_mask_storeu_ps(v0 + i, live, _mm512_cvtpd_ps(v));
		_mm256_mask_storeu_ps(dv + i, live, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_set1_pd(P[6]), iw)));
		_mm256_mask_storeu_ps(wt + i, live, _mm256_maskz_mov_ps(ok, wtf));
		_mm256_mask_storeu_epi32(za + i, live, _mm256_maskz_mov_epi32(ok, _mm512_cvttpd_epi32(lo)));
		_mm256_mask_storeu_epi32(zb + i, live, _mm256_maskz_mov_epi32(ok, _mm512_cvttpd_epi32(hi)));
	}
}

static inline void gen_col_avx512(int n, float *restrict acc, const float *restrict img, const float *restrict zw,
				  float aw, float bw, float au, float bu, float av, float bv, float r0, float umax,
				  float vmax, int Hs);

static inline int lane_i32(__m512i x, int i)
{
	return _mm_cvtsi128_si32(_mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_set1_epi32(i), x)));
}

/* The four samples a = T(iu, iv), b = T(iu + 1, iv), c = T(iu, iv + 1),
 * d = T(iu + 1, iv + 1) of a chunk whose voxels read columns c0 and c0 + Hs
 * (lanes in hi: c0 + Hs and c0 + 2 Hs; only when cross), rows rel, rel1
 * of a window of 16 NV rows. */
static inline __attribute__((always_inline)) void gen_samples(int NV, const float *c0, int Hs, int cross,
							      __mmask16 hi, __m512i rel, __m512i rel1, __m512 *a,
							      __m512 *b, __m512 *c, __m512 *d)
{
	__m512 w[3][8], p[3], q[3];
	for (int k = 0; k < 2 + cross; k++) {
		for (int j = 0; j < NV; j++)
			w[k][j] = _mm512_loadu_ps(c0 + (size_t)k * Hs + 16 * j);
		p[k] = NV == 4 ? pick64(w[k], rel) : pick128(w[k], rel);
		q[k] = NV == 4 ? pick64(w[k], rel1) : pick128(w[k], rel1);
	}
	if (!cross) {
		*a = p[0], *b = p[1], *c = q[0], *d = q[1];
		return;
	}
	*a = _mm512_mask_blend_ps(hi, p[0], p[1]);
	*b = _mm512_mask_blend_ps(hi, p[1], p[2]);
	*c = _mm512_mask_blend_ps(hi, q[0], q[1]);
	*d = _mm512_mask_blend_ps(hi, q[1], q[2]);
}

/* A chunk of the general loop, its indices computed ahead of its samples
 * (gen_chunk_idx): the chain from z to the window's address (w, three
 * Newton steps, u and v, the lanes' extremes) is long, so the next chunk's
 * runs before this chunk's loads, as in the cone loop.  kind: the window
 * (64 or 128 rows) and whether u crosses a pixel border (a third column),
 * or GEN_PORTABLE when the chunk takes the portable loop. */
enum { GEN_64, GEN_64_CROSS, GEN_128, GEN_128_CROSS, GEN_PORTABLE };

struct gen_chunk {
	__m512 fu, fv, wt;
	__m512i rel, rel1;
	__mmask16 hi;
	int kind;
	const float *c0;
};

struct gen_consts {
	__m512 awv, bwv, auv, buv, avv, bvv, r0v, umaxv, vmaxv;
	const float *img;
	int Hs;
};

static inline struct gen_chunk gen_chunk_idx(const struct gen_consts *k, const float *zw, int m)
{
	const __m512 two = _mm512_set1_ps(2.0f), one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
	struct gen_chunk g;
	__m512 zv = _mm512_loadu_ps(zw);
	__m512 w = _mm512_fmadd_ps(k->bwv, zv, k->awv), r = k->r0v;
	for (int it = 0; it < 3; it++)
		r = _mm512_mul_ps(r, _mm512_fnmadd_ps(w, r, two));
	__m512 u = _mm512_fmadd_ps(_mm512_fmadd_ps(k->buv, zv, k->auv), r, one);
	__m512 v = _mm512_fmadd_ps(_mm512_fmadd_ps(k->bvv, zv, k->avv), r, one);
	u = _mm512_min_ps(_mm512_max_ps(u, zero), k->umaxv);
	v = _mm512_min_ps(_mm512_max_ps(v, zero), k->vmaxv);
	__m512i iu = _mm512_cvttps_epi32(u), iv = _mm512_cvttps_epi32(v);
	int iu0 = _mm_cvtsi128_si32(_mm512_castsi512_si128(iu)), iu1 = lane_i32(iu, m - 1);
	int iv0 = _mm_cvtsi128_si32(_mm512_castsi512_si128(iv)), iv1 = lane_i32(iv, m - 1), rows = iv1 + 2 - iv0;
	g.wt = _mm512_mul_ps(r, r);
	g.fu = _mm512_sub_ps(u, _mm512_cvtepi32_ps(iu));
	g.fv = _mm512_sub_ps(v, _mm512_cvtepi32_ps(iv));
	g.rel = _mm512_sub_epi32(iv, _mm512_set1_epi32(iv0));
	g.rel1 = _mm512_add_epi32(g.rel, _mm512_set1_epi32(1));
	/* columns base, base + 1 and, when u crosses a pixel border in this
	 * chunk, base + 2; lanes past the border (hi) read one column
	 * further */
	int base = iu0 < iu1 ? iu0 : iu1;
	g.hi = _mm512_cmpeq_epi32_mask(iu, _mm512_set1_epi32(base + 1));
	if (iu1 - iu0 > 1 || iu0 - iu1 > 1 || iv1 < iv0 || rows > 128) {
		g.kind = GEN_PORTABLE;
		g.c0 = k->img;
		return g;
	}
	g.c0 = k->img + (size_t)base * k->Hs + iv0;
	g.kind = (rows <= 64 ? GEN_64 : GEN_128) + (iu0 != iu1);
	return g;
}

/* The general column loop (a view close to a cone, proj_voxel_tile.h
 * gen_col) without gathers: per chunk of 16 voxels w, 1/w (three Newton
 * steps from the column centre's r0), u and v as the portable loop computes
 * them; when the 16 voxels read at most three neighbouring detector
 * columns (u crosses at most one pixel border, as along a slightly tilted
 * column) and span at most 128 rows, the four samples are picked out of the
 * windows like the cone loop's and blended per voxel (fu differs from voxel
 * to voxel here).  Other chunks take the portable loop. */
static inline void gen_col_win_avx512(int n, float *restrict acc, const float *restrict img,
				      const float *restrict zw, float aw, float bw, float au, float bu, float av,
				      float bv, float r0, float umax, float vmax, int Hs)
{
	const struct gen_consts k = { _mm512_set1_ps(aw), _mm512_set1_ps(bw), _mm512_set1_ps(au),
				      _mm512_set1_ps(bu), _mm512_set1_ps(av), _mm512_set1_ps(bv),
				      _mm512_set1_ps(r0), _mm512_set1_ps(umax), _mm512_set1_ps(vmax), img, Hs };
	if (n <= 0)
		return;
	struct gen_chunk next = gen_chunk_idx(&k, zw, n < 16 ? n : 16);
	for (int z = 0; z < n; z += 16) {
		int m = n - z < 16 ? n - z : 16;
		struct gen_chunk g = next;
		if (z + 16 < n)
			next = gen_chunk_idx(&k, zw + z + 16, n - z - 16 < 16 ? n - z - 16 : 16);
		__m512 a, b, c, d;
		/* constant window sizes and column counts: the loops unroll and
		 * the windows stay in registers (a run-time count spilled them) */
		switch (g.kind) {
		case GEN_64: gen_samples(4, g.c0, Hs, 0, g.hi, g.rel, g.rel1, &a, &b, &c, &d); break;
		case GEN_64_CROSS: gen_samples(4, g.c0, Hs, 1, g.hi, g.rel, g.rel1, &a, &b, &c, &d); break;
		case GEN_128: gen_samples(8, g.c0, Hs, 0, g.hi, g.rel, g.rel1, &a, &b, &c, &d); break;
		case GEN_128_CROSS: gen_samples(8, g.c0, Hs, 1, g.hi, g.rel, g.rel1, &a, &b, &c, &d); break;
		default:
			gen_col_avx512(m, acc + z, img, zw + z, aw, bw, au, bu, av, bv, r0, umax, vmax, Hs);
			continue;
		}
		__m512 top = _mm512_fmadd_ps(g.fu, _mm512_sub_ps(b, a), a);
		__m512 bot = _mm512_fmadd_ps(g.fu, _mm512_sub_ps(d, c), c);
		__m512 val = _mm512_fmadd_ps(g.fv, _mm512_sub_ps(bot, top), top);
		chunk_add(acc + z, m, g.wt, val);
	}
}

#define RC_BPV_GEN_COLUMN gen_col_win_avx512
#define RC_BPV_CONE_COLUMN cone_col_avx512
#define RC_BPV_CONE_ROWS cone_setup_avx512
#define RC_BPV_CONE_ROWS_HAT 1 /* cone_setup_avx512 applies the splat's hat itself */
#define RC_BPV_TILE rc_bpv_tile_avx512
#define RC_BPV_SUFFIX avx512
#include "projectors/proj_voxel_tile.h"
