/* names: the one table of choice words (names.h). */
#include "algo/names.h"

#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "geometry/geometry.h"

struct word {
	const char *name;
	int value;
	unsigned flags;
};

static const struct word engines[] = {
	{ "auto", RC_ENGINE_AUTO, 0 },
	{ "cpu", RC_ENGINE_CPU, RC_NAME_DEVICE },
	{ "opencl", RC_ENGINE_OPENCL, RC_NAME_DEVICE },
	{ "cuda", RC_ENGINE_CUDA, RC_NAME_DEVICE },
	{ "tensor", RC_ENGINE_TENSOR, 0 },
	{ "trigeneous", RC_ENGINE_TRIGENEOUS, 0 },
};
static const struct word algorithms[] = {
	{ "sart", RC_ALGO_SART, 0 },
	{ "sirt", RC_ALGO_SIRT, 0 },
	{ "cgls", RC_ALGO_CGLS, 0 },
	{ "fdk", RC_ALGO_FDK, 0 },
	{ "mlem", RC_ALGO_MLEM, 0 },
};
static const struct word windows[] = {
	{ "ram-lak", RC_WINDOW_RAM_LAK, 0 },
	{ "shepp-logan", RC_WINDOW_SHEPP_LOGAN, 0 },
	{ "hann", RC_WINDOW_HANN, 0 },
};
static const struct word scans[] = {
	{ "auto", RC_SCAN_AUTO, 0 },
	{ "full", RC_SCAN_FULL, 0 },
	{ "short", RC_SCAN_SHORT, 0 },
};
static const struct word geometries[] = {
	{ "cone", RC_GEOM_CONE, 0 },
	{ "helix", RC_GEOM_HELIX, 0 },
	{ "matrices", RC_GEOM_MATRICES, 0 },
	{ "fan", RC_GEOM_FAN, 0 },
	{ "parallel", RC_GEOM_PARALLEL, 0 },
};
static const struct word shapes[] = {
	{ "flat", RC_DETECTOR_FLAT, 0 },
	{ "curved", RC_DETECTOR_CURVED, 0 },
};
static const struct word precisions[] = {
	{ "auto", RC_PRECISION_AUTO, 0 },
	{ "fp32", RC_PRECISION_FP32, 0 },
	{ "mixed", RC_PRECISION_MIXED, 0 },
	{ "bf16", RC_PRECISION_BF16, 0 },
};
static const struct word projectors[] = {
	{ "auto", RC_PROJECTOR_AUTO, 0 },
	{ "splat", RC_PROJECTOR_SPLAT, 0 },
	{ "raycast", RC_PROJECTOR_RAYCAST, 0 },
	{ "footprint", RC_PROJECTOR_FOOTPRINT, 0 },
};
static const struct word initials[] = {
	{ "auto", RC_INITIAL_AUTO, 0 },
	{ "zero", RC_INITIAL_ZERO, 0 },
	{ "fdk", RC_INITIAL_FDK, 0 },
};
static const struct word extends[] = {
	{ "auto", RC_EXTEND_AUTO, 0 },
	{ "off", RC_EXTEND_OFF, 0 },
	{ "on", RC_EXTEND_ON, 0 },
};
static const struct word formats[] = {
	{ "raw", RC_FORMAT_RAW, 0 },
	{ "nifti", RC_FORMAT_NIFTI, 0 },
	{ "mha", RC_FORMAT_MHA, 0 },
	{ "dicom", RC_FORMAT_DICOM, 0 },
};

#define SET(key, words) { key, words, (int)(sizeof words / sizeof words[0]) }
static const struct set {
	const char *key;
	const struct word *w;
	int n;
} sets[RC_NAMES_COUNT] = {
	[RC_NAMES_ENGINE] = SET("engine", engines),
	[RC_NAMES_ALGORITHM] = SET("algorithm", algorithms),
	[RC_NAMES_WINDOW] = SET("window", windows),
	[RC_NAMES_SCAN] = SET("scan", scans),
	[RC_NAMES_GEOMETRY] = SET("geometry", geometries),
	[RC_NAMES_PRECISION] = SET("precision", precisions),
	[RC_NAMES_FORMAT] = SET("format", formats),
	[RC_NAMES_PROJECTOR] = SET("projector", projectors),
	[RC_NAMES_SHAPE] = SET("detector_shape", shapes),
	[RC_NAMES_INITIAL] = SET("initial", initials),
	[RC_NAMES_EXTEND] = SET("extend", extends),
};

