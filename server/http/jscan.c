/*
 * jscan: counts a JSON body's containers and values and its depth in one pass
 * without allocating (jscan.h).  A scalar is counted where it starts: a
 * quote outside a string, or a character of a literal or number after a
 * separator ('[', ',', ':') or at the top.
 */
#include "http/jscan.h"

#include "spec.h"

/* Job specs: a handful of objects (the spec's sections), one array per
 * matrix row plus a few lists, twelve numbers per view plus the scalars of
 * the sections; depth 4 is geometry.matrices[k][i], 16 leaves room. */
const jscan_limits jscan_spec_limits = {
	.max_depth = 16,
	.max_objects = 256,
	.max_arrays = SPEC_MAX_VIEWS + 256,
	.max_values = 13 * (size_t)SPEC_MAX_VIEWS + 4096,
};

struct counts {
	size_t depth, objects, arrays, values;
};

static int over(const struct counts *n, const jscan_limits *lim, rc_err *err)
{
	if (n->depth > lim->max_depth)
		return rc_fail(err, RC_ETOOBIG, "", "the JSON body nests deeper than %zu levels", lim->max_depth);
	if (n->objects > lim->max_objects)
		return rc_fail(err, RC_ETOOBIG, "", "the JSON body has more than %zu objects", lim->max_objects);
	if (n->arrays > lim->max_arrays)
		return rc_fail(err, RC_ETOOBIG, "", "the JSON body has more than %zu arrays", lim->max_arrays);
	if (n->values > lim->max_values)
		return rc_fail(err, RC_ETOOBIG, "", "the JSON body has more than %zu values", lim->max_values);
	return 0;
}

int jscan_check(const char *buf, size_t len, const jscan_limits *lim, rc_err *err)
{
	struct counts n = { 0 };
	int in_string = 0, expect_value = 1; /* at the top, and after '[', ',' or ':' */
	for (size_t i = 0; i < len; i++) {
		char ch = buf[i];
		if (in_string) {
			if (ch == '\\')
				i++; /* the escaped character (the \u digits need no care) */
			else if (ch == '"')
				in_string = 0;
			continue;
		}
		switch (ch) {
		case ' ': case '\t': case '\r': case '\n':
			continue;
		case '{': case '[':
			n.depth++;
			n.values++;
			if (ch == '{')
				n.objects++;
			else
				n.arrays++;
			if (over(&n, lim, err))
				return err->code;
			expect_value = ch == '[';
			continue;
		case '}': case ']':
			if (n.depth)
				n.depth--;
			expect_value = 0;
			continue;
		case ',': case ':':
			expect_value = 1;
			continue;
		case '"':
			in_string = 1;
			break;
		default:
			break;
		}
		if (expect_value) { /* a string, number or literal starts */
			n.values++;
			expect_value = 0;
			if (n.values > lim->max_values)
				return over(&n, lim, err);
		}
	}
	return 0;
}
