/*
 * proj_voxel: voxel-driven back projection (paper 002 Eq. 1),
 *   f(x) = sum_k  p_k(u_k(x), v_k(x)) / w_k(x)^2,
 * bilinear in the detector with zero outside, w the depth in mm (geometry.h).
 *
 * Views go in blocks of RC_BPV_BLOCK: each block is copied into zero-padded
 * transposed images (so the inner loop needs no bounds test, and a voxel
 * column along z reads contiguous detector columns), then the volume is swept
 * once, tile by tile (RC_BPV_BX x by voxel columns of the whole
 * depth), each tile adding the block's views to its sums.  A call of several
 * blocks keeps every tile's sums in one volume-sized buffer and writes the
 * volume once, at its last block.  Tiles are the pool's tasks: each voxel is
 * summed by one task, in view order, so the result is the same for any
 * number of threads.  The loops themselves are in proj_voxel_tile.h,
 * compiled per ISA; this file picks the widest one the CPU has.
 */
#include "projectors/proj_cpu.h"

#include <immintrin.h>
#include <stdio.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define RC_BPV_TILE rc_bpv_tile_baseline
#define RC_BPV_SUFFIX baseline
#include "projectors/proj_voxel_tile.h"

struct rc_bpv {
	const rc_geom *g;
	int threads;
	int Hs;            /* column stride of a padded transposed image: nv + 3 rounded up to 16 */
	size_t img_stride; /* floats per padded image, RC_BPV_TAIL included */
	float *img;        /* RC_BPV_BLOCK padded transposed images, at img_base + 15 */
	float *img_base;
	float *scratch;
	int by, bz;        /* tile rows and depth */
	size_t scratch_floats;
	float *tiles;      /* every tile's sums, for calls of several blocks */
	size_t tiles_bytes; /* reserved for tiles (rc_proj_keep_reserve) */
	int tiles_failed;  /* over the limit or not allocated: write back per block */
};

static int isa_cpu_has(rc_cpu_isa isa)
{
	__builtin_cpu_init();
	switch (isa) {
	case RC_ISA_BASELINE: return 1;
	case RC_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	case RC_ISA_AVX512:
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
		       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	default: return 0;
	}
}

int rc_cpu_isa_supported(rc_cpu_isa isa) { return (int)isa >= 0 && (int)isa < RC_ISA_COUNT && isa_cpu_has(isa); }

const char *rc_cpu_isa_name(rc_cpu_isa isa)
{
	static const char *names[RC_ISA_COUNT] = { "baseline", "avx2", "avx512" };
	return (int)isa >= 0 && (int)isa < RC_ISA_COUNT ? names[isa] : "unknown";
}

rc_cpu_isa rc_cpu_isa_best(void)
{
	rc_cpu_isa cap = RC_ISA_AVX512;
	const char *env = getenv("RECOND_CPU_ISA");
	if (env)
		for (int i = 0; i < RC_ISA_COUNT; i++)
			if (!strcasecmp(env, rc_cpu_isa_name((rc_cpu_isa)i)))
				cap = (rc_cpu_isa)i;
	for (int i = cap; i > 0; i--)
		if (isa_cpu_has((rc_cpu_isa)i))
			return (rc_cpu_isa)i;
	return RC_ISA_BASELINE;
}

/* Rows of a tile (RC_BPV_BX columns wide, the whole depth): as many as keep
 * the tile's sums, which every view reads and writes, within 1 MiB (the L2
 * of the Xeons measured): 16 at 512 deep, 32 at 256 (1.085x 16 at 256^3,
 * where 32 rows at 512^3 were 0.94x), at most 64; fewer while that would
 * leave under 4 tiles per thread to balance. */
static int tile_rows(const rc_volume_desc *v, int bz, int threads)
{
	const long nxb = (v->nx + RC_BPV_BX - 1) / RC_BPV_BX, nzb = (v->nz + bz - 1) / bz;
	int by = 16;
	while (2 * by <= RC_BPV_BYMAX && RC_BPV_TILE_FLOATS(2 * by, bz) * sizeof(float) <= (1u << 20))
		by *= 2;
	while (by > 16 && nxb * ((v->ny + by - 1) / by) * nzb < 4L * threads)
		by /= 2;
	return by;
}

/* rc_bpv_new's sizes, shared with rc_bpv_bytes: a padded image's rows,
 * a worker's scratch floats, the block of images with its alignment */
