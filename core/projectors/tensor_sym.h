/*
 * tensor_sym: single-slice forward projection through the 8 symmetries of
 * the square pixel grid (paper 001 §3.4), so that one image fills the 8
 * columns of a 32.8.16 fragment and the matrix keeps only 1/8 of its columns.
 *
 * With T_s the 8 signed permutations of the centred pixel coordinates
 * (rotations by 90 degrees and mirrors) and D0 = {0 <= q <= p} the
 * fundamental sector, any image is x = sum_s T_s z_s with
 * z_s = m0 . (T_s^-1 x) restricted to D0, m0 = 1 / |stabiliser| (1/2 on the
 * diagonal, 1/8 at an odd image's centre).  When the geometry maps every
 * view k under T_s onto a view k' (same bins, or bins mirrored u -> nu-1-u),
 * A T_s = P_s A with P_s a row permutation, hence
 *     A x = sum_s P_s A0 z_s,   A0 = A restricted to the columns of D0:
 * one product of A0 with the 8 columns [z_0 .. z_7], then a gather-sum.
 * The view map is found by comparing the views' 2x3 matrices, so any
 * geometry that has the symmetry is accepted (square centred grid, zero
 * detector offset, angles closed under the 8 transforms) and any other is
 * refused with RC_EUNSUPPORTED.
 */
#ifndef RC_TENSOR_SYM_H
#define RC_TENSOR_SYM_H

#include <stdint.h>

#include "projectors/bsr.h"

typedef struct rc_sym {
	int n;            /* image side (nx = ny) */
	int nviews, nu;
	int64_t rows;     /* nviews * nu */
	int64_t n0;       /* pixels in D0 = columns of A0 */
	int32_t *src;     /* [8][n0]: natural pixel index of T_s(sector pixel j) */
	float *w0;        /* [n0]: m0 of sector pixel j */
	int32_t *rowsrc;  /* [8][rows]: ordered row of A0's product read for natural row r */
	rc_bsr *b;        /* A0 as BSR 32.8.16, rows pseudo-Morton ordered */
} rc_sym;

int rc_sym_new(const rc_geom *g, int threads, rc_sym **ret, rc_err *err);
void rc_sym_free(rc_sym *s);

/* img[ny][nx] -> proj[nviews][nu] on the CPU (same blocks the GPU uses). */
int rc_sym_forward_cpu(const rc_sym *s, const float *img, float *proj, int threads, rc_err *err);

#endif
