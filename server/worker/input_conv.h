/*
 * input_conv: the worker's side of a job of detector counts (spec_input.h):
 * the mapped counts become float32 line integrals in a buffer of the
 * stack's layout, once and in one pass before the engine runs (every engine
 * then sees line integrals), or view by view as a streaming FDK is given
 * its views.  Flat and dark come from the spec's numbers or the job
 * directory's averaged uploads, the bad-pixel map from its upload.
 */
#ifndef RC_INPUT_CONV_H
#define RC_INPUT_CONV_H

#include <jansson.h>

#include "spec.h"

typedef struct input_conv input_conv;

/* counts: the mapped stack (spec->proj_bytes).  Errors: RC_EIO "flat",
 * "dark" or "bad_pixels" (the uploaded file is missing or short),
 * RC_EINVAL "input.flat" (flat not above dark anywhere), RC_ENOMEM. */
int input_conv_open(const job_spec *s, const char *dir, const void *counts, input_conv **ret, rc_err *err);
void input_conv_close(input_conv *c);

/* The line integrals (the stack's layout, floats). */
const float *input_conv_lines(const input_conv *c);

/* Converts every view on up to threads threads (0 = every core). */
void input_conv_all(input_conv *c, int threads);
/* Converts the n views of list (a streaming FDK's newly given views). */
void input_conv_views(input_conv *c, const int *list, int n);

/* {"kind", "dtype", "clamped_pixels" (the pixels of the views converted
 * last that were clamped or dead, counts.h), "dead_pixels" (per image),
 * "convert_s"} for the worker's report. */
json_t *input_conv_report(const input_conv *c);

#endif
