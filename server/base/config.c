/* config: defaults < config file < flags (config.h). */
#include "base/config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/auth.h"
#include "jfield.h"
#include "spec.h"

void config_default(config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
	c->listen_port = 8080;
	snprintf(c->store, sizeof c->store, "./var");
	/* Next to the daemon's own binary unless configured (set in main). */
	c->threads = 256;
	c->worker_threads = 0;
	c->max_body = 16u << 20;           /* a spec with 100k matrices is ~20 MB of JSON at most */
	c->max_job_bytes = 64ull << 30;
	c->matrix_cache_bytes = 20ull << 30; /* a 512^2 geometry's matrices are 6-7 GB */
	c->retention_s = 7 * 86400.0;
	c->stream_idle_s = 300;
	c->max_per_ip = 64;
	c->conn_timeout_s = 600;
	c->header_timeout_s = 30; /* a request's head is a few hundred bytes: seconds even on a slow link */
	c->push_retry_s = 10;
	c->push_max_attempts = 8;
	c->lease_s = 15;
	c->max_attempts = 3;
	c->preview_concurrency = 2; /* a render is one core's work; leave the rest to the reconstruction */
	snprintf(c->mpirun, sizeof c->mpirun, "mpirun");
}

void config_clear(config *c)
{
	json_decref(c->tokens);
	c->tokens = NULL;
	free(c->dests);
	c->dests = NULL;
	c->ndests = 0;
}

/* A UID root short enough to leave room for the UIDs made under it. */
static int check_uid_root(const char *r, rc_err *err)
{
	return spec_uid_valid(r, 40) ? 0 : rc_fail(err, RC_EINVAL, "dicom.uid_root",
				"dicom.uid_root must be a UID of at most 40 characters: digits and dots, no empty "
				"component, no leading zero (got \"%s\")", r);
}

static int load_dicom(config *c, const json_t *o, rc_err *err)
{
	static const char *const keys[] = { "uid_root", "push_retry_s", "push_max_attempts", "push_confirm_warnings",
					    NULL };
	const char *root = NULL;
	long long v = c->push_max_attempts;
	double d = c->push_retry_s;
	int rc;
	if (!json_is_object(o))
		return rc_fail(err, RC_EINVAL, "dicom", "dicom must be an object");
	if ((rc = jf_check_keys(o, "dicom", keys, err)) || (rc = jf_str(o, "dicom", "uid_root", 0, 40, &root, err)) ||
	    (rc = jf_num(o, "dicom", "push_retry_s", 0, 0, 1, 3600, &d, err)) ||
	    (rc = jf_int(o, "dicom", "push_max_attempts", 0, 1, 1000, &v, err)) ||
	    (rc = jf_bool(o, "dicom", "push_confirm_warnings", 0, &c->push_confirm_warnings, err)))
		return rc;
	if (root && (rc = check_uid_root(root, err)))
		return rc;
	if (root)
		snprintf(c->uid_root, sizeof c->uid_root, "%s", root);
	c->push_retry_s = d;
	c->push_max_attempts = (int)v;
	return 0;
}

int config_parse_listen(const char *s, char *host, size_t hn, int *port, rc_err *err)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s)
		return rc_fail(err, RC_EINVAL, "listen", "listen must be HOST:PORT, e.g. 127.0.0.1:8080 (got \"%s\")", s);
	char *end;
	long p = strtol(colon + 1, &end, 10);
	if (*end || p < 0 || p > 65535 || colon[1] == '\0')
		return rc_fail(err, RC_EINVAL, "listen", "the port of listen must be 0..65535 (got \"%s\")", colon + 1);
	size_t len = (size_t)(colon - s);
	if (len >= hn)
		return rc_fail(err, RC_EINVAL, "listen", "the host of listen is too long");
	memcpy(host, s, len);
	host[len] = '\0';
	*port = (int)p;
	return 0;
}

static int copy_str(const json_t *o, const char *key, char *dst, size_t n, rc_err *err)
{
	const char *v = NULL;
	int rc = jf_str(o, "", key, 0, n - 1, &v, err);
	if (!rc && v)
		snprintf(dst, n, "%s", v);
	return rc;
}

