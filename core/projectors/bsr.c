/*
 * bsr: construction from CSR under row/column permutations, fp16 coding,
 * the CPU products and the streaming block statistics (bsr.h).
 *
 * Construction is two parallel passes over block rows (count the distinct
 * block columns, then fill), each worker with a stamp array over block
 * columns, so it costs O(nnz) plus sorting each block row's column list.
 */
#include "projectors/bsr.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/tensor_par.h"

static const rc_frag_info frags[RC_FRAG_COUNT] = {
	[RC_FRAG_16_16_16] = { "16.16.16", 16, 16, 16 },
	[RC_FRAG_32_8_16] = { "32.8.16", 32, 8, 16 },
	[RC_FRAG_8_32_16] = { "8.32.16", 8, 32, 16 },
};

const rc_frag_info *rc_frag_get(rc_frag f) { return &frags[f]; }

int rc_frag_parse(const char *s, rc_frag *ret)
{
	for (int f = 0; f < RC_FRAG_COUNT; f++)
		if (!strcmp(s, frags[f].name)) {
			*ret = (rc_frag)f;
			return 0;
		}
	return RC_EINVAL;
}

uint16_t rc_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		/* subnormal half: value / 2^-24 = (1.man) * 2^(e - 14 + 24 - 24) */
		if (e < -10)
			return (uint16_t)sign;
		uint32_t m = man | 0x800000u;
		int shift = 14 - e;
		uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* a carry into the exponent is the correct next value (or inf) */
	return (uint16_t)(sign | h);
}

float rc_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, x;
	float f;
	if (exp == 0) {
		f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	if (exp == 31)
		x = sign | 0x7f800000u | (man << 13);
	else
		x = sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &x, sizeof f);
	return f;
}

/* All 65536 halves decoded once: the CPU products decode every block per
 * call, and a table load is cheaper than the branches above. */
static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static void f16_init(void)
{
	for (uint32_t i = 0; i < 65536; i++)
		f16_table[i] = rc_f16_to_f32((uint16_t)i);
}

void rc_bsr_free(rc_bsr *b)
{
	if (!b)
		return;
	free(b->row_ptr);
	free(b->col_idx);
	free(b->blocks);
	free(b->tcol_ptr);
	free(b->tblk);
	free(b->blk_row);
	free(b);
}

int64_t rc_bsr_bytes(const rc_bsr *b)
{
	return b->neb * b->bm * b->bk * 2 + ((int64_t)b->mb + 1) * (int64_t)sizeof(int64_t) +
	       b->neb * (int64_t)sizeof(int32_t);
}

double rc_bsr_neb_pct(const rc_bsr *b)
{
	double total = (double)b->mb * (double)b->nb;
	return total > 0 ? 100.0 * (double)b->neb / total : 0;
}

