/* rc_clock: the one clock of the project: monotonic seconds (CLOCK_MONOTONIC),
 * for durations only (never wall time). */
#ifndef RC_CLOCK_H
#define RC_CLOCK_H

double rc_now_s(void);

#endif
