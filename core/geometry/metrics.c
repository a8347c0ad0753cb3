/* metrics: error measures and masks (metrics.h). */
#include "geometry/metrics.h"

#include <math.h>

double rc_metric_rel_error(const float *x, const float *x0, const uint8_t *mask, size_t n)
{
	double num = 0, den = 0;
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++) {
		if (mask && !mask[i])
			continue;
		double d = (double)x[i] - (double)x0[i];
		num += d * d;
		den += (double)x0[i] * (double)x0[i];
		cnt++;
	}
	if (cnt == 0 || den == 0)
		return NAN;
	return sqrt(num / den);
}

double rc_metric_rmse(const float *x, const float *x0, const uint8_t *mask, size_t n)
{
	double num = 0;
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++) {
		if (mask && !mask[i])
			continue;
		double d = (double)x[i] - (double)x0[i];
		num += d * d;
		cnt++;
	}
	return cnt ? sqrt(num / (double)cnt) : NAN;
}

double rc_metric_psnr(const float *x, const float *x0, const uint8_t *mask, size_t n, double peak)
{
	if (!(peak > 0)) {
		peak = 0;
		for (size_t i = 0; i < n; i++)
			if (!mask || mask[i])
				peak = fmax(peak, fabs((double)x0[i]));
	}
	double rmse = rc_metric_rmse(x, x0, mask, n);
	if (isnan(rmse) || !(peak > 0))
		return NAN;
	if (rmse == 0)
		return INFINITY;
	return 20.0 * log10(peak / rmse);
}

size_t rc_mask_cylinder(const rc_volume_desc *v, double r, double half_height, uint8_t *mask)
{
	size_t cnt = 0, i = 0;
	for (int iz = 0; iz < v->nz; iz++)
		for (int iy = 0; iy < v->ny; iy++)
			for (int ix = 0; ix < v->nx; ix++, i++) {
				double p[3];
				rc_volume_voxel_pos(v, ix, iy, iz, p);
				double dx = p[0] - v->cx, dy = p[1] - v->cy, dz = p[2] - v->cz;
				mask[i] = dx * dx + dy * dy <= r * r && fabs(dz) <= half_height;
				cnt += mask[i];
			}
	return cnt;
}

size_t rc_mask_box(const rc_volume_desc *v, const double half[3], uint8_t *mask)
{
	size_t cnt = 0, i = 0;
	for (int iz = 0; iz < v->nz; iz++)
		for (int iy = 0; iy < v->ny; iy++)
			for (int ix = 0; ix < v->nx; ix++, i++) {
				double p[3];
				rc_volume_voxel_pos(v, ix, iy, iz, p);
				mask[i] = fabs(p[0] - v->cx) <= half[0] && fabs(p[1] - v->cy) <= half[1] &&
					  fabs(p[2] - v->cz) <= half[2];
				cnt += mask[i];
			}
	return cnt;
}
