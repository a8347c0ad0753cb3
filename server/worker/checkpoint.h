/*
 * checkpoint: an iterative job's checkpoint file, DIR/checkpoint.bin: the
 * state of its run after a whole iteration (algo.h's rc_algo_state), from
 * which a later worker of the same job continues (docs/server.md,
 * "Checkpoints").  Written durably (durable.h), so a kill -9 leaves the
 * last one whole.  Its identity is a hash of the job's spec.json and of the
 * projections' (and flat, dark, bad-pixel files') size, inode and change
 * time: a file of another spec or of projections stored since is not used.
 *
 *   header   magic "RCCKPT1\n", identity, method, iteration, vectors,
 *            scalars, each vector's space and float count (host order)
 *   vectors  floats in the host layouts (x, then the method's)
 *   scalars  doubles
 */
#ifndef RC_CHECKPOINT_H
#define RC_CHECKPOINT_H

#include <stdint.h>

#include "algo/algo.h"

#define CKPT_FILE "checkpoint.bin"

/* The identity of job directory dir's spec and inputs: 0, or RC_EIO. */
int ckpt_identity(const char *dir, uint64_t *id, rc_err *err);

/* Writes s (its vectors downloaded from b through scratch, a buffer of
 * max(nvol, nproj) floats) to dir/CKPT_FILE.  nvol, nproj: floats of a
 * volume and a projection vector. */
int ckpt_write(const char *dir, uint64_t id, rc_backend *b, const rc_algo_state *s, size_t nvol, size_t nproj,
	       float *scratch, rc_err *err);

/* Reads dir/CKPT_FILE into s (host and scal allocated; ckpt_state_free):
 * 1 when it exists, is whole and has identity id and vectors of nvol /
 * nproj floats; 0 when there is none or it is not this job's (why in err's
 * message); a negative rc_code for a file that cannot be read. */
int ckpt_read(const char *dir, uint64_t id, size_t nvol, size_t nproj, rc_algo_state *s, rc_err *err);
void ckpt_state_free(rc_algo_state *s);

/* Removes dir/CKPT_FILE (after the job's volume is written). */
void ckpt_remove(const char *dir);

#endif
