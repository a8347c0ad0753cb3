/*
 * Tests of the HTTP API (server/http*.c) against the daemon's own parts
 * started in-process on a random loopback port (daemon_start), with a fake
 * worker script standing in for recond-worker so that these tests do not
 * depend on the reconstruction engines: by the job's label it succeeds
 * (three progress lines, a volume of known bytes), crashes (SIGSEGV) or
 * runs slowly until cancelled.  Covered: create, out-of-order views,
 * whole-stack upload, every kind of bad input with its status and error
 * code (and that it changes nothing), queue + worker success and crash,
 * cancel of a queued and a running job (POST .../cancel; DELETE of an
 * unfinished job and cancel of a finished one are 409), server-sent events, Range
 * downloads, NIfTI and MetaImage headers, tokens and roles.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <nifti1_io.h>

#include "daemon.h"
#include "plan/models.h"
#include "jobs/runner.h"

static char tmp[256];
static char base[64];
static app A;
static config C;

struct resp {
	long status;
	char *body;
	size_t len;
	char headers[4096];
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	char *nb = realloc(r->body, r->len + sz * n + 1);
	if (!nb)
		return 0;
	r->body = nb;
	memcpy(r->body + r->len, p, sz * n);
	r->len += sz * n;
	r->body[r->len] = '\0';
	return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t have = strlen(r->headers);
	if (have + sz * n < sizeof r->headers - 1)
		memcpy(r->headers + have, p, sz * n), r->headers[have + sz * n] = '\0';
	return sz * n;
}

static void resp_free(struct resp *r)
{
	free(r->body);
	memset(r, 0, sizeof *r);
}

/* One request; extra is a header line or NULL. */
static struct resp call(const char *method, const char *path, const void *body, long len, const char *extra)
{
	struct resp r;
	memset(&r, 0, sizeof r);
	CURL *c = curl_easy_init();
	char url[512];
	snprintf(url, sizeof url, "%s%s", base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	struct curl_slist *h = curl_slist_append(NULL, "Expect:");
	if (extra)
		h = curl_slist_append(h, extra);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		print_error("%s %s: %s\n", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return r;
}

static json_t *jbody(const struct resp *r)
{
	json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
	if (!j)
		print_error("not JSON: %.*s\n", (int)r->len, r->body ? r->body : "");
	assert_non_null(j);
	return j;
}

/* Asserts status and, for errors, the JSON error code. */
static void expect(const char *method, const char *path, const void *body, long len, const char *extra,
		   long status, const char *code)
{
	struct resp r = call(method, path, body, len, extra);
	if (r.status != status)
		print_error("%s %s: got %ld want %ld: %.300s\n", method, path, r.status, status, r.body ? r.body : "");
	assert_int_equal(r.status, status);
	if (code) {
		json_t *j = jbody(&r);
		const char *got = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
		assert_non_null(got);
		assert_non_null(json_string_value(json_object_get(json_object_get(j, "error"), "message")));
		if (strcmp(got, code))
			print_error("%s %s: code %s want %s\n", method, path, got, code);
		assert_string_equal(got, code);
		json_decref(j);
	}
	resp_free(&r);
}

/* Asserts the status and that the answer carries a header line starting with hdr. */
static void expect_header(const char *method, const char *path, const void *body, long len, const char *extra,
			  long status, const char *hdr)
{
	struct resp r = call(method, path, body, len, extra);
	if (r.status != status || !strstr(r.headers, hdr))
		print_error("%s %s: got %ld want %ld with \"%s\": %.300s\n", method, path, r.status, status, hdr,
			    r.headers);
	assert_int_equal(r.status, status);
	assert_non_null(strstr(r.headers, hdr));
	resp_free(&r);
}

/* Every wait is for an event, bounded by a deadline far beyond what an idle
 * machine needs: a test that polled a fixed number of times failed under a
 * load average of 6-8 on two cores. */
#define WAIT_S 120.0

#include "util/rc_clock.h"

#define NV 12
#define NU 16
#define NVR 8
#define VIEW_BYTES (NU * NVR * 4)
#define VOL_BYTES (8 * 8 * 4 * 4)

static char *spec(const char *label, int autostart)
{
	static char buf[1024];
	snprintf(buf, sizeof buf,
		 "{\"label\": \"%s\", \"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000,"
		 " \"source_detector_mm\": 1500, \"angles\": {\"start_deg\": 0, \"step_deg\": 30, \"count\": %d},"
		 " \"detector\": {\"nu\": %d, \"nv\": %d, \"du_mm\": 1, \"dv_mm\": 1}},"
		 " \"volume\": {\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": [1, 1, 2], \"center_mm\": [0, 0, 3]},"
		 " \"algorithm\": {\"name\": \"sirt\", \"iterations\": 3}, \"autostart\": %s}",
		 label, NV, NU, NVR, autostart ? "true" : "false");
	return buf;
}

static void create(const char *label, int autostart, char id[37], const char *auth)
{
	const char *s = spec(label, autostart);
	struct resp r = call("POST", "/v1/jobs", s, (long)strlen(s), auth);
	assert_int_equal(r.status, 201);
	assert_non_null(strstr(r.headers, "Location: /v1/jobs/"));
	json_t *j = jbody(&r);
	snprintf(id, 37, "%s", json_string_value(json_object_get(j, "id")));
	assert_string_equal(json_string_value(json_object_get(j, "state")), "created");
	assert_int_equal(json_integer_value(json_object_get(j, "views_expected")), NV);
	assert_int_equal(json_integer_value(json_object_get(j, "view_bytes")), VIEW_BYTES);
	json_decref(j);
	resp_free(&r);
}

static json_t *get_job(const char *id)
{
	char p[128];
	snprintf(p, sizeof p, "/v1/jobs/%s", id);
	struct resp r = call("GET", p, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	json_t *j = jbody(&r);
	resp_free(&r);
	return j;
}

static const char *state_of(json_t *j) { return json_string_value(json_object_get(j, "state")); }

/* Polls until the job reaches a final state; returns the job. */
static json_t *wait_final(const char *id)
{
	for (double t0 = rc_now_s(); rc_now_s() - t0 < WAIT_S;) {
		json_t *j = get_job(id);
		const char *s = state_of(j);
		if (!strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled"))
			return j;
		json_decref(j);
		usleep(50000);
	}
	fail_msg("job %s did not finish", id);
	return NULL;
}

static void upload_all(const char *id)
{
	char p[128];
	static float stack[NV * NU * NVR];
	snprintf(p, sizeof p, "/v1/jobs/%s/projections", id);
	expect("PUT", p, stack, sizeof stack, NULL, 200, NULL);
}

static const char fake_worker[] =
	"#!/bin/sh\n"
	"# fake recond-worker for test_http_api: behaviour chosen by the job label\n"
	"[ \"$1\" = --devices ] && { echo '{\"devices\":[{\"name\":\"fake\",\"engine\":\"cpu\",\"device_id\":\"fake:0\"}]}'; exit 0; }\n"
	"for a; do dir=$a; done\n"
	"case $(cat \"$dir/spec.json\") in\n"
	"*'\"crash'*) kill -SEGV $$ ;;\n"
	"*'\"slow'*) trap 'exit 3' TERM; i=0; while [ $i -lt 600 ]; do i=$((i+1));\n"
	"  echo \"{\\\"type\\\":\\\"progress\\\",\\\"iteration\\\":$i,\\\"of\\\":600,\\\"residual\\\":1,\\\"elapsed_s\\\":$i}\" >&3;"
	" sleep 0.05; done; exit 0 ;;\n"
	"esac\n"
	"for i in 1 2 3; do echo \"{\\\"type\\\":\\\"progress\\\",\\\"iteration\\\":$i,\\\"of\\\":3,\\\"residual\\\":0.5,\\\"elapsed_s\\\":0.0$i}\" >&3; done\n"
	"echo '{\"type\":\"report\",\"engine\":\"cpu\",\"plan\":[{\"name\":\"cpu\",\"views\":{\"forward\":12,\"back\":12},"
	"\"predicted_ms\":{\"forward\":null,\"back\":null},\"measured_ms\":{\"forward\":1.5,\"back\":2.5}}],\"seconds\":0.1}' >&3\n"
	"i=0; : > \"$dir/.v\"; while [ $i -lt %d ]; do printf 'abcdefgh' >> \"$dir/.v\"; i=$((i+8)); done\n"
	"mv \"$dir/.v\" \"$dir/volume.f32\"\n";

static int start_app(int with_tokens)
{
	snprintf(tmp, sizeof tmp, "/tmp/test_http_api.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	config_default(&C);
	snprintf(C.store, sizeof C.store, "%s/store", tmp);
	snprintf(C.worker, sizeof C.worker, "%s/fake-worker", tmp);
	snprintf(C.probe_worker, sizeof C.probe_worker, "%s/fake-worker", tmp);
	snprintf(C.audit_log, sizeof C.audit_log, "%s/audit.log", tmp);
	C.listen_port = 0;
	C.max_body = 4096;
	FILE *f = fopen(C.worker, "w");
	if (!f)
		return -1;
	fprintf(f, fake_worker, VOL_BYTES);
	fclose(f);
	chmod(C.worker, 0755);
	if (with_tokens) {
		char h[3][65];
		auth_sha256_hex("tok-read", 8, h[0]);
		auth_sha256_hex("tok-submit", 10, h[1]);
		auth_sha256_hex("tok-admin", 9, h[2]);
		C.tokens = json_pack("[{ssssss}{ssssss}{ssssss}]", "name", "r", "role", "read", "sha256", h[0],
				     "name", "s", "role", "submit", "sha256", h[1], "name", "a", "role", "admin", "sha256", h[2]);
	}
	rc_err err;
	int port;
	if (daemon_start(&A, &C, &port, &err)) {
		print_error("daemon_start: %s\n", err.msg);
		return -1;
	}
	snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
	for (double t0 = rc_now_s(); !runner_probed(A.run) && rc_now_s() - t0 < WAIT_S;) /* /readyz waits for it */
		usleep(20000);
	return 0;
}

static int setup(void **state) { (void)state; return start_app(0); }
static int setup_tokens(void **state) { (void)state; return start_app(1); }

static int teardown(void **state)
{
	(void)state;
	daemon_stop(&A, 1.0);
	config_clear(&C);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_views_and_run(void **state)
{
	(void)state;
	char id[37], p[160];
	create("ok", 1, id, NULL);
	static float view[NU * NVR];
	static const int order[NV] = { 7, 0, 11, 3, 3, 5, 1, 2, 4, 6, 9, 8 };
	for (int i = 0; i < NV; i++) { /* view 10 held back; view 3 twice (replaces) */
		snprintf(p, sizeof p, "/v1/jobs/%s/projections/%d", id, order[i]);
		expect("PUT", p, view, sizeof view, NULL, 200, NULL);
	}
	/* A scanner resending a view as soon as it has its 200 must get 200 again:
	 * the finished upload's slot is freed before the answer goes out. */
	snprintf(p, sizeof p, "/v1/jobs/%s/projections/%d", id, 3);
	for (int i = 0; i < 200; i++)
		expect("PUT", p, view, sizeof view, NULL, 200, NULL);
	json_t *j = get_job(id);
	assert_string_equal(state_of(j), "receiving");
	assert_int_equal(json_integer_value(json_object_get(j, "views_present")), 11);
	json_t *miss = json_object_get(j, "views_missing");
	assert_int_equal(json_array_size(miss), 1);
	assert_int_equal(json_integer_value(json_array_get(json_array_get(miss, 0), 0)), 10);
	assert_int_equal(json_integer_value(json_array_get(json_array_get(miss, 0), 1)), 10);
	json_decref(j);
	snprintf(p, sizeof p, "/v1/jobs/%s/start", id);
	expect("POST", p, NULL, 0, NULL, 409, "conflict");
	snprintf(p, sizeof p, "/v1/jobs/%s/projections/10", id);
	expect("PUT", p, view, sizeof view, NULL, 200, NULL); /* the last view: autostart queues it */
	j = wait_final(id);
	assert_string_equal(state_of(j), "succeeded");
	assert_string_equal(json_string_value(json_object_get(j, "engine")), "cpu");
	json_t *plan = json_array_get(json_object_get(j, "plan"), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(plan, "views"), "back")), 12);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "progress"), "iteration")), 3); /* the last progress line */
	assert_true(json_real_value(json_object_get(json_object_get(j, "progress"), "fraction")) == 1.0);
	assert_true(json_is_null(json_object_get(j, "error")));
	json_decref(j);
	expect("PUT", p, view, sizeof view, NULL, 409, "conflict"); /* finished: no uploads */

