/*
 * dd_cache: the on-disk cache of distance-driven matrices (dd_matrix.h).
 *
 * File dd-<16 hex of the key hash>.bin:
 *   "RCDDMAT1", u64 key length, key bytes, i32 rows, i32 cols, i64 nnz,
 *   i64 row_ptr[rows+1], i32 col[nnz], f32 val[nnz]   (host byte order)
 * The key is everything the matrix depends on (type, per-view 2x3 matrices,
 * pixel grid, bin count; for a curved fan its shape and radius) plus a
 * format version, so a changed generator bumps the version and old files
 * are simply not found.  A file that does not
 * validate (short, other key, columns out of range) is rebuilt and replaced.
 * Written as temp file, fsync, rename, fsync of the directory: a crash leaves
 * the old file or none, never half a matrix under the final name.
 * The directory is kept under its bound (matrix_cache.h): a reader holds a
 * shared lock while it reads, a writer makes room first and prunes after.
 */
#include "projectors/dd_matrix.h"
#include "projectors/matrix_cache.h"
#include "util/rc_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DD_MAGIC "RCDDMAT1"
#define DD_KEY_VERSION 1

struct key {
	unsigned char *b;
	size_t n, cap;
};

static int key_put(struct key *k, const void *p, size_t n)
{
	if (k->n + n > k->cap) {
		size_t cap = (k->cap ? k->cap * 2 : 256) + n;
		unsigned char *b = realloc(k->b, cap);
		if (!b)
			return -1;
		k->b = b;
		k->cap = cap;
	}
	memcpy(k->b + k->n, p, n);
	k->n += n;
	return 0;
}

static int make_key(const rc_geom *g, struct key *k)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	int32_t head[6] = { DD_KEY_VERSION, (int32_t)rc_geom_type_of(g), rc_geom_nviews(g),
			    rc_geom_detector(g)->nu, v->nx, v->ny };
	double grid[4] = { v->vx, v->vy, v->cx, v->cy };
	if (key_put(k, head, sizeof head) || key_put(k, grid, sizeof grid))
		return -1;
	for (int i = 0; i < rc_geom_nviews(g); i++)
		if (key_put(k, rc_geom_view(g, i)->A, sizeof rc_geom_view(g, i)->A))
			return -1;
	/* a curved fan has the flat fan's A (geometry.h): the shape and the
	 * arc's radius tell them apart.  Appended only for curved, so a flat
	 * geometry's key, hash and cached file stay what they were. */
	if (rc_geom_detector(g)->shape == RC_DETECTOR_CURVED) {
		int32_t shape = (int32_t)RC_DETECTOR_CURVED;
		double S = rc_geom_sdd(g);
		if (key_put(k, &shape, sizeof shape) || key_put(k, &S, sizeof S))
			return -1;
	}
	return 0;
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

int rc_dd_key(const rc_geom *g, unsigned char **ret, size_t *len)
{
	struct key k = { 0 };
	if (make_key(g, &k)) {
		free(k.b);
		return RC_ENOMEM;
	}
	*ret = k.b;
	*len = k.n;
	return 0;
}

uint64_t rc_dd_fnv1a(const void *p, size_t n) { return fnv1a(p, n); }

uint64_t rc_dd_geom_hash(const rc_geom *g)
{
	struct key k = { 0 };
	uint64_t h = 0;
	if (!make_key(g, &k))
		h = fnv1a(k.b, k.n);
	free(k.b);
	return h;
}

/* whole reads and writes at the file position: 0 or -1 */
static int read_all(int fd, void *p, size_t n) { return rc_io_read_full(fd, p, n, -1) == (ssize_t)n ? 0 : -1; }
static int wr(int fd, const void *p, size_t n) { return rc_io_write_full(fd, p, n, -1); }

/* 0 and *ret on a valid file for this key; -1 otherwise (no error set: a
 * miss is not a failure). */
static int load(const char *path, const struct key *k, const rc_geom *g, rc_csr **ret)
{
	int fd = rc_mcache_open(path);
	if (fd < 0)
		return -1;
	int ok = 0;
	rc_csr *m = calloc(1, sizeof *m);
	unsigned char *kb = malloc(k->n ? k->n : 1);
	char magic[8];
	uint64_t klen;
	int32_t rc2[2];
	if (!m || !kb || read_all(fd, magic, 8) || memcmp(magic, DD_MAGIC, 8) ||
	    read_all(fd, &klen, sizeof klen) || klen != k->n || read_all(fd, kb, k->n) ||
	    memcmp(kb, k->b, k->n) || read_all(fd, rc2, sizeof rc2) || read_all(fd, &m->nnz, sizeof m->nnz))
		goto out;
	m->rows = rc2[0];
	m->cols = rc2[1];
	const rc_volume_desc *v = rc_geom_volume(g);
	if (m->rows != rc_geom_nviews(g) * rc_geom_detector(g)->nu || m->cols != v->nx * v->ny ||
	    m->nnz < 0 || m->nnz > (int64_t)m->rows * m->cols)
		goto out;
	m->row_ptr = malloc(((size_t)m->rows + 1) * sizeof *m->row_ptr);
	m->col = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m->col);
	m->val = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m->val);
	if (!m->row_ptr || !m->col || !m->val ||
	    read_all(fd, m->row_ptr, ((size_t)m->rows + 1) * sizeof *m->row_ptr) ||
	    read_all(fd, m->col, (size_t)m->nnz * sizeof *m->col) ||
	    read_all(fd, m->val, (size_t)m->nnz * sizeof *m->val))
		goto out;
	if (m->row_ptr[0] != 0 || m->row_ptr[m->rows] != m->nnz)
		goto out;
	for (int r = 0; r < m->rows; r++)
		if (m->row_ptr[r + 1] < m->row_ptr[r])
			goto out;
	for (int64_t i = 0; i < m->nnz; i++)
		if (m->col[i] < 0 || m->col[i] >= m->cols)
			goto out;
	ok = 1;
