/*
 * input_conv: see input_conv.h.  Each view's clamped pixels are kept per
 * view, so a view converted again (a streaming job's view stored twice, or
 * the whole-stack run after it) replaces its count instead of adding to it.
 */
#include "input_conv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/counts.h"
#include "util/parfor.h"
#include "util/rc_clock.h"

struct input_conv {
	const job_spec *s;
	const char *counts;
	float *lines;       /* mapped: lines_bytes */
	size_t lines_bytes;
	uint64_t *clamped;  /* per view */
	rc_counts *cc;
	double seconds;
};

/* The uploaded file dir/name of n bytes into buf. */
static int read_field(const char *dir, const char *name, const char *field, void *buf, size_t n, rc_err *err)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *fp = fopen(path, "rb");
	size_t got = fp ? fread(buf, 1, n, fp) : 0;
	int e = errno;
	if (fp)
		fclose(fp);
	if (got != n)
		return rc_fail(err, RC_EIO, field, "the uploaded %s %s must hold %zu bytes (%s)", field, path, n,
			       fp ? "it is shorter" : strerror(e));
	return 0;
}

int input_conv_open(const job_spec *s, const char *dir, const void *counts, input_conv **ret, rc_err *err)
{
	size_t pix = (size_t)s->rows * (size_t)s->nu, nvals = (size_t)(s->proj_bytes / s->sample_bytes);
	input_conv *c = calloc(1, sizeof *c);
	float *flat = malloc(sizeof(float) * pix), *dark = malloc(sizeof(float) * pix);
	uint8_t *bad = s->in.uploaded[INPUT_BAD] ? malloc(pix) : NULL;
	int rc = 0;
	/* the line integrals in huge pages where the kernel gives them: first
	 * touching 4 KiB pages was half the pass (0.019 against 0.033 s of CPU
	 * for paper 000's 10.7 M samples) */
	void *m = c ? mmap(NULL, sizeof(float) * (nvals ? nvals : 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0) : MAP_FAILED;
	if (c && m != MAP_FAILED) {
		c->lines = m;
		c->lines_bytes = sizeof(float) * (nvals ? nvals : 1);
#ifdef MADV_HUGEPAGE
		(void)madvise(m, c->lines_bytes, MADV_HUGEPAGE);
#endif
	}
	if (!c || !flat || !dark || (s->in.uploaded[INPUT_BAD] && !bad) || !c->lines ||
	    !(c->clamped = calloc((size_t)s->nviews, sizeof(uint64_t)))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the %zu line integrals of a job of counts", nvals);
		goto out;
	}
	c->s = s;
	c->counts = counts;
	for (size_t p = 0; p < pix; p++) {
		flat[p] = (float)s->in.flat;
		dark[p] = (float)s->in.dark;
	}
	if ((s->in.uploaded[INPUT_FLAT] && (rc = read_field(dir, INPUT_FLAT_FILE, "flat", flat, sizeof(float) * pix, err))) ||
	    (s->in.uploaded[INPUT_DARK] && (rc = read_field(dir, INPUT_DARK_FILE, "dark", dark, sizeof(float) * pix, err))) ||
	    (bad && (rc = read_field(dir, INPUT_BAD_FILE, "bad_pixels", bad, pix, err))))
		goto out;
	rc = rc_counts_new(s->in.dtype, s->rows, s->nu, flat, dark, bad, &c->cc, err);
out:
	free(flat);
	free(dark);
	free(bad);
	if (rc) {
		input_conv_close(c);
		return rc;
	}
	*ret = c;
	return 0;
}

void input_conv_close(input_conv *c)
{
	if (!c)
		return;
	rc_counts_free(c->cc);
	if (c->lines)
		munmap(c->lines, c->lines_bytes);
	free(c->clamped);
	free(c);
}

const float *input_conv_lines(const input_conv *c)
{
	return c->lines;
}

static void convert_view(input_conv *c, int k)
{
	const job_spec *s = c->s;
	uint64_t first = (uint64_t)k * s->view_stride;
	c->clamped[k] = rc_counts_image(c->cc, c->counts + s->sample_bytes * first, s->row_stride, c->lines + first,
					s->row_stride);
}

static void view_fn(void *ud, int worker, int k)
{
	(void)worker;
	convert_view(ud, k);
}

void input_conv_all(input_conv *c, int threads)
{
	double t0 = rc_now_s();
	rc_parallel_for(c->s->nviews, threads, view_fn, c);
	c->seconds += rc_now_s() - t0;
}

void input_conv_views(input_conv *c, const int *list, int n)
{
	double t0 = rc_now_s();
	for (int i = 0; i < n; i++)
		convert_view(c, list[i]);
	c->seconds += rc_now_s() - t0;
}

json_t *input_conv_report(const input_conv *c)
{
	uint64_t total = 0;
	for (int k = 0; k < c->s->nviews; k++)
		total += c->clamped[k];
	return json_pack("{sssssIsIsf}", "kind", "intensity", "dtype", c->s->in.dtype == RC_COUNTS_U16 ? "uint16" : "float32",
			 "clamped_pixels", (json_int_t)total, "dead_pixels", (json_int_t)rc_counts_dead(c->cc),
			 "convert_s", c->seconds);
}
