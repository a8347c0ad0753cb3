/*
 * bsr_cpu_cache: the CPU layout on disk (bsr_cpu_cache.h).
 *
 * File: "RCNZCPU2", u64 key length, key bytes, then struct hdr (counts,
 * the report's numbers, the offset and length of every section, the digest), then the
 * sections, each at a 64-byte aligned offset, in the order walk() visits
 * them: A (ptr, idx, val), A^T, then for a layout with row groups A's and
 * A^T's groups (pair pointers, indices, weights; with groups of four the
 * quads' too; the rest as an rc_spm16).  Host byte order.
 *
 * The file is not fsync'd: a cache can be built again, and a file torn by
 * a crash (pages lost read as zeros, which pass the structural checks) is
 * told by its digest, checked at every load.  The fsync cost the first job
 * on a geometry seconds of disk time (834 MB at 256^2).
 */
#include "projectors/bsr_cpu_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "projectors/dd_matrix.h"
#include "projectors/matrix_cache.h"
#include "util/rc_io.h"
#include "util/tensor_par.h"

#define NZ_MAGIC "RCNZCPU2"
#define NZ_VERSION 2
#define NZ_ALIGN 64
#define NZ_MAX_SECTIONS 32

struct hdr {
	int64_t rows_pad, cols_pad, nnz, bsr_bytes;
	double pct_before, pct_after;
	int64_t a_rows, a_cols, a_nnz, at_rows, at_cols, at_nnz;
	int64_t group, nsec;
	int64_t off[NZ_MAX_SECTIONS], len[NZ_MAX_SECTIONS];
	uint64_t digest; /* of the sections and this header (its digest 0): digest() */
};

/* The key: the DD matrix's (rc_dd_key) and what this layout adds. */
static int make_key(const rc_geom *g, int frag, unsigned char **ret, size_t *len)
{
	unsigned char *k = NULL;
	size_t n = 0;
	if (rc_dd_key(g, &k, &n))
		return -1;
	int32_t tail[3] = { NZ_VERSION, frag, rc_bsr_cpu_group() };
	unsigned char *b = realloc(k, n + sizeof tail);
	if (!b) {
		free(k);
		return -1;
	}
	memcpy(b + n, tail, sizeof tail);
	*ret = b;
	*len = n + sizeof tail;
	return 0;
}

static int path_of(const char *dir, const unsigned char *k, size_t n, char *path, size_t cap)
{
	return snprintf(path, cap, "%s/nz-%016llx.bin", dir, (unsigned long long)rc_dd_fnv1a(k, n)) >= (int)cap;
}

/* The sections in file order: fn(ud, i, &array, bytes) for each; a count
 * that comes from an earlier section (a group's entries) is read from it
 * after fn has set it, so fn checks before anything is read. */
typedef int (*sec_fn)(void *ud, int i, void **pp, int64_t bytes);

/* Entries of an index or value array of n non-zeros (with the kernels'
 * padding); -1 for a count no file holds (a damaged one: the section
 * check then fails, and the sizes never overflow). */
static int64_t ents(int64_t n) { return n < 0 || n > ((int64_t)1 << 40) ? -1 : n + RC_SPM16_PAD; }

static int walk_spm(rc_spm16 *m, int *i, sec_fn fn, void *ud, int from_ptr)
{
	if (fn(ud, (*i)++, (void **)&m->ptr, (m->rows + 1) * (int64_t)sizeof *m->ptr))
		return -1;
	if (from_ptr)
		m->nnz = m->ptr[m->rows];
	if (m->nnz < 0 || fn(ud, (*i)++, (void **)&m->idx, ents(m->nnz) * (int64_t)sizeof *m->idx) ||
	    fn(ud, (*i)++, (void **)&m->val, ents(m->nnz) * (int64_t)sizeof *m->val))
		return -1;
	return 0;
}

static int walk_groups(rc_spm16p *p, int64_t rows, int64_t cols, int *i, sec_fn fn, void *ud)
{
	p->pairs = rows / 2;
	p->rest.rows = rows;
	p->rest.cols = cols;
	if (fn(ud, (*i)++, (void **)&p->sptr, (p->pairs + 1) * (int64_t)sizeof *p->sptr))
		return -1;
	int64_t ns = p->sptr[p->pairs];
	if (ns < 0 || fn(ud, (*i)++, (void **)&p->sidx, ents(ns) * (int64_t)sizeof *p->sidx) ||
	    fn(ud, (*i)++, (void **)&p->sval, ents(ns) * (int64_t)sizeof *p->sval))
		return -1;
	if (p->group == 4) {
		if (fn(ud, (*i)++, (void **)&p->qptr, (rows / 4 + 1) * (int64_t)sizeof *p->qptr))
			return -1;
		int64_t nq = p->qptr[rows / 4];
		if (nq < 0 || fn(ud, (*i)++, (void **)&p->qidx, ents(nq) * (int64_t)sizeof *p->qidx) ||
		    fn(ud, (*i)++, (void **)&p->qval, ents(nq) * (int64_t)sizeof *p->qval))
			return -1;
	}
	return walk_spm(&p->rest, i, fn, ud, 1);
}

