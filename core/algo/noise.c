/* noise: the noise energy of a projection stack, from the data (noise.h). */
#include "algo/noise.h"

#include <math.h>
#include <stdlib.h>

#include "util/parfor.h"

/* Median of chi^2 with one degree of freedom. */
#define CHI2_1_MEDIAN 0.4549364231195724
/* Rows per parallel item. */
#define ROWS_PER_ITEM RC_NOISE_ROWS_PER_ITEM

typedef struct noise_job {
	const float *p;
	int nu;
	int order; /* 2: second differences, 4: fourth */
	size_t nrows;
	float **scratch; /* per worker, nu floats */
	double *var;     /* per item: sum of the rows' variance times their length */
} noise_job;

#define SWAP(a, b) do { float t_ = (a); (a) = (b); (b) = t_; } while (0)

/* The k-th smallest of a[0..n) (a is reordered): selection by partitions
 * around a median of three, which also places the sentinels that keep the
 * inner scans inside [l, ir]. */
static float select_kth(float *a, size_t n, size_t k)
{
	size_t l = 0, ir = n - 1;
	for (;;) {
		if (ir <= l + 1) {
			if (ir == l + 1 && a[ir] < a[l])
				SWAP(a[l], a[ir]);
			return a[k];
		}
		size_t mid = (l + ir) / 2, i = l + 1, j = ir;
		SWAP(a[mid], a[l + 1]);
		if (a[l] > a[ir])
			SWAP(a[l], a[ir]);
		if (a[l + 1] > a[ir])
			SWAP(a[l + 1], a[ir]);
		if (a[l] > a[l + 1])
			SWAP(a[l], a[l + 1]);
		float piv = a[l + 1];
		for (;;) {
			do
				i++;
			while (a[i] < piv);
			do
				j--;
			while (a[j] > piv);
			if (j < i)
				break;
			SWAP(a[i], a[j]);
		}
		a[l + 1] = a[j];
		a[j] = piv;
		if (j >= k)
			ir = j - 1;
		if (j <= k)
			l = i;
	}
}

static void noise_item(void *ud, int worker, int item)
{
	noise_job *j = ud;
	float *d2 = j->scratch[worker];
	const size_t m = (size_t)j->nu - (size_t)j->order;
	/* the difference's variance for white noise of variance 1: the sum
	 * of its coefficients' squares (1 -2 1: 6; 1 -4 6 -4 1: 70) */
	const double gain = j->order == 4 ? 70.0 : 6.0;
	size_t r0 = (size_t)item * ROWS_PER_ITEM, r1 = r0 + ROWS_PER_ITEM;
	double sum = 0.0;
	if (r1 > j->nrows)
		r1 = j->nrows;
	for (size_t r = r0; r < r1; r++) {
		const float *row = j->p + r * (size_t)j->nu;
		if (j->order == 4)
			for (size_t i = 0; i < m; i++) {
				float d = row[i] - 4.0f * row[i + 1] + 6.0f * row[i + 2] - 4.0f * row[i + 3] + row[i + 4];
				d2[i] = d * d;
			}
		else
			for (size_t i = 0; i < m; i++) {
				float d = row[i] - 2.0f * row[i + 1] + row[i + 2];
				d2[i] = d * d;
			}
		double s2 = select_kth(d2, m, m / 2) / (gain * CHI2_1_MEDIAN);
		sum += s2 * j->nu;
	}
	j->var[item] = sum;
}

/* The items' variances added to *total one by one, in order (so that
 * pieces of whole items give the sum of the whole: noise.h). */
static int noise_add(const float *p, size_t n, int nu, int order, int threads, double *total)
{
	if (nu < 8 || !p)
		return 0;
	noise_job j = { .p = p, .nu = nu, .order = order, .nrows = n / (size_t)nu };
	int items = (int)((j.nrows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM), nt = rc_parallel_threads(threads);
	j.var = calloc((size_t)items, sizeof *j.var);
	j.scratch = calloc((size_t)nt, sizeof *j.scratch);
	int ok = j.var && j.scratch;
	for (int t = 0; ok && t < nt; t++)
		ok = (j.scratch[t] = malloc((size_t)nu * sizeof(float))) != NULL;
	if (ok) {
		rc_parallel_for(items, threads, noise_item, &j);
		for (int i = 0; i < items; i++)
			*total += j.var[i];
	}
	for (int t = 0; j.scratch && t < nt; t++)
		free(j.scratch[t]);
	free(j.scratch);
	free(j.var);
	return ok ? 0 : -1;
}

static double noise_energy(const float *p, size_t n, int nu, int order, int threads)
{
	double total = 0.0;
	return noise_add(p, n, nu, order, threads, &total) ? -1.0 : total;
}

int rc_noise_energy_add(const float *p, size_t n, int nu, int order, int threads, double *total)
{
	return noise_add(p, n, nu, order == 4 ? 4 : 2, threads, total);
}

double rc_noise_energy(const float *p, size_t n, int nu, int threads)
{
	return noise_energy(p, n, nu, 2, threads);
}

double rc_noise_relative(const float *p, size_t n, int nu, double sigma, int threads)
{
	if (!p || !n)
		return 0.0;
	double pp = 0.0;
	for (size_t i = 0; i < n; i++)
		pp += (double)p[i] * p[i];
	double e = sigma > 0.0 ? sigma * sigma * (double)n : noise_energy(p, n, nu, 4, threads);
	if (e < 0.0)
		return -1.0; /* out of memory: the caller keeps its default */
	return pp > 0.0 ? sqrt(e / pp) : 0.0;
}