static int padded_rows(int nv)
{
	return (nv + 3 + 15) & ~15;
}

static size_t scratch_floats(int by, int bz)
{
	return (RC_BPV_SCRATCH_FLOATS(by, bz) + 15) & ~(size_t)15;
}

static size_t img_block_bytes(size_t img_stride)
{
	return ((size_t)RC_BPV_BLOCK * img_stride * sizeof(float) + 64 + 63) & ~(size_t)63;
}

uint64_t rc_bpv_bytes(int nu, int nv, int nz, int threads)
{
	size_t stride = (size_t)padded_rows(nv) * (size_t)(nu + 3) + RC_BPV_TAIL;
	int bz = nz < RC_BPV_BZMAX ? nz : RC_BPV_BZMAX;
	return (uint64_t)img_block_bytes(stride) +
	       (uint64_t)(threads > 0 ? threads : 1) * scratch_floats(RC_BPV_BYMAX, bz) * sizeof(float);
}

int rc_bpv_new(const rc_geom *g, int threads, rc_bpv **ret, rc_err *err)
{
	int rc;
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	rc_bpv *b = calloc(1, sizeof *b);
	if (!b)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the back projector");
	b->g = g;
	b->threads = threads;
	/* Hs and img_stride multiples of 16 and img 15 floats past a 64-byte
	 * boundary: every column's pixel rows 0, 16, 32, ... start a cache
	 * line (pad_task's streaming stores) */
	b->Hs = padded_rows(d->nv);
	b->img_stride = (size_t)b->Hs * (size_t)(d->nu + 3) + RC_BPV_TAIL;
	b->bz = v->nz < RC_BPV_BZMAX ? v->nz : RC_BPV_BZMAX;
	b->by = tile_rows(v, b->bz, threads);
	b->scratch_floats = scratch_floats(b->by, b->bz);
	size_t img_bytes = img_block_bytes(b->img_stride);
	size_t scr_bytes = (size_t)threads * b->scratch_floats * sizeof(float);
	b->img_base = aligned_alloc(64, img_bytes);
	b->img = b->img_base ? b->img_base + 15 : NULL;
	b->scratch = aligned_alloc(64, scr_bytes);
	if (!b->img || !b->scratch) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the back projector's buffers (%zu MiB)",
			     (img_bytes + scr_bytes) >> 20);
		goto out_free;
	}
	*ret = b;
	return 0;
out_free:
	rc_bpv_free(b);
	return rc;
}

void rc_bpv_free(rc_bpv *b)
{
	if (!b)
		return;
	free(b->img_base);
	free(b->scratch);
	if (b->tiles)
		rc_proj_keep_release(b->tiles_bytes);
	free(b->tiles);
	free(b);
}

struct pad_ctx {
	const rc_bpv *b;
	const float *proj;
	int first;
	int splat_gain;
};

/* Four vectors to four consecutive 16-byte slots starting at o (64-byte
 * aligned): one whole cache line, written around the caches. */
static inline void stream_line(float *o, __m128 a, __m128 b, __m128 c, __m128 d)
{
	_mm_stream_ps(o, a);
	_mm_stream_ps(o + 4, b);
	_mm_stream_ps(o + 8, c);
	_mm_stream_ps(o + 12, d);
}

/* Copies view first + k into its padded transposed image.  Pixel (i, j)
 * goes to (i + 1) Hs + j + 1, which is 64-byte aligned for j a multiple of
 * 16 (rc_bpv_new), so each detector column's 16-row pieces are whole cache
 * lines: blocks of 16 rows x 4 columns are transposed by 4 x 4 SSE
 * transposes (baseline x86-64) and written with streaming stores, which do
 * not first read the line they write.  The 32 x 32 blocks of ordinary
 * stores before took 3 ms per RabbitCT view, 1 ms now, a tenth of the
 * whole back projection at 256^3 (docs/cpu-engine.md). */