static int walk(rc_bsr_cpu *c, int group, sec_fn fn, void *ud)
{
	int i = 0;
	if (walk_spm(&c->a, &i, fn, ud, 0) || walk_spm(&c->at, &i, fn, ud, 0))
		return -1;
	if (group) {
		c->ap.group = c->atp.group = group;
		if (walk_groups(&c->ap, c->a.rows, c->a.cols, &i, fn, ud) ||
		    walk_groups(&c->atp, c->at.rows, c->at.cols, &i, fn, ud))
			return -1;
	}
	return i;
}

/* --- digest --------------------------------------------------------------- */

/* 64-bit digest of the sections: each section in chunks of DG_CHUNK bytes,
 * a chunk hashed by XXH3 (libxxhash) with its number as the seed, the
 * chunks' hashes hashed in order with the header's hash as the seed.  Not
 * cryptographic: it tells a torn or damaged file (the cache directory is
 * the daemon's own), at memory speed over the threads. */
#define DG_CHUNK ((int64_t)1 << 20)

static uint64_t dg_bytes(const void *p, int64_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, (size_t)n, seed); }

/* The digest of a header (its digest field 0) and its n chunks' hashes. */
static uint64_t dg_fold(const struct hdr *hz, const uint64_t *chunk, int64_t n)
{
	return dg_bytes(chunk, n * (int64_t)sizeof *chunk, dg_bytes(hz, (int64_t)sizeof *hz, (uint64_t)n));
}

struct dg {
	const unsigned char *const *p;
	const int64_t *len;
	int64_t *first;       /* each section's first chunk number (nsec + 1 entries) */
	uint64_t *out;        /* each chunk's hash */
	const uint32_t *cols; /* a load's: an index section's column count (0: not one), or NULL */
};

static int dg_task(int64_t c, int worker, void *ud)
{
	(void)worker;
	const struct dg *d = ud;
	int i = 0;
	while (c >= d->first[i + 1])
		i++;
	int64_t at = (c - d->first[i]) * DG_CHUNK, n = d->len[i] - at < DG_CHUNK ? d->len[i] - at : DG_CHUNK;
	d->out[c] = dg_bytes(d->p[i] + at, n, (uint64_t)c);
	if (!d->cols || !d->cols[i])
		return 0;
	/* an index section's columns checked while its chunk is in cache (the
	 * padding too; its length is a multiple of 4, as DG_CHUNK) */
	const uint32_t *q = (const uint32_t *)(const void *)(d->p[i] + at);
	uint32_t bad = 0, cols = d->cols[i];
	for (int64_t e = 0; e < n / 4; e++)
		bad |= q[e] >= cols;
	return bad ? -1 : 0;
}

/* Each of nsec sections' first chunk number (first[0 .. nsec], len[i]
 * bytes each; first may be NULL): the chunks of all of them. */
static int64_t dg_count(const int64_t *len, int nsec, int64_t *first)
{
	int64_t n = 0;
	for (int i = 0; i < nsec; i++) {
		if (first)
			first[i] = n;
		n += (len[i] + DG_CHUNK - 1) / DG_CHUNK;
	}
	if (first)
		first[nsec] = n;
	return n;
}

/* The digest of sections p[i] of len[i] bytes and of the header h (its
 * digest field taken as 0); 0, or -1 (out of memory, or cols given and an
 * index section holds a column at or above its cols[i]). */
static int digest(const unsigned char *const *p, const int64_t *len, int nsec, const struct hdr *h,
		  const uint32_t *cols, int threads, uint64_t *ret)
{
	int64_t first[NZ_MAX_SECTIONS + 1];
	int64_t n = dg_count(len, nsec, first);
	struct dg d = { p, len, first, malloc((size_t)(n ? n : 1) * sizeof(uint64_t)), cols };
	if (!d.out)
		return -1;
	/* a bad index chunk stops the loop: the chunks not run hold nothing
	 * to fold */
	int rc = rc_par_for(n, 1, threads, dg_task, &d);
	if (!rc) {
		struct hdr hz = *h;
		hz.digest = 0;
		*ret = dg_fold(&hz, d.out, n);
	}
	free(d.out);
	return rc ? -1 : 0;
}