	/* Downloads: whole, ranges, formats. */
	snprintf(p, sizeof p, "/v1/jobs/%s/volume", id);
	struct resp r = call("GET", p, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, VOL_BYTES);
	assert_memory_equal(r.body, "abcdefghabcdefgh", 16);
	resp_free(&r);
	r = call("GET", p, NULL, 0, "Range: bytes=3-9");
	assert_int_equal(r.status, 206);
	assert_int_equal(r.len, 7);
	assert_memory_equal(r.body, "defghab", 7);
	assert_non_null(strstr(r.headers, "Content-Range: bytes 3-9/1024"));
	resp_free(&r);
	r = call("GET", p, NULL, 0, "Range: bytes=-2");
	assert_int_equal(r.status, 206);
	assert_memory_equal(r.body, "gh", 2);
	resp_free(&r);
	expect("GET", p, NULL, 0, "Range: bytes=1024-", 416, "range_not_satisfiable");
	expect_header("GET", p, NULL, 0, "Range: bytes=1024-", 416, "Content-Range: bytes */1024");
	snprintf(p, sizeof p, "/v1/jobs/%s/volume?format=tiff", id);
	expect("GET", p, NULL, 0, NULL, 400, "invalid_argument");

	snprintf(p, sizeof p, "/v1/jobs/%s/volume?format=nifti", id);
	r = call("GET", p, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 352 + VOL_BYTES);
	struct nifti_1_header h;
	memcpy(&h, r.body, sizeof h);
	assert_int_equal(h.sizeof_hdr, 348);
	assert_int_equal(h.dim[0], 3);
	assert_int_equal(h.dim[1], 8);
	assert_int_equal(h.dim[3], 4);
	assert_int_equal(h.datatype, NIFTI_TYPE_FLOAT32);
	assert_true(h.vox_offset == 352.0f);
	assert_true(h.pixdim[3] == 2.0f);
	assert_int_equal(h.sform_code, NIFTI_XFORM_SCANNER_ANAT);
	/* voxel (0,0,0) at ((0 - 3.5) * 1, (0 - 3.5) * 1, (0 - 1.5) * 2 + 3) */
	assert_true(h.srow_x[3] == -3.5f && h.srow_y[3] == -3.5f && h.srow_z[3] == 0.0f);
	assert_true(h.srow_z[2] == 2.0f);
	assert_memory_equal(r.body + 352, "abcdefgh", 8);
	/* and libnifti reads it back with the same geometry */
	char nii[300];
	snprintf(nii, sizeof nii, "%s/v.nii", tmp);
	FILE *f = fopen(nii, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(r.body, 1, r.len, f), r.len);
	fclose(f);
	nifti_image *nim = nifti_image_read(nii, 1);
	assert_non_null(nim);
	assert_int_equal(nim->nx, 8);
	assert_int_equal(nim->nz, 4);
	assert_true(nim->dz == 2.0f);
	assert_true(nim->qto_xyz.m[2][3] == 0.0f && nim->qto_xyz.m[0][3] == -3.5f); /* qform == sform */
	assert_memory_equal(nim->data, "abcdefgh", 8);
	nifti_image_free(nim);
	resp_free(&r);