static void pad_task(void *arg, long k, int worker)
{
	struct pad_ctx *c = arg;
	(void)worker;
	const rc_bpv *b = c->b;
	const rc_detector_desc *d = rc_geom_detector(b->g);
	const int nu = d->nu, nv = d->nv, Hs = b->Hs;
	float *img = b->img + (size_t)k * b->img_stride;
	/* the padding: column 0, rows 0 and nv + 1 .. Hs - 1 of each column,
	 * the last two columns and the tail */
	memset(img, 0, (size_t)Hs * sizeof(float));
	memset(img + (size_t)(nu + 1) * Hs, 0, (2 * (size_t)Hs + RC_BPV_TAIL) * sizeof(float));
	for (int i = 0; i < nu; i++) {
		float *col = img + (size_t)(i + 1) * Hs;
		col[0] = 0;
		memset(col + nv + 1, 0, (size_t)(Hs - nv - 1) * sizeof(float));
	}
	const float *rows[16];
	const int i4 = nu & ~3;
	for (int j0 = 0; j0 < nv; j0 += 16) {
		int j1 = j0 + 16 < nv ? j0 + 16 : nv;
		for (int j = j0; j < j1; j++)
			rows[j - j0] = c->proj + rc_geom_row_offset(b->g, c->first + (int)k, j);
		if (j1 - j0 == 16)
			for (int i = 0; i < i4; i += 4) {
				__m128 t[16];
				for (int q = 0; q < 16; q += 4) {
					t[q] = _mm_loadu_ps(rows[q] + i);
					t[q + 1] = _mm_loadu_ps(rows[q + 1] + i);
					t[q + 2] = _mm_loadu_ps(rows[q + 2] + i);
					t[q + 3] = _mm_loadu_ps(rows[q + 3] + i);
					_MM_TRANSPOSE4_PS(t[q], t[q + 1], t[q + 2], t[q + 3]);
				}
				/* t[q + m]: column i + m, rows j0 + q .. j0 + q + 3 */
				float *o = img + (size_t)(i + 1) * Hs + j0 + 1;
				for (int m = 0; m < 4; m++)
					stream_line(o + (size_t)m * Hs, t[m], t[4 + m], t[8 + m], t[12 + m]);
			}
		/* the last rows (nv not a multiple of 16) and columns (nu not a
		 * multiple of 4) */
		for (int j = j0; j < j1; j++)
			for (int i = j1 - j0 == 16 ? i4 : 0; i < nu; i++)
				img[(size_t)(i + 1) * Hs + j + 1] = rows[j - j0][i];
	}
	_mm_sfence(); /* streaming stores are weakly ordered: done before the tiles read them */
	if (c->splat_gain) {
		rc_splat_gain gn;
		float gain[RC_SPLAT_GAIN_CHUNK];
		rc_splat_gain_init(b->g, c->first + (int)k, &gn);
		for (int i = 0; i < nu; i++) {
			float *col = img + (size_t)(i + 1) * Hs + 1;
			for (int j0 = 0; j0 < nv; j0 += RC_SPLAT_GAIN_CHUNK) {
				int m = nv - j0 < RC_SPLAT_GAIN_CHUNK ? nv - j0 : RC_SPLAT_GAIN_CHUNK;
				rc_splat_gain_line(&gn, i, j0, 1, m, gain);
				for (int j = 0; j < m; j++)
					col[j0 + j] *= gain[j];
			}
		}
	}
}

/* A view takes the column loops (proj_voxel_tile.h) when it is a cone view
 * (P[2] = P[10] = 0: u and w constant along a voxel column) or close to one,
 * as a C-arm's calibrated matrices are: w > 0 on the whole volume, and w
 * changes along a voxel column by at most RC_BPV_NEWTON_MAX of its value at
 * the column's centre, so that three Newton steps from there give 1/w to
 * float precision (the bound of the general row path).  Other views (a
 * strongly tilted gantry) take the general row path. */
static int view_cone_like(const double *P, const rc_volume_desc *v)
{
	if (P[2] == 0 && P[10] == 0)
		return 1;
	double wmin = INFINITY;
	for (int c = 0; c < 8; c++) {
		double X[3];
		rc_volume_voxel_pos(v, c & 1 ? v->nx - 1 : 0, c & 2 ? v->ny - 1 : 0, c & 4 ? v->nz - 1 : 0, X);
		double w = P[8] * X[0] + P[9] * X[1] + P[10] * X[2] + P[11];
		wmin = w < wmin ? w : wmin;
	}
	/* half the change of w along a column; the centre's w is >= wmin */
	double half = fabs(P[10]) * (v->nz - 1) * v->vz / 2;
	return wmin > 0 && half <= RC_BPV_NEWTON_MAX * wmin;
}

