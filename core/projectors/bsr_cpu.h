/*
 * bsr_cpu: the CPU layout of the fp16 BSR matrix (bsr.h) and its products.
 *
 * The BSR blocks suit tensor cores, not a CPU: at 512^2 (8.32.16) only ~20%
 * of the entries inside non-empty blocks are non-zero, so the block scan of
 * rc_bsr_mul reads ~5 fp16 words per non-zero and branches on each.  This
 * layout keeps only the non-zeros, in the same ordered, padded index space
 * and with the same fp16 values (so results equal rc_bsr_mul's up to the
 * order of fp32 sums): rows of A, each a run of (uint32 column, fp16 value),
 * and the same for A^T (rows = columns of A), so both products walk rows
 * with the row's sums in registers, one task per run of rows, no atomics.
 * 6 bytes per non-zero and product (1.83 GB at 512^2, against 3.05 GB of
 * 8.32.16 blocks).
 *
 * Products take X[col][nc], Y[row][nc] as rc_bsr_mul.  The AVX-512 path
 * (runtime dispatch through rc_cpu_isa_best, RECOND_CPU_ISA caps it) keeps
 * 32 slices in two zmm per row and converts 16 fp16 values per vcvtph2ps;
 * with 32 slices (fp32 or bf16 input) it walks rows in groups of four
 * (rc_spm16p: an input row several rows of the group share is loaded once
 * for all of them; a second copy of the non-zeros, made at build);
 * the AVX2 path (with F16C) four ymm and 8 values; the baseline path is
 * plain C over the slices (SSE2 vectorised).
 */
#ifndef RC_BSR_CPU_H
#define RC_BSR_CPU_H

#include <stdint.h>

#include "projectors/bsr.h"

typedef struct rc_spm16 {
	int64_t rows, cols, nnz;
	int64_t *ptr;  /* rows + 1 */
	uint32_t *idx; /* nnz + RC_SPM16_PAD (padding: 0) */
	uint16_t *val; /* nnz + RC_SPM16_PAD, fp16 bits (padding: 0) */
} rc_spm16;

/* The AVX-512 kernel loads 16 values at a time, also past a row's end. */
#define RC_SPM16_PAD 16

/* What the 32-slice AVX-512 products read: the input as it is (fp32), in
 * fp16 relative to each slice's largest |value|, or in bf16 with the
 * weights in bf16 too (vdpbf16ps, where the CPU has AVX512_BF16). */
typedef enum rc_spm_input { RC_SPM_IN_FP32 = 0, RC_SPM_IN_FP16, RC_SPM_IN_BF16 } rc_spm_input;
#define RC_SPM_IN_DEFAULT RC_SPM_IN_FP32

/* Rows of an rc_spm16 in groups, so the fp32-input AVX-512 kernel loads
 * each input row that several rows of a group share once for all of them
 * (two 64-byte loads for four or eight FMAs instead of two per row).
 * Pairs (rows 2p, 2p + 1): the columns both rows have (ascending, with the
 * two fp16 weights in one uint32: low half row 2p, high half row 2p + 1),
 * and an rc_spm16 of what is left of each row (the entries of one row
 * only).  Quads (group 4, rows 4q .. 4q + 3): first the columns all four
 * rows have (four fp16 weights in a uint64, row 4q in the low 16 bits),
 * then each of the two pairs' columns that both rows of the pair have
 * but not all four, then the rest.  Same fp16 values as the rc_spm16;
 * only the order of the fp32 sums differs. */
typedef struct rc_spm16p {
	int group;      /* 2 or 4 (0: none made) */
	int64_t pairs;
	int64_t *sptr;  /* pairs + 1 */
	uint32_t *sidx; /* shared entries + RC_SPM16_PAD (padding: 0) */
	uint32_t *sval; /* shared entries + RC_SPM16_PAD, two fp16 (padding: 0) */
	int64_t *qptr;  /* group 4: rows / 4 + 1 */
	uint32_t *qidx; /* group 4: entries of all four + RC_SPM16_PAD (padding: 0) */
	uint64_t *qval; /* group 4: the same, four fp16 (padding: 0) */
	rc_spm16 rest;  /* same rows and cols as the matrix */
} rc_spm16p;

typedef struct rc_bsr_cpu {
	rc_spm16 a, at; /* A and A^T */
	/* A and A^T in row groups, for the fp32-input AVX-512 path (made where
	 * the CPU has AVX-512; else group == 0) */
	rc_spm16p ap, atp;
	int isa;        /* rc_cpu_isa of the products */
	int input;      /* rc_spm_input of 32-slice AVX-512 products */
	uint16_t *xh;   /* the input's 16-bit copy, max(rows, cols) x 32, made on first use */
	void *map;      /* a layout from the cache (bsr_cpu_cache.h): the mapped file all */
	size_t map_len; /* the arrays above (but xh) point into; NULL = built here */
	int map_fd;     /* with map: the file, open under a shared lock while it is mapped
			 * (matrix_cache.h: pruning skips it) */
} rc_bsr_cpu;

