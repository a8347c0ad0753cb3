/*
 * submit: POST the spec, stream the flat, dark and bad-pixel files of a job
 * of counts (--flat, --dark, --bad-pixels) and the projection file to the
 * job, then queue
 * it (unless the spec autostarts or --no-start).  A job whose upload failed
 * is removed again (POST cancel, then DELETE removes the cancelled job; with
 * tokens that needs the admin role, else it stays cancelled), so
 * that a failed submit leaves nothing running or half-made behind; the job
 * id goes to stdout only once everything worked.
 */
#include "rctl_cmd.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "rctl_job.h"

static int open_projections(const char *path, FILE **ret_fp, uint64_t *ret_size)
{
	FILE *fp = fopen(path, "rbe");
	if (!fp) {
		fprintf(stderr, "reconctl: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(fp), &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "reconctl: %s is not a regular file (the upload needs its size)\n", path);
		fclose(fp);
		return -1;
	}
	*ret_fp = fp;
	*ret_size = (uint64_t)st.st_size;
	return 0;
}

/* After the upload's failure was printed: cancel and delete the job, and say
 * which of that was done. */
static void discard_job(rctl_conn *c, const char *id)
{
	char path[128];
	rctl_fail tmp;
	snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
	int cancelled = rctl_request(c, "POST", path, NULL, NULL, &tmp) == 0;
	snprintf(path, sizeof path, "/v1/jobs/%s", id);
	if (!cancelled)
		fprintf(stderr, "reconctl: so job %s is left as it is (the cancel failed)\n", id);
	else if (rctl_request(c, "DELETE", path, NULL, NULL, &tmp) < 0)
		fprintf(stderr, "reconctl: so job %s was cancelled (not removed: the delete was refused)\n", id);
	else
		fprintf(stderr, "reconctl: so job %s was removed\n", id);
}

int rctl_cmd_submit(rctl_conn *c, const rctl_args *a)
{
	int ex = RCTL_EXIT_USAGE;
	json_error_t je;
	json_t *spec = NULL, *created = NULL, *job = NULL;
	char *body = NULL;
	FILE *fp = NULL;
	uint64_t size = 0;
	char id[40], path[128];
	rctl_fail f;

	spec = json_load_file(a->pos[0], JSON_REJECT_DUPLICATES, &je);
	if (!spec) {
		fprintf(stderr, "reconctl: %s:%d:%d: %s\n", a->pos[0], je.line, je.column, je.text);
		goto out;
	}
	if (!json_is_object(spec)) {
		fprintf(stderr, "reconctl: %s: a job spec is a JSON object\n", a->pos[0]);
		goto out;
	}
	if (open_projections(a->projections, &fp, &size) < 0)
		goto out;
	body = json_dumps(spec, JSON_COMPACT);
	if (!body) {
		ex = RCTL_EXIT_SERVER;
		fprintf(stderr, "reconctl: out of memory\n");
		goto out;
	}

	if (rctl_request(c, "POST", "/v1/jobs", body, &created, &f) < 0)
		goto out_fail;
	const char *cid = json_string_value(json_object_get(created, "id"));
	if (!rctl_valid_id(cid)) {
		rctl_fail_set(&f, 0, "bad_answer", "the server's answer to POST /v1/jobs has no valid id");
		goto out_fail;
	}
	snprintf(id, sizeof id, "%s", cid);

	/* a job of counts: its flat, dark and bad pixels before the views (an
	 * autostarting one takes no view before them) */
	const struct { const char *file, *route; } fields[] = {
		{ a->flat, "flat" }, { a->dark, "dark" }, { a->bad_pixels, "bad-pixels" },
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		FILE *ff = NULL;
		uint64_t fsize = 0;
		if (!fields[i].file)
			continue;
		if (open_projections(fields[i].file, &ff, &fsize) < 0) {
			discard_job(c, id);
			goto out;
		}
		rctl_progress fpb;
		rctl_progress_init(&fpb, fields[i].route, 0);
		snprintf(path, sizeof path, "/v1/jobs/%s/%s", id, fields[i].route);
		int urc = rctl_upload(c, path, ff, fsize, &fpb, NULL, &f);
		fclose(ff);
		if (urc < 0) {
			rctl_fail_print(&f);
			discard_job(c, id);
			ex = rctl_fail_exit(&f);
			goto out;
		}
	}

	rctl_progress pb;
	rctl_progress_init(&pb, "upload", rctl_show_progress(a));
	snprintf(path, sizeof path, "/v1/jobs/%s/projections", id);
	if (rctl_upload(c, path, fp, size, &pb, NULL, &f) < 0) {
		/* The cause first, then what was done about it. */
		rctl_fail_print(&f);
		discard_job(c, id);
		ex = rctl_fail_exit(&f);
		goto out;
	}

	json_t *as = json_object_get(spec, "autostart");
	if (!a->no_start && !json_is_true(as)) {
		snprintf(path, sizeof path, "/v1/jobs/%s/start", id);
		if (rctl_request(c, "POST", path, NULL, NULL, &f) < 0)
			goto out_fail;
	}
	if (a->watch) {
		/* stdout: the id alone (a script's capture); the state as it
		 * goes and the final one go to stderr, the outcome is the exit
		 * code.  --json prints the event lines instead. */
		if (!a->json)
			printf("%s\n", id);
		fflush(stdout);
		ex = rctl_watch_job(c, a, id, 1);
		goto out;
	}
	if (a->json) {
		snprintf(path, sizeof path, "/v1/jobs/%s", id);
		if (rctl_request(c, "GET", path, NULL, &job, &f) < 0)
			goto out_fail;
		rctl_print_json(job);
	} else {
		printf("%s\n", id);
	}
	ex = RCTL_EXIT_OK;
	goto out;
out_fail:
	rctl_fail_print(&f);
	ex = rctl_fail_exit(&f);
out:
	if (fp)
		fclose(fp);
	free(body);
	json_decref(job);
	json_decref(created);
	json_decref(spec);
	return ex;
}
