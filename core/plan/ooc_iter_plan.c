/* ooc_iter_plan: out-of-core CGLS, SIRT, SART and MLEM, the refusals and the plan
 * (ooc_iter.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo_util.h"
#include "algo/colsum.h"
#include "algo/noise.h"
#include "backend/splat_dev.h"
#include "plan/extend.h"
#include "plan/memory.h"
#include "plan/ooc_iter.h"
#include "projectors/proj_cpu.h"

/* The voxel-driven pair s runs on g: what projector auto takes in memory
 * (backend.h's rc_bk_fp on the CPU engine), RC_PROJECTOR_RAYCAST when it
 * is ray casting's (not additive over slabs). */
rc_projector rc_ooc_iter_pair(const rc_recon_spec *s, const rc_geom *g)
{
	if (s->algo.projector != RC_PROJECTOR_AUTO)
		return s->algo.projector;
	if (rc_dev_splat_suits(g))
		return RC_PROJECTOR_SPLAT;
	if (!rc_geom_is_2d(g) && rc_footprint_suits(g) && rc_footprint_auto_suits(g) && !getenv("RECOND_NO_FOOTPRINT"))
		return RC_PROJECTOR_FOOTPRINT;
	return RC_PROJECTOR_RAYCAST;
}

int rc_ooc_iter_subsets(const rc_recon_spec *s)
{
	const rc_algo_params *a = &s->algo;
	int S = rc_algo_subsets(a, s->geom.nviews);
	S = S < 1 ? 1 : S > s->geom.nviews ? s->geom.nviews : S;
	return a->name == RC_ALGO_SART || (a->name == RC_ALGO_MLEM && S > 1) ? S : 0;
}

int rc_ooc_iter_colsum_kept(const rc_recon_spec *s)
{
	int S = rc_ooc_iter_subsets(s);
	return S > 0 && S <= RC_OOC_COLSUM_KEEP_BLOCKS && (s->algo.name == RC_ALGO_MLEM || S == 1);
}

uint64_t rc_ooc_iter_disk_bytes(const rc_recon_spec *s)
{
	uint64_t V = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * (uint64_t)s->vol.nz * 4;
	uint64_t P = (uint64_t)s->geom.det.nu * (uint64_t)s->geom.det.nv * (uint64_t)s->geom.nviews * 4;
	int S = rc_ooc_iter_subsets(s);
	uint64_t vols = S ? (rc_ooc_iter_colsum_kept(s) ? (uint64_t)S : 0) : s->algo.name == RC_ALGO_CGLS ? 2 : 1;
	return V * (1 + vols) + P * (S ? 1 : 2);
}

int rc_ooc_iter_form_may(const rc_recon_spec *s, const rc_geom *g)
{
	int S = rc_ooc_iter_subsets(s);
	return s->algo.name == RC_ALGO_SART && S > 1 && !rc_sart_cache_all(&s->algo, S, rc_volume_count(&s->vol)) &&
	       rc_colsum_form_may_hold(g);
}

int rc_ooc_iter_tv_steps(const rc_recon_spec *s)
{
	const rc_algo_params *a = &s->algo;
	int S = rc_ooc_iter_subsets(s);
	S = S > 1 ? S : 1;
	if (!(a->tv_weight > 0.0))
		return 0;
	return a->tv_steps > S ? (a->tv_steps + S - 1) / S : 1; /* rc_tv_new's */
}

const char *rc_ooc_iter_refusal(const rc_recon_spec *s, const rc_geom *g)
{
	const rc_algo_params *a = &s->algo;
	if (a->name != RC_ALGO_CGLS && a->name != RC_ALGO_SIRT && a->name != RC_ALGO_MLEM && a->name != RC_ALGO_SART)
		return "out of core, only fdk, cgls, sirt, sart and mlem run";
	if (s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL)
		return "out of core, the iterative methods run cone and matrices geometries only";
	/* extend auto: the data decide at the run (rc_ooc_iter refuses an
	 * extension then); on: refused here where the in-memory run would
	 * extend (rc_extent_decide: not where the extended geometry cannot be
	 * built, a source inside it) */
	if (a->extend == RC_EXTEND_ON && g) {
		rc_extent e;
		rc_extent_decide(s, g, NULL, &e);
		if (e.run.nz != s->vol.nz)
			return "out of core, the iterative methods run the asked volume only: algorithm.extend \"on\" would "
			       "extend it (ask \"auto\", which extends only where the data show mass beyond it, or "
			       "\"off\")";
	}
	if (s->engine != RC_ENGINE_CPU && s->engine != RC_ENGINE_AUTO)
		return "out of core, the iterative methods run on the cpu engine";
	rc_projector pair = g ? rc_ooc_iter_pair(s, g) : a->projector;
	if (a->projector == RC_PROJECTOR_RAYCAST || pair == RC_PROJECTOR_RAYCAST)
		return "out of core needs a voxel-driven pair (algorithm.projector splat or footprint)";
	/* the whole job's pair, as in memory (a slab may suit where the whole does not) */
	if (g && pair == RC_PROJECTOR_SPLAT && !rc_dev_splat_suits(g))
		return "algorithm.projector \"splat\" needs a flat detector whose voxels project at most a pixel apart";
	if (g && pair == RC_PROJECTOR_FOOTPRINT && !rc_footprint_suits(g))
		return "algorithm.projector \"footprint\" does not run on this geometry";
	return NULL;
}