	snprintf(p, sizeof p, "/v1/jobs/%s/volume?format=mha", id);
	r = call("GET", p, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "DimSize = 8 8 4\n"));
	assert_non_null(strstr(r.body, "ElementSpacing = 1 1 2\n"));
	assert_non_null(strstr(r.body, "Offset = -3.5 -3.5 0\n"));
	char *data = strstr(r.body, "ElementDataFile = LOCAL\n");
	assert_non_null(data);
	assert_int_equal(r.len - (size_t)(data + 24 - r.body), VOL_BYTES);
	resp_free(&r);

	/* Cancel of a finished job: 409, nothing changes.  Delete: 204, then 404. */
	snprintf(p, sizeof p, "/v1/jobs/%s/cancel", id);
	expect("POST", p, NULL, 0, NULL, 409, "conflict");
	snprintf(p, sizeof p, "/v1/jobs/%s", id);
	expect("DELETE", p, NULL, 0, NULL, 204, NULL);
	expect("GET", p, NULL, 0, NULL, 404, "not_found");
	snprintf(p, sizeof p, "/v1/jobs/%s/cancel", id);
	expect("POST", p, NULL, 0, NULL, 404, "not_found");
}

/* One view of a parallel job is [slice][u]; it lands in the stack's rows
 * (slice j, view k) of [slice][view][u], as the engines read it. */
