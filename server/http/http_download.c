/*
 * http_download: GET /v1/jobs/{id}/volume?format=raw|nifti|mha (dicom:
 * http_dicom.c).
 *
 * The answer is header (empty for raw) + volume.f32, produced by a reader
 * callback that copies from the header in memory and preads the file, so a
 * download never holds the volume in memory.  One byte range
 * (bytes=a-b, a-, -n; http_range.h) gives 206 with Content-Range; a range past
 * the end is 416; several ranges are answered with the whole body (allowed by
 * RFC 9110).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/http_routes.h"
#include "http/http_range.h"
#include "algo/names.h"
#include "spec.h"
#include "http/volume_format.h"

struct dl {
	int fd;
	unsigned char *hdr;
	size_t hdr_len;
	uint64_t start; /* first byte of the answer within header + data */
};

static ssize_t dl_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct dl *d = cls;
	uint64_t at = d->start + pos;
	size_t done = 0;
	if (at < d->hdr_len) {
		size_t n = (size_t)(d->hdr_len - at);
		if (n > max)
			n = max;
		memcpy(buf, d->hdr + at, n);
		done = n;
		at += n;
	}
	while (done < max) {
		ssize_t r = pread(d->fd, buf + done, max - done, (off_t)(at - d->hdr_len));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return done ? (ssize_t)done : MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0)
			break;
		done += (size_t)r;
		at += (uint64_t)r;
	}
	return done ? (ssize_t)done : MHD_CONTENT_READER_END_OF_STREAM;
}

static void dl_free(void *cls)
{
	struct dl *d = cls;
	close(d->fd);
	free(d->hdr);
	free(d);
}

/* The volume grid of job id, from its stored spec through spec.c's parser. */
static int load_volume_desc(app *a, const char *id, rc_volume_desc *v, rc_err *err)
{
	char path[4200];
	store_job_path(a->st, id, "spec.json", path, sizeof path);
	job_spec *s = NULL;
	int rc = job_spec_load(path, &s, err);
	if (!rc)
		*v = s->r.vol;
	job_spec_free(s);
	return rc;
}

enum MHD_Result http_download_volume(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
	if (!fmt) /* absent; an empty format= is no format name (400) */
		fmt = "raw";
	int kind;
	if (rc_name_parse(RC_NAMES_FORMAT, fmt, &kind)) {
		rc_err ferr;
		rc_name_fail(&ferr, RC_NAMES_FORMAT, "format", fmt);
		return http_error_rc(c, r, &ferr);
	}
	job_row row;
	rc_err err;
	if (store_get(a->st, r->id, 0, &row, &err))
		return http_error_rc(c, r, &err);
	job_state st = row.state;
	uint64_t vol_bytes = row.vol_bytes;
	/* the DICOM series carries the patient fields; the other formats none */
	int refused = kind == RC_FORMAT_DICOM && !http_sees_phi(r, row.owner);
	job_row_clear(&row);
	if (refused)
		return http_fail(c, r, RC_EFORBIDDEN, "format",
				 "format=dicom carries the patient fields of job %s, which the token \"%s\" may not see "
				 "(a token with \"phi\": true may); format=raw, nifti and mha carry none", r->id, r->who);
	if (st != JOB_SUCCEEDED)
		return http_fail(c, r, RC_ESTATE, "state", "job %s is %s; the volume exists once it has succeeded",
				 r->id, job_state_name(st));
	if (kind == RC_FORMAT_DICOM) {
		audit_phi(a->audit, r->client, r->who, r->method, r->path, r->id);
		return http_dicom_volume(c, r);
	}
	struct dl *d = calloc(1, sizeof *d);
	if (!d)
		return MHD_NO;
	char path[4200];
	store_job_path(a->st, r->id, "volume.f32", path, sizeof path);
	d->fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (d->fd < 0 || fstat(d->fd, &sb) || (uint64_t)sb.st_size != vol_bytes) {
		if (d->fd >= 0)
			close(d->fd);
		free(d);
		return http_fail(c, r, RC_EIO, "", "the volume file of job %s is missing or has the wrong size", r->id);
	}
	if (kind != RC_FORMAT_RAW) {
		rc_volume_desc v;
		int rc = load_volume_desc(a, r->id, &v, &err);
		if (!rc)
			rc = kind == RC_FORMAT_NIFTI ? volume_nifti_header(&v, &d->hdr, &d->hdr_len)
						     : volume_mha_header(&v, &d->hdr, &d->hdr_len);
		if (rc) {
			close(d->fd);
			free(d->hdr);
			free(d);
			return http_fail(c, r, RC_EINTERNAL, "", "cannot build the %s header", fmt);
		}
	}
	uint64_t total = d->hdr_len + vol_bytes, first = 0, last = total - 1;
	int rr = http_range_parse(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE), total, &first, &last);
	if (rr < 0) {
		dl_free(d);
		char cr[64];
		snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)total);
		rc_fail(&err, RC_EBADRANGE, "Range", "the range starts past the end of the volume (%llu bytes)",
			(unsigned long long)total);
		return http_error_rc_hdr(c, r, &err, "Content-Range", cr);
	}
	d->start = first;
	struct MHD_Response *resp = MHD_create_response_from_callback(last - first + 1, 256 * 1024, dl_read, d, dl_free);
	if (!resp) {
		dl_free(d);
		return MHD_NO;
	}
	static const char *const ext[] = { [RC_FORMAT_RAW] = "f32", [RC_FORMAT_NIFTI] = "nii", [RC_FORMAT_MHA] = "mha",
					   [RC_FORMAT_DICOM] = "zip" };
	char disp[96];
	snprintf(disp, sizeof disp, "attachment; filename=\"%s.%s\"", r->id, ext[kind]);
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	MHD_add_response_header(resp, "Content-Disposition", disp);
	MHD_add_response_header(resp, "Accept-Ranges", "bytes");
	if (rr > 0) {
		char cr[96];
		snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)first, (unsigned long long)last,
			 (unsigned long long)total);
		MHD_add_response_header(resp, "Content-Range", cr);
		return http_answer(c, r, 206, resp);
	}
	return http_answer(c, r, 200, resp);
}
