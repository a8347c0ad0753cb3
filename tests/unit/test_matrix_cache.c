/*
 * test_matrix_cache: the bound on the matrix cache directory
 * (projectors/matrix_cache.h) over a temp directory of files with given
 * sizes and times: least recently used deleted first, the bound kept, a
 * hit moving a file to the back, a file under a reader's lock kept, old
 * temporary files removed and fresh ones and other names left, a file
 * larger than the bound refused; and the DD cache (dd_matrix.h) under a
 * bound: a matrix larger than it returned but not written, one that fits
 * written with an older one deleted; a job that maps a cached CPU layout
 * (bsr_cpu_cache.h) keeps its file through a prune to 0 while it runs; a
 * job makes a cache directory not there yet; a layout larger than the
 * bound leaves the DD matrix cached where that fits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "projectors/dd_matrix.h"
#include "projectors/matrix_cache.h"
#include "plan/recon.h"
#include "tensor_phantom.h"

struct tmp {
	char dir[64];
};

static int setup(void **state)
{
	struct tmp *t = calloc(1, sizeof *t);
	snprintf(t->dir, sizeof t->dir, "/tmp/test_mcache_XXXXXX");
	if (!t || !mkdtemp(t->dir))
		return -1;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tmp *t = *state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
	int rc = system(cmd);
	free(t);
	return rc ? -1 : 0;
}

/* dir/name of `bytes` bytes, last used (atime) and written (mtime) `age`
 * seconds ago. */
static void put(const struct tmp *t, const char *name, long bytes, long age)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", t->dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, bytes), 0);
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age;
	ts[1] = ts[0];
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
}

static int exists(const struct tmp *t, const char *name)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", t->dir, name);
	return access(p, F_OK) == 0;
}

static void four(const struct tmp *t)
{
	put(t, "dd-a.bin", 1000, 400);
	put(t, "nz-b.bin", 2000, 300);
	put(t, "dd-c.bin", 1000, 200);
	put(t, "nz-d.bin", 3000, 100);
}

static void test_lru_order(void **state)
{
	struct tmp *t = *state;
	four(t);
	int64_t left = -1;
	/* no bound: all stay, the total counted */
	assert_int_equal(rc_mcache_prune(t->dir, -1, 0, &left), 0);
	assert_int_equal(left, 7000);
	assert_int_equal(rc_mcache_prune(t->dir, 7000, 0, &left), 0);
	assert_int_equal(left, 7000);
	/* 4500: a (oldest) then b go, c and d (4000) stay */
	assert_int_equal(rc_mcache_prune(t->dir, 4500, 0, &left), 0);
	assert_int_equal(left, 4000);
	assert_false(exists(t, "dd-a.bin"));
	assert_false(exists(t, "nz-b.bin"));
	assert_true(exists(t, "dd-c.bin"));
	assert_true(exists(t, "nz-d.bin"));
	/* a reserve makes room for a file to come: c goes */
	assert_int_equal(rc_mcache_prune(t->dir, 4500, 1000, &left), 0);
	assert_int_equal(left, 3000);
	assert_false(exists(t, "dd-c.bin"));
	/* 0 keeps nothing */
	assert_int_equal(rc_mcache_prune(t->dir, 0, 0, &left), 0);
	assert_int_equal(left, 0);
	assert_false(exists(t, "nz-d.bin"));
	/* a directory not made yet is an empty cache */
	char none[128];
	snprintf(none, sizeof none, "%s/none", t->dir);
	assert_int_equal(rc_mcache_prune(none, 0, 0, &left), 0);
	assert_int_equal(left, 0);
}

static void test_hit_moves_back(void **state)
{
	struct tmp *t = *state;
	four(t);
	char p[256];
	snprintf(p, sizeof p, "%s/dd-a.bin", t->dir);
	int fd = rc_mcache_open(p);
	assert_true(fd >= 0);
	close(fd);
	/* a was used last now: b and c go first (6000 - 2000 - 1000 = 4000) */
	int64_t left;
	assert_int_equal(rc_mcache_prune(t->dir, 4000, 0, &left), 0);
	assert_int_equal(left, 4000);
	assert_true(exists(t, "dd-a.bin"));
	assert_false(exists(t, "nz-b.bin"));
	assert_false(exists(t, "dd-c.bin"));
	assert_true(exists(t, "nz-d.bin"));
	char none[256];
	snprintf(none, sizeof none, "%s/dd-none.bin", t->dir);
	assert_int_equal(rc_mcache_open(none), -1);
}

