/*
 * reconctl: the command-line client of recond.  Parses options (all in one
 * table, accepted before or after the command), checks that the command got
 * exactly the arguments and options it takes, and runs it (rctl_cmd.h).
 * Exit codes are part of the interface: see usage() and docs/clients.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "rctl_cmd.h"
#include "rctl_job.h"

static void usage(FILE *to)
{
	fputs(
"usage: reconctl [--url URL] [--token TOKEN] [--json] [--quiet] COMMAND [ARGS]\n"
"\n"
"commands:\n"
"  submit SPEC.json --projections FILE [--flat F] [--dark D] [--bad-pixels B]\n"
"         [--no-start] [--watch]\n"
"                        create a job, upload its projections (raw float32,\n"
"                        [view][v][u]; or counts, the spec's input) and queue\n"
"                        it; prints the job id.  --flat, --dark: files of one\n"
"                        or more detector images (averaged), --bad-pixels: a\n"
"                        uint8 map, for a spec whose input names them\n"
"                        \"uploaded\"; sent before the projections\n"
"                        (with --watch the id alone too: the final state\n"
"                        goes to stderr, the outcome is the exit code)\n"
"  watch ID              follow a job until it ends (progress bar; --json:\n"
"                        one JSON line per event, then {\"event\":\"end\",...})\n"
"  get ID -o FILE [--format raw|nifti|mha|dicom]\n"
"                        download the volume (format from FILE's extension:\n"
"                        .nii .mha .raw .f32 .bin, .zip for the DICOM series;\n"
"                        -o - writes to stdout)\n"
"  status ID             state, progress, error and PACS delivery of a job\n"
"  list [--state S] [--limit N]   jobs, newest first\n"
"  cancel ID             cancel a job that has not finished (never deletes)\n"
"  priority ID N         set the priority (0..9, higher runs first) of a job\n"
"                        that has not started running\n"
"  delete ID             delete a finished job and its files (cancel first)\n"
"  devices               the daemon's compute devices\n"
"  nodes                 the daemons sharing the store: alive, running job,\n"
"                        heartbeat, engines\n"
"  push ID               send a succeeded job's DICOM series again to the\n"
"                        destinations of its output.push; prints the pushes\n"
"  destinations          the PACS the daemon may push to (name, kind, address)\n"
"\n"
"options:\n"
"  --url URL       daemon address (default $RECOND_URL or http://127.0.0.1:8080)\n"
"  --token TOKEN   bearer token (default $RECOND_TOKEN)\n"
"  --json          machine-readable output on stdout\n"
"  --quiet         no progress bar or messages, only results and errors\n"
"  --idle SECONDS  watch: reconnect after this long without events (default 15)\n"
"\n"
"exit codes:\n"
"  0  ok (watch: the job succeeded)\n"
"  1  usage error (bad arguments, unreadable spec or file)\n"
"  2  the server refused the request (HTTP 4xx: bad spec, unknown job, token)\n"
"  3  server error (HTTP 5xx), network failure or a malformed answer\n"
"  4  the job failed (watch, submit --watch)\n"
"  5  the job was cancelled (watch, submit --watch)\n", to);
}

enum { OPT_URL = 256, OPT_TOKEN, OPT_JSON, OPT_QUIET, OPT_PROJ, OPT_NOSTART,
       OPT_WATCH, OPT_FORMAT, OPT_STATE, OPT_LIMIT, OPT_IDLE, OPT_HELP, OPT_FLAT, OPT_DARK, OPT_BAD };

/* Which command takes which options, and how many positional arguments. */
static const struct command {
	const char *name;
	int (*run)(rctl_conn *, const rctl_args *);
	int nargs;       /* positional arguments after the name */
	int id_arg;      /* the argument is a job id */
	const char *opts; /* letters of the command-specific options it takes */
} commands[] = {
	{ "submit", rctl_cmd_submit, 1, 0, "pnwFDB" },
	{ "watch", rctl_cmd_watch, 1, 1, "i" },
	{ "get", rctl_cmd_get, 1, 1, "of" },
	{ "status", rctl_cmd_status, 1, 1, "" },
	{ "list", rctl_cmd_list, 0, 0, "sl" },
	{ "cancel", rctl_cmd_cancel, 1, 1, "" },
	{ "priority", rctl_cmd_priority, 2, 1, "" },
	{ "delete", rctl_cmd_delete, 1, 1, "" },
	{ "devices", rctl_cmd_devices, 0, 0, "" },
	{ "nodes", rctl_cmd_nodes, 0, 0, "" },
	{ "push", rctl_cmd_push, 1, 1, "" },
	{ "destinations", rctl_cmd_destinations, 0, 0, "" },
};

