/*
 * bsr_cpu_csr: the CPU layout (bsr_cpu.h) straight from the DD matrix's
 * CSR and the orderings, without the fp16 BSR blocks (those are the GPU's
 * WMMA operand; rc_bsr_cpu_build makes the same layout from them).
 *
 * The layout is the matrix renumbered by the orderings, its values in
 * fp16 with the entries fp16 rounds to zero left out (the BSR's empty
 * entries), each row's entries in ascending column.  Two parallel
 * passes: A's rows gathered in ordered row order, each row's renumbered
 * columns sorted where they are (a radix sort of a few hundred keys in
 * the core's cache), then A transposed into A^T (rows of A^T come out
 * sorted: every destination row takes the source rows in ascending
 * order).  The transposition splits the source rows into one run per
 * thread, counts per run and destination row, and fills from those
 * offsets: no atomics, and the result does not depend on the thread
 * count.  The non-empty blocks of the fragment (the report's share and
 * BSR bytes) are counted in the gather's first pass, over every entry as
 * rc_bsr_build counts them (also those fp16 rounds to zero).
 */
#include "projectors/bsr_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "projectors/proj_cpu.h"
#include "util/tensor_par.h"

/* The source runs of a transposition: at most this many (their offsets
 * take runs x destination rows x 4 bytes: 33.5 MB for 512^2's A^T, 262144
 * destination rows). */
#define TR_MAX_RUNS 32
/* Rows per gather task. */
#define GATHER_ROWS 64

/* rc_f32_to_f16(v) is +-0 exactly when |v| <= 2^-25 (2^-25 itself rounds
 * to even, 0): the entries an fp16 BSR block holds as zero. */
static inline int f16_zero(float v)
{
	uint32_t x;
	memcpy(&x, &v, sizeof x);
	return (x & 0x7fffffffu) <= 0x33000000u;
}

struct gather {
	const rc_csr *m;
	const int32_t *irow; /* ordered row -> natural row, -1 = padding */
	const int32_t *cperm;
	rc_spm16 *a;
	int bm;          /* the fragment's block rows (GATHER_ROWS is a multiple) */
	int32_t **stamp; /* count: per worker, a block column's last block row */
	uint64_t **keys; /* fill: per worker, 2 x maxrow (column << 16 | fp16) */
	int64_t maxrow;  /* the longest row of m */
	int digit, passes; /* the radix sort's digit bits and passes */
	int64_t *neb;    /* count: per worker, non-empty blocks */
	int64_t *maxr;   /* count: per worker, the longest row seen */
	int fill;        /* 0: count into ptr[r + 1], 1: fill from ptr[r] */
};

/* LSD radix sort of k[0, n) on the bits above 16 (the columns: distinct,
 * so no order among equals matters); returns the buffer that holds the
 * result (k or t). */
static uint64_t *radix(uint64_t *k, uint64_t *t, int64_t n, int digit, int passes)
{
	uint32_t cnt[1 << 11];
	uint64_t mask = ((uint64_t)1 << digit) - 1;
	for (int p = 0; p < passes; p++) {
		int sh = 16 + p * digit;
		memset(cnt, 0, ((size_t)1 << digit) * sizeof *cnt);
		for (int64_t i = 0; i < n; i++)
			cnt[(k[i] >> sh) & mask]++;
		uint32_t s = 0;
		for (uint64_t d = 0; d <= mask; d++) {
			uint32_t c = cnt[d];
			cnt[d] = s;
			s += c;
		}
		for (int64_t i = 0; i < n; i++)
			t[cnt[(k[i] >> sh) & mask]++] = k[i];
		uint64_t *x = k;
		k = t;
		t = x;
	}
	return k;
}

static int gather_task(int64_t t, int worker, void *ud)
{
	const struct gather *g = ud;
	const rc_csr *m = g->m;
	rc_spm16 *a = g->a;
	int64_t r1 = (t + 1) * GATHER_ROWS < a->rows ? (t + 1) * GATHER_ROWS : a->rows, nb = 0, mr = 0;
	int32_t *st = g->stamp ? g->stamp[worker] : NULL;
	for (int64_t r = t * GATHER_ROWS; r < r1; r++) {
		int32_t n = g->irow[r];
		int64_t i0 = n < 0 ? 0 : m->row_ptr[n], i1 = n < 0 ? 0 : m->row_ptr[n + 1];
		if (!g->fill) {
			/* every entry makes its block non-empty, also one fp16
			 * rounds to zero (rc_bsr_build's count) */
			int32_t br = (int32_t)(r / g->bm);
			int64_t k = 0;
			for (int64_t i = i0; i < i1; i++) {
				k += !f16_zero(m->val[i]);
				if (st) {
					int32_t b = (g->cperm ? g->cperm[m->col[i]] : m->col[i]) >> 4;
					nb += st[b] != br;
					st[b] = br;
				}
			}
			a->ptr[r + 1] = k;
			mr = i1 - i0 > mr ? i1 - i0 : mr;
			continue;
		}
		uint64_t *k = g->keys[worker];
		int64_t nk = 0;
		int sorted = 1;
		for (int64_t i = i0; i < i1; i++) {
			if (f16_zero(m->val[i]))
				continue;
			uint64_t c = (uint64_t)(g->cperm ? g->cperm[m->col[i]] : m->col[i]);
			k[nk] = c << 16 | rc_f32_to_f16(m->val[i]);
			sorted &= nk == 0 || k[nk] > k[nk - 1];
			nk++;
		}
		if (!sorted)
			k = radix(k, k + g->maxrow, nk, g->digit, g->passes);
		int64_t at = a->ptr[r];
		for (int64_t i = 0; i < nk; i++) {
			a->idx[at + i] = (uint32_t)(k[i] >> 16);
			a->val[at + i] = (uint16_t)k[i];
		}
	}
	if (st)
		g->neb[worker] += nb;
	if (!g->fill && mr > g->maxr[worker])
		g->maxr[worker] = mr;
	return 0;
}