/* The keys of the config object o over c; origin names it in messages. */
static int load_object(config *c, json_t *o, const char *origin, rc_err *err)
{
	static const char *const keys[] = { "listen", "store", "worker", "probe_worker", "threads", "worker_threads", "max_body_bytes",
					    "max_job_bytes", "retention_s", "stream_idle_s", "max_connections_per_ip", "connection_timeout_s",
					    "header_timeout_s",
					    "tls_cert", "tls_key", "token_file", "audit_log", "port_file", "tokens", "dicom", "destinations",
					    "preview_concurrency", "spool", "node", "lease_s", "max_attempts", "memory_limit",
					    "matrix_cache_bytes", "mpi_max_ranks", "mpirun", "mpi_worker", "mpi_hosts",
					    "mpi_hostfile", "mpi_args", NULL };
	int rc;
	long long v;
	double d;
	char listen[300] = "";
	if (!json_is_object(o))
		return rc_fail(err, RC_EINVAL, "config", "%s must hold a JSON object", origin);
	if ((rc = jf_check_keys(o, "", keys, err)) || (rc = copy_str(o, "listen", listen, sizeof listen, err)))
		goto out;
	if (listen[0] && (rc = config_parse_listen(listen, c->listen_host, sizeof c->listen_host, &c->listen_port, err)))
		goto out;
	if ((rc = copy_str(o, "store", c->store, sizeof c->store, err)) ||
	    (rc = copy_str(o, "worker", c->worker, sizeof c->worker, err)) ||
	    (rc = copy_str(o, "probe_worker", c->probe_worker, sizeof c->probe_worker, err)) ||
	    (rc = copy_str(o, "tls_cert", c->tls_cert, sizeof c->tls_cert, err)) ||
	    (rc = copy_str(o, "tls_key", c->tls_key, sizeof c->tls_key, err)) ||
	    (rc = copy_str(o, "token_file", c->token_file, sizeof c->token_file, err)) ||
	    (rc = copy_str(o, "audit_log", c->audit_log, sizeof c->audit_log, err)) ||
	    (rc = copy_str(o, "port_file", c->port_file, sizeof c->port_file, err)) ||
	    (rc = copy_str(o, "spool", c->spool, sizeof c->spool, err)) ||
	    (rc = copy_str(o, "node", c->node, sizeof c->node, err)) ||
	    (rc = copy_str(o, "mpirun", c->mpirun, sizeof c->mpirun, err)) ||
	    (rc = copy_str(o, "mpi_worker", c->mpi_worker, sizeof c->mpi_worker, err)) ||
	    (rc = copy_str(o, "mpi_hosts", c->mpi_hosts, sizeof c->mpi_hosts, err)) ||
	    (rc = copy_str(o, "mpi_hostfile", c->mpi_hostfile, sizeof c->mpi_hostfile, err)) ||
	    (rc = copy_str(o, "mpi_args", c->mpi_args, sizeof c->mpi_args, err)))
		goto out;
#define INT_OPT(key, lo, hi, dst) \
	do { \
		v = (long long)(dst); \
		if ((rc = jf_int(o, "", key, 0, lo, hi, &v, err))) \
			goto out; \
		dst = v; \
	} while (0)
	INT_OPT("threads", 1, 100000, c->threads);
	INT_OPT("worker_threads", 0, 4096, c->worker_threads);
	INT_OPT("max_body_bytes", 1024, 1ll << 32, c->max_body);
	INT_OPT("max_job_bytes", 1 << 20, 1ll << 50, c->max_job_bytes);
	json_t *ml = json_object_get(o, "memory_limit");
	if (ml && !(json_is_string(ml) && !strcmp(json_string_value(ml), "auto"))) { /* "auto": the default */
		/* bytes, or the flag's string form ("8G") */
		uint64_t b = 0;
		if (json_is_integer(ml) && json_integer_value(ml) >= (1 << 20))
			b = (uint64_t)json_integer_value(ml);
		else if (!json_is_string(ml) || config_parse_bytes(json_string_value(ml), &b) || b < (1 << 20)) {
			rc = rc_fail(err, RC_EINVAL, "memory_limit", "memory_limit must be a number of bytes of at least "
				     "1048576, a string such as \"8G\" (K, M, G, T: powers of 1024), or \"auto\" (the machine's "
				     "memory less a reserve)");
			goto out;
		}
		c->memory_limit = b;
	}
	json_t *mc = json_object_get(o, "matrix_cache_bytes");
	if (mc) {
		/* bytes, or the flag's string form ("20G") */
		uint64_t b = 0;
		if ((json_is_integer(mc) && json_integer_value(mc) >= 0))
			b = (uint64_t)json_integer_value(mc);
		else if (!json_is_string(mc) || config_parse_bytes(json_string_value(mc), &b)) {
			rc = rc_fail(err, RC_EINVAL, "matrix_cache_bytes", "matrix_cache_bytes must be a number of bytes "
				     "(0 = no matrix cache) or a string such as \"20G\" (K, M, G, T: powers of 1024)");
			goto out;
		}
		c->matrix_cache_bytes = b;
	}
	INT_OPT("max_connections_per_ip", 1, 100000, c->max_per_ip);
	INT_OPT("connection_timeout_s", 1, 86400, c->conn_timeout_s);
	INT_OPT("header_timeout_s", 1, 3600, c->header_timeout_s);
	if (json_object_get(o, "max_connections_per_ip"))
		c->max_per_ip_set = 1;
	INT_OPT("preview_concurrency", 1, 64, c->preview_concurrency);
	INT_OPT("max_attempts", 1, 1000, c->max_attempts);
	INT_OPT("mpi_max_ranks", 0, 4096, c->mpi_max_ranks);
#undef INT_OPT
	d = c->retention_s;
	if ((rc = jf_num(o, "", "retention_s", 0, 0, 0, 1e10, &d, err)))
		goto out;
	c->retention_s = d;
	d = c->stream_idle_s;
	if ((rc = jf_num(o, "", "stream_idle_s", 0, 5, 0, 86400, &d, err))) /* well above a device group's 1 s wait */
		goto out;
	c->stream_idle_s = d;
	d = c->lease_s;
	if ((rc = jf_num(o, "", "lease_s", 0, 1, 0, 86400, &d, err)))
		goto out;
	c->lease_s = d;
	json_t *t = json_object_get(o, "tokens");
	if (t) {
		json_decref(c->tokens);
		c->tokens = json_incref(t);
	}
	if ((t = json_object_get(o, "dicom")) && (rc = load_dicom(c, t, err)))
		goto out;
	if ((t = json_object_get(o, "destinations"))) {
		destination *d;
		int n;
		if ((rc = destinations_parse(t, &d, &n, err)))
			goto out;
		free(c->dests);
		c->dests = d;
		c->ndests = n;
	}
out:
	return rc;
}