static int parse_long(const char *s, long lo, long hi, long *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*ret = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "url", required_argument, NULL, OPT_URL },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "projections", required_argument, NULL, OPT_PROJ },
		{ "no-start", no_argument, NULL, OPT_NOSTART },
		{ "flat", required_argument, NULL, OPT_FLAT },
		{ "dark", required_argument, NULL, OPT_DARK },
		{ "bad-pixels", required_argument, NULL, OPT_BAD },
		{ "watch", no_argument, NULL, OPT_WATCH },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "state", required_argument, NULL, OPT_STATE },
		{ "limit", required_argument, NULL, OPT_LIMIT },
		{ "idle", required_argument, NULL, OPT_IDLE },
		{ "help", no_argument, NULL, OPT_HELP },
		{ 0 },
	};
	rctl_args a = { .idle_s = 15 };
	char given[16] = ""; /* letters of the command-specific options seen */
	a.url = getenv("RECOND_URL");
	a.token = getenv("RECOND_TOKEN");
	int opt;
	while ((opt = getopt_long(argc, argv, "o:hq", lopts, NULL)) != -1) {
		char letter = 0;
		switch (opt) {
		case OPT_URL: a.url = optarg; break;
		case OPT_TOKEN: a.token = optarg; break;
		case OPT_JSON: a.json = 1; break;
		case 'q': case OPT_QUIET: a.quiet = 1; break;
		case OPT_PROJ: a.projections = optarg; letter = 'p'; break;
		case OPT_NOSTART: a.no_start = 1; letter = 'n'; break;
		case OPT_FLAT: a.flat = optarg; letter = 'F'; break;
		case OPT_DARK: a.dark = optarg; letter = 'D'; break;
		case OPT_BAD: a.bad_pixels = optarg; letter = 'B'; break;
		case OPT_WATCH: a.watch = 1; letter = 'w'; break;
		case 'o': a.output = optarg; letter = 'o'; break;
		case OPT_FORMAT: a.format = optarg; letter = 'f'; break;
		case OPT_STATE: a.state = optarg; letter = 's'; break;
		case OPT_LIMIT:
			if (parse_long(optarg, 1, 100000, &a.limit) < 0) {
				fprintf(stderr, "reconctl: --limit must be an integer in 1..100000\n");
				return RCTL_EXIT_USAGE;
			}
			letter = 'l';
			break;
		case OPT_IDLE:
			if (parse_long(optarg, 1, 86400, &a.idle_s) < 0) {
				fprintf(stderr, "reconctl: --idle must be seconds in 1..86400\n");
				return RCTL_EXIT_USAGE;
			}
			letter = 'i';
			break;
		case 'h': case OPT_HELP: usage(stdout); return RCTL_EXIT_OK;
		default: usage(stderr); return RCTL_EXIT_USAGE;
		}
		if (letter && !strchr(given, letter)) {
			size_t n = strlen(given);
			given[n] = letter;
			given[n + 1] = '\0';
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return RCTL_EXIT_USAGE;
	}
	const char *name = argv[optind];
	const struct command *cmd = NULL;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(commands[i].name, name))
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "reconctl: unknown command '%s' (reconctl --help lists them)\n", name);
		return RCTL_EXIT_USAGE;
	}
	a.pos = argv + optind + 1;
	a.npos = argc - optind - 1;
	if (a.npos != cmd->nargs) {
		fprintf(stderr, "reconctl: %s takes %d argument%s (got %d); see reconctl --help\n",
			name, cmd->nargs, cmd->nargs == 1 ? "" : "s", a.npos);
		return RCTL_EXIT_USAGE;
	}
	for (const char *g = given; *g; g++) {
		if (!strchr(cmd->opts, *g)) {
			fprintf(stderr, "reconctl: an option given does not apply to %s; see reconctl --help\n",
				name);
			return RCTL_EXIT_USAGE;
		}
	}
	if (cmd->id_arg && !rctl_valid_id(a.pos[0])) {
		fprintf(stderr, "reconctl: '%s' is not a job id (a UUID like 0d6c9e4a-...)\n", a.pos[0]);
		return RCTL_EXIT_USAGE;
	}
	if (cmd->run == rctl_cmd_submit && !a.projections) {
		fprintf(stderr, "reconctl: submit needs --projections FILE\n");
		return RCTL_EXIT_USAGE;
	}
	if (cmd->run == rctl_cmd_get && !a.output) {
		fprintf(stderr, "reconctl: get needs -o FILE (or -o - for stdout)\n");
		return RCTL_EXIT_USAGE;
	}
	if (!a.url || !*a.url)
		a.url = "http://127.0.0.1:8080";
	if (strncmp(a.url, "http://", 7) && strncmp(a.url, "https://", 8)) {
		fprintf(stderr, "reconctl: --url must start with http:// or https:// (got %s)\n", a.url);
		return RCTL_EXIT_USAGE;
	}

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "reconctl: libcurl failed to initialise\n");
		return RCTL_EXIT_SERVER;
	}
	int ex = RCTL_EXIT_SERVER;
	rctl_conn *c = NULL;
	if (rctl_conn_new(a.url, a.token, &c) < 0) {
		fprintf(stderr, "reconctl: out of memory\n");
		goto out;
	}
	ex = cmd->run(c, &a);
out:
	rctl_conn_free(c);
	curl_global_cleanup();
	return ex;
}