static void test_locked_kept(void **state)
{
	struct tmp *t = *state;
	four(t);
	char p[256];
	snprintf(p, sizeof p, "%s/dd-a.bin", t->dir);
	/* a reader holds the oldest file (it keeps its old atime, so it would
	 * go first: a reader's touch is tested above) */
	int fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_SH), 0);
	int64_t left;
	assert_int_equal(rc_mcache_prune(t->dir, 0, 0, &left), 0);
	assert_int_equal(left, 1000);
	assert_true(exists(t, "dd-a.bin"));
	assert_false(exists(t, "nz-b.bin"));
	assert_false(exists(t, "nz-d.bin"));
	close(fd);
	assert_int_equal(rc_mcache_prune(t->dir, 0, 0, &left), 0);
	assert_int_equal(left, 0);
	assert_false(exists(t, "dd-a.bin"));
}

static void test_tmp_files(void **state)
{
	struct tmp *t = *state;
	put(t, "dd-a.bin.tmp.123", 5000, RC_MCACHE_TMP_AGE_S + 60); /* a crashed writer's */
	put(t, "nz-b.bin.tmp.456", 5000, 10);                        /* a live writer's */
	put(t, "notes.txt", 5000, 10 * RC_MCACHE_TMP_AGE_S);          /* not the cache's */
	put(t, "nz-c.bin", 1000, 10);
	int64_t left;
	assert_int_equal(rc_mcache_prune(t->dir, 1000, 0, &left), 0);
	assert_int_equal(left, 1000); /* temporary files are not counted as cache files */
	assert_false(exists(t, "dd-a.bin.tmp.123"));
	assert_true(exists(t, "nz-b.bin.tmp.456"));
	assert_true(exists(t, "notes.txt"));
	assert_true(exists(t, "nz-c.bin"));
	/* and at bound 0 the other names still stay */
	assert_int_equal(rc_mcache_prune(t->dir, 0, 0, &left), 0);
	assert_true(exists(t, "nz-b.bin.tmp.456"));
	assert_true(exists(t, "notes.txt"));
	assert_false(exists(t, "nz-c.bin"));
}

static void test_admit(void **state)
{
	struct tmp *t = *state;
	four(t);
	/* larger than the bound: refused, nothing deleted */
	assert_int_equal(rc_mcache_admit(t->dir, 2500, 3000, "dd-big.bin"), RC_ETOOBIG);
	int64_t left;
	assert_int_equal(rc_mcache_prune(t->dir, -1, 0, &left), 0);
	assert_int_equal(left, 7000);
	/* fits: room made for it (7000 + 2500 -> others at most 2500: d goes too) */
	assert_int_equal(rc_mcache_admit(t->dir, 5000, 2500, "dd-new.bin"), 0);
	assert_int_equal(rc_mcache_prune(t->dir, -1, 0, &left), 0);
	assert_true(left <= 2500);
	assert_int_equal(left, 0);
	/* no bound: anything fits */
	assert_int_equal(rc_mcache_admit(t->dir, -1, 1ll << 50, "dd-huge.bin"), 0);
}

/* The DD cache under a bound: a matrix larger than it is returned, not
 * written; one that fits is written, an older file making room. */
