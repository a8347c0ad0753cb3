/*
 * bsr_cpu: the non-zeros of the fp16 BSR as rows of A and of A^T, and the
 * CPU products over them (bsr_cpu.h).
 *
 * Both layouts are made from the BSR in two parallel passes (count per row,
 * then fill), A over block rows, A^T over block columns through the BSR's
 * block column index, so each row's entries come out in ascending order
 * without a sort.
 */
#include "projectors/bsr_cpu.h"

#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <emmintrin.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "projectors/proj_cpu.h"
#include "util/tensor_par.h"

void rc_bsr_cpu_free(rc_bsr_cpu *c)
{
	if (!c)
		return;
	if (c->map) {
		/* a cached layout (bsr_cpu_cache.h): every array is in the mapping */
		munmap(c->map, c->map_len);
		close(c->map_fd); /* drops the lock */
		free(c->xh);
		free(c);
		return;
	}
	rc_spm16 *m[2] = { &c->a, &c->at };
	for (int i = 0; i < 2; i++) {
		free(m[i]->ptr);
		free(m[i]->idx);
		free(m[i]->val);
	}
	rc_spm16p_free(&c->ap);
	rc_spm16p_free(&c->atp);
	free(c->xh);
	free(c);
}

int64_t rc_bsr_cpu_bytes(const rc_bsr_cpu *c)
{
	return c->a.nnz * (int64_t)(sizeof(uint32_t) + sizeof(uint16_t)) + (c->a.rows + 1) * (int64_t)sizeof(int64_t);
}

const char *rc_bsr_cpu_path(const rc_bsr_cpu *c)
{
	if (c->isa >= RC_ISA_AVX512)
		return c->input == RC_SPM_IN_BF16 ? "avx512-bf16" : c->input == RC_SPM_IN_FP16 ? "avx512-fp16in" : "avx512";
	return rc_cpu_isa_name((rc_cpu_isa)c->isa);
}

struct cbuild {
	const rc_bsr *b;
	rc_spm16 *m;
	int fill; /* 0: count into ptr[row + 1], 1: fill from ptr[row] */
};

/* Bit k set where h[k] is not zero (-0 is zero, as in rc_bsr_mul): 16
 * entries of a block row in a few SSE2 instructions, so the builds below
 * walk a block's non-zeros (~20% at 512^2) without a branch per entry. */
static inline unsigned nz_mask16(const uint16_t *h)
{
	const __m128i keep = _mm_set1_epi16(0x7fff), zero = _mm_setzero_si128();
	__m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)h), keep);
	__m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(h + 8)), keep);
	__m128i z = _mm_packs_epi16(_mm_cmpeq_epi16(a, zero), _mm_cmpeq_epi16(b, zero));
	return ~(unsigned)_mm_movemask_epi8(z) & 0xffffu;
}

/* Block row br of A: its bm rows, each over the row's blocks in ascending
 * block column.  One pass over the blocks (each read once, all bm rows'
 * positions kept), so a row's entries come in block order, then column. */
static int cbuild_row(int64_t br, int worker, void *ud)
{
	(void)worker;
	const struct cbuild *c = ud;
	const rc_bsr *b = c->b;
	rc_spm16 *m = c->m;
	int bm = b->bm;
	int64_t n[32];
	for (int rr = 0; rr < bm; rr++)
		n[rr] = c->fill ? m->ptr[br * bm + rr] : 0;
	for (int64_t i = b->row_ptr[br]; i < b->row_ptr[br + 1]; i++) {
		const uint16_t *h = b->blocks + i * bm * 16;
		uint32_t c0 = (uint32_t)((int64_t)b->col_idx[i] * 16);
		for (int rr = 0; rr < bm; rr++, h += 16) {
			unsigned k = nz_mask16(h);
			if (!c->fill) {
				n[rr] += __builtin_popcount(k);
				continue;
			}
			for (; k; k &= k - 1) {
				int cc = __builtin_ctz(k);
				m->idx[n[rr]] = c0 + (uint32_t)cc;
				m->val[n[rr]++] = h[cc];
			}
		}
	}
	if (!c->fill)
		for (int rr = 0; rr < bm; rr++)
			m->ptr[br * bm + rr + 1] = n[rr];
	return 0;
}

