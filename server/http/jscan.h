/*
 * jscan: a linear pre-scan of a JSON request body that bounds what parsing
 * it would cost, before jansson builds a tree of it.
 *
 * Invariant: a body that passes has at most the limits' number of objects,
 * arrays and scalar values and nests no deeper than their depth; jansson's
 * tree of it is then at most about 64 bytes per value (docs/server.md,
 * "Security").  Without it a 16 MiB body of empty objects ({"zz":[{},...]})
 * became 5.6 million jansson objects: 1.3 GB and 3 s of parsing.
 *
 * The scan is not a validator: it only counts tokens outside strings
 * (escapes understood), so invalid JSON may pass and is then refused by
 * jansson as before.  Keys after the first of an object count as values
 * (the scan keeps no stack): an overcount by the few keys of a spec.
 */
#ifndef RECOND_JSCAN_H
#define RECOND_JSCAN_H

#include <stddef.h>

#include "util/rc_error.h"

typedef struct jscan_limits {
	size_t max_depth;   /* nesting of objects and arrays */
	size_t max_objects;
	size_t max_arrays;
	size_t max_values;  /* every value: scalars, objects and arrays */
} jscan_limits;

/* The limits of a job spec: the largest legitimate one is geometry.matrices
 * with SPEC_MAX_VIEWS rows of 12 numbers (spec.h). */
extern const jscan_limits jscan_spec_limits;

/* 0 when buf[0..len) stays within lim; else RC_ETOOBIG (400) naming the
 * limit exceeded. */
int jscan_check(const char *buf, size_t len, const jscan_limits *lim, rc_err *err);

#endif
