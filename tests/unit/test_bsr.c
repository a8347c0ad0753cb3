/*
 * test_bsr: binary16 coding (against the compiler's _Float16 where it has
 * one, and against hand-checked values), BSR structure under permutations
 * (decoded back equals the permuted, fp16-rounded matrix), the CPU products
 * against a double reference and each other (adjoint), and the block
 * statistics of paper 001 Table 3 (the ordering must cut non-empty blocks
 * about 2x for every fragment shape), and the layout cache's loader
 * refusing out-of-range columns and unordered row pointers in a file whose
 * digest matches.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "projectors/bsr.h"
#include "projectors/bsr_cpu.h"
#include "projectors/bsr_cpu_cache.h"
#include "projectors/proj_cpu.h"
#include "projectors/morton.h"
#include "tensor_phantom.h"

static unsigned lcg(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static float bits_f(uint32_t x)
{
	float f;
	memcpy(&f, &x, sizeof f);
	return f;
}

static void test_f16_known(void **state)
{
	(void)state;
	static const struct { float f; uint16_t h; } t[] = {
		{ 0.0f, 0x0000 },          { -0.0f, 0x8000 },        { 1.0f, 0x3c00 },
		{ -2.0f, 0xc000 },         { 65504.0f, 0x7bff },     { 65519.99f, 0x7bff },
		{ 65520.0f, 0x7c00 },      { 1e9f, 0x7c00 },         { 0x1p-24f, 0x0001 },
		{ 0x1p-25f, 0x0000 },      { 0x1.8p-25f, 0x0001 },   { 0x1p-14f, 0x0400 },
		{ 0x1.ff8p-15f, 0x03ff }, { 0x1.ffcp-15f, 0x0400 }, /* tie: up into the normals */
		{ 1.0f + 0x1p-11f, 0x3c00 }, /* tie -> even */
		{ 1.0f + 0x3p-11f, 0x3c02 }, /* tie -> even (up) */
		{ 1.0f + 0x1.2p-11f, 0x3c01 }, { 0.1f, 0x2e66 }, { 3.14159265f, 0x4248 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		assert_int_equal(rc_f32_to_f16(t[i].f), t[i].h);
	}
	assert_int_equal(rc_f32_to_f16(INFINITY), 0x7c00);
	assert_int_equal(rc_f32_to_f16(-INFINITY), 0xfc00);
	assert_true((rc_f32_to_f16(NAN) & 0x7fff) > 0x7c00);
	assert_true(rc_f16_to_f32(0x3c00) == 1.0f);
	assert_true(rc_f16_to_f32(0x0001) == 0x1p-24f);
	assert_true(rc_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(isinf(rc_f16_to_f32(0x7c00)));
	assert_true(isnan(rc_f16_to_f32(0x7e00)));
	/* every finite half survives the round trip */
	for (uint32_t h = 0; h < 65536; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue;
		assert_int_equal(rc_f32_to_f16(rc_f16_to_f32((uint16_t)h)), h);
	}
}

static void test_f16_vs_compiler(void **state)
{
	(void)state;
#if defined(__FLT16_MAX__)
	for (uint32_t h = 0; h < 65536; h++) {
		uint16_t hh = (uint16_t)h;
		_Float16 x;
		memcpy(&x, &hh, 2);
		float want = (float)x, got = rc_f16_to_f32(hh);
		if (isnan(want))
			assert_true(isnan(got));
		else
			assert_memory_equal(&want, &got, 4);
	}
	unsigned s = 12345;
	for (int i = 0; i < 2000000; i++) {
		/* random bit patterns cover every exponent, including the
		 * subnormal, overflow and tie cases */
		uint32_t x = (lcg(&s) << 8) ^ lcg(&s) ^ (lcg(&s) << 20);
		if (i & 1) /* concentrate on the half range */
			x = (x & 0x807fffffu) | ((uint32_t)(96 + lcg(&s) % 64) << 23);
		float f = bits_f(x);
		if (isnan(f))
			continue;
		_Float16 c = (_Float16)f;
		uint16_t want;
		memcpy(&want, &c, 2);
		assert_int_equal(rc_f32_to_f16(f), want);
	}
#else
	skip();
#endif
}

