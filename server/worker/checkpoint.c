/* checkpoint: the checkpoint file of an iterative job (checkpoint.h). */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "spec_input.h"

static const char magic[8] = { 'R', 'C', 'C', 'K', 'P', 'T', '1', '\n' };

struct header {
	char magic[8];
	uint64_t identity;
	int32_t name, iteration, nvec, nscal;
	int32_t space[RC_STATE_MAX_VECS], pad;
	uint64_t count[RC_STATE_MAX_VECS];
};

/* FNV-1a, 64 bits */
static uint64_t fnv(uint64_t h, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

int ckpt_identity(const char *dir, uint64_t *id, rc_err *err)
{
	static const char *const inputs[] = { "projections.f32", INPUT_FLAT_FILE, INPUT_DARK_FILE, INPUT_BAD_FILE };
	char path[4200], buf[65536];
	uint64_t h = 0xcbf29ce484222325ull;
	snprintf(path, sizeof path, "%s/spec.json", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rc_fail(err, RC_EIO, "", "cannot open %s: %s", path, strerror(errno));
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			h = fnv(h, buf, (size_t)n);
	close(fd);
	if (n < 0)
		return rc_fail(err, RC_EIO, "", "cannot read %s: %s", path, strerror(errno));
	/* the inputs by size, inode and modification time: a stack stored
	 * again (renamed into place, or written) differs */
	for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, inputs[i]);
		if (stat(path, &st))
			continue;
		int64_t f[4] = { (int64_t)st.st_size, (int64_t)st.st_ino, (int64_t)st.st_mtim.tv_sec,
				 (int64_t)st.st_mtim.tv_nsec };
		h = fnv(h, inputs[i], strlen(inputs[i]));
		h = fnv(h, f, sizeof f);
	}
	*id = h;
	return 0;
}

int ckpt_write(const char *dir, uint64_t id, rc_backend *b, const rc_algo_state *s, size_t nvol, size_t nproj,
	       float *scratch, rc_err *err)
{
	struct header h;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, magic, sizeof magic);
	h.identity = id;
	h.name = (int32_t)s->name;
	h.iteration = s->iteration;
	h.nvec = s->nvec;
	h.nscal = s->nscal;
	/* the iterate is downloaded last into scratch: vectors before it go
	 * through their own copies (one scratch buffer per vector would double
	 * a large job's memory), so each is written in its own file part */
	float *copies[RC_STATE_MAX_VECS] = { 0 };
	durable_part parts[2 + RC_STATE_MAX_VECS];
	int rc = 0;
	parts[0] = (durable_part){ &h, sizeof h };
	for (int i = 0; i < s->nvec; i++) {
		h.space[i] = (int32_t)s->space[i];
		h.count[i] = s->space[i] == RC_SPACE_VOLUME ? nvol : nproj;
		float *dst = scratch;
		if (i < s->nvec - 1 && !(dst = copies[i] = malloc(h.count[i] * sizeof(float)))) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a checkpoint's vector");
			goto out;
		}
		if ((rc = rc_bk_download(b, s->vec[i], dst, err)))
			goto out;
		parts[1 + i] = (durable_part){ dst, h.count[i] * sizeof(float) };
	}
	parts[1 + s->nvec] = (durable_part){ s->scal, (size_t)s->nscal * sizeof(double) };
	rc = durable_write_parts(dir, CKPT_FILE, parts, 2 + s->nvec, err);
out:
	for (int i = 0; i < RC_STATE_MAX_VECS; i++)
		free(copies[i]);
	return rc;
}

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int ckpt_read(const char *dir, uint64_t id, size_t nvol, size_t nproj, rc_algo_state *s, rc_err *err)
{
	char path[4200];
	struct header h;
	int rc = 0;
	memset(s, 0, sizeof *s);
	snprintf(path, sizeof path, "%s/%s", dir, CKPT_FILE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : rc_fail(err, RC_EIO, "", "cannot open %s: %s", path, strerror(errno));
	if (read_all(fd, &h, sizeof h) || memcmp(h.magic, magic, sizeof magic)) {
		rc_fail(err, RC_EINVAL, "checkpoint", "%s is not a checkpoint of this version", path);
		goto out;
	}
	if (h.identity != id) {
		rc_fail(err, RC_EINVAL, "checkpoint", "%s belongs to another spec or other projections", path);
		goto out;
	}
	if (h.nvec < 1 || h.nvec > RC_STATE_MAX_VECS || h.nscal < 1 || h.nscal > (1 << 24) || h.iteration < 1) {
		rc_fail(err, RC_EINVAL, "checkpoint", "%s has a header out of range", path);
		goto out;
	}
	s->name = (rc_algo_name)h.name;
	s->iteration = h.iteration;
	s->nvec = h.nvec;
	s->nscal = h.nscal;
	for (int i = 0; i < h.nvec; i++) {
		s->space[i] = h.space[i] == RC_SPACE_PROJ ? RC_SPACE_PROJ : RC_SPACE_VOLUME;
		if (h.count[i] != (s->space[i] == RC_SPACE_VOLUME ? nvol : nproj)) {
			rc_fail(err, RC_EINVAL, "checkpoint", "%s holds vectors of another size", path);
			goto out_free;
		}
		if (!(s->host[i] = malloc(h.count[i] * sizeof(float)))) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a checkpoint's vector");
			goto out_free;
		}
		if (read_all(fd, s->host[i], h.count[i] * sizeof(float))) {
			rc_fail(err, RC_EINVAL, "checkpoint", "%s is cut short", path);
			goto out_free;
		}
	}
	if (!(s->scal = malloc((size_t)h.nscal * sizeof(double)))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a checkpoint's scalars");
		goto out_free;
	}
	if (read_all(fd, s->scal, (size_t)h.nscal * sizeof(double))) {
		rc_fail(err, RC_EINVAL, "checkpoint", "%s is cut short", path);
		goto out_free;
	}
	close(fd);
	return 1;
out_free:
	ckpt_state_free(s);
out:
	close(fd);
	return rc;
}

void ckpt_state_free(rc_algo_state *s)
{
	for (int i = 0; i < RC_STATE_MAX_VECS; i++) {
		free(s->host[i]);
		s->host[i] = NULL;
	}
	free(s->scal);
	s->scal = NULL;
}

void ckpt_remove(const char *dir)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, CKPT_FILE);
	if (unlink(path) == 0)
		durable_fsync_dir(dir);
}