/* Block column bc of A = 16 rows of A^T, each over the column's blocks in
 * the order of tblk (ascending block id, so ascending block row).  One
 * pass over the blocks, as cbuild_row. */
static int cbuild_col(int64_t bc, int worker, void *ud)
{
	(void)worker;
	const struct cbuild *c = ud;
	const rc_bsr *b = c->b;
	rc_spm16 *m = c->m;
	int bm = b->bm;
	int64_t n[16];
	for (int cc = 0; cc < 16; cc++)
		n[cc] = c->fill ? m->ptr[bc * 16 + cc] : 0;
	for (int64_t j = b->tcol_ptr[bc]; j < b->tcol_ptr[bc + 1]; j++) {
		int64_t i = b->tblk[j];
		const uint16_t *h = b->blocks + i * bm * 16;
		uint32_t r0 = (uint32_t)((int64_t)b->blk_row[i] * bm);
		for (int rr = 0; rr < bm; rr++, h += 16)
			for (unsigned k = nz_mask16(h); k; k &= k - 1) {
				int cc = __builtin_ctz(k);
				if (c->fill) {
					m->idx[n[cc]] = r0 + (uint32_t)rr;
					m->val[n[cc]] = h[cc];
				}
				n[cc]++;
			}
	}
	if (!c->fill)
		for (int cc = 0; cc < 16; cc++)
			m->ptr[bc * 16 + cc + 1] = n[cc];
	return 0;
}

static int spm_make(const rc_bsr *b, int trans, int threads, rc_spm16 *m, rc_err *err)
{
	m->rows = trans ? rc_bsr_cols_pad(b) : rc_bsr_rows_pad(b);
	m->cols = trans ? rc_bsr_rows_pad(b) : rc_bsr_cols_pad(b);
	m->ptr = calloc((size_t)m->rows + 1, sizeof *m->ptr);
	if (!m->ptr)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU matrix's rows");
	struct cbuild c = { b, m, 0 };
	int64_t n = trans ? b->nb : b->mb;
	rc_par_fn fn = trans ? cbuild_col : cbuild_row;
	int rc = rc_par_for(n, 16, threads, fn, &c);
	if (rc)
		return rc_fail(err, rc, "", "building the CPU matrix failed (code %d)", rc);
	for (int64_t r = 0; r < m->rows; r++)
		m->ptr[r + 1] += m->ptr[r];
	m->nnz = m->ptr[m->rows];
	m->idx = calloc((size_t)m->nnz + RC_SPM16_PAD, sizeof *m->idx);
	m->val = calloc((size_t)m->nnz + RC_SPM16_PAD, sizeof *m->val);
	if (!m->idx || !m->val)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU matrix (%lld non-zeros)", (long long)m->nnz);
	c.fill = 1;
	rc = rc_par_for(n, 16, threads, fn, &c);
	if (rc)
		return rc_fail(err, rc, "", "building the CPU matrix failed (code %d)", rc);
	return 0;
}

void rc_spm16p_free(rc_spm16p *p)
{
	free(p->sptr);
	free(p->sidx);
	free(p->sval);
	free(p->qptr);
	free(p->qidx);
	free(p->qval);
	free(p->rest.ptr);
	free(p->rest.idx);
	free(p->rest.val);
	memset(p, 0, sizeof *p);
}

/* Rows per group of the fp32-input AVX-512 layout (rc_spm16p): set from
 * bench-tensor-spmm on the Zen 4 of docs/tensor.md (see there). */
#define RC_SPM16P_GROUP 4