static void test_dd_bounded(void **state)
{
	struct tmp *t = *state;
	rc_geom *g, *g2;
	assert_int_equal(tp_geom(RC_GEOM_FAN, 32, 1.0, 20, 48, 1, 0, &g), 0);
	assert_int_equal(tp_geom(RC_GEOM_FAN, 32, 1.0, 20, 48, 1, 0.5, &g2), 0);
	rc_csr *a = NULL, *b = NULL;
	rc_err err;
	int hit = -1;
	int64_t one, left;
	/* one file's size, written without a bound */
	assert_int_equal(rc_dd_cached_bounded(g, t->dir, -1, 0, &a, &hit, &err), 0);
	assert_int_equal(rc_mcache_prune(t->dir, -1, 0, &one), 0);
	assert_true(one > ((int64_t)a->rows + 1) * 8 + a->nnz * 8);
	assert_int_equal(rc_mcache_prune(t->dir, 0, 0, &left), 0);
	assert_int_equal(left, 0);
	rc_csr_free(a);
	/* larger than the bound: returned, not written */
	assert_int_equal(rc_dd_cached_bounded(g, t->dir, one - 1, 0, &a, &hit, &err), 0);
	assert_int_equal(hit, 0);
	assert_true(a->nnz > 0);
	assert_int_equal(rc_mcache_prune(t->dir, -1, 0, &left), 0);
	assert_int_equal(left, 0);
	rc_csr_free(a);
	/* room for one file: the second geometry's replaces the first's */
	int64_t bound = one * 3 / 2;
	assert_int_equal(rc_dd_cached_bounded(g, t->dir, bound, 0, &a, &hit, &err), 0);
	assert_int_equal(hit, 0);
	assert_int_equal(rc_dd_cached_bounded(g, t->dir, bound, 0, &b, &hit, &err), 0);
	assert_int_equal(hit, 1);
	rc_csr_free(b);
	assert_int_equal(rc_dd_cached_bounded(g2, t->dir, bound, 0, &b, &hit, &err), 0);
	assert_int_equal(hit, 0);
	rc_csr_free(b);
	assert_int_equal(rc_mcache_prune(t->dir, -1, 0, &left), 0);
	assert_true(left > 0 && left <= bound);
	/* the first geometry's file went: a miss, rebuilt the same */
	assert_int_equal(rc_dd_cached_bounded(g, t->dir, bound, 0, &b, &hit, &err), 0);
	assert_int_equal(hit, 0);
	assert_int_equal(b->nnz, a->nnz);
	assert_memory_equal(b->val, a->val, sizeof *a->val * (size_t)a->nnz);
	rc_csr_free(b);
	rc_csr_free(a);
	rc_geom_free(g);
	rc_geom_free(g2);
}

/* Counts dir's files whose names start with prefix. */
static int count(const char *dir, const char *prefix)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "exit $(ls '%s' | grep -c '^%s.*\\.bin$')", dir, prefix);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct during {
	const char *dir;
	int pruned, nz_left, dd_left;
};

/* At the run's first iteration the layout is mapped: a prune to 0 then. */
static void prune_during(void *ud, const rc_progress *p)
{
	struct during *d = ud;
	if (p->iteration != 1 || d->pruned)
		return;
	d->pruned = 1;
	(void)rc_mcache_prune(d->dir, 0, 0, NULL);
	d->nz_left = count(d->dir, "nz-");
	d->dd_left = count(d->dir, "dd-");
}

/* A small CGLS job on the tensor engine's CPU layout, cached in dir. */
struct job {
	double ang[40];
	rc_recon_spec s;
	float *proj, *vol;
};

static void job_init(struct job *j, const char *dir)
{
	rc_recon_spec *s = &j->s;
	rc_recon_spec_default(s);
	for (int k = 0; k < 40; k++)
		j->ang[k] = 9.0 * k + 0.3;
	s->geom.type = RC_GEOM_PARALLEL;
	s->geom.nviews = 40;
	s->geom.angles_deg = j->ang;
	s->geom.det.nu = 48;
	s->geom.det.nv = 1;
	s->geom.det.du = 1.0;
	s->vol = (rc_volume_desc){ 32, 32, 3, 1, 1, 1, 0, 0, 0 };
	rc_algo_params_plain(&s->algo, RC_ALGO_CGLS);
	s->algo.iterations = 3;
	s->engine = RC_ENGINE_TENSOR;
	snprintf(s->precision, sizeof s->precision, "mixed");
	s->cache_dir = dir;
	size_t nproj = (size_t)40 * 48 * 3, nvox = (size_t)32 * 32 * 3;
	j->proj = calloc(nproj, sizeof *j->proj);
	j->vol = calloc(nvox, sizeof *j->vol);
	assert_non_null(j->proj);
	assert_non_null(j->vol);
	for (size_t i = 0; i < nproj; i++)
		j->proj[i] = (float)((i * 7919) % 101) / 100.0f;
}

static void job_free(struct job *j)
{
	free(j->proj);
	free(j->vol);
}

/* The job's report's matrix.cache. */
static void job_run(struct job *j, const rc_algo_hooks *hooks, const char *cache)
{
	rc_recon_report rep;
	rc_err err;
	assert_int_equal(rc_recon_run(&j->s, j->proj, j->vol, hooks, &rep, &err), 0);
	assert_string_equal(rep.matrix.cache, cache);
}