static int evened(int n, int want)
{
	int parts = (n + want - 1) / want;
	return (n + parts - 1) / parts;
}

/* The most rows a slab of nzs slices (evened out) reads. */
static int most_rows(const rc_geom *g, int nz, int nzs)
{
	int most = 0;
	for (int z0 = 0; z0 < nz; z0 += nzs) {
		int r0, r1;
		rc_ooc_slab_rows(g, z0, z0 + nzs < nz ? z0 + nzs : nz, &r0, &r1);
		most = r1 - r0 > most ? r1 - r0 : most;
	}
	return most;
}

/* The peak of an iteration with slabs of nzs slices reading rows rows and
 * chunks of nk views: the process, q's chunk of whole views, the slab's
 * rows of the chunk (and the backend's copy), three slabs (the pass's, the
 * sum's, the backend's copy) and the projectors' own buffers (the voxel
 * back projection's block of 32 transposed views; the footprint pair's
 * block of views, a view per thread, a tile's column sums of the slab's
 * nzs slices per thread and the slab's z-fastest copy). */
/* The job's threads (its spec's, else every online core). */
static uint64_t job_threads_of(const rc_recon_spec *s)
{
	long threads = s->threads > 0 ? s->threads : sysconf(_SC_NPROCESSORS_ONLN);
	return threads < 1 ? 1 : (uint64_t)threads;
}

/* What every iterative slab plan holds beside its vectors: the back
 * projection's block of rows, a block of noise.h's rows for the stack's
 * pass (where a chunk holds fewer), and the footprint pair's images and
 * per-thread tiles (sub: a chunk's rows of the slab, slab: its bytes). */
static uint64_t slab_pass_need(const rc_recon_spec *s, int footprint, int nzs, uint64_t r, uint64_t sub, uint64_t slab)
{
	uint64_t nu = (uint64_t)s->geom.det.nu, threads = job_threads_of(s);
	uint64_t need = 32 * ((r + 3 + 15) & ~(uint64_t)15) * (nu + 3) * 4 + RC_NOISE_ROWS_PER_ITEM * nu * 4;
	if (footprint)
		need += (sub < RC_MEM_FPF_BLOCK ? sub : RC_MEM_FPF_BLOCK) + threads * r * nu * 4 + slab +
			threads * RC_MEM_FPF_TILE_COLS * (uint64_t)nzs * 4;
	return need;
}

/* SART and OS-EM (subsets_need's caller's): a block of nk views twice
 * (its residual and the next block's A x), the block's rows of a slab
 * (and the backend's copy), two slabs (the back projection, the column
 * sums) and the backend's copy, T + 1 slabs in flight with a slice of halo
 * each side (T: TV's steps per block) and with TV the operator's output
 * slab, T carried slices and its weights per thread; where the closed
 * form may hold (rc_ooc_iter_form_may), a slice of its sums (float and
 * double). */
static uint64_t subsets_need(const rc_recon_spec *s, const rc_geom *g, int footprint, int nzs, int rows, int nk)
{
	uint64_t nu = (uint64_t)s->geom.det.nu, nv = (uint64_t)s->geom.det.nv, r = (uint64_t)(rows > 0 ? rows : 1);
	uint64_t plane = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * 4, slab = plane * (uint64_t)nzs;
	uint64_t hslab = plane * (uint64_t)(nzs + 2);
	uint64_t chunk = nv * nu * (uint64_t)nk * 4, sub = r * nu * (uint64_t)nk * 4;
	uint64_t T = (uint64_t)rc_ooc_iter_tv_steps(s);
	uint64_t need = RC_MEM_BASE + 2 * chunk + 2 * sub + 3 * slab + (T + 1) * hslab;
	if (rc_ooc_iter_form_may(s, g))
		need += 3 * plane;
	if (T > 0)
		need += hslab + T * plane + job_threads_of(s) * 2 * plane;
	return need + slab_pass_need(s, footprint, nzs, r, sub, slab);
}