static void test_views_parallel(void **state)
{
	(void)state;
	enum { V = 5, U = 7, Z = 3 };
	const char *sp = "{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0, 30, 60, 90, 120],"
			 " \"detector\": {\"nu\": 7, \"du_mm\": 1}}, \"volume\": {\"nx\": 6, \"ny\": 6, \"nz\": 3,"
			 " \"voxel_mm\": 1}, \"algorithm\": {\"name\": \"sirt\"}}";
	struct resp r = call("POST", "/v1/jobs", sp, (long)strlen(sp), NULL);
	assert_int_equal(r.status, 201);
	json_t *j = jbody(&r);
	char id[37], p[160];
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(j, "id")));
	assert_int_equal(json_integer_value(json_object_get(j, "view_bytes")), Z * U * 4);
	json_decref(j);
	resp_free(&r);
	static float full[Z * V * U], view[Z * U];
	for (int i = 0; i < Z * V * U; i++)
		full[i] = (float)i;
	static const int order[V] = { 3, 0, 4, 1, 2 };
	for (int i = 0; i < V; i++) {
		int k = order[i];
		for (int z = 0; z < Z; z++)
			memcpy(view + z * U, full + (z * V + k) * U, sizeof(float) * U);
		snprintf(p, sizeof p, "/v1/jobs/%s/projections/%d", id, k);
		expect("PUT", p, view, sizeof view, NULL, 200, NULL);
	}
	char path[512];
	store_job_path(A.st, id, "projections.f32", path, sizeof path);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static float got[Z * V * U];
	assert_int_equal(fread(got, sizeof(float), Z * V * U, f), Z * V * U);
	fclose(f);
	assert_memory_equal(got, full, sizeof full);
}

static int count_jobs(void)
{
	struct resp r = call("GET", "/v1/jobs", NULL, 0, NULL);
	json_t *j = jbody(&r);
	int n = (int)json_integer_value(json_object_get(j, "total"));
	json_decref(j);
	resp_free(&r);
	return n;
}