struct transpose {
	const rc_spm16 *s;
	rc_spm16 *d;
	int runs;
	int64_t first[TR_MAX_RUNS + 1]; /* source rows of run k: [first[k], first[k + 1]) */
	uint32_t *off;                  /* runs x d->rows: counts, then offsets in the row */
	int stage;                      /* 0 count, 1 offsets, 2 fill */
};

#define TR_ROWS 4096 /* destination rows per offsets task */

static int transpose_task(int64_t t, int worker, void *ud)
{
	(void)worker;
	struct transpose *x = ud;
	const rc_spm16 *s = x->s;
	rc_spm16 *d = x->d;
	if (x->stage == 1) {
		int64_t r1 = (t + 1) * TR_ROWS < d->rows ? (t + 1) * TR_ROWS : d->rows;
		for (int64_t r = t * TR_ROWS; r < r1; r++) {
			uint32_t n = 0;
			for (int k = 0; k < x->runs; k++) {
				uint32_t c = x->off[(int64_t)k * d->rows + r];
				x->off[(int64_t)k * d->rows + r] = n;
				n += c;
			}
			d->ptr[r + 1] = n;
		}
		return 0;
	}
	uint32_t *off = x->off + t * d->rows;
	if (x->stage == 0) {
		memset(off, 0, (size_t)d->rows * sizeof *off);
		for (int64_t i = s->ptr[x->first[t]]; i < s->ptr[x->first[t + 1]]; i++)
			off[s->idx[i]]++;
		return 0;
	}
	for (int64_t r = x->first[t]; r < x->first[t + 1]; r++)
		for (int64_t i = s->ptr[r]; i < s->ptr[r + 1]; i++) {
			uint32_t c = s->idx[i];
			int64_t p = d->ptr[c] + off[c]++;
			d->idx[p] = (uint32_t)r;
			d->val[p] = s->val[i];
		}
	return 0;
}

/* d = s^T (d->rows = s->cols), its arrays allocated here. */
static int transpose(const rc_spm16 *s, int threads, rc_spm16 *d)
{
	struct transpose *x = calloc(1, sizeof *x);
	int rc = RC_ENOMEM;
	if (!x)
		return rc;
	d->rows = s->cols;
	d->cols = s->rows;
	d->nnz = s->nnz;
	x->s = s;
	x->d = d;
	x->runs = rc_par_threads(threads, TR_MAX_RUNS);
	/* runs of about equal non-zeros */
	int64_t r = 0;
	for (int k = 0; k <= x->runs; k++) {
		int64_t want = s->nnz / x->runs * k;
		while (r < s->rows && (k == x->runs || s->ptr[r] < want))
			r++;
		x->first[k] = k == 0 ? 0 : r;
	}
	x->off = malloc((size_t)x->runs * (size_t)d->rows * sizeof *x->off);
	d->ptr = malloc(((size_t)d->rows + 1) * sizeof *d->ptr);
	d->idx = malloc(((size_t)d->nnz + RC_SPM16_PAD) * sizeof *d->idx);
	d->val = malloc(((size_t)d->nnz + RC_SPM16_PAD) * sizeof *d->val);
	if (d->idx && d->val) {
		memset(d->idx + d->nnz, 0, RC_SPM16_PAD * sizeof *d->idx);
		memset(d->val + d->nnz, 0, RC_SPM16_PAD * sizeof *d->val);
	}
	if (!x->off || !d->ptr || !d->idx || !d->val)
		goto out;
	x->stage = 0;
	if ((rc = rc_par_for(x->runs, 1, threads, transpose_task, x)))
		goto out;
	x->stage = 1;
	if ((rc = rc_par_for((d->rows + TR_ROWS - 1) / TR_ROWS, 1, threads, transpose_task, x)))
		goto out;
	d->ptr[0] = 0;
	for (int64_t i = 0; i < d->rows; i++)
		d->ptr[i + 1] += d->ptr[i];
	x->stage = 2;
	rc = rc_par_for(x->runs, 1, threads, transpose_task, x);
out:
	free(x->off);
	free(x);
	return rc;
}