/* The memory limit of this process's cgroup (systemd's MemoryMax=, a
 * container's limit) in bytes, or 0 if none is found: cgroup v2
 * (memory.max, under /sys/fs/cgroup or, on hybrid systems,
 * /sys/fs/cgroup/unified) or v1 (memory.limit_in_bytes). */
static unsigned long long cgroup_memory_limit(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return 0;
	char line[512], path[640];
	unsigned long long limit = 0;
	while (!limit && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		const char *v2 = !strncmp(line, "0::", 3) ? line + 3 : NULL;
		const char *v1 = strstr(line, ":memory:");
		const char *files[2][2] = { { "/sys/fs/cgroup", "memory.max" },
					    { "/sys/fs/cgroup/unified", "memory.max" } };
		for (int i = 0; i < 3 && !limit; i++) {
			if (i < 2 && v2)
				snprintf(path, sizeof path, "%s%s/%s", files[i][0], v2, files[i][1]);
			else if (i == 2 && v1)
				snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1 + 8);
			else
				continue;
			FILE *m = fopen(path, "re");
			unsigned long long x;
			if (m && fscanf(m, "%llu", &x) == 1) /* "max": no limit */
				limit = x;
			if (m)
				fclose(m);
		}
	}
	fclose(f);
	return limit;
}

/* Bytes of kept buffers (rc_proj_keep_reserve) of the whole process. */
static atomic_size_t kept_bytes;

int rc_proj_keep_reserve(size_t bytes, const char *env_name)
{
	size_t limit = 0;
	const char *env = getenv(env_name);
	char *end = NULL;
	unsigned long long mb = env && *env ? strtoull(env, &end, 10) : 0;
	if (end && *end == 0) {
		limit = mb > SIZE_MAX >> 20 ? SIZE_MAX : (size_t)mb << 20;
	} else {
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		unsigned long long mem =
			pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
		unsigned long long cg = cgroup_memory_limit();
		if (cg && cg < mem)
			mem = cg;
		limit = mem / 4 > SIZE_MAX ? SIZE_MAX : (size_t)(mem / 4);
	}
	size_t cur = atomic_load(&kept_bytes);
	do {
		if (bytes > limit || cur > limit - bytes)
			return 0;
	} while (!atomic_compare_exchange_weak(&kept_bytes, &cur, cur + bytes));
	return 1;
}

void rc_proj_keep_release(size_t bytes) { atomic_fetch_sub(&kept_bytes, bytes); }

/* Whether the columns of a tile need sorting (col_order): the centre
 * tile's box (RC_BPV_BX x by x bz voxels) projected through views
 * first..last covers more than RC_BPV_UNSORTED_BYTES of padded detector
 * in some view (two columns and three rows more, for the bilinear pairs
 * and the window's rounding), or reaches behind a source. */
static int tiles_sorted(const rc_geom *g, int by, int bz, int first, int last)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	double c[3], h[3] = { RC_BPV_BX * v->vx / 2, by * v->vy / 2, bz * v->vz / 2 };
	rc_volume_voxel_pos(v, (v->nx - 1) / 2.0, (v->ny - 1) / 2.0, (v->nz - 1) / 2.0, c);
	for (int k = first; k < last; k++) {
		const rc_view *vw = rc_geom_view(g, k);
		double u0 = INFINITY, u1 = -INFINITY, v0 = INFINITY, v1 = -INFINITY;
		for (int i = 0; i < 8; i++) {
			double X[3] = { c[0] + (i & 1 ? h[0] : -h[0]), c[1] + (i & 2 ? h[1] : -h[1]),
					c[2] + (i & 4 ? h[2] : -h[2]) }, u, vv, w;
			rc_view_project(vw, X, &u, &vv, &w);
			if (!(w > 0))
				return 1;
			u0 = fmin(u0, u);
			u1 = fmax(u1, u);
			v0 = fmin(v0, vv);
			v1 = fmax(v1, vv);
		}
		if (!((u1 - u0 + 2) * (v1 - v0 + 3) * sizeof(float) <= RC_BPV_UNSORTED_BYTES))
			return 1;
	}
	return 0;
}

struct tile_ctx {
	const struct rc_bpv_job *job;
	void (*fn)(const struct rc_bpv_job *, long, int);
};

static void tile_task(void *arg, long task, int worker)
{
	struct tile_ctx *c = arg;
	c->fn(c->job, task, worker);
}

