/*
 * ranks_mpi: the worker's ranks over MPI_COMM_WORLD (worker_ranks.h).
 *
 * MPI is joined only under mpirun (OMPI_COMM_WORLD_SIZE or PMIX_RANK in the
 * environment): run by hand, or for --devices and --names, this binary is
 * the plain single-process worker and starts no MPI runtime.
 */
#include "worker_ranks.h"
#include "worker_proto.h"
#include "util/rc_io.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "mpi_backend.h"

static int joined, rank, size = 1;

int ranks_init(int *argc, char ***argv, rc_err *err)
{
	if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK"))
		return 0;
	if (MPI_Init(argc, argv) != MPI_SUCCESS)
		return rc_fail(err, RC_EIO, "execution.ranks", "MPI_Init failed");
	joined = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	return 0;
}

int ranks_rank(void) { return rank; }
int ranks_size(void) { return size; }

void ranks_slab(int nz, int *z0, int *z1)
{
	*z0 = (int)((long long)nz * rank / size);
	*z1 = (int)((long long)nz * (rank + 1) / size);
}

int ranks_wrap(void *ud, rc_backend *inner, rc_backend **ret, rc_err *err)
{
	(void)ud;
	if (size < 2) {
		*ret = inner;
		return 0;
	}
	return rc_backend_mpi_new(inner, MPI_COMM_WORLD, ret, err);
}

/* Every rank's rc: the first error in rank order (its message broadcast),
 * or 0. */
static int agree(int rc, rc_err *err)
{
	int *all = calloc((size_t)size, sizeof(int));
	if (!all) { /* the other ranks wait in the collective: end them all */
		ranks_abort(WORKER_EXIT_FAILED);
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	}
	MPI_Allgather(&rc, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
	int first = -1;
	for (int r = 0; r < size && first < 0; r++)
		if (all[r])
			first = r;
	free(all);
	if (first < 0)
		return 0;
	char msg[sizeof err->msg];
	snprintf(msg, sizeof msg, "%s", rc ? err->msg : "");
	MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
	if (first != rank || !rc)
		return rc_fail(err, RC_EIO, "", "rank %d: %s", first, msg);
	return rc;
}

static int write_at(int fd, const char *p, uint64_t off, uint64_t len)
{
	return rc_io_write_full(fd, p, (size_t)len, (off_t)off);
}

int ranks_write_slabs(const char *dir, const char *name, const void *buf, uint64_t off, uint64_t len,
		      uint64_t total, rc_err *err)
{
	char tmp[4200], path[4200];
	long id = 0;
	if (rank == 0)
		id = (long)getpid();
	/* named by rank 0's pid, as durable_write_file names its temporary */
	MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	snprintf(tmp, sizeof tmp, "%s/.%s.%ld.tmp", dir, name, id);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int rc = 0;
	if (rank == 0) {
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
		if (fd < 0 || ftruncate(fd, (off_t)total))
			rc = rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	if ((rc = agree(rc, err)))
		return rc;
	int fd = open(tmp, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write_at(fd, buf, off, len) || fsync(fd))
		rc = rc_fail(err, durable_errno_code(errno), "", "cannot write slab [%llu, %llu) of %s: %s",
			     (unsigned long long)off, (unsigned long long)(off + len), tmp, strerror(errno));
	if (fd >= 0)
		close(fd);
	if ((rc = agree(rc, err))) {
		if (rank == 0)
			unlink(tmp);
		return rc;
	}
	if (rank == 0) {
		if (rename(tmp, path))
			rc = rc_fail(err, durable_errno_code(errno), "", "cannot rename %s into place: %s", path,
				     strerror(errno));
		else if (durable_fsync_dir(dir))
			rc = rc_fail(err, durable_errno_code(errno), "", "cannot fsync the directory of %s: %s", path,
				     strerror(errno));
		if (rc)
			unlink(tmp);
	}
	return agree(rc, err);
}

struct rank_row {
	double seconds;
	double rss_mb; /* the rank's own peak resident memory (ru_maxrss) */
	unsigned long long hash;
	long pid;
	char host[MPI_MAX_PROCESSOR_NAME];
};

json_t *ranks_report(double seconds, uint64_t hash, int *identical)
{
	*identical = 1;
	if (!joined)
		return NULL;
	struct rank_row me = { .seconds = seconds, .hash = hash, .pid = (long)getpid() };
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		me.rss_mb = ru.ru_maxrss / 1024.0; /* Linux: KiB */
	int len = 0;
	if (MPI_Get_processor_name(me.host, &len) != MPI_SUCCESS)
		snprintf(me.host, sizeof me.host, "?");
	struct rank_row *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
	if (rank == 0 && !all) /* MPI_Gather's root needs its buffer */
		ranks_abort(WORKER_EXIT_FAILED);
	/* the rows as bytes: every rank runs this same binary */
	MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (rank != 0 || !all)
		return NULL;
	json_t *a = json_array();
	for (int r = 0; r < size; r++) {
		json_array_append_new(a, json_pack("{sisssIsfsf}", "rank", r, "host", all[r].host, "pid",
						   (json_int_t)all[r].pid, "seconds", all[r].seconds, "peak_rss_mb",
						   all[r].rss_mb));
		if (all[r].hash != all[0].hash)
			*identical = 0;
	}
	free(all);
	return a;
}

void ranks_abort(int code)
{
	if (joined && size > 1)
		MPI_Abort(MPI_COMM_WORLD, code);
}

void ranks_finalize(void)
{
	if (joined)
		MPI_Finalize();
}