static void test_bad_input(void **state)
{
	(void)state;
	char id[37], p[160];
	create("ok", 0, id, NULL);
	int before = count_jobs();
	static const struct { const char *body; long status; const char *code; } bad[] = {
		{ "{\"label\": ", 400, "invalid_json" },
		{ "{\"label\": \"a\", \"label\": \"b\"}", 400, "invalid_json" },
		{ "[]", 400, "invalid_json" },
		{ "", 400, "invalid_json" },
		{ "{\"geometry\": 5}", 400, "invalid_argument" },
		{ "{\"label\": \"x\", \"bogus\": 1}", 400, "invalid_argument" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect("POST", "/v1/jobs", bad[i].body, (long)strlen(bad[i].body), NULL, bad[i].status, bad[i].code);
	char big[8192];
	memset(big, ' ', sizeof big);
	big[0] = '{';
	big[sizeof big - 1] = '}';
	expect("POST", "/v1/jobs", big, sizeof big, NULL, 413, "body_too_large");
	const char *s = spec("x", 0);
	char *nan = strdup(s), *neg = strdup(s), *alg = strdup(s);
	char *q = strstr(nan, "1000");
	memcpy(q, "NaN ", 4);
	q = strstr(neg, "1000");
	memcpy(q, "-100", 4);
	q = strstr(alg, "\"sirt\"");
	memcpy(q, "\"art\" ", 6);
	expect("POST", "/v1/jobs", nan, (long)strlen(nan), NULL, 400, "invalid_json");
	expect("POST", "/v1/jobs", neg, (long)strlen(neg), NULL, 400, "invalid_argument");
	expect("POST", "/v1/jobs", alg, (long)strlen(alg), NULL, 400, "invalid_argument");
	free(nan);
	free(neg);
	free(alg);

	static float view[NU * NVR + 1];
	snprintf(p, sizeof p, "/v1/jobs/%s/projections/0", id);
	expect("PUT", p, view, VIEW_BYTES - 4, NULL, 422, "wrong_length");
	expect("PUT", p, view, VIEW_BYTES + 4, NULL, 413, "body_too_large");
	snprintf(p, sizeof p, "/v1/jobs/%s/projections", id);
	expect("PUT", p, view, VIEW_BYTES, NULL, 422, "wrong_length");
	snprintf(p, sizeof p, "/v1/jobs/%s/projections/12", id);
	expect("PUT", p, view, VIEW_BYTES, NULL, 400, "invalid_argument");
	snprintf(p, sizeof p, "/v1/jobs/%s/projections/-1", id);
	expect("PUT", p, view, VIEW_BYTES, NULL, 400, "invalid_argument");
	snprintf(p, sizeof p, "/v1/jobs/%s/projections/abc", id);
	expect("PUT", p, view, VIEW_BYTES, NULL, 400, "invalid_argument");
	expect("GET", "/v1/jobs/123", NULL, 0, NULL, 400, "invalid_id");
	expect("GET", "/v1/jobs/0B4F9C1E-5A8D-4F7E-9C2B-1D3E5F7A9B0C", NULL, 0, NULL, 400, "invalid_id");
	expect("GET", "/v1/jobs/0b4f9c1e-5a8d-4f7e-9c2b-1d3e5f7a9b0c", NULL, 0, NULL, 404, "not_found");
	expect("PUT", "/v1/jobs/0b4f9c1e-5a8d-4f7e-9c2b-1d3e5f7a9b0c/projections/0", view, VIEW_BYTES, NULL, 404, "not_found");
	expect("GET", "/v1/nothing", NULL, 0, NULL, 404, "not_found");
	expect("PATCH", "/v1/jobs", "{}", 2, NULL, 405, "method_not_allowed");
	expect_header("PATCH", "/v1/jobs", "{}", 2, NULL, 405, "Allow: GET, HEAD, POST");
	expect("GET", "/v1/jobs?state=sleeping", NULL, 0, NULL, 400, "invalid_argument");
	expect("GET", "/v1/jobs?limit=0", NULL, 0, NULL, 400, "invalid_argument");
	/* query numbers: digits only, within the contract's maxima */
	expect("GET", "/v1/jobs?limit=", NULL, 0, NULL, 400, "invalid_argument");
	expect("GET", "/v1/jobs?limit=+5", NULL, 0, NULL, 400, "invalid_argument");
	expect("GET", "/v1/jobs?limit=%205", NULL, 0, NULL, 400, "invalid_argument");
	expect("GET", "/v1/jobs?offset=1000000001", NULL, 0, NULL, 400, "invalid_argument");
	expect("GET", "/v1/jobs?offset=1000000000&limit=1000", NULL, 0, NULL, 200, NULL);
	/* DELETE never cancels: a job that has not finished stays as it is */
	snprintf(p, sizeof p, "/v1/jobs/%s", id);
	expect("DELETE", p, NULL, 0, NULL, 409, "conflict");
	expect_header("POST", p, NULL, 0, NULL, 405, "Allow: GET, HEAD, PATCH, DELETE");
	snprintf(p, sizeof p, "/v1/jobs/%s/cancel", id);
	expect_header("GET", p, NULL, 0, NULL, 405, "Allow: POST");
	snprintf(p, sizeof p, "/v1/jobs/%s/volume?format=", id);
	expect("GET", p, NULL, 0, NULL, 400, "invalid_argument");
	snprintf(p, sizeof p, "/v1/jobs/%s/volume", id);
	expect("GET", p, NULL, 0, NULL, 409, "conflict");

	assert_int_equal(count_jobs(), before);
	json_t *j = get_job(id);
	assert_string_equal(state_of(j), "created");
	assert_int_equal(json_integer_value(json_object_get(j, "views_present")), 0);
	json_decref(j);
	expect("GET", "/healthz", NULL, 0, NULL, 200, NULL);
	expect("GET", "/readyz", NULL, 0, NULL, 200, NULL);
	struct resp r = call("GET", "/metrics", NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "recond_jobs{state=\"created\"} 1"));
	assert_non_null(strstr(r.body, "recond_iteration_seconds_bucket{le=\"+Inf\"}"));
	resp_free(&r);
	/* models a worker stored for the probed device's id, read per request:
	 * T = 2 ms/view * W + 10 ms forward (exact samples), one back sample */
	char model_dir[1100];
	snprintf(model_dir, sizeof model_dir, "%s/models", C.store);
	double w[6] = { 4, 8, 12, 16, 24, 32 }, t[6];
	for (int i = 0; i < 6; i++)
		t[i] = 0.002 * w[i] + 0.010;
	assert_int_equal(rc_models_add(model_dir, "fake:0", "cone-8x8x8-8x8-voxel", RC_TASK_FORWARD, w, t, 6, 1, NULL, NULL), 0);
	assert_int_equal(rc_models_add(model_dir, "fake:0", "cone-8x8x8-8x8-voxel", RC_TASK_BACK, w, t, 1, 1, NULL, NULL), 0);
	r = call("GET", "/v1/devices", NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"name\":\"fake\"")); /* as the worker's --devices said */
	assert_non_null(strstr(r.body, "\"state\":\"idle\""));
	json_t *doc = json_loads(r.body, 0, NULL);
	json_t *dev = json_array_get(json_object_get(doc, "devices"), 0);
	assert_string_equal(json_string_value(json_object_get(dev, "device_id")), "fake:0");
	json_t *models = json_object_get(dev, "models");
	assert_int_equal(json_array_size(models), 2);
	json_t *fw = json_array_get(models, 0), *bk = json_array_get(models, 1);
	assert_string_equal(json_string_value(json_object_get(fw, "shape")), "cone-8x8x8-8x8-voxel");
	assert_string_equal(json_string_value(json_object_get(fw, "task")), "forward");
	assert_true(fabs(json_number_value(json_object_get(fw, "a")) - 2.0) < 1e-9);  /* ms per view */
	assert_true(fabs(json_number_value(json_object_get(fw, "b")) - 10.0) < 1e-9); /* ms */
	assert_int_equal(json_integer_value(json_object_get(fw, "samples")), 6);
	assert_true(json_is_string(json_object_get(fw, "updated")));
	assert_string_equal(json_string_value(json_object_get(bk, "task")), "back");
	assert_true(json_is_null(json_object_get(bk, "a")) && json_is_null(json_object_get(bk, "b")));
	assert_int_equal(json_integer_value(json_object_get(bk, "samples")), 1);
	json_decref(doc);
	resp_free(&r);
	/* the one node of a SQLite store, with the same devices (heartbeat every 2 s) */
	json_t *nd = NULL;
	for (double t0 = rc_now_s(); !nd && rc_now_s() - t0 < WAIT_S;) {
		r = call("GET", "/v1/nodes", NULL, 0, NULL);
		assert_int_equal(r.status, 200);
		doc = json_loads(r.body, 0, NULL);
		json_t *nodes = json_object_get(doc, "nodes");
		const char *dev0 = json_string_value(json_object_get(
			json_array_get(json_object_get(json_array_get(nodes, 0), "devices"), 0), "device_id"));
		/* the probed list reaches the row at the heartbeat after the probe */
		if (json_array_size(nodes) == 1 && dev0 && !strcmp(dev0, "fake:0"))
			nd = json_incref(json_array_get(nodes, 0));
		json_decref(doc);
		resp_free(&r);
		if (!nd)
			usleep(100000);
	}
	assert_non_null(nd);
	assert_true(json_is_true(json_object_get(nd, "alive")));
	assert_true(json_is_string(json_object_get(nd, "heartbeat")) && json_is_string(json_object_get(nd, "started")));
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(nd, "devices"), 0),
							      "device_id")), "fake:0");
	json_decref(nd);
	r = call("GET", "/metrics", NULL, 0, NULL);
	assert_non_null(strstr(r.body, "recond_node_info{node=\""));
	assert_non_null(strstr(r.body, "recond_store_up 1"));
	resp_free(&r);
}

