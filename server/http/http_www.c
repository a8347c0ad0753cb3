/*
 * http_www: the operator page (docs/operator.md): GET / (index.html) and its
 * two files /ui/app.js and /ui/app.css, from the table that the build
 * embeds into recond (www.h, scripts/embed-www.py).
 *
 * The page holds no data, so its routes need no token (http.c: ROLE_NONE);
 * its script reads the API with the token the user types in.  Every answer
 * carries a strict Content-Security-Policy (scripts and styles from this
 * origin only, no inline code, images from this origin or blob:/data: URLs,
 * fetch to this origin only, no framing, no forms) and nosniff.  The files
 * are revalidated on every load (Cache-Control: no-cache) against their
 * ETag, a hash of the bytes: a matching If-None-Match is 304 with no body.
 */
#include "http/http_routes.h"
#include "live/www.h"

#define WWW_CSP "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " \
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* Programs that link the daemon's library without the generated table
 * (test_http_api, the fuzzers): no page.  recond links the table
 * ($(BUILD)/gen/www_assets.c), whose strong www_find replaces this one. */
__attribute__((weak)) const www_asset *www_find(const char *path)
{
	(void)path;
	return NULL;
}

enum MHD_Result http_www_get(struct MHD_Connection *c, req *r)
{
	const www_asset *w = www_find(r->path);
	if (!w)
		return http_fail(c, r, RC_ENOTFOUND, "", "no such page: %.200s (the operator page is /)", r->path);
	int same = http_etag_matches(c, w->etag);
	struct MHD_Response *resp = same ? MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT)
					 : MHD_create_response_from_buffer(w->len, (void *)w->bytes,
									   MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	if (!same)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, w->type);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, w->etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_add_response_header(resp, "Content-Security-Policy", WWW_CSP);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	return http_answer(c, r, same ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, resp);
}
