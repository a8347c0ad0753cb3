/* resident: whole runs on one device backend (resident.h). */
#include "plan/resident.h"

int rc_opencl_algo_supported(const rc_algo_params *p, const rc_geom *g)
{
	return p && g;
}

int rc_opencl_run_fits(rc_engine *e, const rc_algo_params *p, rc_err *err)
{
	if (!e || !p)
		return rc_fail(err, RC_EINVAL, "execution.engine", "the resident OpenCL run needs an OpenCL engine");
	int nvol, nproj;
	rc_algo_vectors(p, e->geom, &nvol, &nproj);
	return rc_backend_opencl_fits(e, nvol, nproj, err);
}

int rc_opencl_run_algo(rc_engine *e, const rc_algo_params *p, const float *proj, float *vol,
		       const rc_algo_hooks *hooks, rc_err *err)
{
	if (!p || !proj || !vol)
		return rc_fail(err, RC_EINVAL, "", "an algorithm needs parameters, projections and a volume");
	rc_backend *b = NULL;
	int rc = rc_opencl_run_fits(e, p, err);
	if (rc || (rc = rc_backend_opencl_new(e, &b, err)))
		return rc;
	rc = rc_algo_run_on(p, b, proj, vol, hooks, err);
	rc_backend_free(b);
	return rc;
}

int rc_cuda_algo_supported(const rc_algo_params *p, const rc_geom *g)
{
	return p && g && rc_engine_cuda_built();
}

/* The vectors' bytes of a run of p (rc_algo_vectors). */
static uint64_t vector_bytes(const rc_algo_params *p, const rc_geom *g)
{
	int nvol, nproj;
	rc_algo_vectors(p, g, &nvol, &nproj);
	return ((uint64_t)nvol * rc_volume_count(rc_geom_volume(g)) + (uint64_t)nproj * rc_geom_proj_count(g)) *
	       sizeof(float);
}

int rc_cuda_resident_open(const rc_algo_params *p, const rc_geom *g, const rc_cuda_options *o, rc_backend **ret,
			  rc_err *err)
{
	rc_cuda_options opt;
	if (o)
		opt = *o;
	else
		rc_cuda_options_default(&opt);
	if (!p || !g)
		return rc_fail(err, RC_EINVAL, "", "a resident CUDA run needs parameters and a geometry");
	/* AUTO per algorithm (engine_cuda.h): SART's forward projection HW;
	 * the matched pair of SIRT, CGLS and MLEM always EXACT */
	if (p->name == RC_ALGO_SART) {
		if (opt.fp_interp == RC_CUDA_INTERP_AUTO)
			opt.fp_interp = RC_CUDA_INTERP_HW;
	} else {
		opt.fp_interp = RC_CUDA_INTERP_EXACT;
	}
	/* rc_backend_cuda_new plans with the vectors set aside and refuses
	 * (RC_ETOOBIG) before allocating when the volume needs slabs */
	return rc_backend_cuda_new(g, &opt, vector_bytes(p, g), ret, err);
}

int rc_cuda_run_algo(const rc_algo_params *p, const rc_geom *g, const rc_cuda_options *o, const float *proj,
		     float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	rc_backend *b = NULL;
	int rc = rc_cuda_resident_open(p, g, o, &b, err);
	if (rc)
		return rc;
	rc = rc_algo_run_on(p, b, proj, vol, hooks, err);
	rc_backend_free(b);
	return rc;
}
