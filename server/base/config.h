/*
 * config: the daemon's settings.  Defaults, then the config file (JSON, by
 * --config; optional), then command-line flags, each overriding the one
 * before.  The token list lives in the config file or in a separate token
 * file (JSON {"tokens": [...]}) so that SIGHUP can reload it alone.
 */
#ifndef RC_CONFIG_H
#define RC_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "util/rc_error.h"
#include "base/destinations.h"

typedef struct config {
	char config_path[1024];
	char listen_host[256];
	int listen_port;
	char store[1024];          /* a directory (SQLite) or a postgresql:// URI (store.h) */
	char spool[1024];          /* the job files; "" = the store's directory (required with PostgreSQL) */
	char node[64];             /* this daemon's name in the cluster; "" = the host name */
	double lease_s;            /* PostgreSQL: a running job's lease, renewed every lease_s / 3 */
	int max_attempts;          /* a job whose lease expired this many times fails (lease_expired) */
	char worker[1024];
	char probe_worker[1024];   /* runs `--devices` at start; "" = recond-worker next to recond */
	int threads;               /* HTTP: maximum concurrent connections served (thread per connection) */
	int worker_threads;        /* CPU threads per job (0 = all cores) */
	uint64_t max_body;         /* JSON request body cap */
	uint64_t max_job_bytes;    /* projections + volume cap of one job */
	uint64_t matrix_cache_bytes; /* bound on STATE/matrices, the cached system matrices
				      * (projectors/matrix_cache.h); 0 = no matrix cache */
	uint64_t memory_limit;     /* memory one job's worker may take (bytes); 0 = what the machine or its
				    * cgroup gives less a reserve (config_memory_budget) */
	double retention_s;        /* finished jobs expire after this */
	double stream_idle_s;      /* a streaming job pauses (back to receiving) when no view came for this long */
	int max_per_ip;            /* connections per client address */
	int max_per_ip_set;        /* configured: else at most a quarter of threads (http.c) */
	int conn_timeout_s;        /* a connection silent this long is closed */
	int header_timeout_s;      /* a request line and headers not complete this long after the connection
				    * opened or its last request ended: the connection is closed (http.c) */
	char tls_cert[1024], tls_key[1024];
	char token_file[1024];
	char audit_log[1024];      /* "" = {store}/audit.log */
	char port_file[1024];      /* write the bound port here (tests bind port 0) */
	json_t *tokens;            /* owned; NULL = none */
	char uid_root[41];         /* dicom.uid_root: DICOM UIDs are made under it ("" = DCMTK's) */
	destination *dests;        /* owned; the PACS jobs may push to (destinations.h) */
	int ndests;
	double push_retry_s;       /* first wait before a failed push is retried; doubles, up to 1 h */
	int push_max_attempts;     /* then the push is send_failed */
	int push_confirm_warnings; /* a job with warnings waits for POST push before its output.push */
	int preview_concurrency;   /* slice previews rendered at once (http_preview.c); more wait, then 503 */
	/* One job across processes over MPI (docs/cluster.md): a job with
	 * execution.ranks N > 1 runs `mpirun -np N [--host H | --hostfile F]
	 * ARGS MPI_WORKER ...` (server/jobs/runner_mpi.c) */
	int mpi_max_ranks;         /* the most ranks a job may ask for; 0 = no MPI jobs (422) */
	char mpirun[1024];         /* the launcher (default "mpirun", found on PATH) */
	char mpi_worker[1024];     /* "" = recond-worker-mpi next to recond */
	char mpi_hosts[1024];      /* mpirun --host list, "node1:8,node2:8"; "" = none given */
	char mpi_hostfile[1024];   /* mpirun --hostfile; "" = none given */
	char mpi_args[1024];       /* more mpirun arguments, split at spaces (e.g. "--mca btl self,tcp") */
	char mpi_off[256];         /* why MPI jobs are refused though mpi_max_ranks > 0 ("" = they run) */
} config;

void config_default(config *c);
void config_clear(config *c);
/* Reads a JSON config file over the current values and remembers its path
 * (config_reload_tokens reads it again). */
int config_load_file(config *c, const char *path, rc_err *err);
/* The same for len bytes of JSON text in memory (no path is remembered). */
int config_load_json(config *c, const char *buf, size_t len, rc_err *err);
/* Parses argv over the current values.  Returns 1 when the program should
 * exit 0 (--help, --hash-token done), 0 to run, < 0 on a bad flag. */
int config_parse_args(config *c, int argc, char **argv, rc_err *err);
/* Loads the tokens again (token file if set, else the config file). */
int config_reload_tokens(config *c, json_t **ret_tokens, rc_err *err);
int config_parse_listen(const char *s, char *host, size_t hn, int *port, rc_err *err);
/* "8G", "512M", "1048576": bytes with an optional K/M/G/T suffix (powers of 1024). */
int config_parse_bytes(const char *s, uint64_t *ret);
/* The memory a job's worker may take: memory_limit when set, else the
 * machine's memory (cgroup v2 memory.max when not "max", else MemTotal of
 * /proc/meminfo) less a reserve for the daemon and the OS, the larger of
 * 10 % and 1 GiB (docs/server.md, "Memory").  *machine (may be NULL) gets
 * what the machine gives (0 when unknown); 0 is returned when neither is
 * known (no check). */
uint64_t config_memory_budget(const config *c, uint64_t *machine);

/* where (a store's address) with a URI's password replaced by "***", for logs. */
void config_mask_uri(const char *where, char *out, size_t n);

#endif
