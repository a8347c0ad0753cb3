/* rctl_progress: see rctl_progress.h. */
#include "rctl_progress.h"

#include <math.h>
#include <stdio.h>

#include "util/rc_clock.h"

#define BAR_WIDTH 30

void rctl_progress_init(rctl_progress *p, const char *label, int enabled)
{
	p->label = label;
	p->enabled = enabled;
	p->drawn = 0;
	p->full = 0;
	p->t0 = rc_now_s();
	p->last = 0;
}

/* Rate-limits drawing; force draws anyway (the final 100 %). */
static int due(rctl_progress *p, int force)
{
	if (!p->enabled)
		return 0;
	double t = rc_now_s();
	if (!force && p->drawn && t - p->last < 0.1)
		return 0;
	p->last = t;
	p->drawn = 1;
	return 1;
}

static void draw_bar(double f)
{
	if (!(f >= 0))
		f = 0;
	if (f > 1)
		f = 1;
	int full = (int)lround(f * BAR_WIDTH);
	fputc('[', stderr);
	for (int i = 0; i < BAR_WIDTH; i++)
		fputc(i < full ? '#' : '.', stderr);
	fprintf(stderr, "] %3d%%", (int)lround(f * 100));
}

void rctl_progress_bytes(rctl_progress *p, uint64_t done, uint64_t total)
{
	int full = total && done >= total;
	if (p->full || !due(p, full))
		return;
	p->full = full;
	double el = rc_now_s() - p->t0;
	double mb = done / 1e6;
	fprintf(stderr, "\r%s ", p->label);
	if (total)
		draw_bar((double)done / (double)total);
	fprintf(stderr, " %.1f MB  %.1f MB/s\033[K", mb, el > 0 ? mb / el : 0.0);
	fflush(stderr);
}

void rctl_progress_fraction(rctl_progress *p, double fraction, const char *text, int force)
{
	if (!due(p, force))
		return;
	fprintf(stderr, "\r%s ", p->label);
	draw_bar(fraction);
	fprintf(stderr, " %s\033[K", text ? text : "");
	fflush(stderr);
}

void rctl_progress_end(rctl_progress *p)
{
	if (p->enabled && p->drawn)
		fputc('\n', stderr);
	p->drawn = 0;
	p->full = 0;
}
