/* dicom_series: the job's DICOM series, written once (dicom_series.h). */
#include "pacs/dicom_series.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "algo/names.h"
#include "pacs/dicom_dcmtk.h"
#include "durable.h"
#include "spec.h"

/* generate's answer when another daemon's series is already in place */
#define SERIES_WRITTEN_ELSEWHERE 1

#define HU_BINS 65536 /* int16 */

static pthread_mutex_t series_lock = PTHREAD_MUTEX_INITIALIZER;

void dicom_series_file(store *st, const char *id, int k, char *buf, size_t n)
{
	char name[32];
	snprintf(name, sizeof name, "dicom/%05d.dcm", k + 1);
	store_job_path(st, id, name, buf, n);
}

int dicom_series_read(store *st, const char *id, dicom_series *out)
{
	char path[4200];
	memset(out, 0, sizeof *out);
	store_job_path(st, id, "dicom/series.json", path, sizeof path);
	json_t *j = json_load_file(path, 0, NULL);
	const char *study = NULL, *series = NULL;
	json_int_t inst = 0, clamped = 0;
	double wc = 0, ww = 0;
	int rc = j && !json_unpack(j, "{s:s, s:s, s:I, s:I, s:F, s:F}", "study_uid", &study, "series_uid", &series,
				   "instances", &inst, "clamped", &clamped, "window_center", &wc, "window_width", &ww)
			 ? 0
			 : -1;
	if (!rc) {
		snprintf(out->study_uid, sizeof out->study_uid, "%s", study);
		snprintf(out->series_uid, sizeof out->series_uid, "%s", series);
		out->instances = (int)inst;
		out->clamped = (long long)clamped;
		out->window_center = wc;
		out->window_width = ww;
	}
	json_decref(j);
	return rc;
}

static int rm_tree(const char *dir)
{
	char path[4300];
	for (int k = 1;; k++) { /* only what this module writes: NNNNN.dcm and series.json */
		snprintf(path, sizeof path, "%s/%05d.dcm", dir, k);
		if (unlink(path)) /* numbered without gaps: the first that fails ends it */
			break;
	}
	snprintf(path, sizeof path, "%s/series.json", dir);
	unlink(path);
	return rmdir(dir) && errno != ENOENT ? -1 : 0;
}

/* hu_per_mu = 1000 / mu_w, divided once per series, not per voxel. */
static int16_t to_hu(float mu, double mu_w, double hu_per_mu, long long *clamped)
{
	double hu = ((double)mu - mu_w) * hu_per_mu;
	if (!(hu >= -32768.0)) { /* also NaN */
		++*clamped;
		return INT16_MIN;
	}
	if (hu > 32767.0) {
		++*clamped;
		return INT16_MAX;
	}
	return (int16_t)lrint(hu);
}

