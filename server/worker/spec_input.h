/*
 * spec_input: the job spec's "input" object (job_input, a member of
 * spec.h's job_spec): what the uploaded projections are.
 *
 *   {"kind": "line_integrals"}   float32 line integrals (the default)
 *   {"kind": "intensity", "dtype": "uint16" | "float32",
 *    "flat": <number> | "uploaded", "dark": <number> | "uploaded",
 *    "bad_pixels": "uploaded"}   detector counts; the worker computes
 *                                p = -ln((I - dark) / (flat - dark))
 *                                (core/util/counts.h)
 *
 * "uploaded" fields come by PUT /v1/jobs/{id}/flat, /dark and /bad-pixels
 * (docs/api.md) into the job's directory as the files named here.
 */
#ifndef RC_SPEC_INPUT_H
#define RC_SPEC_INPUT_H

#include <jansson.h>
#include <stdint.h>

#include "util/counts.h"
#include "util/rc_error.h"

/* The job directory's files of the uploaded fields: flat and dark as the
 * average of the uploaded images (float32, rows x nu), the bad-pixel map
 * as uploaded (uint8, rows x nu). */
#define INPUT_FLAT_FILE "flat.f32"
#define INPUT_DARK_FILE "dark.f32"
#define INPUT_BAD_FILE "bad_pixels.u8"
#define INPUT_MAX_IMAGES 1024 /* images one flat or dark upload may average */
#define INPUT_MAX_BYTES (256u << 20) /* and bytes (it is gathered in memory): at least one image */

typedef enum input_field { INPUT_FLAT = 0, INPUT_DARK, INPUT_BAD, INPUT_NFIELDS } input_field;

typedef struct job_input {
	int intensity;            /* 0: line integrals (float32) */
	rc_counts_dtype dtype;    /* of the projections and the flat/dark images */
	int uploaded[INPUT_NFIELDS]; /* the field comes as an upload */
	double flat, dark;        /* the numbers, where not uploaded */
} job_input;

/* Parses the object into *in (NULL: line integrals).  Errors: RC_EINVAL
 * naming the field (input.kind, input.dtype, input.flat, input.dark,
 * input.bad_pixels). */
int spec_parse_input(const json_t *o, job_input *in, rc_err *err);

/* Bytes of one sample of the projections: 4, or 2 for uint16 counts. */
unsigned spec_input_sample_bytes(const job_input *in);

/* The route's and the error field's name of a field ("flat", "dark",
 * "bad-pixels") and its file in the job directory. */
const char *input_field_route(input_field f);
const char *input_field_file(input_field f);

#endif