void rc_bp_voxel(rc_bpv *b, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol,
		 int first, int last, int splat_gain)
{
	rc_bp_voxel_acc(b, pool, isa, proj, vol, first, last, splat_gain, 0);
}

void rc_bp_voxel_acc(rc_bpv *b, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol, int first,
		     int last, int splat_gain, int accumulate)
{
	const rc_volume_desc *v = rc_geom_volume(b->g);
	static void (*const fns[RC_ISA_COUNT])(const struct rc_bpv_job *, long, int) = {
		rc_bpv_tile_baseline, rc_bpv_tile_avx2, rc_bpv_tile_avx512
	};
	if (last <= first) {
		if (!accumulate)
			memset(vol, 0, rc_volume_count(v) * sizeof(float));
		return;
	}
	if (!rc_cpu_isa_supported(isa))
		isa = RC_ISA_BASELINE;
	struct rc_bpv_job job = { 0 }, *J = &job;
	J->nx = v->nx;
	J->ny = v->ny;
	J->nz = v->nz;
	J->nu = rc_geom_detector(b->g)->nu;
	J->nv = rc_geom_detector(b->g)->nv;
	J->Hs = b->Hs;
	J->img_stride = b->img_stride;
	J->img = b->img;
	J->vol = vol;
	rc_volume_voxel_pos(v, 0, 0, 0, J->x0);
	J->s[0] = v->vx;
	J->s[1] = v->vy;
	J->s[2] = v->vz;
	J->nxb = (v->nx + RC_BPV_BX - 1) / RC_BPV_BX;
	J->by = b->by;
	J->nyb = (v->ny + b->by - 1) / b->by;
	J->bz = b->bz;
	J->nzb = (v->nz + b->bz - 1) / b->bz;
	J->scratch = b->scratch;
	J->scratch_floats = b->scratch_floats;
	J->hat = splat_gain;
	long ntiles = (long)J->nxb * J->nyb * J->nzb;
	/* One layout of the sums for the whole call: columns if every view is
	 * cone-like, else rows (the general path) */
	J->cone = 1;
	for (int k = first; k < last; k++)
		if (!view_cone_like(rc_geom_view(b->g, k)->P, v))
			J->cone = 0;
	/* a cylindrical detector: columns always, set up by proj_cyl.c */
	const int cyl = rc_geom_type_is_cone(rc_geom_type_of(b->g)) && rc_geom_detector(b->g)->shape == RC_DETECTOR_CURVED;
	if (cyl)
		J->cone = 1;
	J->sorted = J->cone && tiles_sorted(b->g, b->by, b->bz, first, last);
	/* Several blocks: the sums stay in tiles across blocks and reach the
	 * volume once; writing them out per block was a fifth of the time
	 * (one scattered read-modify-write of the volume per 32 views).
	 * Without the memory for it, the sums are written out per block. */
	if (last - first > RC_BPV_BLOCK && !b->tiles && !b->tiles_failed) {
		size_t bytes = (size_t)ntiles * RC_BPV_TILE_FLOATS(b->by, b->bz) * sizeof(float);
		if (rc_proj_keep_reserve(bytes, "RECOND_BPV_TILES_MAX_MB")) {
			b->tiles = aligned_alloc(64, bytes);
			if (b->tiles)
				b->tiles_bytes = bytes;
			else
				rc_proj_keep_release(bytes);
		}
		b->tiles_failed = !b->tiles;
	}
	J->tiles = last - first > RC_BPV_BLOCK ? b->tiles : NULL;
	struct tile_ctx tc = { .job = J, .fn = fns[isa] };
	for (int k0 = first; k0 < last; k0 += RC_BPV_BLOCK) {
		int K = last - k0 < RC_BPV_BLOCK ? last - k0 : RC_BPV_BLOCK;
		struct pad_ctx pc = { .b = b, .proj = proj, .first = k0, .splat_gain = splat_gain };
		rc_pool_run(pool, K, pad_task, &pc);
		J->K = K;
		for (int k = 0; k < K; k++)
			memcpy(J->P[k], rc_geom_view(b->g, k0 + k)->P, sizeof J->P[k]);
		if (cyl)
			rc_bpv_cyl_setup(b->g, k0, K, J);
		J->first_block = k0 == first;
		J->last_block = k0 + K >= last;
		J->overwrite = !accumulate && (J->tiles || k0 == first);
		rc_pool_run(pool, ntiles, tile_task, &tc);
	}
}
