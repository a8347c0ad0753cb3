/*
 * auth: bearer tokens with roles.  Tokens are configured by their SHA-256
 * (hex), never in clear, so a leaked config does not leak a token; a request's
 * token is hashed (nettle) and compared in constant time against each entry.
 * Roles are ordered: read < submit < admin; a route needs a minimum role.
 * Independently of the role, a token may carry "phi": it sees the patient
 * fields of every job (docs/server.md, "Owners and patient fields").  The
 * token's name is its identity: the owner of the jobs it creates.
 * The token set is swapped atomically on reload (SIGHUP) under a lock.
 */
#ifndef RC_AUTH_H
#define RC_AUTH_H

#include <jansson.h>

#include "util/rc_error.h"

typedef enum auth_role { ROLE_NONE = 0, ROLE_READ = 1, ROLE_SUBMIT = 2, ROLE_ADMIN = 3 } auth_role;

typedef struct auth auth;

int auth_new(auth **ret);
void auth_free(auth *a);

/* Replaces the token set from a JSON array of {"name", "role", "sha256"}
 * and optionally "phi": true (NULL or empty = no tokens).  The name "-" is
 * refused: it stands for "no token" (loopback mode) in owners and the audit
 * log.  On error the old set stays. */
int auth_load(auth *a, const json_t *tokens, rc_err *err);
int auth_count(auth *a);

/* Checks an Authorization header value.  Returns 0 and the role, the token
 * name (name buffer of 64) and whether it may see patient fields (*phi)
 * when it matches; RC_EUNAUTH when the header is absent or the token
 * unknown; RC_EINVAL when the header does not start with the Bearer scheme
 * (a bare token, Basic, ...), so the answer can say how it must read. */
int auth_check(auth *a, const char *header, auth_role *role, char name[64], int *phi);

const char *auth_role_name(auth_role r);
/* Lower-case hex SHA-256 of s into hex[65]. */
void auth_sha256_hex(const char *s, size_t len, char hex[65]);

#endif
