/*
 * bsr: the system matrix in block compressed sparse rows with IEEE binary16
 * values (paper 001 §3.2, Fig. 3), the CPU products over batches of slices,
 * and the non-empty-block statistics of Table 3.
 *
 * Block shapes are the A tiles of the WMMA fragments M.N.K (paper Table 1 and
 * Table 3's footnote: "block size (alpha, beta) is equal to the dimension of
 * Tile A"):  16.16.16 -> 16 x 16,  32.8.16 -> 32 x 16,  8.32.16 -> 8 x 16
 * (rows x columns of the matrix); N is the number of slices one fragment
 * multiplies at once.  The matrix is padded with zero rows and columns to
 * whole blocks.
 *
 * Storage as Fig. 3: blocks[NEB][bm][bk] (row-major inside a block),
 * row_ptr[1 + rows/bm] (the paper's row_indices), col_idx[NEB] ascending
 * within a block row.  A^T is read from the same blocks through a block
 * column index (tcol_ptr, tblk): no second copy of the values.
 *
 * Vectors of the products hold ncols slices side by side: X[col][ncols],
 * Y[row][ncols], on the padded, ordered index space (rc_bsr_rows_pad,
 * rc_bsr_cols_pad).  CPU products decode each block to fp32 once and
 * accumulate in fp32.
 */
#ifndef RC_BSR_H
#define RC_BSR_H

#include <stdint.h>

#include "projectors/dd_matrix.h"

typedef enum rc_frag {
	RC_FRAG_16_16_16 = 0,
	RC_FRAG_32_8_16,
	RC_FRAG_8_32_16,
	RC_FRAG_COUNT
} rc_frag;

typedef struct rc_frag_info {
	const char *name; /* "16.16.16" */
	int m, n, k;      /* block = m x k, n slices per fragment */
} rc_frag_info;

const rc_frag_info *rc_frag_get(rc_frag f);
/* "16.16.16" etc.; RC_EINVAL for others. */
int rc_frag_parse(const char *s, rc_frag *ret);

/* IEEE binary16, round to nearest even (overflow -> inf, NaN kept). */
uint16_t rc_f32_to_f16(float f);
float rc_f16_to_f32(uint16_t h);

typedef struct rc_bsr {
	rc_frag frag;
	int bm, bk;          /* block rows, block columns */
	int rows, cols;      /* of the unpadded matrix */
	int mb, nb;          /* block rows and block columns */
	int64_t nnz;         /* entries of the source matrix */
	int64_t neb;         /* non-empty blocks */
	int64_t *row_ptr;    /* mb + 1 */
	int32_t *col_idx;    /* neb */
	uint16_t *blocks;    /* neb * bm * bk, fp16 bits */
	int64_t *tcol_ptr;   /* nb + 1: blocks of block column c are */
	int32_t *tblk;       /* tblk[tcol_ptr[c] .. tcol_ptr[c+1]) (block ids) */
	int32_t *blk_row;    /* neb: block row of each block */
} rc_bsr;

/* Builds the BSR of m with rows renumbered by rperm and columns by cperm
 * (perm[natural] = ordered; NULL = natural order), threads as tensor_par. */
int rc_bsr_build(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f,
		 int threads, rc_bsr **ret, rc_err *err);
void rc_bsr_free(rc_bsr *b);
/* Only the non-empty blocks that rc_bsr_build would make, and all blocks. */
int rc_bsr_count(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f,
		 int threads, int64_t *ret_neb, int64_t *ret_total, rc_err *err);

static inline int64_t rc_bsr_rows_pad(const rc_bsr *b) { return (int64_t)b->mb * b->bm; }
static inline int64_t rc_bsr_cols_pad(const rc_bsr *b) { return (int64_t)b->nb * b->bk; }
/* Bytes of blocks + row_ptr + col_idx (what the GPU holds; Table 5). */
int64_t rc_bsr_bytes(const rc_bsr *b);
/* Non-empty blocks in % of all blocks (Table 3). */
double rc_bsr_neb_pct(const rc_bsr *b);

/* Y = A X and X = A^T Y, ncols slices, fp16 values, fp32 accumulation. */
int rc_bsr_mul(const rc_bsr *b, const float *X, float *Y, int ncols, int threads);
int rc_bsr_mul_t(const rc_bsr *b, const float *Y, float *X, int ncols, int threads);

/* Table 3 without holding the matrix: the non-empty blocks of the DD matrix
 * of g for every fragment shape, with rows and columns renumbered by
 * rperm/cperm (NULL = natural), generating rows on the fly.  neb[f] and
 * total[f] (all blocks of the padded matrix) per rc_frag; *ret_nnz (may be
 * NULL) the matrix's entries. */
int rc_dd_block_stats(const rc_geom *g, const int32_t *rperm, const int32_t *cperm, int threads,
		      int64_t neb[RC_FRAG_COUNT], int64_t total[RC_FRAG_COUNT], int64_t *ret_nnz, rc_err *err);

#endif