out:
	close(fd);
	free(kb);
	if (!ok) {
		rc_csr_free(m);
		return -1;
	}
	*ret = m;
	return 0;
}

/* The bytes store() writes. */
static int64_t file_bytes(const struct key *k, const rc_csr *m)
{
	return 8 + 8 + (int64_t)k->n + 8 + 8 + ((int64_t)m->rows + 1) * 8 + m->nnz * 8;
}

static int store(const char *dir, const char *path, int64_t bound, const struct key *k, const rc_csr *m, rc_err *err)
{
	char tmp[4096];
	int rc = 0;
	if (rc_mcache_admit(dir, bound, file_bytes(k, m), path))
		return 0; /* larger than the whole cache: the job runs uncached */
	if (rc_mcache_tmp(path, tmp, sizeof tmp))
		return rc_fail(err, RC_EIO, "cache_dir", "the matrix cache path is too long");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return rc_fail(err, RC_EIO, "cache_dir", "cannot create %s: %s", tmp, strerror(errno));
	uint64_t klen = k->n;
	int32_t rc2[2] = { m->rows, m->cols };
	if (wr(fd, DD_MAGIC, 8) || wr(fd, &klen, sizeof klen) ||
	    wr(fd, k->b, k->n) || wr(fd, rc2, sizeof rc2) ||
	    wr(fd, &m->nnz, sizeof m->nnz) ||
	    wr(fd, m->row_ptr, ((size_t)m->rows + 1) * sizeof *m->row_ptr) ||
	    wr(fd, m->col, (size_t)m->nnz * sizeof *m->col) ||
	    wr(fd, m->val, (size_t)m->nnz * sizeof *m->val) || fsync(fd)) {
		rc = rc_fail(err, RC_EIO, "cache_dir", "cannot write %s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return rc;
	}
	close(fd);
	return rc_mcache_publish(dir, bound, tmp, path, err);
}

/* g's key into *k and its file's name into path. */
static int key_path(const rc_geom *g, const char *dir, struct key *k, char *path, size_t cap, rc_err *err)
{
	if (make_key(g, k))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the geometry key");
	if (snprintf(path, cap, "%s/dd-%016llx.bin", dir, (unsigned long long)fnv1a(k->b, k->n)) >= (int)cap)
		return rc_fail(err, RC_EINVAL, "cache_dir", "the matrix cache directory name is too long");
	return 0;
}

int rc_dd_store(const rc_geom *g, const char *dir, int64_t bound, const rc_csr *m, rc_err *err)
{
	struct key k = { 0 };
	char path[4096];
	int rc = key_path(g, dir, &k, path, sizeof path, err);
	if (!rc)
		rc = rc_mcache_make_dir(dir, err);
	if (!rc)
		rc = store(dir, path, bound, &k, m, err);
	free(k.b);
	return rc;
}

int rc_dd_cached(const rc_geom *g, const char *dir, int threads, rc_csr **ret,
		 int *ret_hit, rc_err *err)
{
	return rc_dd_cached_bounded(g, dir, -1, threads, ret, ret_hit, err);
}

static int cached(const rc_geom *g, const char *dir, int64_t bound, int do_store, int threads, rc_csr **ret,
		  int *ret_hit, rc_err *err);

int rc_dd_cached_bounded(const rc_geom *g, const char *dir, int64_t bound, int threads, rc_csr **ret,
			 int *ret_hit, rc_err *err)
{
	return cached(g, dir, bound, 1, threads, ret, ret_hit, err);
}

int rc_dd_cached_nostore(const rc_geom *g, const char *dir, int threads, rc_csr **ret, int *ret_hit,
			 rc_err *err)
{
	return cached(g, dir, -1, 0, threads, ret, ret_hit, err);
}

static int cached(const rc_geom *g, const char *dir, int64_t bound, int do_store, int threads, rc_csr **ret,
		  int *ret_hit, rc_err *err)
{
	struct key k = { 0 };
	char path[4096];
	rc_csr *m = NULL;
	int rc = 0, hit = 0;
	if (!dir || !*dir) {
		rc = rc_dd_build(g, threads, &m, err);
		goto out;
	}
	if ((rc = key_path(g, dir, &k, path, sizeof path, err)))
		goto out;
	if (!load(path, &k, g, &m)) {
		hit = 1;
		goto out;
	}
	/* the directory before the build: a cache that cannot be made fails
	 * the job before its seconds of building */
	if (do_store && (rc = rc_mcache_make_dir(dir, err)))
		goto out;
	rc = rc_dd_build(g, threads, &m, err);
	if (!rc && do_store)
		rc = store(dir, path, bound, &k, m, err);
out:
	free(k.b);
	if (rc) {
		rc_csr_free(m);
		return rc;
	}
	if (ret_hit)
		*ret_hit = hit;
	*ret = m;
	return 0;
}