struct pbuild {
	const rc_spm16 *m;
	rc_spm16p *p;
	int fill; /* 0: count into qptr[g + 1], sptr[pair + 1], rest.ptr[row + 1]; 1: fill */
};

/* Groups [16 t, 16 t + 16): merge the group's rows' ascending columns. */
static int pbuild_task(int64_t t, int worker, void *ud)
{
	(void)worker;
	const struct pbuild *b = ud;
	const rc_spm16 *m = b->m;
	rc_spm16p *p = b->p;
	int k = p->group;
	int64_t ng = m->rows / k, g1 = (t + 1) * 16 < ng ? (t + 1) * 16 : ng;
	for (int64_t g = t * 16; g < g1; g++) {
		int64_t cur[4], end[4], nr[4], ns[2], nq = 0;
		for (int r = 0; r < k; r++) {
			cur[r] = m->ptr[g * k + r];
			end[r] = m->ptr[g * k + r + 1];
			nr[r] = b->fill ? p->rest.ptr[g * k + r] : 0;
		}
		for (int h = 0; h < k / 2; h++)
			ns[h] = b->fill ? p->sptr[g * k / 2 + h] : 0;
		if (k == 4 && b->fill)
			nq = p->qptr[g];
		for (;;) {
			uint32_t c = UINT32_MAX;
			for (int r = 0; r < k; r++)
				if (cur[r] < end[r] && m->idx[cur[r]] < c)
					c = m->idx[cur[r]];
			if (c == UINT32_MAX) /* every row done (columns are < cols) */
				break;
			int has = 0;
			for (int r = 0; r < k; r++)
				if (cur[r] < end[r] && m->idx[cur[r]] == c)
					has |= 1 << r;
			if (k == 4 && has == 15) {
				if (b->fill) {
					p->qidx[nq] = c;
					p->qval[nq] = 0;
					for (int r = 0; r < 4; r++)
						p->qval[nq] |= (uint64_t)m->val[cur[r]] << (16 * r);
				}
				nq++;
			} else {
				for (int h = 0; h < k / 2; h++) {
					int two = (has >> (2 * h)) & 3;
					if (two == 3) {
						if (b->fill) {
							p->sidx[ns[h]] = c;
							p->sval[ns[h]] = m->val[cur[2 * h]] | (uint32_t)m->val[cur[2 * h + 1]] << 16;
						}
						ns[h]++;
					} else if (two) {
						int r = 2 * h + (two == 2);
						if (b->fill) {
							p->rest.idx[nr[r]] = c;
							p->rest.val[nr[r]] = m->val[cur[r]];
						}
						nr[r]++;
					}
				}
			}
			for (int r = 0; r < k; r++)
				cur[r] += (has >> r) & 1;
		}
		if (!b->fill) {
			if (k == 4)
				p->qptr[g + 1] = nq;
			for (int h = 0; h < k / 2; h++)
				p->sptr[g * k / 2 + h + 1] = ns[h];
			for (int r = 0; r < k; r++)
				p->rest.ptr[g * k + r + 1] = nr[r];
		}
	}
	return 0;
}

