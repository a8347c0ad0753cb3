/*
 * http_calib: PUT /v1/jobs/{id}/flat, /dark and /bad-pixels, the fields a
 * job of detector counts (spec_input.h, input.kind "intensity") names
 * "uploaded", and the check that a job has them before it starts.
 *
 * A flat or dark body is one or more detector images (rows x nu samples of
 * the job's dtype, row j = detector row j as in a view upload); several are
 * averaged (in double) into one float32 image.  The bad-pixel map is one
 * image of uint8 (nonzero = bad).  The body is gathered in memory (a few
 * images: INPUT_MAX_IMAGES caps it), checked, then written to the job's
 * directory with durable_write_file (temporary, fsync, rename, fsync the
 * directory) before the 200: acknowledged only once on disk.  A body of the
 * wrong length, values that are not numbers, or a flat not above the dark
 * at any pixel: 4xx naming the field, nothing stored.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "durable.h"
#include "http/http_routes.h"
#include "base/log.h"
#include "spec.h"

struct calib {
	input_field f;
	rc_counts_dtype dtype;
	uint64_t image_bytes, expected, got;
	size_t pixels;
	int nu;
	int too_long;
	char *buf;
};

/* durable_write_file's temporary is one per process and name: one write of
 * a calibration file at a time (they are small); the flat-above-dark check
 * against the other field's file and the job's state are read under it too.
 * A start that races the last moment of an upload may still run on the
 * file before it (single node: the state check and the rename are not one
 * step with the start's transition). */
static pthread_mutex_t calib_lock = PTHREAD_MUTEX_INITIALIZER;

static int input_of(app *a, const char *id, job_input *in, rc_err *err)
{
	char path[4200];
	store_job_path(a->st, id, "spec.json", path, sizeof path);
	return job_spec_load_input(path, in, err);
}

static int file_present(app *a, const char *id, input_field f)
{
	char path[4200];
	store_job_path(a->st, id, input_field_file(f), path, sizeof path);
	return access(path, F_OK) == 0;
}

int http_input_missing(app *a, const char *id, const char **missing, rc_err *err)
{
	job_input in;
	int rc = input_of(a, id, &in, err);
	*missing = NULL;
	if (rc)
		return rc;
	for (int f = 0; f < INPUT_NFIELDS && in.intensity; f++)
		if (in.uploaded[f] && !file_present(a, id, (input_field)f)) {
			*missing = input_field_route((input_field)f);
			break;
		}
	return 0;
}

enum MHD_Result http_input_refuse(struct MHD_Connection *c, req *r, const char *missing, const char *why)
{
	char field[32];
	snprintf(field, sizeof field, "%s", !strcmp(missing, "bad-pixels") ? "bad_pixels" : missing);
	return http_fail(c, r, RC_ESTATE, field,
			 "the job's input.%s is \"uploaded\" and has not been: PUT /v1/jobs/%s/%s first (%s)", field,
			 r->id, missing, why);
}

