/*
 * paper001: the fan geometry of paper 001's experiments, shared by the
 * tensor benches (bench-tensor, bench-tensor-cg, bench-tensor-spmm): an
 * n x n image over a 512 mm field (pixels of 512/n mm), nz slices,
 * nviews views over 360 degrees, D = 1000 mm, S = 2000 mm, nu bins whose
 * fan just covers the image's circumcircle.
 */
#ifndef RC_BENCH_PAPER001_H
#define RC_BENCH_PAPER001_H

#include <math.h>

#include "geometry/geometry.h"

static inline int paper001_geom(int n, int nviews, int nu, int nz, rc_geom **ret, rc_err *err)
{
	static double ang[4096];
	if (nviews > 4096)
		return rc_fail(err, RC_EINVAL, "", "paper001_geom: at most 4096 views (got %d)", nviews);
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	double px = 512.0 / n, R = 512.0 * sqrt(2) / 2, D = 1000, S = 2000;
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = D,
			    .source_detector_mm = S };
	sp.det.nu = nu;
	sp.det.nv = 1;
	sp.det.du = 2 * S * tan(asin(R / D)) / nu;
	rc_volume_desc v = { n, n, nz, px, px, px, 0, 0, 0 };
	return rc_geom_new(&sp, &v, NULL, ret, err);
}

#endif