struct bbuild {
	const rc_csr *m;
	const int32_t *cperm;
	int32_t *irow; /* ordered row -> natural row, -1 = padding */
	rc_bsr *b;
	int32_t **stamp; /* per worker, nb entries */
	int32_t **pos;   /* per worker, nb entries */
	int pass;
};

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static int bbuild_row(int64_t br, int worker, void *ud)
{
	struct bbuild *c = ud;
	rc_bsr *b = c->b;
	const rc_csr *m = c->m;
	int32_t *stamp = c->stamp[worker], *pos = c->pos[worker];
	int64_t count = 0, base = c->pass ? b->row_ptr[br] : 0;
	int32_t *list = c->pass ? b->col_idx + base : NULL;
	for (int r = 0; r < b->bm; r++) {
		int32_t nr = c->irow[br * b->bm + r];
		if (nr < 0)
			continue;
		for (int64_t i = m->row_ptr[nr]; i < m->row_ptr[nr + 1]; i++) {
			int32_t pc = c->cperm ? c->cperm[m->col[i]] : m->col[i];
			int32_t bc = pc / b->bk;
			if (stamp[bc] != (int32_t)br) {
				stamp[bc] = (int32_t)br;
				if (list)
					list[count] = bc;
				count++;
			}
		}
	}
	if (!c->pass) {
		b->row_ptr[br + 1] = count;
		return 0;
	}
	if (count != b->row_ptr[br + 1] - base)
		return RC_EINTERNAL;
	qsort(list, (size_t)count, sizeof *list, cmp_i32);
	for (int64_t j = 0; j < count; j++)
		pos[list[j]] = (int32_t)j;
	size_t bsz = (size_t)b->bm * b->bk;
	uint16_t *blk = b->blocks + base * (int64_t)bsz;
	memset(blk, 0, (size_t)count * bsz * sizeof *blk);
	for (int r = 0; r < b->bm; r++) {
		int32_t nr = c->irow[br * b->bm + r];
		if (nr < 0)
			continue;
		for (int64_t i = m->row_ptr[nr]; i < m->row_ptr[nr + 1]; i++) {
			int32_t pc = c->cperm ? c->cperm[m->col[i]] : m->col[i];
			int32_t bc = pc / b->bk;
			blk[(size_t)pos[bc] * bsz + (size_t)r * b->bk + (size_t)(pc % b->bk)] = rc_f32_to_f16(m->val[i]);
		}
	}
	for (int64_t j = 0; j < count; j++)
		b->blk_row[base + j] = (int32_t)br;
	return 0;
}

/* count_only: stop after the counting pass with b->neb set and no values. */
static int bsr_make(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f,
		    int threads, int count_only, rc_bsr **ret, rc_err *err)
{
	const rc_frag_info *fi = rc_frag_get(f);
	int rc = 0;
	rc_bsr *b = calloc(1, sizeof *b);
	struct bbuild c = { .m = m, .cperm = cperm };
	int nt = 0;
	if (!b)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the BSR matrix");
	b->frag = f;
	b->bm = fi->m;
	b->bk = fi->k;
	b->rows = m->rows;
	b->cols = m->cols;
	b->nnz = m->nnz;
	b->mb = (m->rows + b->bm - 1) / b->bm;
	b->nb = (m->cols + b->bk - 1) / b->bk;
	nt = rc_par_threads(threads, b->mb);
	c.b = b;
	b->row_ptr = calloc((size_t)b->mb + 1, sizeof *b->row_ptr);
	c.irow = malloc((size_t)b->mb * b->bm * sizeof *c.irow);
	c.stamp = calloc((size_t)nt, sizeof *c.stamp);
	c.pos = calloc((size_t)nt, sizeof *c.pos);
	if (!b->row_ptr || !c.irow || !c.stamp || !c.pos) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the BSR matrix");
		goto out;
	}
	for (int t = 0; t < nt; t++) {
		c.stamp[t] = malloc((size_t)b->nb * sizeof **c.stamp);
		c.pos[t] = malloc((size_t)b->nb * sizeof **c.pos);
		if (!c.stamp[t] || !c.pos[t]) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the BSR build");
			goto out;
		}
	}
	for (int64_t i = 0; i < (int64_t)b->mb * b->bm; i++)
		c.irow[i] = -1;
	for (int r = 0; r < m->rows; r++)
		c.irow[rperm ? rperm[r] : r] = r;
	for (int pass = 0; pass < 2; pass++) {
		for (int t = 0; t < nt; t++)
			for (int j = 0; j < b->nb; j++)
				c.stamp[t][j] = -1;
		c.pass = pass;
		if (pass == 1) {
			for (int r = 0; r < b->mb; r++)
				b->row_ptr[r + 1] += b->row_ptr[r];
			b->neb = b->row_ptr[b->mb];
			if (count_only)
				break;
			if (b->neb >= INT32_MAX) {
				rc = rc_fail(err, RC_ETOOBIG, "", "the matrix has too many blocks (%lld)", (long long)b->neb);
				goto out;
			}
			size_t n = (size_t)(b->neb ? b->neb : 1);
			b->col_idx = malloc(n * sizeof *b->col_idx);
			b->blk_row = malloc(n * sizeof *b->blk_row);
			b->blocks = malloc(n * (size_t)b->bm * b->bk * sizeof *b->blocks);
			if (!b->col_idx || !b->blk_row || !b->blocks) {
				rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %lld blocks (%.1f MiB)",
					     (long long)b->neb, (double)n * b->bm * b->bk * 2 / 1048576.0);
				goto out;
			}
		}
		rc = rc_par_for(b->mb, 16, nt, bbuild_row, &c);
		if (rc) {
			rc = rc_fail(err, RC_EINTERNAL, "", "the BSR block count changed between passes");
			goto out;
		}
	}
	if (count_only) {
		*ret = b;
		b = NULL;
		goto out;
	}
	/* block column index for A^T: counting sort of the blocks by column,
	 * which keeps block rows ascending inside a column */
	b->tcol_ptr = calloc((size_t)b->nb + 1, sizeof *b->tcol_ptr);
	b->tblk = malloc((size_t)(b->neb ? b->neb : 1) * sizeof *b->tblk);
	if (!b->tcol_ptr || !b->tblk) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the BSR column index");
		goto out;
	}
	for (int64_t i = 0; i < b->neb; i++)
		b->tcol_ptr[b->col_idx[i] + 1]++;
	for (int j = 0; j < b->nb; j++)
		b->tcol_ptr[j + 1] += b->tcol_ptr[j];
	{
		int64_t *fill = calloc((size_t)b->nb, sizeof *fill);
		if (!fill) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the BSR column index");
			goto out;
		}
		for (int64_t i = 0; i < b->neb; i++) {
			int32_t col = b->col_idx[i];
			b->tblk[b->tcol_ptr[col] + fill[col]++] = (int32_t)i;
		}
		free(fill);
	}
	*ret = b;
	b = NULL;
