/*
 * proj_atan: atan without branches, for the cylinder's per-column set-ups
 * (proj_cyl.c's back projection, proj_footprint.c's footprint pair), whose
 * loops must not branch on the column.
 */
#ifndef RC_PROJ_ATAN_H
#define RC_PROJ_ATAN_H

#include <math.h>

/* atan(t) to double rounding without branches (Cephes' atan: reduced to
 * |x| <= 0.66, then a rational function), so that a set-up loop
 * vectorises; libm's atan2 per column was half the cylinder's back
 * projection at 128^3. */
static inline double rc_atan_bf(double t)
{
	double a = fabs(t);
	int big = a > 2.41421356237309504880, mid = !big & (a > 0.66);
	/* both quotients always (a selected division is control flow) */
	double xb = -1.0 / (a > 1.0 ? a : 1.0), xm = (a - 1.0) / (a + 1.0);
	double x = big ? xb : mid ? xm : a;
	double y0 = big ? 1.57079632679489661923 : mid ? 0.78539816339744830962 : 0.0;
	double more = big ? 6.123233995736765886130e-17 : mid ? 0.5 * 6.123233995736765886130e-17 : 0.0;
	double z = x * x;
	double p = (((-8.750608600031904122785e-1 * z - 1.615753718733365076637e1) * z - 7.500855792314704667340e1) * z -
		    1.228866684490136173410e2) * z - 6.485021904942025371773e1;
	double q = ((((z + 2.485846490142306297962e1) * z + 1.650270098316988542046e2) * z + 4.328810604912902668951e2) * z +
		    4.853903996359136964868e2) * z + 1.945506571482613964425e2;
	double r = y0 + (x * (z * p / q) + x) + more;
	return t < 0 ? -r : r;
}

#endif