/* fp32 -> bf16 -> fp32, round to nearest even (finite, normal values). */
static float bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	u += 0x7fffu + ((u >> 16) & 1u);
	u &= 0xffff0000u;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* Random sparse matrix with values in [0.1, 1] (none rounds to zero). */
static rc_csr *random_csr(int rows, int cols, double density, unsigned seed)
{
	rc_csr *m = calloc(1, sizeof *m);
	m->rows = rows;
	m->cols = cols;
	m->row_ptr = calloc((size_t)rows + 1, sizeof *m->row_ptr);
	int64_t cap = (int64_t)rows * cols;
	m->col = malloc(sizeof *m->col * (size_t)cap);
	m->val = malloc(sizeof *m->val * (size_t)cap);
	unsigned s = seed;
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < cols; c++)
			if ((lcg(&s) % 100000) < density * 100000) {
				m->col[m->nnz] = c;
				m->val[m->nnz] = 0.1f + (float)(lcg(&s) % 9000) / 10000.0f;
				m->nnz++;
			}
		m->row_ptr[r + 1] = m->nnz;
	}
	return m;
}

/* A x and A^T y against a double reference over the decoded matrix want
 * (R x C): 1e-5 of the sum of |terms| */
static void check_products(const float *want, int64_t R, int64_t C, int nc, const float *x, const float *y,
			   const float *ax, const float *aty)
{
	for (int c = 0; c < nc; c++) {
		for (int64_t r = 0; r < R; r++) {
			double acc = 0, mag = 0;
			for (int64_t k = 0; k < C; k++) {
				acc += (double)want[r * C + k] * x[k * nc + c];
				mag += fabs((double)want[r * C + k] * x[k * nc + c]);
			}
			assert_true(fabs(ax[r * nc + c] - acc) <= 1e-5 * (mag + 1e-30));
		}
		for (int64_t k = 0; k < C; k++) {
			double acc = 0, mag = 0;
			for (int64_t r = 0; r < R; r++) {
				acc += (double)want[r * C + k] * y[r * nc + c];
				mag += fabs((double)want[r * C + k] * y[r * nc + c]);
			}
			assert_true(fabs(aty[k * nc + c] - acc) <= 1e-5 * (mag + 1e-30));
		}
	}
}

