/*
 * proj_testutil: the small helpers of the CPU projector tests (include
 * after <cmocka.h>): a CPU engine, zeroed float buffers and a xorshift
 * stream of uniform numbers (PROJ_TESTUTIL_SEED before the include picks
 * another stream).
 */
#ifndef RC_TEST_PROJ_TESTUTIL_H
#define RC_TEST_PROJ_TESTUTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/engine_cpu.h"

#ifndef PROJ_TESTUTIL_SEED
#define PROJ_TESTUTIL_SEED 0x9E3779B97F4A7C15ull
#endif

static inline rc_engine *make_engine(const rc_geom *g, int threads)
{
	rc_engine *e = NULL;
	rc_err err;
	if (rc_engine_cpu_new(g, threads, &e, &err))
		fail_msg("engine: %s", err.msg);
	return e;
}

static inline float *falloc(size_t n)
{
	float *p = calloc(n, sizeof(float));
	assert_non_null(p);
	return p;
}

static uint64_t rng = PROJ_TESTUTIL_SEED;
static inline double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

#endif
