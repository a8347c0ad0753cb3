/*
 * dd_matrix: the distance-driven projector (De Man & Basu 2002) of a fan or
 * parallel geometry as a sparse matrix, one slice: rows are detector bins x
 * views (row = view * nu + u, the [view][u] order of one slice of the
 * projection stack), columns are pixels (col = iy * nx + ix).  A[row][col] is
 * the length (mm) that the bin's ray bundle spends in the pixel averaged over
 * the bin, so A x is the bin-averaged line integral of x (1/mm).
 *
 * How a row is made: bin u of view k has boundary rays at detector
 * coordinates u - 1/2 and u + 1/2.  With the view's 2x3 matrix A (geometry.h,
 * (x, y, 1) -> (u w, w)) the ray of coordinate e is the line
 *     (A0 - e A3) x + (A1 - e A4) y + (A2 - e A5) = 0,
 * whose coefficients are linear in e; this holds for fan and parallel alike.
 * A curved fan's bin edges are the rays at their fan angles: the same lines
 * at e' = rc_geom_line_u(e) (the tangent-plane index of that ray), so its
 * bin footprints, and with them the overlaps below, are exact for the arc.
 * When the bin's central ray is closer to the y axis we walk the image rows:
 * both boundaries cut row y_j at xa, xb, each pixel of the row gets
 * overlap([xa, xb], pixel) / (xb - xa) times the central ray's path length
 * through the row, vy / |cos|.  Otherwise the roles of x and y swap.  Points
 * with w <= 0 (behind a fan source) are skipped.
 *
 * The matrix is built with all cores (views split across threads), kept in
 * CSR with fp32 values and sorted columns, and cached on disk per geometry
 * (rc_dd_cached: file dd-<hash>.bin in a directory; the file also holds the
 * whole geometry key, so a hash collision is a miss, not a wrong matrix).
 */
#ifndef RC_DD_MATRIX_H
#define RC_DD_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "geometry/geometry.h"

typedef struct rc_csr {
	int rows, cols;
	int64_t nnz;
	int64_t *row_ptr; /* rows + 1 */
	int32_t *col;     /* nnz, ascending within a row */
	float *val;       /* nnz */
} rc_csr;

/* Per-row generator: writes the row's (col, weight) pairs, columns not
 * sorted, into cols/vals (capacity cap) and returns the count, or -1 when
 * cap is too small.  rc_dd_row_cap is always enough. */
int rc_dd_row(const rc_geom *g, int view, int u, int32_t *cols, float *vals, int cap);
int rc_dd_row_cap(const rc_geom *g);

/* Builds the matrix with `threads` threads (0 = one per online core).
 * RC_EUNSUPPORTED unless fan or parallel. */
int rc_dd_build(const rc_geom *g, int threads, rc_csr **ret, rc_err *err);

/* Loads the matrix for g from dir, or builds it and stores it there (temp
 * file, fsync, rename).  dir NULL or "" = no cache.  *ret_hit tells whether
 * it came from disk (may be NULL). */
int rc_dd_cached(const rc_geom *g, const char *dir, int threads, rc_csr **ret,
		 int *ret_hit, rc_err *err);
/* The same with dir kept under `bound` bytes (matrix_cache.h; < 0 = no
 * bound): a file larger than the bound is not written (the matrix is
 * still returned), a hit holds a shared lock while it reads. */
int rc_dd_cached_bounded(const rc_geom *g, const char *dir, int64_t bound, int threads, rc_csr **ret,
			 int *ret_hit, rc_err *err);

/* The same without writing a miss to dir: for a caller that caches what
 * it makes of the matrix instead (bsr_cpu_cache.h), so its first job does
 * not wait for this file. */
int rc_dd_cached_nostore(const rc_geom *g, const char *dir, int threads, rc_csr **ret, int *ret_hit,
			 rc_err *err);
/* Writes m (built for g) to dir as rc_dd_cached_bounded writes a miss (dir
 * made where it is not there yet): for such a caller whose own file the
 * bound does not take, so a later job at least finds the matrix. */
int rc_dd_store(const rc_geom *g, const char *dir, int64_t bound, const rc_csr *m, rc_err *err);

/* The 64-bit FNV-1a hash of the geometry key: the file name of the cache. */
uint64_t rc_dd_geom_hash(const rc_geom *g);
/* The geometry key itself (malloc'd, *len bytes): everything the matrix
 * depends on, for caches of its converted forms (bsr_cpu_cache.h); and the
 * hash over any bytes. */
int rc_dd_key(const rc_geom *g, unsigned char **ret, size_t *len);
uint64_t rc_dd_fnv1a(const void *p, size_t n);

void rc_csr_free(rc_csr *m);

/* New matrix = m^T (columns become rows), for the CPU fp32 A^T product. */
int rc_csr_transpose(const rc_csr *m, rc_csr **ret, rc_err *err);

/* Y[rows][ncols] = m * X[cols][ncols] (row-major, ncols slices side by side),
 * fp32, `threads` threads (0 = all cores). */
int rc_csr_mul(const rc_csr *m, const float *X, float *Y, int ncols, int threads, rc_err *err);
/* The same over rows [r0, r1) of Y only (the others untouched) and the
 * entries of columns [c0, c1) only (the others count as 0): a subset of
 * views of a matrix in natural order (rows view * nu + u) is a row range of
 * A and a column range of A^T, so its product costs the subset's share. */
int rc_csr_mul_range(const rc_csr *m, const float *X, float *Y, int ncols, int threads, int64_t r0, int64_t r1,
		     int32_t c0, int32_t c1, rc_err *err);

#endif