static void check_structure(const rc_csr *m, const int32_t *rp, const int32_t *cp, rc_frag f)
{
	rc_bsr *b = NULL;
	rc_err err;
	assert_int_equal(rc_bsr_build(m, rp, cp, f, 2, &b, &err), 0);
	const rc_frag_info *fi = rc_frag_get(f);
	assert_int_equal(b->bm, fi->m);
	assert_int_equal(b->bk, 16);
	int64_t R = rc_bsr_rows_pad(b), C = rc_bsr_cols_pad(b);
	float *dense = calloc((size_t)(R * C), sizeof *dense), *want = calloc((size_t)(R * C), sizeof *want);
	for (int br = 0; br < b->mb; br++) {
		for (int64_t i = b->row_ptr[br]; i < b->row_ptr[br + 1]; i++) {
			if (i > b->row_ptr[br])
				assert_true(b->col_idx[i] > b->col_idx[i - 1]);
			assert_int_equal(b->blk_row[i], br);
			int nz = 0;
			for (int r = 0; r < b->bm; r++)
				for (int k = 0; k < b->bk; k++) {
					float v = rc_f16_to_f32(b->blocks[(i * b->bm + r) * b->bk + k]);
					dense[(br * b->bm + r) * C + b->col_idx[i] * b->bk + k] = v;
					nz += v != 0;
				}
			assert_true(nz > 0); /* stored blocks are non-empty */
		}
	}
	for (int r = 0; r < m->rows; r++)
		for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++)
			want[(int64_t)(rp ? rp[r] : r) * C + (cp ? cp[m->col[i]] : m->col[i])] =
				rc_f16_to_f32(rc_f32_to_f16(m->val[i]));
	assert_memory_equal(dense, want, sizeof(float) * (size_t)(R * C));
	/* the column index lists every block once, block rows ascending */
	int64_t seen = 0;
	for (int c = 0; c < b->nb; c++)
		for (int64_t j = b->tcol_ptr[c]; j < b->tcol_ptr[c + 1]; j++) {
			assert_int_equal(b->col_idx[b->tblk[j]], c);
			if (j > b->tcol_ptr[c])
				assert_true(b->blk_row[b->tblk[j]] > b->blk_row[b->tblk[j - 1]]);
			seen++;
		}
	assert_int_equal(seen, b->neb);
	int64_t neb, total;
	assert_int_equal(rc_bsr_count(m, rp, cp, f, 1, &neb, &total, &err), 0);
	assert_int_equal(neb, b->neb);
	assert_int_equal(total, (int64_t)b->mb * b->nb);

	/* products against a double reference over the decoded matrix: the
	 * block products, then the non-zero layout (bsr_cpu.h) on every path
	 * this CPU runs, for slice counts that take each of its kernels (32:
	 * the two-register one; 5, 16, 37: 16 at a time with a masked tail) */
	rc_bsr_cpu *bc = NULL;
	assert_int_equal(rc_bsr_cpu_build(b, 2, &bc, &err), 0);
	assert_int_equal(bc->a.rows, R);
	assert_int_equal(bc->at.rows, C);
	assert_int_equal(bc->a.nnz, bc->at.nnz);
	static const int ncs[4] = { 5, 16, 32, 37 };
	for (int variant = 0; variant < 1 + 4 * RC_ISA_COUNT; variant++) {
		int nc = variant == 0 ? 5 : ncs[(variant - 1) % 4], isa = variant == 0 ? -1 : (variant - 1) / 4;
		if (isa >= 0 && !rc_cpu_isa_supported((rc_cpu_isa)isa))
			continue;
		float *x = malloc(sizeof(float) * (size_t)(C * nc)), *y = malloc(sizeof(float) * (size_t)(R * nc));
		float *ax = malloc(sizeof(float) * (size_t)(R * nc)), *aty = malloc(sizeof(float) * (size_t)(C * nc));
		unsigned s = 99;
		for (int64_t i = 0; i < C * nc; i++)
			x[i] = (float)(lcg(&s) % 2001) / 1000.0f - 1;
		for (int64_t i = 0; i < R * nc; i++)
			y[i] = (float)(lcg(&s) % 2001) / 1000.0f - 1;
		if (isa < 0) {
			assert_int_equal(rc_bsr_mul(b, x, ax, nc, 2), 0);
			assert_int_equal(rc_bsr_mul_t(b, y, aty, nc, 2), 0);
		} else {
			/* two calls over halves of the rows: ranges start mid-matrix */
			rc_spm16_rows(&bc->a, isa, x, ax, nc, 0, R / 2);
			rc_spm16_rows(&bc->a, isa, x, ax, nc, R / 2, R);
			rc_spm16_rows(&bc->at, isa, y, aty, nc, 0, C / 3);
			rc_spm16_rows(&bc->at, isa, y, aty, nc, C / 3, C);
			if (isa == bc->isa) {
				/* the threaded call = the kernel over all rows (the
				 * fp16-input product is checked below) */
				float *ax2 = malloc(sizeof(float) * (size_t)(R * nc));
				float *aty2 = malloc(sizeof(float) * (size_t)(C * nc));
				assert_int_equal(rc_bsr_cpu_mul(bc, 0, x, ax2, nc, 2), 0);
				assert_int_equal(rc_bsr_cpu_mul(bc, 1, y, aty2, nc, 2), 0);
				if (isa >= RC_ISA_AVX512 && nc == 32 && bc->ap.group) {
					/* the fp32 input takes the row pairs (bsr_cpu.h):
					 * every non-zero once, the pair kernel over two
					 * ranges = the threaded call, and the result
					 * against the reference */
					assert_int_equal(bc->ap.pairs * 2, R);
					const rc_spm16p *gp[2] = { &bc->ap, &bc->atp };
					for (int t = 0; t < 2; t++) {
						int64_t n = gp[t]->sptr[gp[t]->pairs] * 2 + gp[t]->rest.nnz;
						if (gp[t]->group == 4)
							n += gp[t]->qptr[gp[t]->pairs / 2] * 4;
						assert_int_equal(n, t ? bc->at.nnz : bc->a.nnz);
					}
					float *ax3 = malloc(sizeof(float) * (size_t)(R * nc));
					float *aty3 = malloc(sizeof(float) * (size_t)(C * nc));
					int64_t rh = R / 8 * 4, ch = C / 12 * 4; /* multiples of the group */
					rc_spm16p_rows32_avx512(&bc->ap, x, ax3, 0, rh);
					rc_spm16p_rows32_avx512(&bc->ap, x, ax3, rh, R);
					rc_spm16p_rows32_avx512(&bc->atp, y, aty3, 0, ch);
					rc_spm16p_rows32_avx512(&bc->atp, y, aty3, ch, C);
					assert_memory_equal(ax3, ax2, sizeof(float) * (size_t)(R * nc));
					assert_memory_equal(aty3, aty2, sizeof(float) * (size_t)(C * nc));
					check_products(want, R, C, nc, x, y, ax2, aty2);
					free(ax3);
					free(aty3);
				} else {
					assert_memory_equal(ax, ax2, sizeof(float) * (size_t)(R * nc));
					assert_memory_equal(aty, aty2, sizeof(float) * (size_t)(C * nc));
				}
				free(ax2);
				free(aty2);
			}
		}
		check_products(want, R, C, nc, x, y, ax, aty);
		free(x);
		free(y);
		free(ax);
		free(aty);
	}
	/* the 32-slice AVX-512 product reads its input in fp16, each slice
	 * relative to its largest |value|: against a double reference over the
	 * same rounded input; a slice of zeros stays zero; an inf anywhere
	 * takes the fp32 kernel, row pairs (the result equals it bit for bit) */
	if (rc_cpu_isa_supported(RC_ISA_AVX512) && bc->isa == RC_ISA_AVX512) {
		const int nc = 32;
		assert_int_equal(rc_bsr_cpu_set_input(bc, RC_SPM_IN_FP16), 0);
		assert_string_equal(rc_bsr_cpu_path(bc), "avx512-fp16in");
		float *x = malloc(sizeof(float) * (size_t)(C * nc)), *xr = malloc(sizeof(float) * (size_t)(C * nc));
		float *ax = malloc(sizeof(float) * (size_t)(R * nc)), *ax2 = malloc(sizeof(float) * (size_t)(R * nc));
		unsigned s = 7;
		for (int64_t i = 0; i < C * nc; i++)
			x[i] = (i % nc == 3) ? 0.0f : ((float)(lcg(&s) % 2001) / 1000.0f - 1) * (float)(1 + i % nc);
		for (int c = 0; c < nc; c++) {
			float mx = 0;
			for (int64_t k = 0; k < C; k++)
				mx = fabsf(x[k * nc + c]) > mx ? fabsf(x[k * nc + c]) : mx;
			float inv = mx > 0 ? 1.0f / mx : 0;
			for (int64_t k = 0; k < C; k++)
				xr[k * nc + c] = (float)((double)rc_f16_to_f32(rc_f32_to_f16(x[k * nc + c] * inv)) * mx);
		}
		assert_int_equal(rc_bsr_cpu_mul(bc, 0, x, ax, nc, 2), 0);
		for (int c = 0; c < nc; c++)
			for (int64_t r = 0; r < R; r++) {
				double acc = 0, mag = 0;
				for (int64_t k = 0; k < C; k++) {
					acc += (double)want[r * C + k] * xr[k * nc + c];
					mag += fabs((double)want[r * C + k] * xr[k * nc + c]);
				}
				assert_true(fabs(ax[r * nc + c] - acc) <= 1e-5 * (mag + 1e-30));
				if (c == 3)
					assert_true(ax[r * nc + c] == 0);
			}
		x[5 * nc + 7] = __builtin_inff();
		assert_int_equal(rc_bsr_cpu_mul(bc, 0, x, ax, nc, 2), 0);
		if (bc->ap.group) /* the fp32 kernel of 32 slices: the row groups */
			rc_spm16p_rows32_avx512(&bc->ap, x, ax2, 0, R);
		else
			rc_spm16_rows(&bc->a, RC_ISA_AVX512, x, ax2, nc, 0, R);
		assert_memory_equal(ax, ax2, sizeof(float) * (size_t)(R * nc));
		/* bf16 (vdpbf16ps): weights and input rounded to bf16, the
		 * reference over the same rounded values; both products */
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512bf16")) {
			x[5 * nc + 7] = 1.5f;
			assert_int_equal(rc_bsr_cpu_set_input(bc, RC_SPM_IN_BF16), 0);
			float *y = malloc(sizeof(float) * (size_t)(R * nc)), *yr = malloc(sizeof(float) * (size_t)(R * nc));
			float *aty = malloc(sizeof(float) * (size_t)(C * nc));
			for (int64_t i = 0; i < R * nc; i++)
				y[i] = ((float)(lcg(&s) % 2001) / 1000.0f - 1) * 3.0f;
			for (int64_t i = 0; i < C * nc; i++)
				xr[i] = bf16(x[i]);
			for (int64_t i = 0; i < R * nc; i++)
				yr[i] = bf16(y[i]);
			assert_int_equal(rc_bsr_cpu_mul(bc, 0, x, ax, nc, 2), 0);
			assert_int_equal(rc_bsr_cpu_mul(bc, 1, y, aty, nc, 2), 0);
			for (int c = 0; c < nc; c++) {
				for (int64_t r = 0; r < R; r++) {
					double acc = 0, mag = 0;
					for (int64_t k = 0; k < C; k++) {
						double a = bf16(want[r * C + k]);
						acc += a * xr[k * nc + c];
						mag += fabs(a * xr[k * nc + c]);
					}
					assert_true(fabs(ax[r * nc + c] - acc) <= 1e-5 * (mag + 1e-30));
				}
				for (int64_t k = 0; k < C; k++) {
					double acc = 0, mag = 0;
					for (int64_t r = 0; r < R; r++) {
						double a = bf16(want[r * C + k]);
						acc += a * yr[r * nc + c];
						mag += fabs(a * yr[r * nc + c]);
					}
					assert_true(fabs(aty[k * nc + c] - acc) <= 1e-5 * (mag + 1e-30));
				}
			}
			assert_string_equal(rc_bsr_cpu_path(bc), "avx512-bf16");
			free(y);
			free(yr);
			free(aty);
		} else {
			assert_int_equal(rc_bsr_cpu_set_input(bc, RC_SPM_IN_BF16), RC_EUNSUPPORTED);
			printf("no AVX512_BF16 on this CPU: its kernel is not tested here\n");
		}
		free(x);
		free(xr);
		free(ax);
		free(ax2);
	}
	rc_bsr_cpu_free(bc);
	free(dense);
	free(want);
	rc_bsr_free(b);
}