int config_load_file(config *c, const char *path, rc_err *err)
{
	json_error_t je;
	json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return rc_fail(err, RC_EINVAL, "config", "%s:%d:%d: %s", path, je.line, je.column, je.text);
	int rc = load_object(c, o, path, err);
	if (!rc)
		snprintf(c->config_path, sizeof c->config_path, "%s", path);
	json_decref(o);
	return rc;
}

int config_load_json(config *c, const char *buf, size_t len, rc_err *err)
{
	json_error_t je;
	json_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return rc_fail(err, RC_EINVAL, "config", "config:%d:%d: %s", je.line, je.column, je.text);
	int rc = load_object(c, o, "the config", err);
	json_decref(o);
	return rc;
}

int config_reload_tokens(config *c, json_t **ret_tokens, rc_err *err)
{
	const char *path = c->token_file[0] ? c->token_file : c->config_path;
	*ret_tokens = NULL;
	if (!path[0])
		return 0;
	json_error_t je;
	json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return rc_fail(err, RC_EINVAL, "tokens", "%s:%d:%d: %s", path, je.line, je.column, je.text);
	/* A dedicated token file holds "tokens" and nothing else: a misspelled
	 * key must not read as "no tokens" (that would switch authentication
	 * off).  The config file's other keys are load_object's to check. */
	static const char *const keys[] = { "tokens", NULL };
	json_t *t = json_object_get(o, "tokens");
	rc_err e;
	int rc = 0;
	if (c->token_file[0] && !json_is_object(o))
		rc = rc_fail(err, RC_EINVAL, "tokens", "%s must hold {\"tokens\": [...]}", path);
	else if (c->token_file[0] && jf_check_keys(o, "", keys, &e))
		rc = rc_fail(err, RC_EINVAL, "tokens", "%s: \"%s\" is not a known key; a token file holds "
			     "{\"tokens\": [...]} only", path, e.field);
	else if (c->token_file[0] && !t)
		rc = rc_fail(err, RC_EINVAL, "tokens", "%s has no \"tokens\" list", path);
	else if (t && !json_is_array(t))
		rc = rc_fail(err, RC_EINVAL, "tokens", "%s: tokens must be a list of {\"name\", \"role\", \"sha256\"}", path);
	else if (t)
		*ret_tokens = json_incref(t);
	json_decref(o);
	return rc;
}

