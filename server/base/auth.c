/* auth: hashed bearer tokens and roles (auth.h). */
#include "base/auth.h"

#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jfield.h"

struct token {
	char name[64];
	auth_role role;
	int phi; /* may see patient fields of every job */
	unsigned char digest[SHA256_DIGEST_SIZE];
};

struct auth {
	pthread_mutex_t lock;
	struct token *tok;
	int n;
};

int auth_new(auth **ret)
{
	auth *a = calloc(1, sizeof *a);
	if (!a)
		return RC_ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	*ret = a;
	return 0;
}

void auth_free(auth *a)
{
	if (!a)
		return;
	free(a->tok);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

const char *auth_role_name(auth_role r)
{
	switch (r) {
	case ROLE_READ: return "read";
	case ROLE_SUBMIT: return "submit";
	case ROLE_ADMIN: return "admin";
	default: return "none";
	}
}

void auth_sha256_hex(const char *s, size_t len, char hex[65])
{
	struct sha256_ctx c;
	unsigned char d[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, len, (const uint8_t *)s);
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int unhex(const char *h, unsigned char *out)
{
	if (strlen(h) != 2 * SHA256_DIGEST_SIZE)
		return -1;
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (unsigned char)v;
	}
	return 0;
}

int auth_load(auth *a, const json_t *tokens, rc_err *err)
{
	size_t n = tokens ? json_array_size(tokens) : 0;
	if (tokens && !json_is_array(tokens))
		return rc_fail(err, RC_EINVAL, "tokens", "tokens must be a list of {\"name\", \"role\", \"sha256\"}");
	struct token *t = calloc(n ? n : 1, sizeof *t);
	if (!t)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		static const char *const keys[] = { "name", "role", "sha256", "phi", NULL };
		json_t *o = json_array_get(tokens, i);
		char p[32];
		const char *name = NULL, *role = NULL, *hash = NULL;
		snprintf(p, sizeof p, "tokens[%zu]", i);
		int rc;
		if (!json_is_object(o))
			rc = rc_fail(err, RC_EINVAL, p, "%s must be an object {\"name\", \"role\", \"sha256\"}", p);
		else if (!(rc = jf_check_keys(o, p, keys, err)) && !(rc = jf_str(o, p, "name", 1, 63, &name, err)) &&
			 !(rc = jf_str(o, p, "role", 1, 16, &role, err)) && !(rc = jf_str(o, p, "sha256", 1, 64, &hash, err)) &&
			 !(rc = jf_bool(o, p, "phi", 0, &t[i].phi, err))) {
			snprintf(t[i].name, sizeof t[i].name, "%s", name);
			t[i].role = !strcmp(role, "read") ? ROLE_READ : !strcmp(role, "submit") ? ROLE_SUBMIT
				  : !strcmp(role, "admin") ? ROLE_ADMIN : ROLE_NONE;
			if (!strcmp(name, "-"))
				rc = rc_fail(err, RC_EINVAL, p, "%s.name \"-\" is reserved (it names no token: loopback mode)", p);
			else if (t[i].role == ROLE_NONE)
				rc = rc_fail(err, RC_EINVAL, p, "%s.role must be read, submit or admin (got \"%s\")", p, role);
			else if (unhex(hash, t[i].digest))
				rc = rc_fail(err, RC_EINVAL, p, "%s.sha256 must be 64 hex digits (recond --hash-token prints them)", p);
		}
		if (rc) {
			free(t);
			return rc;
		}
	}
	pthread_mutex_lock(&a->lock);
	free(a->tok);
	a->tok = t;
	a->n = (int)n;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

int auth_count(auth *a)
{
	pthread_mutex_lock(&a->lock);
	int n = a->n;
	pthread_mutex_unlock(&a->lock);
	return n;
}

int auth_check(auth *a, const char *header, auth_role *role, char name[64], int *phi)
{
	if (!header)
		return RC_EUNAUTH;
	if (strncasecmp(header, "Bearer ", 7))
		return RC_EINVAL;
	const char *tok = header + 7;
	while (*tok == ' ')
		tok++;
	struct sha256_ctx c;
	unsigned char d[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, strlen(tok), (const uint8_t *)tok);
	sha256_digest(&c, sizeof d, d);
	int rc = RC_EUNAUTH;
	pthread_mutex_lock(&a->lock);
	for (int i = 0; i < a->n; i++) {
		unsigned diff = 0;
		for (int j = 0; j < SHA256_DIGEST_SIZE; j++)
			diff |= (unsigned)(d[j] ^ a->tok[i].digest[j]);
		if (!diff && rc) {
			*role = a->tok[i].role;
			snprintf(name, 64, "%s", a->tok[i].name);
			*phi = a->tok[i].phi;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}