static void test_structure_and_products(void **state)
{
	(void)state;
	rc_csr *m = random_csr(70, 45, 0.08, 3);
	int32_t *rp = NULL, *cp = NULL;
	rc_err err;
	assert_int_equal(rc_morton_perm(10, 7, 4, 2, &rp, &err), 0);
	assert_int_equal(rc_morton_perm(9, 5, 4, 2, &cp, &err), 0);
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		check_structure(m, NULL, NULL, (rc_frag)f);
		check_structure(m, rp, cp, (rc_frag)f);
	}
	/* rows of ~70 non-zeros: the CPU layout's kernels go through several
	 * groups of 16 values per row, with odd tails */
	rc_csr *d = random_csr(70, 45, 0.5, 5);
	check_structure(d, rp, cp, RC_FRAG_8_32_16);
	rc_csr_free(d);
	free(rp);
	free(cp);
	rc_csr_free(m);
}

static void test_frag_names(void **state)
{
	(void)state;
	rc_frag f;
	assert_int_equal(rc_frag_parse("32.8.16", &f), 0);
	assert_int_equal(f, RC_FRAG_32_8_16);
	assert_int_equal(rc_frag_get(f)->m, 32);
	assert_int_equal(rc_frag_get(f)->n, 8);
	assert_int_equal(rc_frag_parse("8.32.16", &f), 0);
	assert_int_equal(rc_frag_get(f)->m, 8);
	assert_int_equal(rc_frag_get(f)->n, 32);
	assert_int_equal(rc_frag_parse("16.8.32", &f), RC_EINVAL);
}