int rc_bsr_cpu_build(const rc_bsr *b, int threads, rc_bsr_cpu **ret, rc_err *err);
/* The same layout straight from the matrix m (bsr_cpu_csr.c): rows and
 * columns renumbered by rperm / cperm (NULL = natural), padded to whole
 * blocks of fragment f as rc_bsr_build pads them, values in fp16, no BSR
 * made on the way.  groups 0: no row groups (the products take the single
 * rows; about a third of the build's time saved where they would be
 * thrown away).  *ret_neb (may be NULL): the non-empty blocks
 * rc_bsr_build would make (rc_bsr.neb), for the report. */
int rc_bsr_cpu_from_csr(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, rc_frag f, int threads,
			int groups, rc_bsr_cpu **ret, int64_t *ret_neb, rc_err *err);
void rc_bsr_cpu_free(rc_bsr_cpu *c);
/* The rc_cpu_isa the products of a layout built here take, and the row
 * group its rc_spm16p have (0: none, off the AVX-512 path). */
int rc_bsr_cpu_isa(void);
int rc_bsr_cpu_group(void);
/* c->input from RECOND_TENSOR_CPU_INPUT (default RC_SPM_IN_DEFAULT). */
void rc_bsr_cpu_input_init(rc_bsr_cpu *c);
/* RC_EUNSUPPORTED: a 16-bit input off the AVX-512 path, or bf16 on a CPU
 * without AVX512_BF16; the input stays as it was. */
int rc_bsr_cpu_set_input(rc_bsr_cpu *c, rc_spm_input in);
/* Whether this CPU runs the bf16-input products (the AVX-512 path, not
 * capped by RECOND_CPU_ISA, and AVX512_BF16). */
int rc_bsr_cpu_has_bf16(void);
/* Bytes one product streams (values, indices, row pointers of A or A^T). */
int64_t rc_bsr_cpu_bytes(const rc_bsr_cpu *c);
/* "avx512-bf16", "avx512-fp16in", "avx512", "avx2" or "baseline": the path
 * the 32-slice products take. */
const char *rc_bsr_cpu_path(const rc_bsr_cpu *c);

/* Y = A X (trans 0) or X = A^T Y (trans 1), nc slices.  With 32 slices on
 * the AVX-512 path (and xh16, the default) the input is first rounded to
 * fp16 per slice relative to its largest |value| (paper 001's fp16 B
 * operand; relative rounding 2^-11 of that maximum at most, as the GPU's
 * WMMA path); an input slice with a NaN or inf takes the fp32 kernel.  One
 * product at a time per matrix (the fp16 copy is the matrix's). */
int rc_bsr_cpu_mul(rc_bsr_cpu *c, int trans, const float *in, float *out, int nc, int threads);
/* The same product on one matrix, rows [r0, r1), a given path (tests). */
void rc_spm16_rows(const rc_spm16 *m, int isa, const float *in, float *out, int nc, int64_t r0, int64_t r1);

/* Machine figures for the floor of bench-tensor-cg: read bandwidth of a
 * buffer of `bytes` with `threads` threads (GB/s, best of 3), and the fp32
 * FMA rate of the given path (GFLOP/s, 2 flops per FMA lane); both per CPU
 * second of each thread, summed (what the cores do when they run). */
double rc_cpu_read_gbs(int threads, size_t bytes);
double rc_cpu_fma_gflops(int isa, int threads);

/* AVX2 + F16C kernel (bsr_cpu_avx2.c; call only where the CPU has both). */
void rc_spm16_rows_avx2(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1);

/* AVX-512 kernels (bsr_cpu_avx512.c; call only where rc_cpu_isa_supported). */
void rc_spm16_rows_avx512(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1);
double rc_fma_loop_avx512(long iters);
/* rows [r0, r1) (multiples of the group) of the grouped layout, 32
 * slices, fp32 input */
void rc_spm16p_rows32_avx512(const rc_spm16p *m, const float *in, float *out, int64_t r0, int64_t r1);
/* the grouped layout of m, group 2 or 4 (rows a multiple of it) */
int rc_spm16p_make(const rc_spm16 *m, int group, int threads, rc_spm16p *p);
void rc_spm16p_free(rc_spm16p *p);
double rc_dpbf16_loop_avx512(long iters);
/* rc_cpu_fma_gflops's isa argument for the vdpbf16ps rate */
#define RC_FMA_BF16 100
/* 32 slices with X in fp16 (X / sc per slice), out = sc * (A Xh) */
void rc_spm16_rows32h_avx512(const rc_spm16 *m, const uint16_t *in, const float *sc, float *out, int64_t r0, int64_t r1);
/* mx[s] = max(mx[s], |in[r][s]|) over rows [r0, r1), 32 slices */
void rc_absmax32_avx512(const float *in, int64_t r0, int64_t r1, float mx[32]);
/* out[r][s] = fp16(in[r][s] * inv[s]), 32 slices */
void rc_to_f16_32_avx512(const float *in, const float inv[32], uint16_t *out, int64_t r0, int64_t r1);
/* AVX512_BF16 (call only where the CPU has it): rows of 32 slices */
void rc_to_bf16_32_avx512(const float *in, uint16_t *out, int64_t r0, int64_t r1);
void rc_spm16_rows32b_avx512(const rc_spm16 *m, const uint16_t *in, float *out, int64_t r0, int64_t r1);
/* the same over the row groups (rows [r0, r1) multiples of the group) */
void rc_spm16p_rows32b_avx512(const rc_spm16p *m, const uint16_t *in, float *out, int64_t r0, int64_t r1);

#endif
