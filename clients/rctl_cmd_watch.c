/*
 * watch: follow a job through its event stream until it ends.
 *
 * The stream is a hint, the job's GET is the truth: before every (re)connect
 * the job is fetched, and the loop ends only when that says the job is
 * finished.  So a stream that closes, stays quiet for --idle seconds (a lost
 * event, a proxy that buffers) or breaks on the network costs a reconnect,
 * never a wrong answer.  Network failures are retried a few times.
 */
#include "rctl_cmd.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rctl_job.h"

#define NET_RETRIES 5

typedef struct watch_ctx {
	const rctl_args *a;
	rctl_progress pb;
	char last_state[32];
} watch_ctx;

static void show(watch_ctx *w, const rctl_job_view *v)
{
	char text[160];
	rctl_job_progress_text(v, text, sizeof text);
	double f = v->fraction;
	if (v->state && !strcmp(v->state, "succeeded"))
		f = 1;
	if (w->pb.enabled) {
		rctl_progress_fraction(&w->pb, f < 0 ? 0 : f, text, rctl_state_terminal(v->state));
	} else if (!w->a->json && !w->a->quiet && v->state && strcmp(v->state, w->last_state)) {
		fprintf(stderr, "reconctl: %s\n", text);
	}
	if (v->state && v->state != w->last_state) /* progress events borrow last_state */
		snprintf(w->last_state, sizeof w->last_state, "%s", v->state);
}

static int on_event(void *ctx, const char *event, const char *data)
{
	watch_ctx *w = ctx;
	json_t *j = json_loads(data, 0, NULL);
	if (w->a->json) {
		json_t *line = json_pack("{s:s, s:O}", "event", event,
					 "data", j ? j : json_string(data));
		if (line) {
			char *s = json_dumps(line, JSON_COMPACT);
			if (s)
				printf("%s\n", s);
			free(s);
			fflush(stdout);
			json_decref(line);
		}
	}
	rctl_job_view v;
	rctl_job_view_of(j, &v);
	int stop = 0;
	if (v.state || v.fraction >= 0) {
		if (!v.state)
			v.state = w->last_state[0] ? w->last_state : "running";
		show(w, &v);
		stop = rctl_state_terminal(v.state);
	}
	json_decref(j);
	/* "deleted": the job is gone; the GET that follows reports it. */
	return stop || !strcmp(event, "deleted");
}

int rctl_watch_job(rctl_conn *c, const rctl_args *a, const char *id, int state_to_stderr)
{
	char path[128];
	rctl_fail f;
	watch_ctx w = { .a = a };
	int retries = 0;
	rctl_progress_init(&w.pb, "job", rctl_show_progress(a));
	for (;;) {
		json_t *job = NULL;
		snprintf(path, sizeof path, "/v1/jobs/%s", id);
		if (rctl_request(c, "GET", path, NULL, &job, &f) < 0)
			goto net_fail;
		rctl_job_view v;
		rctl_job_view_of(job, &v);
		if (rctl_state_terminal(v.state)) {
			show(&w, &v);
			rctl_progress_end(&w.pb);
			int ex = rctl_state_exit(v.state);
			if (a->json) {
				json_t *line = json_pack("{s:s, s:O}", "event", "end", "data", job);
				char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
				if (s)
					printf("%s\n", s);
				free(s);
				json_decref(line);
			} else {
				if (state_to_stderr) {
					if (!a->quiet)
						fprintf(stderr, "reconctl: job %s %s\n", id, v.state);
				} else {
					printf("%s %s\n", id, v.state);
				}
				if (v.error)
					fprintf(stderr, "reconctl: job %s: %s\n", v.state, v.error);
				/* a succeeded job's warnings are why its result may be wrong */
				if (!a->quiet || json_array_size(json_object_get(job, "warnings")))
					rctl_print_warnings(job, stderr);
			}
			json_decref(job);
			return ex;
		}
		show(&w, &v);
		json_decref(job);
		time_t t0 = time(NULL);
		snprintf(path, sizeof path, "/v1/jobs/%s/events", id);
		int rc = rctl_events(c, path, a->idle_s, on_event, &w, &f);
		if (rc < 0)
			goto net_fail;
		retries = 0;
		if (rc == 0 && time(NULL) - t0 < 1)
			sleep(1); /* a server that closes at once must not make us spin */
		continue;
net_fail:
		if (f.status == 0 && ++retries <= NET_RETRIES) {
			sleep(1);
			continue;
		}
		rctl_progress_end(&w.pb);
		rctl_fail_print(&f);
		return rctl_fail_exit(&f);
	}
}

int rctl_cmd_watch(rctl_conn *c, const rctl_args *a)
{
	return rctl_watch_job(c, a, a->pos[0], 0);
}