out:
	if (c.stamp)
		for (int t = 0; t < nt; t++)
			free(c.stamp[t]);
	if (c.pos)
		for (int t = 0; t < nt; t++)
			free(c.pos[t]);
	free(c.stamp);
	free(c.pos);
	free(c.irow);
	rc_bsr_free(b);
	return rc;
}

int rc_bsr_build(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f,
		 int threads, rc_bsr **ret, rc_err *err)
{
	return bsr_make(m, rperm, cperm, f, threads, 0, ret, err);
}

int rc_bsr_count(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f,
		 int threads, int64_t *ret_neb, int64_t *ret_total, rc_err *err)
{
	rc_bsr *b = NULL;
	int rc = bsr_make(m, rperm, cperm, f, threads, 1, &b, err);
	if (rc)
		return rc;
	*ret_neb = b->neb;
	*ret_total = (int64_t)b->mb * b->nb;
	rc_bsr_free(b);
	return 0;
}

/* ---- CPU products ------------------------------------------------------- */

struct bmul {
	const rc_bsr *b;
	const float *in;
	float *out;
	int nc;
};

/* Adds a * x[0..nc) to y; nc is small (8..32 typically) and the compiler
 * vectorises this loop. */
static inline void axpy(float *restrict y, float a, const float *restrict x, int nc)
{
	for (int j = 0; j < nc; j++)
		y[j] += a * x[j];
}

/* The blocks are sparse inside too (Table 3: a few % of blocks, each
 * partly filled), so the CPU walks the raw fp16 words four at a time and
 * decodes only the non-zeros (sign bit ignored: -0 is zero). */
#define NZ4(w) ((w) & 0x7fff7fff7fff7fffULL)