/* Cluster settings: flags, config keys, bounds; a URI's password never logged. */
static void test_cluster_config(void **state)
{
	(void)state;
	config c;
	rc_err err;
	config_default(&c);
	assert_true(c.lease_s == 15 && c.max_attempts == 3 && !c.spool[0] && !c.node[0]);
	const char *cfg = "{\"spool\": \"/srv/spool\", \"node\": \"ct-1\", \"lease_s\": 4, \"max_attempts\": 5}";
	assert_int_equal(config_load_json(&c, cfg, strlen(cfg), &err), 0);
	assert_string_equal(c.spool, "/srv/spool");
	assert_string_equal(c.node, "ct-1");
	assert_true(c.lease_s == 4 && c.max_attempts == 5);
	assert_int_equal(config_load_json(&c, "{\"lease_s\": 0.5}", 16, &err), RC_EINVAL);
	char *argv[] = { "recond", "--store", "postgresql://u:pw@db:5432/recond", "--spool", "/s", "--node", "n2",
			 "--lease", "9", "--max-attempts", "2", NULL };
	assert_int_equal(config_parse_args(&c, 11, argv, &err), 0);
	assert_string_equal(c.node, "n2");
	assert_true(c.lease_s == 9 && c.max_attempts == 2);
	char m[256];
	config_mask_uri(c.store, m, sizeof m);
	assert_string_equal(m, "postgresql://u:***@db:5432/recond");
	config_mask_uri("postgres://db/recond?user=u&password=secret&sslmode=require", m, sizeof m);
	assert_string_equal(m, "postgres://db/recond?user=u&password=***&sslmode=require");
	config_mask_uri("postgresql://u@db/recond", m, sizeof m);
	assert_string_equal(m, "postgresql://u@db/recond");
	config_mask_uri("/var/lib/recond", m, sizeof m);
	assert_string_equal(m, "/var/lib/recond");
	config_clear(&c);
}

