/*
 * http_dicom: GET /v1/jobs/{id}/volume?format=dicom.  The job's series
 * (dicom_series.h, written on the first request) leaves one instance at a
 * time, so a download holds one slice's file, never the series:
 *  - as a ZIP (libarchive, entries stored: DICOM pixels barely compress and
 *    a PACS script wants them fast) named {id}/NNNNN.dcm, by default;
 *  - as multipart/related; type="application/dicom" when Accept asks for it,
 *    the form DICOMweb's WADO-RS answers with.
 * The length is not known in advance: the answer is chunked.
 */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/bytebuf.h"
#include "pacs/dicom_series.h"
#include "http/http_routes.h"
#include "base/log.h"

#define BOUNDARY "recond-dicom-0f4b1e7a9c2d"

typedef struct dcm_dl {
	store *st;
	char id[37];
	int n, k;            /* instances, next one */
	int multipart;
	struct archive *ar;
	bytebuf out;         /* bytes produced; those from off on not yet handed to MHD */
	size_t off;
	bytebuf file;        /* ZIP: the instance being added */
	int finished;
} dcm_dl;

static la_ssize_t zip_write(struct archive *ar, void *cls, const void *p, size_t n)
{
	(void)ar;
	dcm_dl *d = cls;
	return bytebuf_add(&d->out, p, n) ? -1 : (la_ssize_t)n;
}

/* Puts the next instance (or the end) into the buffer. */
static int produce(dcm_dl *d)
{
	if (d->k == d->n) {
		d->finished = 1;
		if (d->multipart)
			return bytebuf_add(&d->out, "--" BOUNDARY "--\r\n", strlen("--" BOUNDARY "--\r\n"));
		return archive_write_close(d->ar) == ARCHIVE_OK ? 0 : -1;
	}
	char path[4200];
	time_t mtime = 0;
	dicom_series_file(d->st, d->id, d->k++, path, sizeof path);
	if (d->multipart) {
		static const char head[] = "--" BOUNDARY "\r\nContent-Type: application/dicom\r\n\r\n";
		return bytebuf_add(&d->out, head, strlen(head)) || bytebuf_add_file(&d->out, path, NULL) ||
			       bytebuf_add(&d->out, "\r\n", 2)
			       ? -1
			       : 0;
	}
	d->file.len = 0; /* the instance, which libarchive copies into out */
	struct archive_entry *e = archive_entry_new();
	char name[64];
	snprintf(name, sizeof name, "%s/%05d.dcm", d->id, d->k);
	int rc = !e || bytebuf_add_file(&d->file, path, &mtime) ? -1 : 0;
	if (!rc) {
		archive_entry_set_pathname(e, name);
		archive_entry_set_size(e, (la_int64_t)d->file.len);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_mtime(e, mtime, 0); /* the file's: every download the same bytes */
		rc = archive_write_header(d->ar, e) != ARCHIVE_OK ||
				     archive_write_data(d->ar, d->file.p, d->file.len) != (la_ssize_t)d->file.len ||
				     archive_write_finish_entry(d->ar) != ARCHIVE_OK
			     ? -1
			     : 0;
	}
	archive_entry_free(e);
	return rc;
}

static ssize_t dcm_read(void *cls, uint64_t pos, char *out, size_t max)
{
	(void)pos;
	dcm_dl *d = cls;
	while (d->off == d->out.len) {
		if (d->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		d->off = d->out.len = 0;
		if (produce(d)) {
			rlog(LOG_P_ERR, "dicom_download_failed", "id=%s instance=%d", d->id, d->k);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
	size_t n = d->out.len - d->off < max ? d->out.len - d->off : max;
	memcpy(out, d->out.p + d->off, n);
	d->off += n;
	return (ssize_t)n;
}

static void dcm_free(void *cls)
{
	dcm_dl *d = cls;
	if (d->ar)
		archive_write_free(d->ar);
	bytebuf_free(&d->out);
	bytebuf_free(&d->file);
	free(d);
}

enum MHD_Result http_dicom_volume(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	dicom_series s;
	rc_err err;
	if (dicom_series_ensure(a->st, r->id, a->cfg->uid_root, &s, &err)) {
		rlog(LOG_P_ERR, "dicom_series_failed", "id=%s error=\"%s\"", r->id, rlog_q(err.msg));
		if (err.code == RC_EINVAL) /* a value DCMTK refused: nothing the client can fix */
			err.code = RC_EINTERNAL;
		return http_error_rc(c, r, &err);
	}
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	dcm_dl *d = calloc(1, sizeof *d);
	if (!d)
		return MHD_NO;
	d->st = a->st;
	snprintf(d->id, sizeof d->id, "%s", r->id);
	d->n = s.instances;
	d->multipart = accept && strstr(accept, "multipart/related") != NULL;
	if (!d->multipart) {
		d->ar = archive_write_new();
		if (!d->ar || archive_write_set_format_zip(d->ar) != ARCHIVE_OK ||
		    archive_write_set_options(d->ar, "zip:compression=store") != ARCHIVE_OK ||
		    archive_write_set_bytes_per_block(d->ar, 0) != ARCHIVE_OK ||
		    archive_write_open2(d->ar, d, NULL, zip_write, NULL, NULL) != ARCHIVE_OK) {
			dcm_free(d);
			return http_fail(c, r, RC_EINTERNAL, "", "cannot start the ZIP archive");
		}
	}
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, dcm_read, d, dcm_free);
	if (!resp) {
		dcm_free(d);
		return MHD_NO;
	}
	char disp[96], count[16];
	snprintf(count, sizeof count, "%d", s.instances);
	if (d->multipart) {
		MHD_add_response_header(resp, "Content-Type",
					"multipart/related; type=\"application/dicom\"; boundary=" BOUNDARY);
	} else {
		snprintf(disp, sizeof disp, "attachment; filename=\"%s-dicom.zip\"", r->id);
		MHD_add_response_header(resp, "Content-Type", "application/zip");
		MHD_add_response_header(resp, "Content-Disposition", disp);
	}
	MHD_add_response_header(resp, "X-Instances", count);
	return http_answer(c, r, 200, resp);
}