int rc_bsr_cpu_from_csr(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f, int threads,
			int groups, rc_bsr_cpu **ret, int64_t *ret_neb, rc_err *err)
{
	const rc_frag_info *fi = rc_frag_get(f);
	int bm = fi->m, rc = 0;
	rc_bsr_cpu *c = calloc(1, sizeof *c);
	int32_t *irow = NULL;
	struct gather g = { .m = m, .cperm = cperm, .bm = bm };
	int nt = rc_par_threads(threads, 1 << 20);
	if (!c)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	rc_spm16 *a = g.a = &c->a;
	/* the BSR's padded index space: whole blocks of bm rows and 16 columns */
	a->rows = ((int64_t)m->rows + bm - 1) / bm * bm;
	a->cols = ((int64_t)m->cols + 15) / 16 * 16;
	a->ptr = malloc(((size_t)a->rows + 1) * sizeof *a->ptr);
	g.irow = irow = malloc((size_t)a->rows * sizeof *irow);
	g.maxr = calloc((size_t)nt, sizeof *g.maxr);
	if (ret_neb) {
		g.stamp = calloc((size_t)nt, sizeof *g.stamp);
		g.neb = calloc((size_t)nt, sizeof *g.neb);
		for (int t = 0; g.stamp && t < nt; t++) {
			int64_t nbc = a->cols / 16;
			if (!(g.stamp[t] = malloc((size_t)nbc * sizeof **g.stamp)))
				break;
			for (int64_t j = 0; j < nbc; j++)
				g.stamp[t][j] = -1;
		}
	}
	if (!a->ptr || !irow || !g.maxr || (ret_neb && (!g.stamp || !g.neb || !g.stamp[nt - 1]))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU matrix's rows");
		goto out;
	}
	for (int64_t r = 0; r < a->rows; r++)
		irow[r] = -1;
	for (int r = 0; r < m->rows; r++)
		irow[rperm ? rperm[r] : r] = r;
	int64_t ntask = (a->rows + GATHER_ROWS - 1) / GATHER_ROWS;
	/* gather_task never fails, nor rc_par_for but through its tasks */
	(void)rc_par_for(ntask, 4, nt, gather_task, &g);
	for (int t = 0; t < nt; t++)
		g.maxrow = g.maxr[t] > g.maxrow ? g.maxr[t] : g.maxrow;
	if (ret_neb) {
		*ret_neb = 0;
		for (int t = 0; t < nt; t++)
			*ret_neb += g.neb[t];
	}
	a->ptr[0] = 0;
	for (int64_t r = 0; r < a->rows; r++)
		a->ptr[r + 1] += a->ptr[r];
	a->nnz = a->ptr[a->rows];
	a->idx = malloc(((size_t)a->nnz + RC_SPM16_PAD) * sizeof *a->idx);
	a->val = malloc(((size_t)a->nnz + RC_SPM16_PAD) * sizeof *a->val);
	if (!a->idx || !a->val) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU matrix (%lld non-zeros)", (long long)a->nnz);
		goto out;
	}
	memset(a->idx + a->nnz, 0, RC_SPM16_PAD * sizeof *a->idx);
	memset(a->val + a->nnz, 0, RC_SPM16_PAD * sizeof *a->val);
	/* the sort's scratch and digits: two passes up to 22 column bits */
	int bits = 1;
	while (bits < 40 && ((int64_t)1 << bits) < a->cols)
		bits++;
	g.passes = (bits + 10) / 11;
	g.digit = (bits + g.passes - 1) / g.passes;
	if (!(g.keys = calloc((size_t)nt, sizeof *g.keys))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU matrix's build");
		goto out;
	}
	for (int t = 0; t < nt; t++)
		if (!(g.keys[t] = malloc((size_t)(2 * g.maxrow + 1) * sizeof **g.keys))) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU matrix's build");
			goto out;
		}
	g.fill = 1;
	(void)rc_par_for(ntask, 4, nt, gather_task, &g);
	if ((rc = transpose(a, threads, &c->at)))
		goto fail;
	c->isa = rc_bsr_cpu_isa();
	/* the row groups of the fp32-input AVX-512 kernel (without memory for
	 * them the products take the single rows) */
	if (groups && c->isa >= RC_ISA_AVX512) {
		int group = rc_bsr_cpu_group();
		if (rc_spm16p_make(&c->a, group, threads, &c->ap) || rc_spm16p_make(&c->at, group, threads, &c->atp)) {
			rc_spm16p_free(&c->ap);
			rc_spm16p_free(&c->atp);
		}
	}
	rc_bsr_cpu_input_init(c);
	*ret = c;
	c = NULL;
	goto out;
fail:
	rc = rc_fail(err, rc, "", "building the CPU matrix failed (code %d)", rc);
out:
	if (g.stamp)
		for (int t = 0; t < nt; t++)
			free(g.stamp[t]);
	free(g.stamp);
	free(g.neb);
	free(g.maxr);
	if (g.keys)
		for (int t = 0; t < nt; t++)
			free(g.keys[t]);
	free(g.keys);
	free(irow);
	rc_bsr_cpu_free(c);
	return rc;
}