static const struct set *set_of(rc_name_set s)
{
	return (unsigned)s < RC_NAMES_COUNT ? &sets[s] : NULL;
}

const char *rc_name_set_key(rc_name_set set)
{
	const struct set *s = set_of(set);
	return s ? s->key : NULL;
}

int rc_names_count(rc_name_set set)
{
	const struct set *s = set_of(set);
	return s ? s->n : 0;
}

const char *rc_names_at(rc_name_set set, int i, int *ret_value, unsigned *ret_flags)
{
	const struct set *s = set_of(set);
	if (!s || i < 0 || i >= s->n)
		return NULL;
	if (ret_value)
		*ret_value = s->w[i].value;
	if (ret_flags)
		*ret_flags = s->w[i].flags;
	return s->w[i].name;
}

const char *rc_name_str(rc_name_set set, int value)
{
	const struct set *s = set_of(set);
	for (int i = 0; s && i < s->n; i++)
		if (s->w[i].value == value)
			return s->w[i].name;
	return NULL;
}

int rc_name_parse(rc_name_set set, const char *str, int *ret)
{
	const struct set *s = set_of(set);
	for (int i = 0; s && str && i < s->n; i++)
		if (!strcmp(s->w[i].name, str)) {
			*ret = s->w[i].value;
			return 0;
		}
	return RC_EINVAL;
}

const char *rc_names_join_if(rc_name_set set, int (*keep)(int value, void *ud), void *ud, char *buf, size_t n)
{
	const struct set *s = set_of(set);
	int total = 0, k = 0;
	size_t at = 0;
	if (!n)
		return buf;
	buf[0] = '\0';
	for (int i = 0; s && i < s->n; i++)
		total += keep(s->w[i].value, ud) != 0;
	for (int i = 0; s && i < s->n && at < n; i++) {
		if (!keep(s->w[i].value, ud))
			continue;
		const char *sep = k == 0 ? "" : k == total - 1 ? " or " : ", ";
		int w = snprintf(buf + at, n - at, "%s%s", sep, s->w[i].name);
		if (w < 0)
			break;
		at += (size_t)w;
		k++;
	}
	return buf;
}

struct flag_filter {
	const struct set *s;
	unsigned flags;
};

static int has_flags(int value, void *ud)
{
	const struct flag_filter *f = ud;
	for (int i = 0; i < f->s->n; i++)
		if (f->s->w[i].value == value)
			return (f->s->w[i].flags & f->flags) == f->flags;
	return 0;
}

const char *rc_names_join(rc_name_set set, unsigned flags, char *buf, size_t n)
{
	struct flag_filter f = { set_of(set), flags };
	if (!f.s) {
		if (n)
			buf[0] = '\0';
		return buf;
	}
	return rc_names_join_if(set, has_flags, &f, buf, n);
}

int rc_name_fail(rc_err *err, rc_name_set set, const char *field, const char *got)
{
	char list[256];
	return rc_fail(err, RC_EINVAL, field, "%s must be one of %s (got \"%.64s\")", field,
		       rc_names_join(set, 0, list, sizeof list), got ? got : "");
}

/* algo.h's typed calls over the table. */
int rc_algo_name_parse(const char *s, rc_algo_name *ret)
{
	int v;
	if (rc_name_parse(RC_NAMES_ALGORITHM, s, &v))
		return RC_EINVAL;
	*ret = (rc_algo_name)v;
	return 0;
}

const char *rc_algo_name_str(rc_algo_name n)
{
	const char *s = rc_name_str(RC_NAMES_ALGORITHM, (int)n);
	return s ? s : "unknown";
}

int rc_filter_window_parse(const char *s, rc_filter_window *ret)
{
	int v;
	if (rc_name_parse(RC_NAMES_WINDOW, s, &v))
		return RC_EINVAL;
	*ret = (rc_filter_window)v;
	return 0;
}