#if defined(__SANITIZE_ADDRESS__)
#define T3_N 64
#define T3_VIEWS 90
#else
#define T3_N 256
#define T3_VIEWS 360
#endif

/* Table 3 at a reduced size (the full 512^2 / 720 x 512 figures come from
 * bench-tensor): the fan geometry of the benchmark, rows ordered with u as
 * Alg. 2's a and the view as b, columns with x as a and y as b. */
static void test_table3_ordering(void **state)
{
	(void)state;
	rc_geom *g;
	int nu = T3_N;
	assert_int_equal(tp_geom(RC_GEOM_FAN, T3_N, 1.0, T3_VIEWS, nu, 1, 0, &g), 0);
	int32_t *rp = NULL, *cp = NULL;
	rc_err err;
	assert_int_equal(rc_morton_perm(nu, T3_VIEWS, 4, 2, &rp, &err), 0);
	assert_int_equal(rc_morton_perm(T3_N, T3_N, 4, 2, &cp, &err), 0);
	int64_t nb[RC_FRAG_COUNT], tb[RC_FRAG_COUNT], na[RC_FRAG_COUNT], ta[RC_FRAG_COUNT];
	int64_t nnz0 = 0, nnz1 = 0;
	assert_int_equal(rc_dd_block_stats(g, NULL, NULL, 0, nb, tb, &nnz0, &err), 0);
	assert_int_equal(rc_dd_block_stats(g, rp, cp, 0, na, ta, &nnz1, &err), 0);
	assert_int_equal(nnz0, nnz1);
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		double before = 100.0 * (double)nb[f] / (double)tb[f], after = 100.0 * (double)na[f] / (double)ta[f];
		printf("%dx%d image, %dx%d projections, %-8s: non-empty blocks %.2f%% -> %.2f%% (%.2fx)\n", T3_N,
		       T3_N, T3_VIEWS, nu, rc_frag_get((rc_frag)f)->name, before, after, before / after);
		assert_true(before / after >= 1.8);
	}
	/* the streaming count agrees with the blocks the BSR build makes */
	rc_csr *m = NULL;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	assert_int_equal(m->nnz, nnz0);
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		int64_t neb, total;
		assert_int_equal(rc_bsr_count(m, rp, cp, (rc_frag)f, 0, &neb, &total, &err), 0);
		assert_int_equal(neb, na[f]);
		assert_int_equal(total, ta[f]);
		assert_int_equal(rc_bsr_count(m, NULL, NULL, (rc_frag)f, 0, &neb, &total, &err), 0);
		assert_int_equal(neb, nb[f]);
	}
	/* fp16 values: the ordered BSR product, brought back, is the fp32 CSR
	 * product within fp16 rounding */
	rc_bsr *b = NULL;
	assert_int_equal(rc_bsr_build(m, rp, cp, RC_FRAG_8_32_16, 0, &b, &err), 0);
	int nc = 2;
	float *img = malloc(sizeof(float) * (size_t)m->cols * nc), *xo = malloc(sizeof(float) * (size_t)rc_bsr_cols_pad(b) * nc);
	float *yo = malloc(sizeof(float) * (size_t)rc_bsr_rows_pad(b) * nc), *y = malloc(sizeof(float) * (size_t)m->rows * nc);
	float *yref = malloc(sizeof(float) * (size_t)m->rows * nc);
	tp_pixelize(rc_geom_volume(g), 2, T3_N / 128.0, img);
	for (int i = m->cols - 1; i >= 0; i--) { /* two slices: phantom and its negative */
		float v = img[i];
		img[2 * i] = v;
		img[2 * i + 1] = -0.5f * v;
	}
	rc_perm_apply(cp, m->cols, rc_bsr_cols_pad(b), nc, img, xo);
	assert_int_equal(rc_bsr_mul(b, xo, yo, nc, 0), 0);
	rc_perm_unapply(rp, m->rows, nc, yo, y);
	assert_int_equal(rc_csr_mul(m, img, yref, nc, 0, &err), 0);
	double num = 0, den = 0;
	for (int64_t i = 0; i < (int64_t)m->rows * nc; i++) {
		num += (double)(y[i] - yref[i]) * (y[i] - yref[i]);
		den += (double)yref[i] * yref[i];
	}
	printf("fp16 BSR vs fp32 CSR forward projection: relative L2 difference %.2e\n", sqrt(num / den));
	assert_true(sqrt(num / den) < 1e-3);
	assert_true(sqrt(num / den) > 0); /* the values really are rounded */
	free(img);
	free(xo);
	free(yo);
	free(y);
	free(yref);
	rc_bsr_free(b);
	rc_csr_free(m);
	free(rp);
	free(cp);
	rc_geom_free(g);
}

