/*
 * fuzz_config: the daemon's config file (server/base/config.c) through
 * config_load_json, the in-memory twin of config_load_file, and then what
 * daemon_start does with it: the tokens through auth_load, the destinations
 * through destinations_json (GET /v1/destinations).  The input is applied
 * twice over the same config, as flags and reloads apply values over values
 * (the second pass replaces the token and destination lists the first one
 * set).  Checked besides the sanitizers: every limit the daemon sizes things
 * by stays in its documented range, strings stay terminated, a refusal has
 * a code and a message, and the destinations' JSON never carries a
 * credential.
 * Input: the file's text, as is.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/auth.h"
#include "base/config.h"
#include "base/destinations.h"

static void check(int ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz_config: %s\n", what);
	abort();
}

#define TERMINATED(s) (memchr((s), '\0', sizeof(s)) != NULL)

static void check_config(const config *c)
{
	check(c->threads >= 1 && c->threads <= 100000, "threads out of range");
	check(c->worker_threads >= 0 && c->worker_threads <= 4096, "worker_threads out of range");
	check(c->max_body >= 1024 && c->max_body <= (1ull << 32), "max_body_bytes out of range");
	check(c->max_job_bytes >= (1u << 20) && c->max_job_bytes <= (1ull << 50), "max_job_bytes out of range");
	check(c->max_per_ip >= 1 && c->conn_timeout_s >= 1 && c->conn_timeout_s <= 86400 &&
		      c->header_timeout_s >= 1 && c->header_timeout_s <= 3600, "connection limits");
	check(c->retention_s >= 0 && c->retention_s <= 1e10, "retention_s out of range");
	check(c->listen_port >= 0 && c->listen_port <= 65535, "listen port out of range");
	check(TERMINATED(c->listen_host) && TERMINATED(c->store) && TERMINATED(c->worker) &&
		      TERMINATED(c->probe_worker) && TERMINATED(c->tls_cert) && TERMINATED(c->tls_key) &&
		      TERMINATED(c->token_file) && TERMINATED(c->audit_log) && TERMINATED(c->port_file) &&
		      TERMINATED(c->uid_root),
	      "an unterminated string");
	check(c->push_retry_s > 0 && c->push_retry_s <= 3600 && c->push_max_attempts >= 1 &&
		      c->push_max_attempts <= 1000,
	      "dicom push settings out of range");
	check(c->ndests >= 0 && c->ndests <= DEST_MAX && (c->ndests == 0 || c->dests), "destination count");
	for (int i = 0; i < c->ndests; i++) {
		const destination *d = &c->dests[i];
		check(d->name[0] && TERMINATED(d->name) && TERMINATED(d->url) && TERMINATED(d->host) &&
			      TERMINATED(d->called_ae) && TERMINATED(d->calling_ae) && TERMINATED(d->password),
		      "a destination's strings");
		check(destinations_find(c->dests, c->ndests, d->name) == d, "destination names are not unique");
		check(d->kind != DEST_C_STORE || (d->port >= 1 && d->port <= 65535), "a destination's port");
	}
	json_t *j = destinations_json(c->dests, c->ndests);
	check(json_is_array(j) && json_array_size(j) == (size_t)c->ndests, "destinations_json");
	for (size_t i = 0; i < json_array_size(j); i++) {
		json_t *o = json_array_get(j, i);
		check(!json_object_get(o, "password") && !json_object_get(o, "username"),
		      "destinations_json shows a credential");
		check(!strcmp(json_string_value(json_object_get(o, "name")), c->dests[i].name), "destinations_json's names");
	}
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1u << 20))
		return 0;
	config c;
	config_default(&c);
	for (int pass = 0; pass < 2; pass++) {
		rc_err err;
		rc_err_clear(&err);
		int rc = config_load_json(&c, (const char *)data, size, &err);
		if (rc) {
			check(rc < 0 && err.code == rc && err.msg[0], "a refusal without its code or message");
			break;
		}
		check_config(&c);
		auth *a = NULL;
		check(auth_new(&a) == 0, "auth_new");
		if (!auth_load(a, c.tokens, &err)) {
			char name[64];
			auth_role role;
			int phi;
			check(auth_count(a) >= 0, "auth_count");
			/* a token nobody configured (its hash is not in any list) */
			check(auth_check(a, "Bearer fuzz-token-never-configured", &role, name, &phi) != 0 ||
				      auth_count(a) == 0,
			      "an unknown token was accepted");
		}
		auth_free(a);
	}
	config_clear(&c);
	return 0;
}