enum MHD_Result http_calib_begin(struct MHD_Connection *c, req *r, int field)
{
	app *a = r->a;
	input_field f = (input_field)field;
	const char *name = input_field_route(f);
	unsigned long long len;
	enum MHD_Result ret;
	if (http_content_length(c, r, "", &len, &ret))
		return ret;
	job_row row;
	rc_err err;
	if (store_get(a->st, r->id, 0, &row, &err))
		return http_error_rc(c, r, &err);
	job_input in;
	if (!http_may_act(r, row.owner)) {
		ret = http_refuse_act(c, r, row.owner);
		goto out;
	}
	if (!(JOB_BIT(row.state) & JOB_UPLOADABLE)) {
		ret = http_fail(c, r, RC_ESTATE, "", "job %s is %s: its %s can no longer change", r->id,
				job_state_name(row.state), name);
		goto out;
	}
	if (input_of(a, r->id, &in, &err)) {
		ret = http_error_rc(c, r, &err);
		goto out;
	}
	char field_name[32];
	snprintf(field_name, sizeof field_name, "input.%s", f == INPUT_BAD ? "bad_pixels" : name);
	if (!in.intensity || !in.uploaded[f]) {
		ret = http_fail(c, r, RC_ESTATE, !in.intensity ? "input.kind" : field_name,
				!in.intensity ? "the job's input.kind is \"line_integrals\": it takes no %s (create the job "
						"with input.kind \"intensity\" and %s \"uploaded\")"
					      : "the job's %s is not \"uploaded\" (create the job with %s \"uploaded\" to "
						"send it)",
				!in.intensity ? name : field_name, field_name);
		goto out;
	}
	unsigned sb = f == INPUT_BAD ? 1 : (unsigned)rc_counts_sample_bytes(in.dtype);
	size_t pixels = (size_t)row.rows * (size_t)row.nu;
	uint64_t img = (uint64_t)pixels * sb;
	uint64_t max_images = f == INPUT_BAD ? 1 : INPUT_MAX_IMAGES;
	if (max_images > 1 && img > 0 && max_images * img > INPUT_MAX_BYTES)
		max_images = INPUT_MAX_BYTES / img > 1 ? INPUT_MAX_BYTES / img : 1;
	const char *dt = f == INPUT_BAD ? "uint8" : in.dtype == RC_COUNTS_U16 ? "uint16" : "float32";
	if (len == 0 || len % img || len / img > max_images) {
		rc_code code = len > img * max_images ? RC_EBODYTOOBIG : RC_EWRONGLEN;
		if (f == INPUT_BAD)
			ret = http_fail(c, r, code, "Content-Length",
					"the bad-pixel map is one image of %llu bytes (%d rows x %d pixels x 1 byte of uint8, "
					"nonzero = bad); got Content-Length %llu",
					(unsigned long long)img, row.rows, row.nu, len);
		else
			ret = http_fail(c, r, code, "Content-Length",
					"the %s is 1 to %llu images of %llu bytes each (%d rows x %d pixels x %u bytes of %s), "
					"averaged; got Content-Length %llu, %s",
					name, (unsigned long long)max_images, (unsigned long long)img, row.rows, row.nu, sb, dt,
					len, len > img * max_images ? "more than that" : "which is not a whole number of images");
		goto out;
	}
	struct calib *k = calloc(1, sizeof *k);
	if (k)
		k->buf = malloc((size_t)len);
	if (!k || !k->buf) {
		free(k);
		ret = http_fail(c, r, RC_ENOMEM, "", "out of memory for a %llu-byte %s", len, name);
		goto out;
	}
	k->f = f;
	k->dtype = in.dtype;
	k->image_bytes = img;
	k->expected = len;
	k->pixels = pixels;
	k->nu = row.nu > 0 ? row.nu : 1;
	r->cal = k;
	ret = MHD_YES;
out:
	job_row_clear(&row);
	return ret;
}

enum MHD_Result http_calib_data(req *r, const char *data, size_t len)
{
	struct calib *k = r->cal;
	if (k->too_long || k->got + len > k->expected) {
		k->too_long = 1;
		k->got += len;
		return k->got - k->expected > (16u << 20) ? MHD_NO : MHD_YES;
	}
	memcpy(k->buf + k->got, data, len);
	k->got += len;
	metrics_bytes_received(r->a->met, len);
	return MHD_YES;
}

/* The other of flat and dark as an image (file or number), or 0 in *have. */
static int other_field(app *a, const char *id, const job_input *in, input_field other, float *img, size_t n,
		       int *have)
{
	*have = 0;
	if (!in->uploaded[other]) {
		float v = (float)(other == INPUT_FLAT ? in->flat : in->dark);
		for (size_t p = 0; p < n; p++)
			img[p] = v;
		*have = 1;
		return 0;
	}
	char path[4200];
	store_job_path(a->st, id, input_field_file(other), path, sizeof path);
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return 0;
	*have = fread(img, sizeof(float), n, fp) == n;
	fclose(fp);
	return 0;
}