static void spm_equal(const rc_spm16 *x, const rc_spm16 *y)
{
	assert_int_equal(x->rows, y->rows);
	assert_int_equal(x->cols, y->cols);
	assert_int_equal(x->nnz, y->nnz);
	assert_memory_equal(x->ptr, y->ptr, (size_t)(x->rows + 1) * sizeof *x->ptr);
	/* the padding too (the kernels read it) */
	assert_memory_equal(x->idx, y->idx, (size_t)(x->nnz + RC_SPM16_PAD) * sizeof *x->idx);
	assert_memory_equal(x->val, y->val, (size_t)(x->nnz + RC_SPM16_PAD) * sizeof *x->val);
}

static void grp_equal(const rc_spm16p *x, const rc_spm16p *y)
{
	assert_int_equal(x->group, y->group);
	if (!x->group)
		return;
	int64_t ns = x->sptr[x->pairs];
	assert_int_equal(x->pairs, y->pairs);
	assert_memory_equal(x->sptr, y->sptr, (size_t)(x->pairs + 1) * sizeof *x->sptr);
	assert_memory_equal(x->sidx, y->sidx, (size_t)(ns + RC_SPM16_PAD) * sizeof *x->sidx);
	assert_memory_equal(x->sval, y->sval, (size_t)(ns + RC_SPM16_PAD) * sizeof *x->sval);
	if (x->group == 4) {
		int64_t nq = x->qptr[x->pairs / 2];
		assert_memory_equal(x->qptr, y->qptr, (size_t)(x->pairs / 2 + 1) * sizeof *x->qptr);
		assert_memory_equal(x->qidx, y->qidx, (size_t)(nq + RC_SPM16_PAD) * sizeof *x->qidx);
		assert_memory_equal(x->qval, y->qval, (size_t)(nq + RC_SPM16_PAD) * sizeof *x->qval);
	}
	spm_equal(&x->rest, &y->rest);
}

