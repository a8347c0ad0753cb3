/*
 * rctl_progress: one progress bar on stderr for reconctl (uploads,
 * downloads, a running job).  Drawn only when enabled (stderr is a terminal
 * and the user did not ask for quiet), at most ten times a second, always on
 * one line that is rewritten with '\r'; rctl_progress_end finishes the line.
 * Output on stdout is never touched, so `id=$(reconctl submit ...)` works with
 * a bar on the terminal.
 */
#ifndef RCTL_PROGRESS_H
#define RCTL_PROGRESS_H

#include <stdint.h>

typedef struct rctl_progress {
	const char *label;
	int enabled;
	int drawn;
	int full;        /* the 100 % state was drawn: redraw it no more */
	double t0, last;
} rctl_progress;

void rctl_progress_init(rctl_progress *p, const char *label, int enabled);
/* A byte transfer: bar, MB transferred and MB/s; total 0 = unknown. */
void rctl_progress_bytes(rctl_progress *p, uint64_t done, uint64_t total);
/* A job: bar of fraction in [0, 1] and a short text ("iteration 3/10"). */
void rctl_progress_fraction(rctl_progress *p, double fraction, const char *text, int force);
void rctl_progress_end(rctl_progress *p);

#endif