static uint64_t iter_need(const rc_recon_spec *s, const rc_geom *g, int footprint, int nzs, int rows, int nk)
{
	if (rc_ooc_iter_subsets(s))
		return subsets_need(s, g, footprint, nzs, rows, nk);
	/* SIRT, MLEM: one more slab, x beside s and C */
	int sirt = s->algo.name == RC_ALGO_SIRT || s->algo.name == RC_ALGO_MLEM;
	uint64_t nu = (uint64_t)s->geom.det.nu, nv = (uint64_t)s->geom.det.nv, r = (uint64_t)(rows > 0 ? rows : 1);
	uint64_t slab = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * (uint64_t)nzs * 4;
	uint64_t chunk = nv * nu * (uint64_t)nk * 4, sub = r * nu * (uint64_t)nk * 4;
	uint64_t need = RC_MEM_BASE + chunk + 2 * sub + (uint64_t)(3 + sirt) * slab;
	if (s->algo.tv_weight > 0) {
		/* TV: two slabs with a slice of halo each side (CGLS: three, w
		 * and d apart), SIRT's carried slice, the operator's two slices
		 * of weights per thread (tv_host.c) */
		uint64_t plane = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * 4;
		need += (uint64_t)(sirt ? 2 : 3) * (slab + 2 * plane) + (uint64_t)sirt * plane +
			job_threads_of(s) * 2 * plane;
	}
	return need + slab_pass_need(s, footprint, nzs, r, sub, slab);
}

static uint64_t io_of(const rc_recon_spec *s, int nzs, int rows, int chunks)
{
	uint64_t V = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * (uint64_t)s->vol.nz * 4;
	uint64_t P = (uint64_t)s->geom.det.nu * (uint64_t)s->geom.det.nv * (uint64_t)s->geom.nviews * 4;
	uint64_t S = (uint64_t)((s->vol.nz + nzs - 1) / nzs);
	uint64_t rowsP = P / (uint64_t)s->geom.det.nv * (uint64_t)rows;
	/* SART and OS-EM: per block x read and written once, the block's
	 * views of p (and SART's R) read for its residual, its kept B_s(1)
	 * read (ooc_iter.h) */
	int blocks = rc_ooc_iter_subsets(s);
	if (blocks)
		return (uint64_t)(rc_ooc_iter_colsum_kept(s) ? 3 : 2) * (uint64_t)blocks * V +
		       (uint64_t)(s->algo.name == RC_ALGO_MLEM ? 1 : 2) * P;
	uint64_t io = (uint64_t)chunks * V + S * rowsP + 4 * V + 2 * P + 3 * V + 2 * P;
	/* TV (ooc_iter.h), each slab with a slice of halo each side: CGLS
	 * reads x and d for d^T L(x) d and x for grad TV(x), 2 (S - 1) slices
	 * more each; SIRT's and MLEM's descent reads (the slice below carried:
	 * S - 1 slices more) and writes x per step */
	uint64_t halo = (S - 1) * (V / (uint64_t)s->vol.nz);
	if (s->algo.tv_weight > 0)
		io += s->algo.name == RC_ALGO_CGLS
			      ? 3 * (V + 2 * halo)
			      : (2 * V + halo) * (uint64_t)(s->algo.tv_steps > 1 ? s->algo.tv_steps : 1);
	return io;
}

uint64_t rc_ooc_iter_io(const rc_recon_spec *s, const rc_ooc_plan *p)
{
	return io_of(s, p->slab_nz, p->rows, p->chunks);
}