/* rc_bsr_cpu_from_csr makes the layout rc_bsr_cpu_build makes from the
 * BSR, bit for bit (the padding too), and counts the BSR's blocks: with
 * and without orderings, every fragment, one and several threads, and
 * with entries that fp16 rounds to zero (the BSR holds them as empty
 * entries of a block it still counts; the layout leaves them out); on
 * 40x40 pixels (1600 columns: the row sort's one radix pass) and 48x48
 * (2304: two passes).  Without row groups asked for, the same rows and
 * no groups. */
static void layout_from_csr(int n)
{
	rc_geom *g;
	assert_int_equal(tp_geom(RC_GEOM_FAN, n, 1.0, 30, 40, 1, 0, &g), 0);
	rc_csr *m = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	/* every 7th entry below fp16's reach: 2^-25 (rounds to 0), 2^-26, -0;
	 * every 11th at 2^-25 and a bit (the smallest subnormal) */
	for (int64_t i = 0; i < m->nnz; i++) {
		if (i % 7 == 0)
			m->val[i] = i % 3 == 0 ? 0x1p-25f : i % 3 == 1 ? 0x1p-26f : -0.0f;
		else if (i % 11 == 0)
			m->val[i] = 0x1.000002p-25f;
	}
	int32_t *rp = NULL, *cp = NULL;
	assert_int_equal(rc_morton_perm(40, 30, 4, 2, &rp, &err), 0);
	assert_int_equal(rc_morton_perm(n, n, 4, 2, &cp, &err), 0);
	for (int f = 0; f < RC_FRAG_COUNT; f++)
		for (int ord = 0; ord < 2; ord++)
			for (int th = 1; th <= 3; th += 2) {
				rc_bsr *b = NULL;
				rc_bsr_cpu *want = NULL, *got = NULL, *rows = NULL;
				int64_t neb = -1;
				assert_int_equal(rc_bsr_build(m, ord ? rp : NULL, ord ? cp : NULL, (rc_frag)f, th, &b, &err), 0);
				assert_int_equal(rc_bsr_cpu_build(b, th, &want, &err), 0);
				assert_int_equal(rc_bsr_cpu_from_csr(m, ord ? rp : NULL, ord ? cp : NULL, (rc_frag)f, th, 1,
									&got, &neb, &err), 0);
				assert_int_equal(neb, b->neb);
				assert_true(want->a.nnz < m->nnz); /* the zeros are left out */
				spm_equal(&want->a, &got->a);
				spm_equal(&want->at, &got->at);
				grp_equal(&want->ap, &got->ap);
				grp_equal(&want->atp, &got->atp);
				assert_int_equal(want->isa, got->isa);
				assert_int_equal(want->input, got->input);
				assert_int_equal(rc_bsr_cpu_from_csr(m, ord ? rp : NULL, ord ? cp : NULL, (rc_frag)f, th, 0,
									&rows, NULL, &err), 0);
				spm_equal(&want->a, &rows->a);
				spm_equal(&want->at, &rows->at);
				assert_int_equal(rows->ap.group, 0);
				assert_int_equal(rows->atp.group, 0);
				rc_bsr_cpu_free(rows);
				rc_bsr_cpu_free(want);
				rc_bsr_cpu_free(got);
				rc_bsr_free(b);
			}
	free(rp);
	free(cp);
	rc_csr_free(m);
	rc_geom_free(g);
}