enum MHD_Result http_calib_end(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	struct calib *k = r->cal;
	const char *name = input_field_route(k->f);
	rc_err err;
	if (k->too_long || k->got != k->expected)
		return http_fail(c, r, k->too_long ? RC_EBODYTOOBIG : RC_EWRONGLEN, "Content-Length",
				 "received %llu of the %llu bytes announced; nothing was stored",
				 (unsigned long long)k->got, (unsigned long long)k->expected);
	const void *bytes = k->buf;
	size_t nbytes = (size_t)k->expected;
	float *avg = NULL, *other = NULL;
	int locked = 0;
	enum MHD_Result ret;
	if (k->f != INPUT_BAD) {
		int n = (int)(k->expected / k->image_bytes);
		avg = malloc(sizeof(float) * (k->pixels ? k->pixels : 1));
		other = malloc(sizeof(float) * (k->pixels ? k->pixels : 1));
		if (!avg || !other) {
			ret = http_fail(c, r, RC_ENOMEM, "", "out of memory averaging the %s", name);
			goto out;
		}
		rc_counts_average(k->dtype, k->buf, n, k->pixels, avg);
		for (size_t p = 0; p < k->pixels; p++)
			if (!isfinite(avg[p])) {
				ret = http_fail(c, r, RC_EINVAL, name, "the %s has a value that is not a finite number at "
						"row %zu, column %zu; nothing was stored", name, p / (size_t)k->nu,
						p % (size_t)k->nu);
				goto out;
			}
		/* the other field is read, checked against and this one written
		 * under one lock: two uploads at once (a flat and a dark) cannot
		 * each pass against the other's old file */
		pthread_mutex_lock(&calib_lock);
		locked = 1;
		job_input in;
		int have = 0;
		if (!input_of(a, r->id, &in, &err)) {
			input_field of = k->f == INPUT_FLAT ? INPUT_DARK : INPUT_FLAT;
			other_field(a, r->id, &in, of, other, k->pixels, &have);
		}
		if (have) {
			const float *fl = k->f == INPUT_FLAT ? avg : other, *dk = k->f == INPUT_FLAT ? other : avg;
			size_t above = 0;
			for (size_t p = 0; p < k->pixels; p++)
				above += fl[p] > dk[p];
			if (!above) {
				ret = http_fail(c, r, RC_EINVAL, name,
						"the flat field is not above the dark field at any pixel: p = -ln((I - dark) / "
						"(flat - dark)) needs flat > dark; nothing was stored");
				goto out;
			}
		}
		bytes = avg;
		nbytes = sizeof(float) * k->pixels;
	}
	char dir[4200];
	store_job_path(a->st, r->id, NULL, dir, sizeof dir);
	/* the job may have been started (or cancelled) while the body came */
	job_row row;
	if (store_get(a->st, r->id, 0, &row, &err)) {
		ret = http_error_rc(c, r, &err);
		goto out;
	}
	int open_state = (JOB_BIT(row.state) & JOB_UPLOADABLE) != 0;
	job_state st = row.state;
	job_row_clear(&row);
	if (!open_state) {
		ret = http_fail(c, r, RC_ESTATE, "", "job %s became %s while the %s arrived; nothing was stored", r->id,
				job_state_name(st), name);
		goto out;
	}
	if (!locked)
		pthread_mutex_lock(&calib_lock);
	locked = 1;
	int rc = durable_write_file(dir, input_field_file(k->f), bytes, nbytes, &err);
	pthread_mutex_unlock(&calib_lock);
	locked = 0;
	if (rc) {
		ret = http_error_rc(c, r, &err);
		goto out;
	}
	rlog(LOG_P_INFO, "input_stored", "id=%s field=%s images=%llu bytes=%llu", r->id, name,
	     (unsigned long long)(k->expected / k->image_bytes), (unsigned long long)k->expected);
	app_job_changed(a, r->id);
	ret = http_job(c, r, 200, r->id);
out:
	if (locked)
		pthread_mutex_unlock(&calib_lock);
	free(avg);
	free(other);
	return ret;
}

void http_calib_free(req *r)
{
	if (!r->cal)
		return;
	free(r->cal->buf);
	free(r->cal);
	r->cal = NULL;
}