int rc_spm16p_make(const rc_spm16 *m, int group, int threads, rc_spm16p *p)
{
	memset(p, 0, sizeof *p);
	if ((group != 2 && group != 4) || m->rows % group)
		return RC_EINVAL;
	p->group = group;
	p->pairs = m->rows / 2;
	p->rest.rows = m->rows;
	p->rest.cols = m->cols;
	p->sptr = calloc((size_t)p->pairs + 1, sizeof *p->sptr);
	p->rest.ptr = calloc((size_t)m->rows + 1, sizeof *p->rest.ptr);
	if (group == 4)
		p->qptr = calloc((size_t)(m->rows / 4) + 1, sizeof *p->qptr);
	if (!p->sptr || !p->rest.ptr || (group == 4 && !p->qptr))
		goto nomem;
	struct pbuild b = { m, p, 0 };
	int64_t ng = m->rows / group, nt = (ng + 15) / 16;
	int rc = rc_par_for(nt, 16, threads, pbuild_task, &b);
	if (rc) {
		rc_spm16p_free(p);
		return rc;
	}
	for (int64_t q = 0; q < p->pairs; q++)
		p->sptr[q + 1] += p->sptr[q];
	for (int64_t r = 0; r < m->rows; r++)
		p->rest.ptr[r + 1] += p->rest.ptr[r];
	int64_t nq = 0;
	if (group == 4) {
		for (int64_t g = 0; g < ng; g++)
			p->qptr[g + 1] += p->qptr[g];
		nq = p->qptr[ng];
		p->qidx = calloc((size_t)nq + RC_SPM16_PAD, sizeof *p->qidx);
		p->qval = calloc((size_t)nq + RC_SPM16_PAD, sizeof *p->qval);
		if (!p->qidx || !p->qval)
			goto nomem;
	}
	int64_t ns = p->sptr[p->pairs];
	p->rest.nnz = p->rest.ptr[m->rows];
	p->sidx = calloc((size_t)ns + RC_SPM16_PAD, sizeof *p->sidx);
	p->sval = calloc((size_t)ns + RC_SPM16_PAD, sizeof *p->sval);
	p->rest.idx = calloc((size_t)p->rest.nnz + RC_SPM16_PAD, sizeof *p->rest.idx);
	p->rest.val = calloc((size_t)p->rest.nnz + RC_SPM16_PAD, sizeof *p->rest.val);
	if (!p->sidx || !p->sval || !p->rest.idx || !p->rest.val)
		goto nomem;
	b.fill = 1;
	rc = rc_par_for(nt, 16, threads, pbuild_task, &b);
	if (rc) {
		rc_spm16p_free(p);
		return rc;
	}
	return 0;
nomem:
	rc_spm16p_free(p);
	return RC_ENOMEM;
}

/* F16C (cpuid leaf 1, ecx bit 29): through cpuid.h, since clang's
 * __builtin_cpu_supports does not know "f16c" (the fuzz build is clang). */
static int has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int cpu_bf16(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512bf16");
}

int rc_bsr_cpu_has_bf16(void) { return rc_cpu_isa_best() >= RC_ISA_AVX512 && cpu_bf16(); }

int rc_bsr_cpu_set_input(rc_bsr_cpu *c, rc_spm_input in)
{
	if ((in != RC_SPM_IN_FP32 && c->isa < RC_ISA_AVX512) || (in == RC_SPM_IN_BF16 && !cpu_bf16()))
		return RC_EUNSUPPORTED;
	if ((int)in < 0 || in > RC_SPM_IN_BF16)
		return RC_EINVAL;
	c->input = in;
	return 0;
}

int rc_bsr_cpu_isa(void)
{
	rc_cpu_isa best = rc_cpu_isa_best();
	return best >= RC_ISA_AVX512 ? RC_ISA_AVX512 : best >= RC_ISA_AVX2 && has_f16c() ? RC_ISA_AVX2 : RC_ISA_BASELINE;
}

int rc_bsr_cpu_group(void) { return rc_bsr_cpu_isa() >= RC_ISA_AVX512 ? RC_SPM16P_GROUP : 0; }

void rc_bsr_cpu_input_init(rc_bsr_cpu *c)
{
	/* RC_SPM_IN_DEFAULT unless RECOND_TENSOR_CPU_INPUT=fp32|fp16|bf16 says
	 * otherwise (comparisons; a path this CPU lacks is ignored) */
	c->input = RC_SPM_IN_DEFAULT;
	const char *env = getenv("RECOND_TENSOR_CPU_INPUT");
	static const char *names[3] = { "fp32", "fp16", "bf16" };
	for (int i = 0; env && i < 3; i++)
		if (!strcmp(env, names[i]))
			rc_bsr_cpu_set_input(c, (rc_spm_input)i);
}

