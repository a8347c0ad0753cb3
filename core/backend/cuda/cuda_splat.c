/*
 * cuda_splat: host side of kernels/cuda/splat.cu (cuda_splat.h): the
 * table of splat_dev.h on the device, zeroing of the views a forward
 * projection writes, RC_CUDA_MAX_BATCH views per launch (the back
 * projection's views times the gain in a buffer of that many views).
 */
#ifdef RC_HAVE_CUDA
#include "backend/cuda/cuda_splat.h"

#include <stdlib.h>

#include "backend/cuda/engine_cuda_impl.h"
#include "backend/splat_dev.h"

struct cu_splat {
	double *dtab;
	float *dgp; /* RC_CUDA_MAX_BATCH views times the gain (the back projection's input) */
	rc_cuda_splat g;
	int nviews;
};

_Static_assert(RC_CUDA_SPLAT_HEAD == RC_SPLAT_DEV_HEAD && RC_CUDA_SPLAT_VIEW == RC_SPLAT_DEV_VIEW,
	       "splat.cu reads splat_dev.h's table");

int cu_splat_new(const rc_geom *g, cu_splat **ret, rc_err *err)
{
	int rc = 0;
	size_t n;
	double *t = rc_splat_dev_table(g, &n);
	cu_splat *s = calloc(1, sizeof *s);
	if (!t || !s) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the splat pair's view table");
		goto out;
	}
	const rc_volume_desc *v = rc_geom_volume(g);
	s->g = (rc_cuda_splat){ v->nx, v->ny, v->nz, rc_geom_detector(g)->nu, rc_geom_detector(g)->nv };
	s->nviews = rc_geom_nviews(g);
	CU_CHECK(cudaMalloc((void **)&s->dtab, n * sizeof(double)), "cudaMalloc(splat view table)");
	CU_CHECK(cudaMemcpy(s->dtab, t, n * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy(splat view table)");
	CU_CHECK(cudaMalloc((void **)&s->dgp, (size_t)RC_CUDA_MAX_BATCH * s->g.nu * s->g.nv * sizeof(float)),
		 "cudaMalloc(splat gained views)");
out:
	free(t);
	if (rc) {
		cu_splat_free(s);
		return rc;
	}
	*ret = s;
	return 0;
}

void cu_splat_free(cu_splat *s)
{
	if (!s)
		return;
	if (s->dtab)
		cu_release(cudaFree(s->dtab));
	if (s->dgp)
		cu_release(cudaFree(s->dgp));
	free(s);
}

static int check(const cu_splat *s, int first, int last, rc_err *err)
{
	if (!s)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "voxels project more than %.1f pixel apart on this geometry (or it is not a cone or "
			       "matrices geometry with a flat detector): the CUDA engine does not splat it",
			       1.0);
	if (first < 0 || last > s->nviews || first > last)
		return rc_fail(err, RC_EINVAL, "", "view range [%d, %d) is outside [0, %d)", first, last, s->nviews);
	return 0;
}

int cu_splat_fp(cu_splat *s, const float *dvol, float *dproj, int first, int last, cudaStream_t st, rc_err *err)
{
	int rc = check(s, first, last, err);
	if (rc || first == last)
		return rc;
	const size_t view = (size_t)s->g.nu * (size_t)s->g.nv;
	CU_CHECK(cudaMemsetAsync(dproj + (size_t)first * view, 0, (size_t)(last - first) * view * sizeof(float), st),
		 "cudaMemsetAsync(splat views)");
	for (int c = first; c < last; c += RC_CUDA_MAX_BATCH) {
		int cl = c + RC_CUDA_MAX_BATCH < last ? c + RC_CUDA_MAX_BATCH : last;
		CU_CHECK((cudaError_t)rc_cuda_launch_fp_splat(dvol, s->dtab, dproj, &s->g, c, cl, st),
			 "launch of the splat forward projector");
	}
out:
	return rc;
}

int cu_splat_bp(cu_splat *s, const float *dproj, float *dvol, int first, int last, int add, cudaStream_t st,
		rc_err *err)
{
	int rc = check(s, first, last, err);
	if (rc || (first == last && add))
		return rc;
	if (first == last) {
		size_t nvox = (size_t)s->g.nx * (size_t)s->g.ny * (size_t)s->g.nz;
		CU_CHECK(cudaMemsetAsync(dvol, 0, nvox * sizeof(float), st), "cudaMemsetAsync(volume)");
	}
	for (int c = first; c < last; c += RC_CUDA_MAX_BATCH) {
		int cl = c + RC_CUDA_MAX_BATCH < last ? c + RC_CUDA_MAX_BATCH : last;
		CU_CHECK((cudaError_t)rc_cuda_launch_bp_splat(dproj, s->dtab, s->dgp, dvol, &s->g, c, cl, add || c > first, st),
			 "launch of the splat back projector");
	}
out:
	return rc;
}

#else
typedef int rc_cuda_splat_unused;
#endif /* RC_HAVE_CUDA */