static void test_crash_then_next(void **state)
{
	(void)state;
	char bad[37], good[37];
	create("crash", 1, bad, NULL);
	create("ok", 1, good, NULL);
	upload_all(bad);
	upload_all(good);
	json_t *j = wait_final(bad);
	assert_string_equal(state_of(j), "failed");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "worker_crashed");
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")), "signal 11"));
	json_decref(j);
	j = wait_final(good);
	assert_string_equal(state_of(j), "succeeded");
	json_decref(j);
	struct resp r = call("GET", "/metrics", NULL, 0, NULL);
	assert_non_null(strstr(r.body, "recond_worker_crashes_total 1"));
	resp_free(&r);
}

static void test_cancel(void **state)
{
	(void)state;
	char run[37], queued[37], p[160];
	create("slow", 1, run, NULL);
	create("ok", 1, queued, NULL);
	upload_all(run);
	json_t *j = NULL;
	for (double t0 = rc_now_s(); rc_now_s() - t0 < WAIT_S;) { /* wait for it to run and report */
		j = get_job(run);
		if (!strcmp(state_of(j), "running") &&
		    json_integer_value(json_object_get(json_object_get(j, "progress"), "iteration")) > 0)
			break;
		json_decref(j);
		j = NULL;
		usleep(50000);
	}
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "progress"), "of")), 600);
	json_decref(j);
	upload_all(queued);
	j = get_job(queued);
	assert_string_equal(state_of(j), "queued");
	json_decref(j);
	snprintf(p, sizeof p, "/v1/jobs/%s", queued);
	expect("DELETE", p, NULL, 0, NULL, 409, "conflict"); /* DELETE never cancels */
	snprintf(p, sizeof p, "/v1/jobs/%s/cancel", queued);
	expect("POST", p, NULL, 0, NULL, 200, NULL);
	j = get_job(queued);
	assert_string_equal(state_of(j), "cancelled");
	json_decref(j);
	expect("POST", p, NULL, 0, NULL, 409, "conflict"); /* already cancelled */
	snprintf(p, sizeof p, "/v1/jobs/%s/cancel", run);
	expect("POST", p, NULL, 0, NULL, 202, NULL);
	expect("POST", p, NULL, 0, NULL, 202, NULL); /* still running: asked again */
	j = wait_final(run);
	assert_string_equal(state_of(j), "cancelled");
	json_decref(j);
	snprintf(p, sizeof p, "/v1/jobs/%s", run);
	expect("DELETE", p, NULL, 0, NULL, 204, NULL);
}

struct sse_buf {
	char url[256];
	char *p;
	size_t len;
	atomic_int connected; /* the stream's first event arrived */
};

static size_t on_sse(char *p, size_t sz, size_t n, void *ud)
{
	struct sse_buf *b = ud;
	char *nb = realloc(b->p, b->len + sz * n + 1);
	if (!nb)
		return 0;
	b->p = nb;
	memcpy(b->p + b->len, p, sz * n);
	b->len += sz * n;
	b->p[b->len] = '\0';
	atomic_store(&b->connected, 1);
	return sz * n;
}