int rc_ooc_plan_iter(const rc_recon_spec *s, const rc_geom *g, uint64_t budget, rc_ooc_plan *p, rc_err *err)
{
	memset(p, 0, sizeof *p);
	p->slabs = 1;
	p->slab_nz = s->vol.nz;
	p->rows = s->geom.det.nv;
	p->chunks = 1;
	p->budget_bytes = budget;
	p->predicted_bytes = rc_plan_memory(s, 0);
	if (!budget || p->predicted_bytes <= budget)
		return 0;
	p->out_of_core = 1;
	const char *why = rc_ooc_iter_refusal(s, g);
	if (why)
		return rc_fail(err, RC_EUNSUPPORTED, "volume", "%s", why);
	rc_projector pair = rc_ooc_iter_pair(s, g);
	int nz = s->vol.nz, nviews = s->geom.nviews, fp = pair == RC_PROJECTOR_FOOTPRINT;
	if (nz < 2)
		return rc_fail(err, RC_EUNSUPPORTED, "volume", "out of core, an iterative run needs at least 2 slices to split");
	/* the FDK start's own plan, when the run takes it */
	uint64_t fdk_need = 0;
	int fdk = s->algo.initial == RC_INITIAL_FDK ||
		  (s->algo.initial == RC_INITIAL_AUTO && !rc_fdk_suits(g, s->algo.scan, NULL));
	if (fdk) {
		rc_recon_spec f = *s;
		rc_algo_params_default(&f.algo, RC_ALGO_FDK);
		f.algo.scan = s->algo.scan;
		rc_ooc_plan fp_plan;
		rc_err e;
		if (rc_ooc_plan_fdk(&f, g, budget, &fp_plan, &e))
			return rc_fail(err, RC_EUNSUPPORTED, "volume",
				       "out of core, the FDK start does not fit (%s): algorithm.initial \"zero\" may",
				       e.msg);
		fdk_need = fp_plan.predicted_bytes;
	}
	/* for each chunk size (halving), the thickest slab that fits; the
	 * thickest of those, then the least I/O per iteration: the splat walks
	 * z columns, its set-up per column and view paid once per slab (at
	 * 128^3 from 24 views, CGLS in slabs of 6, 32 and 128 slices took 7.4,
	 * 1.9 and 1.05 s, 0.92 s in memory), while a chunk more re-reads d
	 * once, mostly from the page cache */
	int found = 0;
	uint64_t best_io = 0, least = UINT64_MAX;
	/* SART and OS-EM: a block of views at a time (chunks: the blocks) */
	const int subs = rc_ooc_iter_subsets(s);
	for (int nk = subs ? (nviews + subs - 1) / subs : nviews;; nk = (nk + 1) / 2) {
		int chunks = subs ? subs : (nviews + nk - 1) / nk;
		nk = (nviews + chunks - 1) / chunks;
		uint64_t n1 = iter_need(s, g, fp, 1, most_rows(g, nz, 1), nk);
		least = n1 < least ? n1 : least;
		if (n1 <= budget) {
			int good = 1, bad = nz + 1;
			while (bad - good > 1) {
				int mid = good + (bad - good) / 2, nzs = evened(nz, mid);
				if (iter_need(s, g, fp, nzs, most_rows(g, nz, nzs), nk) <= budget)
					good = mid;
				else
					bad = mid;
			}
			int nzs = evened(nz, good), rows = most_rows(g, nz, nzs);
			uint64_t io = io_of(s, nzs, rows, chunks);
			if (!found || nzs > p->slab_nz || (nzs == p->slab_nz && io < best_io)) {
				found = 1;
				best_io = io;
				p->slab_nz = nzs;
				p->slabs = (nz + nzs - 1) / nzs;
				p->rows = rows;
				p->chunks = chunks;
				p->predicted_bytes = iter_need(s, g, fp, nzs, rows, nk);
			}
		}
		if (nk == 1 || subs)
			break;
	}
	if (!found) {
		p->predicted_bytes = least > fdk_need ? least : fdk_need;
		if (subs)
			return rc_fail(err, RC_EUNSUPPORTED, "volume",
				       "out of core, one slice and a block of %d views at a time needs about %llu bytes, "
				       "over the budget of %llu bytes: more algorithm.subsets (smaller blocks) may fit",
				       (nviews + subs - 1) / subs, (unsigned long long)least, (unsigned long long)budget);
		return rc_fail(err, RC_EUNSUPPORTED, "volume",
			       "out of core, one slice and one view at a time needs about %llu bytes, over the "
			       "budget of %llu bytes",
			       (unsigned long long)least, (unsigned long long)budget);
	}
	if (p->slabs == 1) { /* nz >= 2: refused above otherwise */
		/* out of core all the same (the stacks do not fit): two slabs
		 * mark the plan so, for a few rows read twice */
		p->slab_nz = (nz + 1) / 2;
		p->slabs = 2;
		p->rows = most_rows(g, nz, p->slab_nz);
		uint64_t n2 = iter_need(s, g, fp, p->slab_nz, p->rows, (nviews + p->chunks - 1) / p->chunks);
		p->predicted_bytes = n2 > p->predicted_bytes ? n2 : p->predicted_bytes;
	}
	p->predicted_bytes = p->predicted_bytes > fdk_need ? p->predicted_bytes : fdk_need;
	return 0;
}