/* --- store ---------------------------------------------------------------- */

struct wr {
	struct hdr *h;
	const void *p[NZ_MAX_SECTIONS];
	int64_t at; /* the next free offset */
};

static int wr_sec(void *ud, int i, void **pp, int64_t bytes)
{
	struct wr *w = ud;
	if (i >= NZ_MAX_SECTIONS || bytes < 0)
		return -1;
	w->at = (w->at + NZ_ALIGN - 1) / NZ_ALIGN * NZ_ALIGN;
	w->h->off[i] = w->at;
	w->h->len[i] = bytes;
	w->p[i] = *pp;
	w->at += bytes;
	return 0;
}

/* Where the header stands in a file whose key is kn bytes: after the
 * magic and the key's length and bytes. */
static int64_t hdr_at(size_t kn) { return 8 + (int64_t)sizeof(uint64_t) + (int64_t)kn; }

/* The row groups' size c's layout was built with (0: none). */
static int layout_group(const rc_bsr_cpu *c) { return c->ap.group && c->atp.group ? c->ap.group : 0; }

/* c's sections laid out after the header (w: the file's end; h: each
 * section's offset and length): their count, or -1. */
static int lay_out(const rc_bsr_cpu *c, size_t kn, struct hdr *h, struct wr *w)
{
	*w = (struct wr){ .h = h, .at = hdr_at(kn) + (int64_t)sizeof *h };
	rc_bsr_cpu view = *c; /* walk writes the counts it derives; c stays const */
	return walk(&view, layout_group(c), wr_sec, w);
}

/* a whole write at the file position: 0 or -1 */
static int wr(int fd, const void *p, size_t n) { return rc_io_write_full(fd, p, n, -1); }

/* The file, each section's chunks hashed as they are written (one read of
 * the layout, the chunk still in cache for the write); the header written
 * again at the end with the digest (digest() gives the same). */
static int write_file(int fd, const unsigned char *k, size_t kn, struct wr *w)
{
	static const unsigned char zeros[NZ_ALIGN];
	struct hdr *h = w->h;
	uint64_t klen = kn;
	int64_t at = hdr_at(kn) + (int64_t)sizeof *h, c = 0;
	int64_t n = dg_count(h->len, (int)h->nsec, NULL);
	uint64_t *chunk = malloc((size_t)(n ? n : 1) * sizeof *chunk);
	int rc = -1;
	h->digest = 0;
	if (!chunk || wr(fd, NZ_MAGIC, 8) || wr(fd, &klen, sizeof klen) || wr(fd, k, kn) || wr(fd, h, sizeof *h))
		goto out;
	for (int i = 0; i < h->nsec; i++) {
		if (wr(fd, zeros, (size_t)(h->off[i] - at)))
			goto out;
		const unsigned char *p = w->p[i];
		for (int64_t o = 0; o < h->len[i]; o += DG_CHUNK, c++) {
			int64_t m = h->len[i] - o < DG_CHUNK ? h->len[i] - o : DG_CHUNK;
			chunk[c] = dg_bytes(p + o, m, (uint64_t)c);
			if (wr(fd, p + o, (size_t)m))
				goto out;
		}
		at = h->off[i] + h->len[i];
	}
	h->digest = dg_fold(h, chunk, n);
	/* no fsync: a torn file fails the digest at its load */
	rc = rc_io_write_full(fd, h, sizeof *h, (off_t)hdr_at(kn));
out:
	free(chunk);
	return rc;
}

int64_t rc_bsr_cpu_file_bytes(const rc_geom *g, int frag, const rc_bsr_cpu *c)
{
	unsigned char *k = NULL;
	size_t kn = 0;
	struct hdr h;
	memset(&h, 0, sizeof h);
	if (make_key(g, frag, &k, &kn))
		return -1;
	free(k);
	struct wr w;
	return lay_out(c, kn, &h, &w) < 0 ? -1 : w.at;
}

