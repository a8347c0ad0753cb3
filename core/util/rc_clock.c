/* rc_clock: see rc_clock.h. */
#include "util/rc_clock.h"

#include <time.h>

double rc_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