static void *sse_thread(void *arg)
{
	struct sse_buf *b = arg;
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, b->url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_sse);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)WAIT_S);
	curl_easy_perform(c);
	curl_easy_cleanup(c);
	return b;
}

static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_events(void **state)
{
	(void)state;
	char id[37];
	create("ok", 0, id, NULL);
	struct sse_buf *b = calloc(1, sizeof *b);
	assert_non_null(b);
	snprintf(b->url, sizeof b->url, "%s/v1/jobs/%s/events", base, id);
	pthread_t t;
	pthread_create(&t, NULL, sse_thread, b);
	/* the job must not move before the stream has its first event: a
	 * stream that connected late would start at a later state */
	for (double t0 = rc_now_s(); !atomic_load(&b->connected) && rc_now_s() - t0 < WAIT_S;)
		usleep(10000);
	assert_true(atomic_load(&b->connected));
	upload_all(id);
	char p[160];
	snprintf(p, sizeof p, "/v1/jobs/%s/start", id);
	expect("POST", p, NULL, 0, NULL, 202, NULL);
	pthread_join(t, NULL); /* the stream ends by itself at the final state */
	assert_non_null(b->p);
	assert_true(b->p == strstr(b->p, "event: state\ndata: {"));
	assert_int_equal(count(b->p, "event: progress\n"), 3);
	assert_non_null(strstr(b->p, "\"state\":\"queued\""));
	assert_non_null(strstr(b->p, "\"state\":\"running\""));
	const char *last = strstr(b->p, "\"state\":\"succeeded\"");
	assert_non_null(last);
	assert_null(strstr(last + 1, "event:"));
	free(b->p);
	free(b);
}

static void test_tokens(void **state)
{
	(void)state;
	const char *s = spec("ok", 0);
	long n = (long)strlen(s);
	expect("POST", "/v1/jobs", s, n, NULL, 401, "unauthorized");
	expect("POST", "/v1/jobs", s, n, "Authorization: Bearer nope", 401, "unauthorized");
	expect("POST", "/v1/jobs", s, n, "Authorization: Bearer tok-read", 403, "forbidden");
	expect("GET", "/v1/jobs", NULL, 0, "Authorization: Bearer tok-read", 200, NULL);
	/* a known token without the Bearer scheme: 401 saying how the header reads */
	struct resp bare = call("GET", "/v1/jobs", NULL, 0, "Authorization: tok-read");
	assert_int_equal(bare.status, 401);
	assert_non_null(bare.body);
	assert_non_null(strstr(bare.body, "Authorization: Bearer TOKEN"));
	resp_free(&bare);
	expect("GET", "/v1/devices", NULL, 0, NULL, 401, "unauthorized");
	expect_header("GET", "/v1/devices", NULL, 0, NULL, 401, "WWW-Authenticate: Bearer");
	expect("GET", "/healthz", NULL, 0, NULL, 200, NULL);
	expect("GET", "/metrics", NULL, 0, NULL, 200, NULL);
	char id[37], p[160];
	create("ok", 1, id, "Authorization: Bearer tok-submit");
	static float stack[NV * NU * NVR];
	snprintf(p, sizeof p, "/v1/jobs/%s/projections", id);
	expect("PUT", p, stack, sizeof stack, "Authorization: Bearer tok-read", 403, "forbidden");
	expect("PUT", p, stack, sizeof stack, "Authorization: Bearer tok-submit", 200, NULL);
	snprintf(p, sizeof p, "/v1/jobs/%s", id);
	int done = 0;
	for (double t0 = rc_now_s(); !done && rc_now_s() - t0 < WAIT_S;) {
		struct resp r = call("GET", p, NULL, 0, "Authorization: Bearer tok-read");
		done = r.body && strstr(r.body, "\"state\":\"succeeded\"");
		resp_free(&r);
		if (!done)
			usleep(50000);
	}
	assert_true(done);
	expect("DELETE", p, NULL, 0, "Authorization: Bearer tok-submit", 403, "forbidden");
	expect("DELETE", p, NULL, 0, "Authorization: Bearer tok-admin", 204, NULL);
	/* The audit log names the token of each request touching patient data. */
	int admin_delete = 0;
	for (double t0 = rc_now_s(); !admin_delete && rc_now_s() - t0 < WAIT_S;) { /* written at completion */
		FILE *f = fopen(C.audit_log, "r");
		assert_non_null(f);
		char line[2048];
		while (fgets(line, sizeof line, f))
			admin_delete |= strstr(line, "token=a method=DELETE") && strstr(line, "status=204");
		fclose(f);
		usleep(20000);
	}
	assert_true(admin_delete);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_views_and_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_views_parallel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_then_next, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tokens, setup_tokens, teardown),
		cmocka_unit_test(test_cluster_config),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