int rc_bsr_cpu_store(const rc_geom *g, const char *dir, int64_t bound, int frag, const rc_bsr_cpu *c,
		     const rc_nz_meta *meta, rc_err *err)
{
	unsigned char *k = NULL;
	size_t kn = 0;
	char path[4096], tmp[4200];
	struct hdr h;
	memset(&h, 0, sizeof h);
	/* the job's first file may be this one (the DD matrix is not written
	 * where the layout is) */
	int rc = rc_mcache_make_dir(dir, err), fd = -1;
	if (rc)
		return rc;
	if (make_key(g, frag, &k, &kn))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the geometry key");
	if (path_of(dir, k, kn, path, sizeof path)) {
		rc = rc_fail(err, RC_EINVAL, "cache_dir", "the matrix cache directory name is too long");
		goto out;
	}
	if (rc_mcache_tmp(path, tmp, sizeof tmp)) {
		rc = rc_fail(err, RC_EINVAL, "cache_dir", "the matrix cache directory name is too long");
		goto out;
	}
	int group = layout_group(c);
	if (group != rc_bsr_cpu_group()) {
		rc = rc_fail(err, RC_EINVAL, "", "the layout's row groups are not this CPU's: not cached");
		goto out;
	}
	h.rows_pad = meta->rows_pad;
	h.cols_pad = meta->cols_pad;
	h.nnz = meta->nnz;
	h.bsr_bytes = meta->bsr_bytes;
	h.pct_before = meta->pct_before;
	h.pct_after = meta->pct_after;
	h.a_rows = c->a.rows;
	h.a_cols = c->a.cols;
	h.a_nnz = c->a.nnz;
	h.at_rows = c->at.rows;
	h.at_cols = c->at.cols;
	h.at_nnz = c->at.nnz;
	h.group = group;
	struct wr w;
	int n = lay_out(c, kn, &h, &w);
	if (n < 0) {
		rc = rc_fail(err, RC_EINTERNAL, "", "the CPU layout has more sections than its file holds");
		goto out;
	}
	h.nsec = n;
	if (rc_mcache_admit(dir, bound, w.at, path))
		goto out; /* larger than the whole cache: not written */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = rc_fail(err, RC_EIO, "cache_dir", "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (write_file(fd, k, kn, &w)) {
		rc = rc_fail(err, RC_EIO, "cache_dir", "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	close(fd);
	fd = -1;
	rc = rc_mcache_publish(dir, bound, tmp, path, err);
out:
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(k);
	return rc;
}

/* --- load ----------------------------------------------------------------- */

struct rd {
	const struct hdr *h;
	unsigned char *base;
	int64_t size;
};

/* A section where the header says, of the length the counts give, inside
 * the file: its array points into the mapping. */
static int rd_sec(void *ud, int i, void **pp, int64_t bytes)
{
	struct rd *r = ud;
	const struct hdr *h = r->h;
	if (i >= h->nsec || bytes < 0 || h->len[i] != bytes || h->off[i] < 0 || h->off[i] % NZ_ALIGN ||
	    h->off[i] > r->size - bytes)
		return -1;
	*pp = r->base + h->off[i];
	return 0;
}

/* Row pointers from 0, in order, ending at nnz, checked in chunks over the
 * threads; each run's index array and column count listed (struct idxs)
 * for the digest's pass, which checks the indices as it reads them. */
struct chk {
	const int64_t *ptr;
	int64_t nptr;
};

struct idxs {
	int n;
	const uint32_t *idx[8];
	uint32_t cols[8];
};

#define CHK_CHUNK (1 << 20)

static int chk_ptr(int64_t item, int worker, void *ud)
{
	(void)worker;
	const struct chk *c = ud;
	int64_t a = item * CHK_CHUNK, b = a + CHK_CHUNK < c->nptr - 1 ? a + CHK_CHUNK : c->nptr - 1;
	for (int64_t r = a; r < b; r++)
		if (c->ptr[r + 1] < c->ptr[r])
			return -1;
	return 0;
}

static int check_run(const int64_t *ptr, int64_t nptr, int64_t end, const uint32_t *idx, int64_t cols, int threads,
		     struct idxs *ix)
{
	if (nptr < 1 || ptr[0] != 0 || ptr[nptr - 1] != end || cols <= 0 || cols > UINT32_MAX || ix->n >= 8)
		return -1;
	ix->idx[ix->n] = idx;
	ix->cols[ix->n++] = (uint32_t)cols;
	struct chk c = { ptr, nptr };
	return rc_par_for((nptr - 1 + CHK_CHUNK - 1) / CHK_CHUNK, 1, threads, chk_ptr, &c);
}

static int check_groups(const rc_spm16p *p, int64_t rows, int64_t cols, int threads, struct idxs *ix)
{
	if (check_run(p->sptr, p->pairs + 1, p->sptr[p->pairs], p->sidx, cols, threads, ix))
		return -1;
	if (p->group == 4 && check_run(p->qptr, rows / 4 + 1, p->qptr[rows / 4], p->qidx, cols, threads, ix))
		return -1;
	return check_run(p->rest.ptr, rows + 1, p->rest.nnz, p->rest.idx, cols, threads, ix);
}

static int check_layout(const rc_bsr_cpu *c, int group, int threads, struct idxs *ix)
{
	if (check_run(c->a.ptr, c->a.rows + 1, c->a.nnz, c->a.idx, c->a.cols, threads, ix) ||
	    check_run(c->at.ptr, c->at.rows + 1, c->at.nnz, c->at.idx, c->at.cols, threads, ix))
		return -1;
	return group && (check_groups(&c->ap, c->a.rows, c->a.cols, threads, ix) ||
			 check_groups(&c->atp, c->at.rows, c->at.cols, threads, ix));
}

int rc_bsr_cpu_load(const rc_geom *g, const char *dir, int frag, int threads, rc_bsr_cpu **ret, rc_nz_meta *meta)
{
	unsigned char *k = NULL;
	size_t kn = 0;
	char path[4096];
	int fd = -1, ok = 0;
	void *map = MAP_FAILED;
	size_t len = 0;
	rc_bsr_cpu *c = NULL;
	if (!dir || !*dir || make_key(g, frag, &k, &kn) || path_of(dir, k, kn, path, sizeof path))
		goto out;
	fd = rc_mcache_open(path); /* locked until the layout is freed */
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb))
		goto out;
	len = (size_t)sb.st_size;
	int64_t head = hdr_at(kn) + (int64_t)sizeof(struct hdr);
	if (sb.st_size < head)
		goto out;
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		goto out;
	unsigned char *b = map;
	uint64_t klen;
	memcpy(&klen, b + 8, sizeof klen);
	if (memcmp(b, NZ_MAGIC, 8) || klen != kn || memcmp(b + 16, k, kn))
		goto out;
	struct hdr h;
	memcpy(&h, b + hdr_at(kn), sizeof h);
	int group = rc_bsr_cpu_group();
	if (h.group != group || h.nsec < 0 || h.nsec > NZ_MAX_SECTIONS || h.a_rows <= 0 || h.at_rows <= 0 ||
	    h.a_rows != h.at_cols || h.a_cols != h.at_rows || h.a_nnz != h.at_nnz || h.a_rows != h.rows_pad ||
	    h.a_cols != h.cols_pad || (group && (h.a_rows % group || h.at_rows % group)) ||
	    /* counts the file could hold (no overflow in the sizes below) */
	    h.a_rows > sb.st_size / 8 || h.at_rows > sb.st_size / 8 || h.a_nnz < 0 || h.a_nnz > sb.st_size)
		goto out;
	if (!(c = calloc(1, sizeof *c)))
		goto out;
	c->a = (rc_spm16){ .rows = h.a_rows, .cols = h.a_cols, .nnz = h.a_nnz };
	c->at = (rc_spm16){ .rows = h.at_rows, .cols = h.at_cols, .nnz = h.at_nnz };
	struct rd r = { &h, b, sb.st_size };
	if (walk(c, group, rd_sec, &r) != h.nsec)
		goto out;
	struct idxs ix = { 0 };
	if (check_layout(c, group, threads, &ix))
		goto out;
	/* one read of the file: the digest (a torn file's zero pages pass the
	 * structural checks) and the indices' columns */
	const unsigned char *sec[NZ_MAX_SECTIONS];
	uint32_t cols[NZ_MAX_SECTIONS] = { 0 };
	for (int i = 0; i < h.nsec; i++) {
		sec[i] = b + h.off[i];
		for (int j = 0; j < ix.n; j++)
			if (sec[i] == (const unsigned char *)ix.idx[j])
				cols[i] = ix.cols[j];
	}
	uint64_t dg;
	if (digest(sec, h.len, (int)h.nsec, &h, cols, threads, &dg) || dg != h.digest)
		goto out;
	c->isa = rc_bsr_cpu_isa();
	rc_bsr_cpu_input_init(c);
	c->map = map;
	c->map_len = len;
	c->map_fd = fd;
	fd = -1;
	meta->rows_pad = h.rows_pad;
	meta->cols_pad = h.cols_pad;
	meta->nnz = h.nnz;
	meta->bsr_bytes = h.bsr_bytes;
	meta->pct_before = h.pct_before;
	meta->pct_after = h.pct_after;
	*ret = c;
	ok = 1;
out:
	if (fd >= 0)
		close(fd);
	free(k);
	if (!ok) {
		free(c);
		if (map != MAP_FAILED)
			munmap(map, len);
		return -1;
	}
	return 0;
}
