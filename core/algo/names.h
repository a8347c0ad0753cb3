/*
 * names: the one table of the words that name a choice in a job spec and in
 * the API: engines, algorithms, filter windows, scan modes, geometry types,
 * detector shapes, precisions and volume formats.  The spec parser
 * (server/worker/spec.c), recon's check, /v1/devices, downloads and every
 * error message that lists the choices read them from here; api/openapi.yaml's enums are tested
 * against this table (`recond-worker --names` prints it as JSON,
 * tests/integration/test_names.py compares).
 *
 * Each set lists its words in the order messages and the API show them;
 * each word carries the enum value it parses to (algo.h, geometry.h and the
 * enums below), so the order of a set is not the order of its enum.
 *
 * rc_algo_name_parse/_str and rc_filter_window_parse (declared in algo.h,
 * so that algo.h needs nothing from here) are defined in names.c over this
 * table.
 */
#ifndef RC_NAMES_H
#define RC_NAMES_H

#include <stddef.h>

#include "util/rc_error.h"

/* execution.engine */
typedef enum rc_engine_choice {
	RC_ENGINE_AUTO = 0,
	RC_ENGINE_CPU,
	RC_ENGINE_OPENCL,
	RC_ENGINE_CUDA,
	RC_ENGINE_TENSOR,
	RC_ENGINE_TRIGENEOUS,
} rc_engine_choice;

/* execution.precision */
typedef enum rc_precision {
	RC_PRECISION_FP32 = 0,
	RC_PRECISION_MIXED,
	RC_PRECISION_BF16, /* mixed, with bf16 operands in the CPU products */
	RC_PRECISION_AUTO, /* the default: mixed (docs/tensor.md, "precision auto") */
} rc_precision;

/* GET /v1/jobs/{id}/volume?format= */
typedef enum rc_volume_format {
	RC_FORMAT_RAW = 0,
	RC_FORMAT_NIFTI,
	RC_FORMAT_MHA,
	RC_FORMAT_DICOM,    /* the daemon's DICOM series (docs/pacs.md) */
} rc_volume_format;

typedef enum rc_name_set {
	RC_NAMES_ENGINE = 0, /* rc_engine_choice */
	RC_NAMES_ALGORITHM,  /* rc_algo_name (algo.h) */
	RC_NAMES_WINDOW,     /* rc_filter_window (algo.h) */
	RC_NAMES_SCAN,       /* rc_scan_mode (algo.h) */
	RC_NAMES_GEOMETRY,   /* rc_geom_type (geometry.h) */
	RC_NAMES_PRECISION,  /* rc_precision */
	RC_NAMES_FORMAT,     /* rc_volume_format */
	RC_NAMES_PROJECTOR,  /* rc_projector (algo.h) */
	RC_NAMES_SHAPE,      /* rc_detector_shape (geometry.h) */
	RC_NAMES_INITIAL,    /* rc_initial (algo.h; RC_INITIAL_GIVEN is internal) */
	RC_NAMES_EXTEND,     /* rc_extend (algo.h) */
	RC_NAMES_COUNT
} rc_name_set;

/* Flag of an engine word that is also a device's engine (core/devices.h,
 * `engine` of a Device in GET /v1/devices). */
#define RC_NAME_DEVICE 1u

/* The set's key in `recond-worker --names` ("engine", "algorithm", ...). */
const char *rc_name_set_key(rc_name_set set);

/* Number of words in the set; word i (0-based, display order) with its
 * value and flags (either may be NULL).  NULL past the end. */
int rc_names_count(rc_name_set set);
const char *rc_names_at(rc_name_set set, int i, int *ret_value, unsigned *ret_flags);

/* The word of a value; NULL when the set has none. */
const char *rc_name_str(rc_name_set set, int value);
/* Parses a word: 0 and *ret set, or RC_EINVAL (nothing set). */
int rc_name_parse(rc_name_set set, const char *s, int *ret);

/* The words of the set whose flags include every bit of `flags` (0: all),
 * joined for a message: "a, b or c".  Returns buf (always terminated). */
const char *rc_names_join(rc_name_set set, unsigned flags, char *buf, size_t n);
/* The same for the words whose value keep(value, ud) accepts. */
const char *rc_names_join_if(rc_name_set set, int (*keep)(int value, void *ud), void *ud, char *buf, size_t n);

/* RC_EINVAL with field and the message "FIELD must be one of a, b or c
 * (got \"s\")". */
int rc_name_fail(rc_err *err, rc_name_set set, const char *field, const char *got);

#endif
