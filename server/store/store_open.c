/*
 * store_open: the choice of backend from the store's address and the
 * opening of the spool and the backend (store.h).  Above store.c and the
 * backends: it is the one file that names them both, so store.c reaches a
 * backend only through its ops and the backends call down into store.c's
 * decisions without a cycle.
 */
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/store_backend.h"

int store_is_pg(const char *where)
{
	return where && (!strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11));
}

int store_open2(const char *where, const char *spool, const char *node, store **ret, rc_err *err)
{
	int pg = store_is_pg(where), rc;
	char host[STORE_NODE_MAX];
	if (!where || !where[0])
		return rc_fail(err, RC_EINVAL, "store", "no store given");
	if (pg && (!spool || !spool[0]))
		return rc_fail(err, RC_EINVAL, "spool",
			       "a PostgreSQL store needs a spool directory (--spool DIR), shared by its daemons");
	if (!spool || !spool[0])
		spool = where;
	if (!node || !node[0]) {
		if (gethostname(host, sizeof host))
			snprintf(host, sizeof host, "local");
		host[sizeof host - 1] = '\0';
		node = host;
	}
	if (strlen(node) >= STORE_NODE_MAX)
		return rc_fail(err, RC_EINVAL, "node", "the node name is longer than %d bytes", STORE_NODE_MAX - 1);
	if (strlen(spool) >= sizeof(((store *)0)->dir) - 64)
		return rc_fail(err, RC_EINVAL, "spool", "the spool directory's path is too long");
	if ((rc = store_spool_init(spool, err)))
		return rc;
	store *st = NULL;
	if ((rc = pg ? store_pg_open(where, &st, err) : store_sqlite_open(where, &st, err)))
		return rc;
	snprintf(st->dir, sizeof st->dir, "%s", spool);
	snprintf(st->node, sizeof st->node, "%s", node);
	pthread_mutex_init(&st->holds_lock, NULL);
	pthread_cond_init(&st->holds_cond, NULL);
	*ret = st;
	return 0;
}

int store_open(const char *dir, store **ret, rc_err *err)
{
	return store_open2(dir, NULL, NULL, ret, err);
}