void config_mask_uri(const char *where, char *out, size_t n)
{
	snprintf(out, n, "%s", where);
	if (strncmp(out, "postgres", 8))
		return;
	/* scheme://user:PASSWORD@host: the userinfo ends at the first '@' */
	char *auth = strstr(out, "://"), *at, *colon;
	if (auth && (at = strchr(auth + 3, '@')) && (colon = memchr(auth + 3, ':', (size_t)(at - auth - 3)))) {
		char rest[1024];
		snprintf(rest, sizeof rest, "%s", at);
		snprintf(colon, n - (size_t)(colon - out), ":***%s", rest);
	}
	/* ?password=...&: libpq's parameter form */
	for (char *p = strstr(out, "password="); p; p = strstr(p + 1, "password=")) {
		char *v = p + 9, *end = v + strcspn(v, "&");
		char rest[1024];
		snprintf(rest, sizeof rest, "%s", end);
		snprintf(v, n - (size_t)(v - out), "***%s", rest);
	}
}

static void usage(void)
{
	printf("usage: recond [options]\n"
	       "  --config PATH          JSON config file (optional; flags override it)\n"
	       "  --listen HOST:PORT     address to serve on (default 127.0.0.1:8080; port 0 = any free port)\n"
	       "  --store DIR|URI        job database and spool directory (default ./var), or a PostgreSQL\n"
	       "                         database postgresql://USER@HOST:PORT/DB shared by many daemons\n"
	       "  --spool DIR            the job files (required with PostgreSQL: one directory all share)\n"
	       "  --node NAME            this daemon's name in the cluster (default: the host name)\n"
	       "  --lease SECONDS        a running job's lease (PostgreSQL; default 15, at least 1)\n"
	       "  --max-attempts N       lease expiries before a job fails (default 3)\n"
	       "  --worker PATH          the worker program (default: recond-worker next to recond)\n"
	       "  --probe-worker PATH    program run as `PATH --devices` at start to list the devices\n"
	       "                         (default: recond-worker next to recond, whatever --worker says)\n"
	       "  --threads N            maximum concurrent connections (default 256)\n"
	       "  --worker-threads N     CPU threads per job (default 0 = all cores)\n"
	       "  --max-body BYTES       cap on JSON request bodies (default 16 MiB)\n"
	       "  --max-job-bytes BYTES  cap on projections + volume of one job (default 64 GiB)\n"
	       "  --memory-limit BYTES   memory one job may take, K/M/G/T suffixes (e.g. 8G); a job predicted to\n"
	       "                         need more is refused (422) (default: the machine's or its cgroup's\n"
	       "                         memory less the larger of 10 %% and 1 GiB)\n"
	       "  --matrix-cache-bytes BYTES  bound on the cached system matrices (STATE/matrices), K/M/G/T\n"
	       "                         suffixes; least recently used deleted first (default 20G; 0 = no cache)\n"
	       "  --retention SECONDS    finished jobs are deleted after this (default 7 days)\n"
	       "  --max-per-ip N         connections per client address (default 64, at most threads/4)\n"
	       "  --timeout SECONDS      idle time before a connection is closed (default 600)\n"
	       "  --header-timeout SECONDS  time for a request line and headers to arrive (default 30)\n"
	       "  --token-file PATH      JSON {\"tokens\": [{\"name\", \"role\", \"sha256\"}]}; reloaded on SIGHUP\n"
	       "  --tls-cert PATH --tls-key PATH   serve HTTPS\n"
	       "  --audit-log PATH       requests touching patient data (default STORE/audit.log)\n"
	       "  --port-file PATH       write the bound port there once listening\n"
	       "  --hash-token           read a token on stdin, print its SHA-256 for the config\n"
	       "  --mpi-max-ranks N      the most MPI ranks a job may ask for (execution.ranks; default 0 = no\n"
	       "                         MPI jobs; docs/cluster.md)\n"
	       "  --mpirun PATH          the MPI launcher (default mpirun)\n"
	       "  --mpi-worker PATH      the MPI worker (default: recond-worker-mpi next to recond)\n"
	       "  --mpi-hosts LIST       mpirun --host, e.g. node1:8,node2:8\n"
	       "  --mpi-hostfile PATH    mpirun --hostfile\n"
	       "  --mpi-args \"ARGS\"      more mpirun arguments, split at spaces\n");
}