static int bmul_row(int64_t br, int worker, void *ud)
{
	(void)worker;
	const struct bmul *c = ud;
	const rc_bsr *b = c->b;
	int bm = b->bm, nc = c->nc;
	float *y = c->out + br * bm * nc;
	memset(y, 0, (size_t)bm * nc * sizeof *y);
	for (int64_t i = b->row_ptr[br]; i < b->row_ptr[br + 1]; i++) {
		const uint16_t *h = b->blocks + i * bm * 16;
		const float *x = c->in + (int64_t)b->col_idx[i] * 16 * nc;
		for (int e = 0; e < bm * 16; e += 4) {
			uint64_t w;
			memcpy(&w, h + e, sizeof w);
			if (!NZ4(w))
				continue;
			for (int q = e; q < e + 4; q++)
				if (h[q] & 0x7fff)
					axpy(y + (q >> 4) * nc, f16_table[h[q]], x + (q & 15) * nc, nc);
		}
	}
	return 0;
}

static int bmul_col(int64_t bc, int worker, void *ud)
{
	(void)worker;
	const struct bmul *c = ud;
	const rc_bsr *b = c->b;
	int bm = b->bm, nc = c->nc;
	float *x = c->out + bc * 16 * nc;
	memset(x, 0, (size_t)16 * nc * sizeof *x);
	for (int64_t j = b->tcol_ptr[bc]; j < b->tcol_ptr[bc + 1]; j++) {
		int64_t i = b->tblk[j];
		const uint16_t *h = b->blocks + i * bm * 16;
		const float *y = c->in + (int64_t)b->blk_row[i] * bm * nc;
		for (int e = 0; e < bm * 16; e += 4) {
			uint64_t w;
			memcpy(&w, h + e, sizeof w);
			if (!NZ4(w))
				continue;
			for (int q = e; q < e + 4; q++)
				if (h[q] & 0x7fff)
					axpy(x + (q & 15) * nc, f16_table[h[q]], y + (q >> 4) * nc, nc);
		}
	}
	return 0;
}

int rc_bsr_mul(const rc_bsr *b, const float *X, float *Y, int ncols, int threads)
{
	pthread_once(&f16_once, f16_init);
	struct bmul c = { b, X, Y, ncols };
	return rc_par_for(b->mb, 8, threads, bmul_row, &c);
}

int rc_bsr_mul_t(const rc_bsr *b, const float *Y, float *X, int ncols, int threads)
{
	pthread_once(&f16_once, f16_init);
	struct bmul c = { b, Y, X, ncols };
	return rc_par_for(b->nb, 8, threads, bmul_col, &c);
}

/* ---- streaming block statistics ----------------------------------------- */

/* Groups of 32 ordered rows (the largest block height; 8 and 16 divide it)
 * are generated together and every shape counts its blocks from them. */
#define STAT_ROWS 32

struct bstat {
	const rc_geom *g;
	const int32_t *cperm;
	int32_t *irow; /* ordered row -> natural row, -1 = padding */
	int nu, cap, nbk;
	int64_t ngroups;
	int32_t **cols;
	float **vals;
	int32_t **stamp; /* per worker: [frag][nbk] */
	int64_t *neb;    /* per worker: [frag + 1], the last slot counts entries */
};

static int bstat_group(int64_t grp, int worker, void *ud)
{
	struct bstat *s = ud;
	int32_t *cols = s->cols[worker];
	float *vals = s->vals[worker];
	int32_t *stamp = s->stamp[worker];
	int64_t *neb = s->neb + (int64_t)worker * (RC_FRAG_COUNT + 1);
	for (int r = 0; r < STAT_ROWS; r++) {
		int64_t orow = grp * STAT_ROWS + r;
		int32_t nr = s->irow[orow];
		if (nr < 0)
			continue;
		int n = rc_dd_row(s->g, nr / s->nu, nr % s->nu, cols, vals, s->cap);
		if (n < 0)
			return RC_EINTERNAL;
		neb[RC_FRAG_COUNT] += n;
		for (int f = 0; f < RC_FRAG_COUNT; f++) {
			const rc_frag_info *fi = rc_frag_get((rc_frag)f);
			int32_t br = (int32_t)(orow / fi->m);
			int32_t *st = stamp + (int64_t)f * s->nbk;
			for (int i = 0; i < n; i++) {
				int32_t pc = s->cperm ? s->cperm[cols[i]] : cols[i];
				int32_t bc = pc / fi->k;
				if (st[bc] != br) {
					st[bc] = br;
					neb[f]++;
				}
			}
		}
	}
	return 0;
}