int rc_bsr_cpu_build(const rc_bsr *b, int threads, rc_bsr_cpu **ret, rc_err *err)
{
	rc_bsr_cpu *c = calloc(1, sizeof *c);
	if (!c)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	int rc = spm_make(b, 0, threads, &c->a, err);
	if (!rc)
		rc = spm_make(b, 1, threads, &c->at, err);
	if (rc) {
		rc_bsr_cpu_free(c);
		return rc;
	}
	c->isa = rc_bsr_cpu_isa();
	/* the row pairs of the fp32-input AVX-512 kernel (without memory for
	 * them the products take the single rows) */
	if (c->isa >= RC_ISA_AVX512) {
		if (rc_spm16p_make(&c->a, RC_SPM16P_GROUP, threads, &c->ap) ||
		    rc_spm16p_make(&c->at, RC_SPM16P_GROUP, threads, &c->atp)) {
			rc_spm16p_free(&c->ap);
			rc_spm16p_free(&c->atp);
		}
	}
	rc_bsr_cpu_input_init(c);
	*ret = c;
	return 0;
}

/* The 65536 halves decoded once for the baseline path. */
static float h2f[65536];
static pthread_once_t h2f_once = PTHREAD_ONCE_INIT;
static void h2f_init(void)
{
	for (uint32_t i = 0; i < 65536; i++)
		h2f[i] = rc_f16_to_f32((uint16_t)i);
}

static void rows_base(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1)
{
	pthread_once(&h2f_once, h2f_init);
	for (int64_t r = r0; r < r1; r++) {
		float *restrict y = out + r * nc;
		for (int j = 0; j < nc; j++)
			y[j] = 0;
		for (int64_t i = m->ptr[r]; i < m->ptr[r + 1]; i++) {
			float a = h2f[m->val[i]];
			const float *restrict x = in + (int64_t)m->idx[i] * nc;
			for (int j = 0; j < nc; j++)
				y[j] += a * x[j];
		}
	}
}

void rc_spm16_rows(const rc_spm16 *m, int isa, const float *in, float *out, int nc, int64_t r0, int64_t r1)
{
	if (isa >= RC_ISA_AVX512)
		rc_spm16_rows_avx512(m, in, out, nc, r0, r1);
	else if (isa == RC_ISA_AVX2)
		rc_spm16_rows_avx2(m, in, out, nc, r0, r1);
	else
		rows_base(m, in, out, nc, r0, r1);
}

/* Rows per task (a multiple of RC_SPM16P_GROUP): 64 rows are ~50 K non-zeros at 512^2 (~0.1 ms), small
 * enough to balance two cores over 5760 tasks, large enough that the task
 * counter is touched rarely. */
#define SPM_TASK_ROWS 64

struct cmul {
	const rc_spm16 *m;
	const rc_spm16p *mp; /* its row groups (fp32 and bf16 input), or NULL */
	int isa, nc;
	const float *in;
	float *out;
	/* fp16 input (32 slices, AVX-512): */
	uint16_t *xh, *xh_to; /* the product's input; the conversion's output */
	int64_t in_rows;
	float mx[64][32]; /* per worker largest |in| per slice */
	float sc[32], inv[32];
	int input; /* rc_spm_input */
	int stage; /* 0 max, 1 convert, 2 product */
};