int config_parse_bytes(const char *s, uint64_t *ret)
{
	char *end;
	if (!s || !*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; break;
	case 'M': case 'm': shift = 20; break;
	case 'G': case 'g': shift = 30; break;
	case 'T': case 't': shift = 40; break;
	case '\0': break;
	default: return -1;
	}
	if (shift && end[1] && strcmp(end + 1, "B") && strcmp(end + 1, "iB"))
		return -1;
	if (errno || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*ret = (uint64_t)v << shift;
	return 0;
}

/* The first number after key in the file at path (0: none). */
static uint64_t read_num(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char line[256];
	uint64_t v = 0;
	while (fgets(line, sizeof line, f)) {
		if (key && strncmp(line, key, strlen(key)))
			continue;
		const char *p = line + (key ? strlen(key) : 0);
		while (*p == ' ' || *p == '\t' || *p == ':')
			p++;
		if (*p >= '0' && *p <= '9')
			v = strtoull(p, NULL, 10) * (key ? 1024 : 1); /* meminfo counts kB */
		break;
	}
	fclose(f);
	return v;
}

uint64_t config_memory_budget(const config *c, uint64_t *machine)
{
	/* cgroup v2: memory.max is "max" (no limit, read as 0) or bytes */
	uint64_t m = read_num("/sys/fs/cgroup/memory.max", NULL), total = read_num("/proc/meminfo", "MemTotal");
	if (!m || (total && total < m))
		m = total;
	if (machine)
		*machine = m;
	if (c && c->memory_limit)
		return c->memory_limit;
	/* the daemon, the page cache the uploads go through and the OS keep
	 * the larger of 10 % and 1 GiB (docs/server.md, "Memory") */
	uint64_t reserve = m / 10 > (1ull << 30) ? m / 10 : (1ull << 30);
	return m > reserve ? m - reserve : m / 2;
}

static int parse_u64(const char *s, const char *name, uint64_t lo, uint64_t *out, rc_err *err)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || v < lo || s[0] == '-')
		return rc_fail(err, RC_EINVAL, name, "--%s needs a whole number of at least %llu (got \"%s\")", name,
			       (unsigned long long)lo, s);
	*out = v;
	return 0;
}

