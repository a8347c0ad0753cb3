/* push_send: STOW-RS and C-STORE sends of a series (push_send.h). */
#include "pacs/push_send.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytebuf.h"
#include "pacs/dicom_dcmtk.h"
#include "pacs/dicom_series.h"

#define BOUNDARY "recond-stow-5d1c8e2b7a4f"

static size_t keep_answer(char *p, size_t size, size_t n, void *ud)
{
	bytebuf *b = ud;
	size_t len = size * n;
	if (b->len < 4096) /* the start is enough for the error message */
		bytebuf_add(b, p, len < 4096 - b->len ? len : 4096 - b->len);
	return len;
}

/* One instance as a multipart/related body (PS3.18 10.5). */
static int instance_body(const char *path, bytebuf *b)
{
	static const char head[] = "--" BOUNDARY "\r\nContent-Type: application/dicom\r\n\r\n";
	static const char tail[] = "\r\n--" BOUNDARY "--\r\n";
	b->len = 0;
	return bytebuf_add(b, head, sizeof head - 1) || bytebuf_add_file(b, path, NULL) ||
		       bytebuf_add(b, tail, sizeof tail - 1)
		       ? -1
		       : 0;
}

/* A STOW-RS answer's verdict on the one instance sent (PS3.18 10.5.3): a
 * FailedSOPSequence (0008,1198) item, or a ReferencedSOPSequence
 * (0008,1199) that does not list it, is a failure even under 200 (a PACS
 * may drop what it could not store).  Answers that are not DICOM JSON are
 * taken at their status.  Returns 0, or the failure reason (-1: unknown). */
static long stow_verdict(const bytebuf *ans)
{
	json_t *j = ans->len ? json_loadb(ans->p, ans->len, 0, NULL) : NULL;
	long reason = 0;
	if (json_is_object(j)) {
		json_t *failed = json_object_get(json_object_get(j, "00081198"), "Value");
		json_t *stored = json_object_get(j, "00081199");
		if (json_array_size(failed) > 0) {
			json_t *r = json_object_get(json_object_get(json_array_get(failed, 0), "00081197"), "Value");
			reason = json_is_integer(json_array_get(r, 0)) ? (long)json_integer_value(json_array_get(r, 0)) : -1;
		} else if (stored && json_array_size(json_object_get(stored, "Value")) == 0) {
			reason = -1;
		}
	}
	json_decref(j);
	return reason;
}

typedef struct xfer {
	push_progress progress;
	void *ud;
} xfer;

/* libcurl's progress hook: lets a stop interrupt a slow PACS at once. */
static int stow_poll(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	const xfer *x = ud;
	return x->progress && x->progress(x->ud, -1) ? 1 : 0;
}

static int send_stow(store *st, const char *id, int n, const destination *d, push_progress progress, void *ud,
		     rc_err *err)
{
	char url[1100], path[4200];
	snprintf(url, sizeof url, "%s/studies", d->url);
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = NULL;
	bytebuf b = { 0 }, ans = { 0 };
	int rc = 0;
	if (!h || !(hdr = curl_slist_append(hdr, "Content-Type: multipart/related; type=\"application/dicom\"; "
						 "boundary=" BOUNDARY)) ||
	    !(hdr = curl_slist_append(hdr, "Accept: application/dicom+json")) ||
	    !(hdr = curl_slist_append(hdr, "Expect:"))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)d->timeout_s);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)d->timeout_s);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_answer);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &ans);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	xfer x = { progress, ud };
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stow_poll);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	if (d->username[0]) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, d->username);
		curl_easy_setopt(h, CURLOPT_PASSWORD, d->password);
	}
	if (d->ca_file[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, d->ca_file);
	for (int k = 0; k < n && !rc; k++) {
		dicom_series_file(st, id, k, path, sizeof path);
		if (instance_body(path, &b)) {
			rc = rc_fail(err, RC_EIO, "", "cannot read instance %d of the series", k + 1);
			break;
		}
		ans.len = 0;
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, b.p);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b.len);
		CURLcode cc = curl_easy_perform(h);
		long status = 0, reason;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (cc == CURLE_ABORTED_BY_CALLBACK) {
			rc = rc_fail(err, RC_ECANCELLED, "", "stopped");
		} else if (cc != CURLE_OK) {
			rc = rc_fail(err, RC_EIO, "", "STOW-RS to %s failed: %s", url, curl_easy_strerror(cc));
		} else if (status != 200) {
			/* 202 is "stored with warnings or some failed" (PS3.18 10.5.3):
			 * with one instance per request, a failure of that one.  The
			 * answer's body is not quoted: a PACS may echo patient data. */
			rc = rc_fail(err, RC_EIO, "", "STOW-RS to %s answered HTTP %ld for instance %d", url, status,
				     k + 1);
		} else if ((reason = stow_verdict(&ans))) {
			rc = rc_fail(err, RC_EIO, "", "STOW-RS to %s answered 200 but did not store instance %d "
				     "(failure reason %ld)", url, k + 1, reason);
		} else if (progress && progress(ud, k + 1)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "stopped");
		}
	}
out:
	curl_slist_free_all(hdr);
	if (h)
		curl_easy_cleanup(h);
	bytebuf_free(&b);
	bytebuf_free(&ans);
	return rc;
}

static int send_cstore(store *st, const char *id, int n, const destination *d, push_progress progress, void *ud,
		       rc_err *err)
{
	rc_dcm_cstore *c = NULL;
	char path[4200];
	int rc = rc_dcm_cstore_open(d->host, d->port, d->called_ae, d->calling_ae, d->timeout_s, &c, err);
	for (int k = 0; k < n && !rc; k++) {
		dicom_series_file(st, id, k, path, sizeof path);
		if (!(rc = rc_dcm_cstore_send(c, path, err)) && progress && progress(ud, k + 1))
			rc = rc_fail(err, RC_ECANCELLED, "", "stopped");
	}
	if (c)
		rc_dcm_cstore_close(c);
	return rc;
}

int push_send(store *st, const char *id, int instances, const destination *d, push_progress progress, void *ud,
	      rc_err *err)
{
	return d->kind == DEST_STOW_RS ? send_stow(st, id, instances, d, progress, ud, err)
				       : send_cstore(st, id, instances, d, progress, ud, err);
}
