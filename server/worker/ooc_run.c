/* ooc_run: the worker's out-of-core FDK (ooc_run.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "durable.h"
#include "ooc_run.h"
#include "plan/ooc_iter.h"
#include "util/rc_clock.h"
#include "util/rc_io.h"

static int write_all(int fd, const void *buf, size_t len, off_t off, const char *path, rc_err *err)
{
	if (rc_io_write_full(fd, buf, len, off))
		return rc_fail(err, durable_errno_code(errno), "", "cannot write %s: %s", path, strerror(errno));
	return 0;
}

/* A scratch file in dir, unlinked once open (gone with the process): its
 * fd, or the failure's code (< 0; RC_ENOSPACE for a full disk). */
static int scratch(const char *dir, const char *name, rc_err *err)
{
	char path[4400], f32[256];
	snprintf(f32, sizeof f32, "%s.f32", name);
	durable_tmp_path(path, sizeof path, dir, f32);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", path, strerror(errno));
	unlink(path);
	return fd;
}

/* The written volume's temporary, fd, made the job's volume.f32: synced,
 * closed (whatever happens) and renamed, the directory synced; tmp
 * deleted where that fails. */
static int publish(int fd, const char *tmp, const char *dir, rc_err *err)
{
	char dst[4300];
	snprintf(dst, sizeof dst, "%s/volume.f32", dir);
	if (fsync(fd)) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return rc_fail(err, durable_errno_code(e), "", "cannot fsync %s: %s", tmp, strerror(e));
	}
	close(fd);
	if (rename(tmp, dst) || durable_fsync_dir(dir)) {
		int e = errno; /* unlink's ENOENT must not replace it */
		unlink(tmp);
		return rc_fail(err, durable_errno_code(e), "", "cannot rename %s to %s: %s", tmp, dst, strerror(e));
	}
	return 0;
}

/* Whether dir's disk has need bytes free (what a run writes beside the
 * spool's stack; the store's check at creation counted the stack and the
 * volume only): what names the parts in the message. */
static int room(const char *dir, unsigned long long need, const char *what, rc_err *err)
{
	struct statvfs vfs;
	if (statvfs(dir, &vfs))
		return 0; /* unknown: the writes will tell */
	unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
	if (need <= avail)
		return 0;
	return rc_fail(err, RC_ENOSPACE, "", "out of core, the run writes %llu bytes beside the stack (%s), and the job's disk has %llu bytes free",
		       need, what, avail);
}

/* FDK's: the volume's temporary and, where the plan filters once, the
 * filtered stack. */
static int fdk_room(const char *dir, const rc_recon_spec *s, const rc_ooc_plan *p, rc_err *err)
{
	unsigned long long vol = 4ull * (unsigned long long)s->vol.nx * (unsigned long long)s->vol.ny *
				 (unsigned long long)s->vol.nz;
	unsigned long long filt = p->filter_chunk > 0 ? 4ull * (unsigned long long)s->geom.nviews *
								(unsigned long long)s->geom.det.nu *
								(unsigned long long)s->geom.det.nv
						      : 0;
	char what[160];
	snprintf(what, sizeof what, "the volume %llu and the filtered stack %llu", vol, filt);
	return room(dir, vol + filt, what, err);
}

/* CGLS, SIRT, SART or MLEM (core/plan/ooc_iter.h): x in the volume's temporary, the
 * other vectors in two scratch files; progress per iteration through hooks. */
