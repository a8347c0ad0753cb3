/* destinations: the configured PACS (destinations.h). */
#include "base/destinations.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jfield.h"

const char *dest_kind_name(dest_kind k)
{
	return k == DEST_C_STORE ? "c-store" : "stow-rs";
}

static int copy(const json_t *o, const char *p, const char *key, int required, char *dst, size_t n, rc_err *err)
{
	const char *v = NULL;
	int rc = jf_str(o, p, key, required, n - 1, &v, err);
	if (!rc && v)
		snprintf(dst, n, "%s", v);
	return rc;
}

/* A DICOM AE title: 1-16 characters of printable ASCII without backslash,
 * not all spaces (PS3.5 AE VR). */
static int check_ae(const char *v, const char *path, rc_err *err)
{
	int nonspace = 0;
	for (const char *c = v; *c; c++) {
		if (*c < 0x20 || *c > 0x7e || *c == '\\')
			return rc_fail(err, RC_EINVAL, path, "%s must be printable ASCII without backslashes", path);
		nonspace |= *c != ' ';
	}
	if (!nonspace)
		return rc_fail(err, RC_EINVAL, path, "%s must be 1 to 16 characters, not all spaces", path);
	return 0;
}

static int parse_one(const json_t *o, const char *p, destination *d, rc_err *err)
{
	static const char *const keys[] = { "name", "kind", "timeout_s", "url", "username", "password", "ca_file",
					    "host", "port", "called_ae", "calling_ae", NULL };
	char kind[16] = "", path[128];
	long long v;
	int rc;
	if (!json_is_object(o))
		return rc_fail(err, RC_EINVAL, p, "%s must be an object", p);
	if ((rc = jf_check_keys(o, p, keys, err)) || (rc = copy(o, p, "name", 1, d->name, sizeof d->name, err)) ||
	    (rc = copy(o, p, "kind", 1, kind, sizeof kind, err)))
		return rc;
	for (const char *c = d->name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
		      *c == '_' || *c == '.'))
			return rc_fail(err, RC_EINVAL, p, "%s.name may hold only letters, digits, '-', '_' and '.'", p);
	if (!d->name[0])
		return rc_fail(err, RC_EINVAL, p, "%s.name must not be empty", p);
	v = 60;
	if ((rc = jf_int(o, p, "timeout_s", 0, 1, 3600, &v, err)))
		return rc;
	d->timeout_s = (int)v;
	if (!strcmp(kind, "stow-rs")) {
		d->kind = DEST_STOW_RS;
		if ((rc = copy(o, p, "url", 1, d->url, sizeof d->url, err)) ||
		    (rc = copy(o, p, "username", 0, d->username, sizeof d->username, err)) ||
		    (rc = copy(o, p, "password", 0, d->password, sizeof d->password, err)) ||
		    (rc = copy(o, p, "ca_file", 0, d->ca_file, sizeof d->ca_file, err)))
			return rc;
		if (strncmp(d->url, "http://", 7) && strncmp(d->url, "https://", 8))
			return rc_fail(err, RC_EINVAL, p, "%s.url must start with http:// or https:// (got \"%s\")", p, d->url);
		if (strchr(d->url, '@'))
			return rc_fail(err, RC_EINVAL, p, "%s.url must not hold credentials: give username and password", p);
		size_t len = strlen(d->url);
		while (len > 8 && d->url[len - 1] == '/')
			d->url[--len] = '\0'; /* the base; "/studies" is appended */
		return 0;
	}
	if (!strcmp(kind, "c-store")) {
		d->kind = DEST_C_STORE;
		snprintf(d->calling_ae, sizeof d->calling_ae, "RECOND");
		if ((rc = copy(o, p, "host", 1, d->host, sizeof d->host, err)) ||
		    (rc = jf_int(o, p, "port", 1, 1, 65535, &v, err)))
			return rc;
		d->port = (int)v;
		if ((rc = copy(o, p, "called_ae", 1, d->called_ae, sizeof d->called_ae, err)) ||
		    (rc = copy(o, p, "calling_ae", 0, d->calling_ae, sizeof d->calling_ae, err)))
			return rc;
		snprintf(path, sizeof path, "%s.called_ae", p);
		if ((rc = check_ae(d->called_ae, path, err)))
			return rc;
		snprintf(path, sizeof path, "%s.calling_ae", p);
		return check_ae(d->calling_ae, path, err);
	}
	return rc_fail(err, RC_EINVAL, p, "%s.kind must be \"stow-rs\" or \"c-store\" (got \"%s\")", p, kind);
}

int destinations_parse(const json_t *arr, destination **ret, int *n, rc_err *err)
{
	*ret = NULL;
	*n = 0;
	if (!json_is_array(arr))
		return rc_fail(err, RC_EINVAL, "destinations", "destinations must be an array of objects");
	size_t count = json_array_size(arr);
	if (count > DEST_MAX)
		return rc_fail(err, RC_EINVAL, "destinations", "at most %d destinations (got %zu)", DEST_MAX, count);
	destination *d = calloc(count ? count : 1, sizeof *d);
	if (!d)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	int rc = 0;
	for (size_t i = 0; i < count && !rc; i++) {
		char p[48];
		snprintf(p, sizeof p, "destinations[%zu]", i);
		rc = parse_one(json_array_get(arr, i), p, &d[i], err);
		for (size_t j = 0; j < i && !rc; j++)
			if (!strcmp(d[j].name, d[i].name))
				rc = rc_fail(err, RC_EINVAL, p, "%s.name \"%s\" is used twice", p, d[i].name);
	}
	if (rc) {
		free(d);
		return rc;
	}
	*ret = d;
	*n = (int)count;
	return 0;
}

const destination *destinations_find(const destination *d, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(d[i].name, name))
			return &d[i];
	return NULL;
}

json_t *destinations_json(const destination *d, int n)
{
	json_t *arr = json_array();
	for (int i = 0; arr && i < n; i++) {
		json_t *o;
		if (d[i].kind == DEST_STOW_RS)
			o = json_pack("{sssssssb}", "name", d[i].name, "kind", "stow-rs", "url", d[i].url, "authenticated",
				      d[i].username[0] != '\0');
		else
			o = json_pack("{sssssssissss}", "name", d[i].name, "kind", "c-store", "host", d[i].host, "port",
				      d[i].port, "called_ae", d[i].called_ae, "calling_ae", d[i].calling_ae);
		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}