static void test_layout_from_csr(void **state)
{
	(void)state;
	layout_from_csr(40);
	layout_from_csr(48);
}

/* The cache loader's own structural checks, which a damaged file's digest
 * would otherwise answer first: a layout stored through rc_bsr_cpu_store
 * (so its digest matches) with one column index at cols, or with row
 * pointers that decrease, is a miss; the layout as built loads. */
static int store_load(const rc_geom *g, const char *dir, const rc_bsr_cpu *c, int threads)
{
	rc_nz_meta meta = { .rows_pad = c->a.rows, .cols_pad = c->a.cols, .nnz = c->a.nnz, .bsr_bytes = 1 };
	rc_err err;
	if (rc_bsr_cpu_store(g, dir, -1, 0, c, &meta, &err))
		fail_msg("store: %s", err.msg);
	rc_bsr_cpu *got = NULL;
	rc_nz_meta back;
	int rc = rc_bsr_cpu_load(g, dir, 0, threads, &got, &back);
	if (!rc) {
		assert_int_equal(got->a.nnz, c->a.nnz);
		assert_memory_equal(got->a.idx, c->a.idx, (size_t)c->a.nnz * sizeof *c->a.idx);
		rc_bsr_cpu_free(got);
	}
	return rc;
}

static void test_cache_loader_checks(void **state)
{
	(void)state;
	rc_geom *g;
	assert_int_equal(tp_geom(RC_GEOM_FAN, 16, 1.0, 12, 20, 1, 0, &g), 0);
	rc_csr *m = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	rc_bsr_cpu *c = NULL;
	assert_int_equal(rc_bsr_cpu_from_csr(m, NULL, NULL, (rc_frag)0, 1, 1, &c, NULL, &err), 0);
	char dir[] = "/tmp/recond-test-bsr-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_true(c->a.nnz > 4 && c->a.rows > 4);
	for (int threads = 1; threads <= 3; threads += 2) {
		assert_int_equal(store_load(g, dir, c, threads), 0);
		/* a column index at cols (out of range) in A, then in A^T */
		int64_t e = c->a.nnz / 2;
		uint32_t keep = c->a.idx[e];
		c->a.idx[e] = (uint32_t)c->a.cols;
		assert_int_equal(store_load(g, dir, c, threads), -1);
		c->a.idx[e] = keep;
		e = c->at.nnz - 1;
		keep = c->at.idx[e];
		c->at.idx[e] = (uint32_t)c->at.cols;
		assert_int_equal(store_load(g, dir, c, threads), -1);
		c->at.idx[e] = keep;
		assert_int_equal(store_load(g, dir, c, threads), 0);
		/* a row pointer above the next one (first, last and nnz kept) */
		int64_t r = c->a.rows / 2;
		while (r + 1 < c->a.rows && c->a.ptr[r + 1] >= c->a.nnz)
			r--;
		int64_t kp = c->a.ptr[r];
		c->a.ptr[r] = c->a.ptr[r + 1] + 1;
		assert_int_equal(store_load(g, dir, c, threads), -1);
		c->a.ptr[r] = kp;
		assert_int_equal(store_load(g, dir, c, threads), 0);
	}
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	rc_bsr_cpu_free(c);
	rc_csr_free(m);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_known),       cmocka_unit_test(test_f16_vs_compiler),
		cmocka_unit_test(test_frag_names),      cmocka_unit_test(test_structure_and_products),
		cmocka_unit_test(test_table3_ordering), cmocka_unit_test(test_layout_from_csr),
		cmocka_unit_test(test_cache_loader_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
