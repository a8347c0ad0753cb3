/*
 * bsr_cpu_cache: the tensor path's CPU layout (bsr_cpu.h) kept on disk per
 * geometry, beside the distance-driven matrix it comes from (dd_matrix.h),
 * so that a later job on the same geometry maps it instead of building the
 * matrix, its blocks and the layout again.
 *
 * File nz-<16 hex of the key hash>.bin in the cache directory, keyed by the
 * geometry key of the DD matrix (rc_dd_key) plus the format version, the
 * fragment (it sets the padded index space) and the row group of this
 * CPU's layout (rc_bsr_cpu_group).  The file holds the whole key (a hash
 * collision is a miss), what the job reports about the matrix (rc_nz_meta)
 * and every array of the rc_bsr_cpu (A, A^T, their row groups), each at a
 * 64-byte aligned offset, so the loaded layout points into the mapping.  A
 * file that does not validate (short, another key, sections that do not
 * add up, a digest of the sections and header that differs from the one
 * stored, row pointers out of order, columns out of range) is a miss.
 * Written as temp file and renamed (then the directory fsync'd), the file
 * itself not fsync'd: a crash's torn file fails the digest.  A loaded
 * layout keeps the file open under a shared lock until it is freed, so the
 * cache's pruning (matrix_cache.h) never deletes a file a job maps.
 * The fp16 weights serve every input the products take (fp32, fp16, bf16:
 * precision mixed and bf16), so one file serves both precisions.
 */
#ifndef RC_BSR_CPU_CACHE_H
#define RC_BSR_CPU_CACHE_H

#include "geometry/geometry.h"
#include "projectors/bsr_cpu.h"

/* What a job reports about its matrix and the backend needs besides the
 * layout: the padded extents and the numbers of the report. */
typedef struct rc_nz_meta {
	int64_t rows_pad, cols_pad;
	int64_t nnz;       /* of the DD matrix */
	int64_t bsr_bytes; /* the fp16 BSR's bytes (the report's matrix.bytes) */
	double pct_before, pct_after;
} rc_nz_meta;

/* 0 and *ret (its arrays in the mapped file) and *meta when dir holds a
 * valid file for (g, frag); -1 otherwise (a miss is not an error).  The
 * checks use `threads` threads. */
int rc_bsr_cpu_load(const rc_geom *g, const char *dir, int frag, int threads, rc_bsr_cpu **ret, rc_nz_meta *meta);

/* Stores c (built for g, frag) and meta in dir, kept under `bound` bytes
 * (matrix_cache.h; < 0 = no bound): a file larger than the bound is not
 * written (0 all the same: the job runs uncached). */
int rc_bsr_cpu_store(const rc_geom *g, const char *dir, int64_t bound, int frag, const rc_bsr_cpu *c,
		     const rc_nz_meta *meta, rc_err *err);

/* The bytes rc_bsr_cpu_store writes for c (-1: out of memory): a caller
 * compares them with the cache's bound before it counts on the file. */
int64_t rc_bsr_cpu_file_bytes(const rc_geom *g, int frag, const rc_bsr_cpu *c);

#endif