static int read_slice(int fd, size_t count, int z, float *buf)
{
	size_t bytes = count * sizeof *buf, done = 0;
	off_t at = (off_t)z * (off_t)bytes;
	while (done < bytes) {
		ssize_t r = pread(fd, (char *)buf + done, bytes - done, at + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* Percentile p of the histogram (count voxels). */
static double hist_pct(const uint64_t *h, uint64_t count, double p)
{
	uint64_t want = (uint64_t)(p * (double)count), sum = 0;
	for (int b = 0; b < HU_BINS; b++)
		if ((sum += h[b]) > want)
			return (double)(b + INT16_MIN);
	return INT16_MAX;
}

typedef struct gen {
	store *st;
	const char *id, *uid_root;
	const job_spec *spec;
	double finished;
	char comments[4096]; /* the job's warnings ("" = none) */
	int iterations_done; /* the iterations that ran (the report's progress; -1 unknown) */
	char stopped[32];    /* why they ended before those asked ("" = all ran) */
	int fd;
	char tmp[4200];
} gen;

static int write_slices(gen *g, dicom_series *out, rc_err *err)
{
	const rc_volume_desc *v = &g->spec->r.vol;
	const double mu_w = g->spec->out.water_mu_per_mm, hu_per_mu = 1000.0 / mu_w;
	const size_t count = (size_t)v->nx * (size_t)v->ny;
	float *f = malloc(count * sizeof *f);
	int16_t *px = malloc(count * sizeof *px);
	uint64_t *hist = calloc(HU_BINS, sizeof *hist);
	int rc = 0;
	if (!f || !px || !hist) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a slice of %dx%d", v->nx, v->ny);
		goto out;
	}
	/* pass 1: the HU histogram, for the window */
	for (int z = 0; z < v->nz && !rc; z++) {
		if (read_slice(g->fd, count, z, f)) {
			rc = rc_fail(err, RC_EIO, "", "cannot read slice %d of job %s's volume", z, g->id);
			break;
		}
		for (size_t i = 0; i < count; i++)
			hist[to_hu(f[i], mu_w, hu_per_mu, &out->clamped) - INT16_MIN]++;
	}
	if (rc)
		goto out;
	uint64_t total = (uint64_t)count * (uint64_t)v->nz;
	double lo = hist_pct(hist, total, 0.005), hi = hist_pct(hist, total, 0.995);
	if (hi <= lo)
		hi = lo + 1;
	out->window_center = 0.5 * (lo + hi);
	out->window_width = hi - lo;

	const job_dicom *d = &g->spec->dicom;
	rc_dcm_patient pt = { d->patient_id, d->patient_name, d->patient_birth_date, d->patient_sex,
			      d->accession_number, d->study_description, d->series_description,
			      d->referring_physician, d->institution };
	char frame_uid[65], sop_uid[65], date[16], tim[16], study_id[17], derivation[160], series_desc[80];
	if ((rc = rc_dcm_uid(g->uid_root, frame_uid, sizeof frame_uid, err)))
		goto out;
	time_t t = (time_t)g->finished;
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(date, sizeof date, "%Y%m%d", &tm);
	strftime(tim, sizeof tim, "%H%M%S", &tm);
	snprintf(study_id, sizeof study_id, "%.8s", g->id);
	const rc_algo_params *ap = &g->spec->r.algo;
	const char *algo = rc_algo_name_str(ap->name);
	const char *kernel = ap->name == RC_ALGO_FDK ? rc_name_str(RC_NAMES_WINDOW, (int)ap->window) : NULL;
	if (kernel)
		snprintf(derivation, sizeof derivation, "recond %s, %s filter", algo, kernel);
	else if (g->stopped[0] && g->iterations_done >= 0)
		snprintf(derivation, sizeof derivation, "recond %s, %d of %d iterations (stopped: %s)", algo,
			 g->iterations_done, ap->iterations, g->stopped);
	else /* the iterations that ran: all those asked (a succeeded job without a stop) */
		snprintf(derivation, sizeof derivation, "recond %s, %d iterations", algo,
			 g->iterations_done > 0 ? g->iterations_done : ap->iterations);
	if (!d->series_description[0])
		snprintf(series_desc, sizeof series_desc, "recond %s", algo);
	pt.series_description = d->series_description[0] ? d->series_description : series_desc;

	/* voxel (ix, iy, iz) sits at ((ix - (nx-1)/2) vx + cx, ...) (docs/geometry.md) */
	rc_dcm_ct_slice s = {
		.patient = &pt, .study_uid = out->study_uid, .series_uid = out->series_uid, .sop_uid = sop_uid,
		.frame_uid = frame_uid, .date = date, .time = tim, .study_id = study_id, .series_number = 1,
		.rows = v->ny, .cols = v->nx, .pixel_spacing = { v->vy, v->vx }, .slice_thickness = v->vz,
		.position = { -0.5 * (v->nx - 1) * v->vx + v->cx, -0.5 * (v->ny - 1) * v->vy + v->cy, 0 },
		.orientation = { 1, 0, 0, 0, 1, 0 }, .window_center = out->window_center,
		.window_width = out->window_width, .rescale_slope = 1, .rescale_intercept = 0,
		.convolution_kernel = kernel, .derivation = derivation, .software = "recond", .pixels = px,
		.image_comments = g->comments,
	};
	/* pass 2: one instance per slice */
	for (int z = 0; z < v->nz && !rc; z++) {
		long long ignored = 0;
		char path[4300];
		if (read_slice(g->fd, count, z, f)) {
			rc = rc_fail(err, RC_EIO, "", "cannot read slice %d of job %s's volume", z, g->id);
			break;
		}
		for (size_t i = 0; i < count; i++)
			px[i] = to_hu(f[i], mu_w, hu_per_mu, &ignored);
		if ((rc = rc_dcm_uid(g->uid_root, sop_uid, sizeof sop_uid, err)))
			break;
		s.instance_number = z + 1;
		s.position[2] = (z - 0.5 * (v->nz - 1)) * v->vz + v->cz;
		s.slice_location = s.position[2];
		snprintf(path, sizeof path, "%s/%05d.dcm", g->tmp, z + 1);
		rc = rc_dcm_write_ct(&s, path, err);
		int fd = rc ? -1 : open(path, O_RDONLY | O_CLOEXEC);
		if (!rc && (fd < 0 || fsync(fd)))
			rc = rc_fail(err, durable_errno_code(errno), "", "cannot fsync %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	out->instances = v->nz;
out:
	free(f);
	free(px);
	free(hist);
	return rc;
}

static int generate(gen *g, dicom_series *out, rc_err *err)
{
	char path[4200], final[4200];
	const job_dicom *d = &g->spec->dicom;
	int rc;
	store_job_path(g->st, g->id, "volume.f32", path, sizeof path);
	g->fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (g->fd < 0 || fstat(g->fd, &sb) || (uint64_t)sb.st_size != g->spec->vol_bytes)
		return rc_fail(err, RC_EIO, "", "the volume file of job %s is missing or has the wrong size", g->id);
	/* named per node and process: daemons sharing a spool may write one
	 * job's series at once; the first rename wins (below) */
	char name[160];
	snprintf(name, sizeof name, "dicom.%s.%ld.tmp", store_node(g->st), (long)getpid());
	store_job_path(g->st, g->id, name, g->tmp, sizeof g->tmp);
	rm_tree(g->tmp); /* what a crash of this process's pid left */
	if (mkdir(g->tmp, 0750))
		return rc_fail(err, durable_errno_code(errno), "", "cannot create %s: %s", g->tmp, strerror(errno));
	if (d->study_instance_uid[0])
		snprintf(out->study_uid, sizeof out->study_uid, "%s", d->study_instance_uid);
	else if ((rc = rc_dcm_uid(g->uid_root, out->study_uid, sizeof out->study_uid, err)))
		return rc;
	if ((rc = rc_dcm_uid(g->uid_root, out->series_uid, sizeof out->series_uid, err)) ||
	    (rc = write_slices(g, out, err)))
		return rc;
	json_t *j = json_pack("{sssssIsIsfsf}", "study_uid", out->study_uid, "series_uid", out->series_uid,
			      "instances", (json_int_t)out->instances, "clamped", (json_int_t)out->clamped,
			      "window_center", out->window_center, "window_width", out->window_width);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	rc = durable_write_file(g->tmp, "series.json", text, strlen(text), err);
	free(text);
	if (rc)
		return rc;
	store_job_path(g->st, g->id, "dicom", final, sizeof final);
	store_job_path(g->st, g->id, NULL, path, sizeof path);
	if (rename(g->tmp, final)) {
		if (errno == ENOTEMPTY || errno == EEXIST)
			return SERIES_WRITTEN_ELSEWHERE; /* another node's rename came first */
		return rc_fail(err, durable_errno_code(errno), "", "cannot move the series into %s: %s", final,
			       strerror(errno));
	}
	if (durable_fsync_dir(path))
		return rc_fail(err, durable_errno_code(errno), "", "cannot move the series into %s: %s", final,
			       strerror(errno));
	return 0;
}

/* "recond warnings: code: message; ..." from the worker's report (JSON
 * text), for the series' Image Comments; "" without warnings.  The spec
 * parser keeps control characters and backslashes out of what the LT may
 * hold; messages are the worker's own ASCII. */
static void warnings_comment(const char *report, char *buf, size_t n)
{
	buf[0] = '\0';
	json_t *rep = report ? json_loads(report, 0, NULL) : NULL;
	json_t *ws = rep ? json_object_get(rep, "warnings") : NULL;
	size_t len = 0;
	for (size_t i = 0; i < json_array_size(ws) && len < n; i++) {
		const char *c = json_string_value(json_object_get(json_array_get(ws, i), "code"));
		const char *m = json_string_value(json_object_get(json_array_get(ws, i), "message"));
		len += (size_t)snprintf(buf + len, n - len, "%s%s: %s", i ? "; " : "recond warnings: ", c ? c : "?",
					m ? m : "");
	}
	for (char *p = buf; *p; p++) /* LT: no backslash, no control character */
		if (*p == '\\' || (unsigned char)*p < 0x20)
			*p = ' ';
	json_decref(rep);
}

/* The iterations that ran and why they ended early ("" = they did not),
 * from the worker's report's progress (docs/api.md, "Progress"). */
static void iterations_ran(const char *report, int *done, char *stopped, size_t n)
{
	*done = -1;
	stopped[0] = '\0';
	json_t *rep = report ? json_loads(report, 0, NULL) : NULL;
	json_t *p = rep ? json_object_get(rep, "progress") : NULL;
	if (json_is_integer(json_object_get(p, "iteration")))
		*done = (int)json_integer_value(json_object_get(p, "iteration"));
	const char *st = json_string_value(json_object_get(p, "stopped"));
	if (st) {
		snprintf(stopped, n, "%s", st);
		for (char *c = stopped; *c; c++) /* ST: no backslash, no control character */
			if (*c == '\\' || (unsigned char)*c < 0x20)
				*c = ' ';
	}
	json_decref(rep);
}

int dicom_series_ensure(store *st, const char *id, const char *uid_root, dicom_series *out, rc_err *err)
{
	char path[4200];
	job_row row;
	job_spec *spec = NULL;
	int rc;
	memset(out, 0, sizeof *out);
	/* Held before the row is read: a DELETE that removes the row from now
	 * on removes the directory only after this writer is done, and one that
	 * came first leaves no row to find (store_files_hold). */
	if ((rc = store_files_hold(st, id, err)))
		return rc;
	if ((rc = store_get(st, id, 0, &row, err)))
		goto out_release;
	job_state state = row.state;
	double finished = row.finished;
	char comments[4096], stopped[32];
	int done;
	warnings_comment(row.report, comments, sizeof comments);
	iterations_ran(row.report, &done, stopped, sizeof stopped);
	job_row_clear(&row);
	if (state != JOB_SUCCEEDED) {
		rc = rc_fail(err, RC_ESTATE, "state", "job %s is %s; its DICOM series exists once it has succeeded", id,
			     job_state_name(state));
		goto out_release;
	}
	pthread_mutex_lock(&series_lock);
	if (dicom_series_read(st, id, out) == 0) {
		rc = 0;
		goto out_unlock;
	}
	store_job_path(st, id, "spec.json", path, sizeof path);
	if ((rc = job_spec_load(path, &spec, err)))
		goto out_unlock;
	gen g = { .st = st, .id = id, .uid_root = uid_root ? uid_root : "", .spec = spec, .finished = finished,
		  .iterations_done = done, .fd = -1 };
	snprintf(g.comments, sizeof g.comments, "%s", comments);
	snprintf(g.stopped, sizeof g.stopped, "%s", stopped);
	rc = generate(&g, out, err);
	if (g.fd >= 0)
		close(g.fd);
	if (rc && g.tmp[0])
		rm_tree(g.tmp);
	if (rc == SERIES_WRITTEN_ELSEWHERE) /* the same UIDs for everyone: the series that is there */
		rc = dicom_series_read(st, id, out) ? rc_fail(err, RC_EIO, "", "cannot read the series of job %s", id)
						    : 0;
	job_spec_free(spec);
	/* Another node's DELETE (a shared spool) does not see this node's
	 * hold: a series written for a row that is gone now is removed here. */
	if (!rc && store_is_shared(st) && store_get(st, id, 0, &row, NULL) == RC_ENOTFOUND) {
		store_job_path(st, id, "dicom", path, sizeof path);
		rm_tree(path);
		store_job_path(st, id, NULL, path, sizeof path);
		rmdir(path); /* empty once the deleting node's removal is done too */
		rc = rc_fail(err, RC_ENOTFOUND, "", "job %s was deleted while its series was written", id);
	}
	job_row_clear(&row);
out_unlock:
	pthread_mutex_unlock(&series_lock);
out_release:
	store_files_release(st, id);
	return rc;
}