int config_parse_args(config *c, int argc, char **argv, rc_err *err)
{
	enum { O_CONFIG = 256, O_LISTEN, O_STORE, O_WORKER, O_THREADS, O_WTHREADS, O_MAXBODY, O_MAXJOB, O_RET,
	       O_PERIP, O_TIMEOUT, O_TOKENS, O_PROBE, O_CERT, O_KEY, O_AUDIT, O_PORTFILE, O_HASH, O_HELP,
	       O_SPOOL, O_NODE, O_LEASE, O_ATTEMPTS, O_HDRTIMEOUT, O_MEMLIMIT, O_MCACHE,
	       O_MPIMAX, O_MPIRUN, O_MPIWORKER, O_MPIHOSTS, O_MPIHOSTFILE, O_MPIARGS };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, O_CONFIG }, { "listen", required_argument, NULL, O_LISTEN },
		{ "store", required_argument, NULL, O_STORE }, { "worker", required_argument, NULL, O_WORKER },
		{ "probe-worker", required_argument, NULL, O_PROBE },
		{ "threads", required_argument, NULL, O_THREADS }, { "worker-threads", required_argument, NULL, O_WTHREADS },
		{ "max-body", required_argument, NULL, O_MAXBODY }, { "max-job-bytes", required_argument, NULL, O_MAXJOB },
		{ "memory-limit", required_argument, NULL, O_MEMLIMIT },
		{ "matrix-cache-bytes", required_argument, NULL, O_MCACHE },
		{ "retention", required_argument, NULL, O_RET }, { "max-per-ip", required_argument, NULL, O_PERIP },
		{ "timeout", required_argument, NULL, O_TIMEOUT }, { "token-file", required_argument, NULL, O_TOKENS },
		{ "header-timeout", required_argument, NULL, O_HDRTIMEOUT },
		{ "tls-cert", required_argument, NULL, O_CERT }, { "tls-key", required_argument, NULL, O_KEY },
		{ "audit-log", required_argument, NULL, O_AUDIT }, { "port-file", required_argument, NULL, O_PORTFILE },
		{ "spool", required_argument, NULL, O_SPOOL }, { "node", required_argument, NULL, O_NODE },
		{ "lease", required_argument, NULL, O_LEASE }, { "max-attempts", required_argument, NULL, O_ATTEMPTS },
		{ "hash-token", no_argument, NULL, O_HASH }, { "help", no_argument, NULL, O_HELP },
		{ "mpi-max-ranks", required_argument, NULL, O_MPIMAX }, { "mpirun", required_argument, NULL, O_MPIRUN },
		{ "mpi-worker", required_argument, NULL, O_MPIWORKER }, { "mpi-hosts", required_argument, NULL, O_MPIHOSTS },
		{ "mpi-hostfile", required_argument, NULL, O_MPIHOSTFILE }, { "mpi-args", required_argument, NULL, O_MPIARGS },
		{ NULL, 0, NULL, 0 },
	};
	int rc, o;
	/* The file first, whatever the position of --config, so flags win. */
	opterr = 0;
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1)
		if (o == O_CONFIG && (rc = config_load_file(c, optarg, err)))
			return rc;
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint64_t v = 0;
		rc = 0;
		switch (o) {
		case O_CONFIG: break;
		case O_LISTEN: rc = config_parse_listen(optarg, c->listen_host, sizeof c->listen_host, &c->listen_port, err); break;
		case O_STORE: snprintf(c->store, sizeof c->store, "%s", optarg); break;
		case O_SPOOL: snprintf(c->spool, sizeof c->spool, "%s", optarg); break;
		case O_NODE:
			if (!optarg[0] || strlen(optarg) >= sizeof c->node)
				rc = rc_fail(err, RC_EINVAL, "node", "--node needs a name of 1 to %zu bytes", sizeof c->node - 1);
			else
				snprintf(c->node, sizeof c->node, "%s", optarg);
			break;
		case O_LEASE: if (!(rc = parse_u64(optarg, "lease", 1, &v, err))) c->lease_s = (double)v; break;
		case O_ATTEMPTS: if (!(rc = parse_u64(optarg, "max-attempts", 1, &v, err))) c->max_attempts = (int)v; break;
		case O_WORKER: snprintf(c->worker, sizeof c->worker, "%s", optarg); break;
		case O_PROBE: snprintf(c->probe_worker, sizeof c->probe_worker, "%s", optarg); break;
		case O_THREADS: if (!(rc = parse_u64(optarg, "threads", 1, &v, err))) c->threads = (int)v; break;
		case O_WTHREADS: if (!(rc = parse_u64(optarg, "worker-threads", 0, &v, err))) c->worker_threads = (int)v; break;
		case O_MAXBODY: rc = parse_u64(optarg, "max-body", 1024, &c->max_body, err); break;
		case O_MAXJOB: rc = parse_u64(optarg, "max-job-bytes", 1 << 20, &c->max_job_bytes, err); break;
		case O_MEMLIMIT:
			if (config_parse_bytes(optarg, &v) || v < (1 << 20))
				rc = rc_fail(err, RC_EINVAL, "memory-limit", "--memory-limit needs bytes of at least 1M, with an "
					     "optional K, M, G or T suffix, e.g. 8G (got \"%s\")", optarg);
			else
				c->memory_limit = v;
			break;
		case O_MCACHE:
			if (config_parse_bytes(optarg, &v))
				rc = rc_fail(err, RC_EINVAL, "matrix-cache-bytes", "--matrix-cache-bytes needs bytes with an "
					     "optional K, M, G or T suffix, e.g. 20G, or 0 for no cache (got \"%s\")", optarg);
			else
				c->matrix_cache_bytes = v;
			break;
		case O_RET: if (!(rc = parse_u64(optarg, "retention", 0, &v, err))) c->retention_s = (double)v; break;
		case O_PERIP:
			if (!(rc = parse_u64(optarg, "max-per-ip", 1, &v, err))) {
				c->max_per_ip = (int)v;
				c->max_per_ip_set = 1;
			}
			break;
		case O_HDRTIMEOUT:
			if (!(rc = parse_u64(optarg, "header-timeout", 1, &v, err)) && v > 3600)
				rc = rc_fail(err, RC_EINVAL, "header-timeout", "--header-timeout is at most 3600 seconds");
			if (!rc)
				c->header_timeout_s = (int)v;
			break;
		case O_TIMEOUT: if (!(rc = parse_u64(optarg, "timeout", 1, &v, err))) c->conn_timeout_s = (int)v; break;
		case O_TOKENS: snprintf(c->token_file, sizeof c->token_file, "%s", optarg); break;
		case O_CERT: snprintf(c->tls_cert, sizeof c->tls_cert, "%s", optarg); break;
		case O_KEY: snprintf(c->tls_key, sizeof c->tls_key, "%s", optarg); break;
		case O_AUDIT: snprintf(c->audit_log, sizeof c->audit_log, "%s", optarg); break;
		case O_PORTFILE: snprintf(c->port_file, sizeof c->port_file, "%s", optarg); break;
		case O_MPIMAX:
			if (!(rc = parse_u64(optarg, "mpi-max-ranks", 0, &v, err)) && v > 4096)
				rc = rc_fail(err, RC_EINVAL, "mpi-max-ranks", "--mpi-max-ranks is at most 4096");
			if (!rc)
				c->mpi_max_ranks = (int)v;
			break;
		case O_MPIRUN: snprintf(c->mpirun, sizeof c->mpirun, "%s", optarg); break;
		case O_MPIWORKER: snprintf(c->mpi_worker, sizeof c->mpi_worker, "%s", optarg); break;
		case O_MPIHOSTS: snprintf(c->mpi_hosts, sizeof c->mpi_hosts, "%s", optarg); break;
		case O_MPIHOSTFILE: snprintf(c->mpi_hostfile, sizeof c->mpi_hostfile, "%s", optarg); break;
		case O_MPIARGS: snprintf(c->mpi_args, sizeof c->mpi_args, "%s", optarg); break;
		case O_HASH: {
			char line[4096], hex[65];
			if (!fgets(line, sizeof line, stdin))
				return rc_fail(err, RC_EINVAL, "hash-token", "--hash-token reads the token on stdin");
			line[strcspn(line, "\r\n")] = '\0';
			auth_sha256_hex(line, strlen(line), hex);
			printf("%s\n", hex);
			return 1;
		}
		case O_HELP: usage(); return 1;
		default:
			return rc_fail(err, RC_EINVAL, "args", "unknown or incomplete option \"%s\" (recond --help lists them)",
				       argv[optind - 1]);
		}
		if (rc)
			return rc;
	}
	if (optind < argc)
		return rc_fail(err, RC_EINVAL, "args", "unexpected argument \"%s\"", argv[optind]);
	if (c->token_file[0]) {
		json_t *t = NULL;
		if ((rc = config_reload_tokens(c, &t, err)))
			return rc;
		json_decref(c->tokens);
		c->tokens = t;
	}
	return 0;
}