static int run_iter(const job_spec *spec, const char *src, const char *dir, const char *tmp, const rc_ooc_plan *p,
		    const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err)
{
	const rc_recon_spec *s = &spec->r;
	rc_geom *g = NULL;
	int in = -1, out = -1, vs = -1, ps = -1, rc;
	if ((rc = rc_geom_new(&s->geom, &s->vol, &s->limits, &g, err)))
		return rc;
	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = rc_fail(err, RC_EIO, "projections", "cannot open %s: %s", src, strerror(errno));
		goto out;
	}
	if ((out = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) < 0) {
		rc = rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if ((rc = room(dir, rc_ooc_iter_disk_bytes(s), "the volume's temporary and the iterations' scratch files", err)))
		goto out;
	/* scratch's code (RC_ENOSPACE for a full disk) is the job's */
	if ((vs = scratch(dir, "iter-volumes", err)) < 0 || (ps = scratch(dir, "iter-projections", err)) < 0) {
		rc = vs < 0 ? vs : ps;
		goto out;
	}
	if ((rc = rc_ooc_iter(s, g, in, out, vs, ps, p, hooks, rep, err)))
		goto out;
	rc = publish(out, tmp, dir, err);
	out = -1;
out:
	if (out >= 0) {
		close(out);
		unlink(tmp);
	}
	if (in >= 0)
		close(in);
	if (vs >= 0)
		close(vs);
	if (ps >= 0)
		close(ps);
	rc_geom_free(g);
	return rc;
}

int ooc_run_iter(const job_spec *spec, const char *dir, const rc_ooc_plan *p, const rc_algo_hooks *hooks,
		 rc_recon_report *rep, rc_err *err)
{
	char src[4200], tmp[4400];
	snprintf(src, sizeof src, "%s/projections.f32", dir);
	durable_tmp_path(tmp, sizeof tmp, dir, "volume.f32");
	return run_iter(spec, src, dir, tmp, p, hooks, rep, err);
}

int ooc_run(const job_spec *spec, const char *dir, const rc_ooc_plan *p, const atomic_int *cancel,
	    void (*slab_done)(void *ud, int done, int of), void *ud, rc_recon_report *rep, rc_err *err)
{
	double t0 = rc_now_s();
	const rc_recon_spec *s = &spec->r;
	char src[4200], tmp[4400];
	snprintf(src, sizeof src, "%s/projections.f32", dir);
	durable_tmp_path(tmp, sizeof tmp, dir, "volume.f32");
	rc_geom *g = NULL;
	float *slab = NULL;
	int in = -1, out = -1, filt = -1, rc;
	if ((rc = rc_geom_new(&s->geom, &s->vol, &s->limits, &g, err)))
		return rc;
	size_t plane = (size_t)s->vol.nx * (size_t)s->vol.ny;
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = rc_fail(err, RC_EIO, "projections", "cannot open %s: %s", src, strerror(errno));
		goto out;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (out < 0) {
		rc = rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if ((rc = fdk_room(dir, s, p, err)))
		goto out;
	/* the stack filtered once into the scratch file, then the slabs read it */
	if (p->filter_chunk > 0) {
		if ((filt = scratch(dir, "filtered", err)) < 0) {
			rc = filt; /* RC_ENOSPACE for a full disk, as the other writes */
			goto out;
		}
		if ((rc = rc_ooc_filter(s, g, in, filt, p->filter_chunk, cancel, err)))
			goto out;
	}
	if (!(slab = malloc(sizeof(float) * plane * (size_t)p->slab_nz))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a slab of %d slices", p->slab_nz);
		goto out;
	}
	rc_algo_hooks h = { .cancel = cancel };
	int nz = s->vol.nz, done = 0;
	for (int z0 = 0; z0 < nz; z0 += p->slab_nz) {
		int z1 = z0 + p->slab_nz < nz ? z0 + p->slab_nz : nz;
		if (cancel && atomic_load(cancel)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled");
			goto out;
		}
		memset(rep, 0, sizeof *rep);
		if ((rc = rc_ooc_fdk_slab(s, g, filt >= 0 ? filt : in, filt >= 0, z0, z1, slab, &h, rep, err)) ||
		    (rc = write_all(out, slab, sizeof(float) * plane * (size_t)(z1 - z0),
				    (off_t)(sizeof(float) * plane * (size_t)z0), tmp, err)))
			goto out;
		if (slab_done)
			slab_done(ud, ++done, p->slabs);
	}
	rc = publish(out, tmp, dir, err);
	out = -1;
	if (rc)
		goto out;
	rep->iterations_done = 1;
	rep->seconds = rc_now_s() - t0;
out:
	if (out >= 0) {
		close(out);
		unlink(tmp);
	}
	if (in >= 0)
		close(in);
	if (filt >= 0)
		close(filt);
	free(slab);
	rc_geom_free(g);
	return rc;
}
