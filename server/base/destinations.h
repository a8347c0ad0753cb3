/*
 * destinations: the PACS a job may push its DICOM series to, configured by
 * the operator in the config file's "destinations" array and only named by
 * jobs (output.push), so that no client can send patient data to an address
 * of its own or read a PACS password (docs/pacs.md).
 *
 *   {"name": "pacs-main", "kind": "stow-rs", "url": "https://pacs/dicom-web",
 *    "username": "...", "password": "...", "ca_file": "...", "timeout_s": 60}
 *   {"name": "pacs-dimse", "kind": "c-store", "host": "10.0.0.5", "port": 104,
 *    "called_ae": "PACS", "calling_ae": "RECOND", "timeout_s": 30}
 */
#ifndef RC_DESTINATIONS_H
#define RC_DESTINATIONS_H

#include <jansson.h>

#include "util/rc_error.h"

#define DEST_NAME_MAX 32
#define DEST_MAX 32

typedef enum dest_kind { DEST_STOW_RS = 0, DEST_C_STORE = 1 } dest_kind;

typedef struct destination {
	char name[DEST_NAME_MAX + 1];
	dest_kind kind;
	int timeout_s;
	/* stow-rs */
	char url[1024];
	char username[256], password[256];
	char ca_file[1024];
	/* c-store */
	char host[256];
	int port;
	char called_ae[17], calling_ae[17];
} destination;

const char *dest_kind_name(dest_kind k);

/* Parses the config's "destinations" array into *ret (malloc'd, *n entries).
 * Errors name the entry: "destinations[1].port must be ...". */
int destinations_parse(const json_t *arr, destination **ret, int *n, rc_err *err);

/* The entry called name, or NULL. */
const destination *destinations_find(const destination *d, int n, const char *name);

/* The list GET /v1/destinations answers: names, kinds and where (URL or
 * host:port and AE titles), never credentials. */
json_t *destinations_json(const destination *d, int n);

#endif
