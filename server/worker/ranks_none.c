/*
 * ranks_none: one process, rank 0 of 1 (worker_ranks.h); recond-worker-mpi
 * links mpi/ranks_mpi.c instead.
 */
#include "worker_ranks.h"

int ranks_init(int *argc, char ***argv, rc_err *err)
{
	(void)argc;
	(void)argv;
	(void)err;
	return 0;
}

int ranks_rank(void) { return 0; }
int ranks_size(void) { return 1; }

void ranks_slab(int nz, int *z0, int *z1)
{
	*z0 = 0;
	*z1 = nz;
}

int ranks_wrap(void *ud, rc_backend *inner, rc_backend **ret, rc_err *err)
{
	(void)ud;
	(void)err;
	*ret = inner;
	return 0;
}

int ranks_write_slabs(const char *dir, const char *name, const void *buf, uint64_t off, uint64_t len,
		      uint64_t total, rc_err *err)
{
	(void)dir;
	(void)name;
	(void)buf;
	(void)off;
	(void)len;
	(void)total;
	return rc_fail(err, RC_EINTERNAL, "", "one process writes its volume whole");
}

json_t *ranks_report(double seconds, uint64_t hash, int *identical)
{
	(void)seconds;
	(void)hash;
	*identical = 1;
	return NULL;
}

void ranks_abort(int code) { (void)code; }
void ranks_finalize(void) {}