static int cmul_task(int64_t t, int worker, void *ud)
{
	struct cmul *c = ud;
	int64_t rows = c->stage == 2 ? c->m->rows : c->in_rows;
	int64_t r0 = t * SPM_TASK_ROWS, r1 = r0 + SPM_TASK_ROWS < rows ? r0 + SPM_TASK_ROWS : rows;
	if (c->stage == 0)
		rc_absmax32_avx512(c->in, r0, r1, c->mx[worker]);
	else if (c->stage == 1 && c->input == RC_SPM_IN_BF16)
		rc_to_bf16_32_avx512(c->in, c->xh_to, r0, r1);
	else if (c->stage == 1)
		rc_to_f16_32_avx512(c->in, c->inv, c->xh_to, r0, r1);
	else if (c->xh && c->input == RC_SPM_IN_BF16 && c->mp)
		rc_spm16p_rows32b_avx512(c->mp, c->xh, c->out, r0, r1);
	else if (c->xh && c->input == RC_SPM_IN_BF16)
		rc_spm16_rows32b_avx512(c->m, c->xh, c->out, r0, r1);
	else if (c->xh)
		rc_spm16_rows32h_avx512(c->m, c->xh, c->sc, c->out, r0, r1);
	else if (c->mp)
		rc_spm16p_rows32_avx512(c->mp, c->in, c->out, r0, r1);
	else
		rc_spm16_rows(c->m, c->isa, c->in, c->out, c->nc, r0, r1);
	return 0;
}

static int64_t tasks(int64_t rows)
{
	return (rows + SPM_TASK_ROWS - 1) / SPM_TASK_ROWS;
}

/* The input in fp16 per slice (rc_bsr_cpu_mul); 0 = take the fp32 kernel
 * (no memory, or a slice that is not finite). */
static int to_f16(rc_bsr_cpu *c, struct cmul *k, int threads)
{
	if (!c->xh) {
		int64_t n = c->a.rows > c->a.cols ? c->a.rows : c->a.cols;
		/* 64-byte rows on 64-byte lines: one cache line per non-zero */
		c->xh = aligned_alloc(64, (size_t)n * 32 * sizeof *c->xh);
		if (!c->xh)
			return 0;
	}
	int nt = rc_par_threads(threads, tasks(k->in_rows));
	if (nt > 64)
		nt = 64;
	memset(k->mx, 0, sizeof k->mx);
	k->stage = 0;
	if (rc_par_for(tasks(k->in_rows), 8, nt, cmul_task, k))
		return 0;
	for (int s = 0; s < 32; s++) {
		float mx = 0;
		for (int w = 0; w < nt; w++)
			mx = k->mx[w][s] > mx ? k->mx[w][s] : mx;
		/* bf16 rounds values above ~3.39e38 to inf (0 x inf in a
		 * padded pair would be NaN) */
		if (!isfinite(mx) || (k->input == RC_SPM_IN_BF16 && mx > 1e38f))
			return 0;
		k->sc[s] = mx;
		k->inv[s] = mx > 0 ? 1.0f / mx : 0;
	}
	k->stage = 1;
	k->xh_to = c->xh;
	if (rc_par_for(tasks(k->in_rows), 8, nt, cmul_task, k))
		return 0;
	k->xh = c->xh;
	return 1;
}

int rc_bsr_cpu_mul(rc_bsr_cpu *c, int trans, const float *in, float *out, int nc, int threads)
{
	const rc_spm16 *m = trans ? &c->at : &c->a;
	struct cmul *k = calloc(1, sizeof *k);
	if (!k)
		return RC_ENOMEM;
	*k = (struct cmul){ .m = m, .isa = c->isa, .nc = nc, .in = in, .out = out, .in_rows = m->cols, .input = c->input };
	if (c->isa >= RC_ISA_AVX512 && nc == 32 && c->input != RC_SPM_IN_FP32 && !to_f16(c, k, threads))
		k->xh = NULL;
	k->stage = 2;
	const rc_spm16p *mp = trans ? &c->atp : &c->ap;
	if (c->isa >= RC_ISA_AVX512 && nc == 32 && mp->group)
		k->mp = mp;
	int rc = rc_par_for(tasks(m->rows), 1, threads, cmul_task, k);
	free(k);
	return rc;
}

/* ---- machine figures ------------------------------------------------------ */

/* Rates are per CPU second of each thread, summed over the threads: on a
 * shared machine a wall-clock rate measures the other users' load too. */
static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct rd {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
	double cpu;
};