/* The size of dir's only file whose name starts with prefix (-1: none). */
static long file_size(const char *dir, const char *prefix, struct stat *ret)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "ls '%s' | grep '^%s.*\\.bin$'", dir, prefix);
	FILE *f = popen(cmd, "r");
	char name[256] = "", p[600];
	if (!f)
		return -1;
	if (!fgets(name, sizeof name, f))
		name[0] = 0;
	pclose(f);
	name[strcspn(name, "\n")] = 0;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	struct stat st;
	if (!name[0] || stat(p, &st))
		return -1;
	if (ret)
		*ret = st;
	return (long)st.st_size;
}

static void test_mapped_layout_kept(void **state)
{
	struct tmp *t = *state;
	struct job j;
	job_init(&j, t->dir);
	job_run(&j, NULL, "miss");
	assert_int_equal(count(t->dir, "nz-"), 1);
	assert_int_equal(count(t->dir, "dd-"), 0); /* the layout is cached, not the DD matrix */
	/* a DD file the job does not read (on a hit nothing but the layout is) */
	put(t, "dd-x.bin", 1000, 0);
	struct during d = { .dir = t->dir };
	rc_algo_hooks hooks = { .progress = prune_during, .ud = &d };
	job_run(&j, &hooks, "hit");
	assert_int_equal(d.pruned, 1);
	assert_int_equal(d.nz_left, 1); /* mapped: locked, kept */
	assert_int_equal(d.dd_left, 0); /* not read on a hit: deleted */
	/* the job is over: nothing holds it now */
	assert_int_equal(rc_mcache_prune(t->dir, 0, 0, NULL), 0);
	assert_int_equal(count(t->dir, "nz-"), 0);
	job_free(&j);
}

/* The cache directory not there yet: the first job makes it and writes the
 * layout, the second maps it. */
static void test_layout_dir_made(void **state)
{
	struct tmp *t = *state;
	char sub[128];
	snprintf(sub, sizeof sub, "%s/new", t->dir);
	struct job j;
	job_init(&j, sub);
	job_run(&j, NULL, "miss");
	assert_int_equal(count(sub, "nz-"), 1);
	job_run(&j, NULL, "hit");
	job_free(&j);
}

/* A bound between the DD matrix's file and the layout's: the layout is not
 * written, the DD matrix is, and the next job reads it (its atime moves;
 * the layout is still built, so the report says miss). */
static void test_layout_too_big_dd_kept(void **state)
{
	struct tmp *t = *state;
	char a[128], b[128];
	snprintf(a, sizeof a, "%s/a", t->dir);
	snprintf(b, sizeof b, "%s/b", t->dir);
	struct job j;
	/* the two files' sizes: the layout unbounded, the DD matrix as the
	 * fp32 path writes it */
	job_init(&j, a);
	job_run(&j, NULL, "miss");
	snprintf(j.s.precision, sizeof j.s.precision, "fp32");
	job_run(&j, NULL, "miss");
	long lay = file_size(a, "nz-", NULL), dd = file_size(a, "dd-", NULL);
	assert_true(dd > 0 && lay > dd);
	snprintf(j.s.precision, sizeof j.s.precision, "mixed");
	j.s.cache_dir = b;
	j.s.cache_bytes = (dd + lay) / 2;
	job_run(&j, NULL, "miss");
	assert_int_equal(count(b, "nz-"), 0);
	assert_int_equal(file_size(b, "dd-", NULL), dd);
	/* used 1000 s ago: the next job's read marks it used now */
	char cmd[300];
	snprintf(cmd, sizeof cmd, "touch -a -d '-1000 seconds' '%s'/dd-*.bin", b);
	assert_int_equal(system(cmd), 0);
	struct stat st;
	assert_true(file_size(b, "dd-", &st) == dd && st.st_atime < time(NULL) - 900);
	job_run(&j, NULL, "miss");
	assert_true(file_size(b, "dd-", &st) == dd && st.st_atime >= time(NULL) - 60);
	assert_int_equal(count(b, "nz-"), 0);
	/* a bound below the DD file too: nothing written */
	snprintf(cmd, sizeof cmd, "rm -f '%s'/dd-*.bin", b);
	assert_int_equal(system(cmd), 0);
	j.s.cache_bytes = dd - 1;
	job_run(&j, NULL, "miss");
	assert_int_equal(count(b, "dd-"), 0);
	assert_int_equal(count(b, "nz-"), 0);
	job_free(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lru_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hit_moves_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_locked_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tmp_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dd_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mapped_layout_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layout_dir_made, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layout_too_big_dd_kept, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