int rc_dd_block_stats(const rc_geom *g, const int32_t *rperm, const int32_t *cperm, int threads,
		      int64_t neb[RC_FRAG_COUNT], int64_t total[RC_FRAG_COUNT], int64_t *ret_nnz, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	int nu = rc_geom_detector(g)->nu;
	int64_t rows = (int64_t)rc_geom_nviews(g) * nu, cols = (int64_t)v->nx * v->ny;
	/* every block height divides STAT_ROWS and k = 16 for all shapes */
	struct bstat s = { .g = g, .cperm = cperm, .nu = nu, .cap = rc_dd_row_cap(g),
			   .nbk = (int)((cols + 15) / 16), .ngroups = (rows + STAT_ROWS - 1) / STAT_ROWS };
	int nt = rc_par_threads(threads, s.ngroups);
	int rc = 0;
	s.irow = malloc((size_t)(s.ngroups * STAT_ROWS) * sizeof *s.irow);
	s.cols = calloc((size_t)nt, sizeof *s.cols);
	s.vals = calloc((size_t)nt, sizeof *s.vals);
	s.stamp = calloc((size_t)nt, sizeof *s.stamp);
	s.neb = calloc((size_t)nt * (RC_FRAG_COUNT + 1), sizeof *s.neb);
	if (!s.irow || !s.cols || !s.vals || !s.stamp || !s.neb) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the block statistics");
		goto out;
	}
	for (int t = 0; t < nt; t++) {
		s.cols[t] = malloc((size_t)s.cap * sizeof **s.cols);
		s.vals[t] = malloc((size_t)s.cap * sizeof **s.vals);
		s.stamp[t] = malloc((size_t)RC_FRAG_COUNT * s.nbk * sizeof **s.stamp);
		if (!s.cols[t] || !s.vals[t] || !s.stamp[t]) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the block statistics");
			goto out;
		}
		for (int64_t j = 0; j < (int64_t)RC_FRAG_COUNT * s.nbk; j++)
			s.stamp[t][j] = -1;
	}
	for (int64_t i = 0; i < s.ngroups * STAT_ROWS; i++)
		s.irow[i] = -1;
	for (int64_t r = 0; r < rows; r++)
		s.irow[rperm ? rperm[r] : r] = (int32_t)r;
	/* a group never splits a block of any shape, so a worker owns whole
	 * block rows and its stamps stay valid */
	rc = rc_par_for(s.ngroups, 4, nt, bstat_group, &s);
	if (rc) {
		rc = rc_fail(err, RC_EINTERNAL, "", "the distance-driven row generator overflowed its buffer");
		goto out;
	}
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		const rc_frag_info *fi = rc_frag_get((rc_frag)f);
		neb[f] = 0;
		for (int t = 0; t < nt; t++)
			neb[f] += s.neb[(int64_t)t * (RC_FRAG_COUNT + 1) + f];
		total[f] = ((rows + fi->m - 1) / fi->m) * ((cols + fi->k - 1) / fi->k);
	}
	if (ret_nnz) {
		*ret_nnz = 0;
		for (int t = 0; t < nt; t++)
			*ret_nnz += s.neb[(int64_t)t * (RC_FRAG_COUNT + 1) + RC_FRAG_COUNT];
	}
out:
	for (int t = 0; t < nt; t++) {
		if (s.cols)
			free(s.cols[t]);
		if (s.vals)
			free(s.vals[t]);
		if (s.stamp)
			free(s.stamp[t]);
	}
	free(s.cols);
	free(s.vals);
	free(s.stamp);
	free(s.neb);
	free(s.irow);
	return rc;
}