static void *rd_run(void *arg)
{
	struct rd *r = arg;
	/* four independent sums: the loop is bound by the loads, not the adds */
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	double t0 = thread_cpu_s();
	for (size_t i = 0; i + 4 <= r->n; i += 4) {
		s0 += r->p[i];
		s1 += r->p[i + 1];
		s2 += r->p[i + 2];
		s3 += r->p[i + 3];
	}
	r->sum = s0 + s1 + s2 + s3;
	r->cpu = thread_cpu_s() - t0;
	return NULL;
}

double rc_cpu_read_gbs(int threads, size_t bytes)
{
	threads = rc_par_threads(threads, 64);
	size_t n = bytes / sizeof(uint64_t);
	uint64_t *p = malloc(n * sizeof *p);
	if (!p)
		return 0;
	for (size_t i = 0; i < n; i++)
		p[i] = i;
	double best = 0;
	for (int rep = 0; rep < 3; rep++) {
		struct rd r[64];
		pthread_t tid[64];
		size_t per = n / (size_t)threads / 4 * 4;
		int started = 0;
		for (int i = 0; i < threads; i++) {
			r[i] = (struct rd){ p + (size_t)i * per, per, 0, 0 };
			/* stop at the first thread that does not start: every tid
			 * up to started is then one to join */
			if (i > 0 && pthread_create(&tid[i], NULL, rd_run, &r[i]) != 0)
				break;
			started = i;
		}
		rd_run(&r[0]);
		for (int i = 1; i <= started; i++)
			pthread_join(tid[i], NULL);
		volatile uint64_t sink = r[0].sum;
		(void)sink;
		double gbs = 0;
		for (int i = 0; i <= started; i++)
			gbs += r[i].cpu > 0 ? (double)(per * sizeof *p) / r[i].cpu / 1e9 : 0;
		if (gbs > best)
			best = gbs;
	}
	free(p);
	return best;
}

struct fm {
	int isa;
	long iters;
	double flops, cpu;
};

static void *fm_run(void *arg)
{
	struct fm *f = arg;
	double t0 = thread_cpu_s();
	if (f->isa == RC_FMA_BF16) {
		f->flops = rc_dpbf16_loop_avx512(f->iters);
	} else if (f->isa >= RC_ISA_AVX512) {
		f->flops = rc_fma_loop_avx512(f->iters);
	} else {
		/* baseline: 8 independent multiply-adds over 4-wide vectors the
		 * compiler makes of these arrays (SSE2 has no FMA: 2 ops each) */
		float a[8][4], m = 1.0000001f, d = 1e-7f;
		for (int k = 0; k < 8; k++)
			for (int j = 0; j < 4; j++)
				a[k][j] = (float)(k + j);
		for (long i = 0; i < f->iters; i++)
			for (int k = 0; k < 8; k++)
				for (int j = 0; j < 4; j++)
					a[k][j] = a[k][j] * m + d;
		volatile float sink = a[3][1];
		(void)sink;
		f->flops = (double)f->iters * 8 * 4 * 2;
	}
	f->cpu = thread_cpu_s() - t0;
	return NULL;
}

double rc_cpu_fma_gflops(int isa, int threads)
{
	threads = rc_par_threads(threads, 64);
	double best = 0;
	for (int rep = 0; rep < 3; rep++) {
		struct fm f[64];
		pthread_t tid[64];
		int started = 0;
		for (int i = 0; i < threads; i++) {
			f[i] = (struct fm){ isa, 20000000, 0, 0 };
			if (i > 0 && pthread_create(&tid[i], NULL, fm_run, &f[i]) != 0)
				break; /* as rc_cpu_read_gbs: join only started threads */
			started = i;
		}
		fm_run(&f[0]);
		for (int i = 1; i <= started; i++)
			pthread_join(tid[i], NULL);
		double rate = 0;
		for (int i = 0; i <= started; i++)
			rate += f[i].cpu > 0 ? f[i].flops / f[i].cpu / 1e9 : 0;
		if (rate > best)
			best = rate;
	}
	return best;
}
