#include "http/http.h"

#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "common/query.h"
#include "http/path.h"

/* The view of no request: every field of r zero but the arrays read only up to their counts
 * (pend, kept, fbuf), an empty target at fbuf's start, and no Content-Length. Done by
 * lg_http_init and lg_http_next, so a request line finds it empty. */
static void
clear_req(struct lg_http_req *r)
{
	memset(r, 0, offsetof(struct lg_http_req, pend));
	r->target = r->fbuf;
	r->target[0] = '\0';
	r->content_length = LG_HTTP_NO_LENGTH;
}

_Static_assert(LG_HTTP_KEEP_NAME <= 64, "struct lg_http_keep's lens has a bit per length");

int
lg_http_keep_add(struct lg_http_keep *k, const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= LG_HTTP_KEEP_NAME)
		return -1;
	for (unsigned i = 0; i < k->n; i++)
		if (strcasecmp(k->names[i], name) == 0)
			return 0;
	if (k->n == LG_HTTP_KEEP_NAMES)
		return -1;
	for (size_t i = 0; i <= n; i++)
		k->names[k->n][i] = (char)tolower((unsigned char)name[i]);
	k->n++;
	k->lens |= 1ull << n; /* n < LG_HTTP_KEEP_NAME = 64 */
	return 0;
}

/* A field the server reads (lim->keep names it) does not fit what a request keeps. */
static int
keep_full(struct lg_http *h)
{
	h->frame.status = 431;
	h->frame.why = "a header field the server reads is past the kept ones (32 lines, 4 KiB)";
	return -1;
}

/* Whether a field called name (len bytes) is kept: lim->keep names it, or there is none. */
static int
wanted(const struct lg_http *h, const char *name, size_t len)
{
	const struct lg_http_keep *k = h->lim->keep;

	if (len == 0 || len >= LG_HTTP_KEEP_NAME)
		return 0;
	if (k == NULL)
		return 1;
	if (!(k->lens >> len & 1))
		return 0; /* no kept name is that long: most names of a request end here */
	/* names[] are lower case and NUL-terminated: a cheap test of the length and the first
	 * byte goes first (most names of a request fail it); strncasecmp decides */
	for (unsigned i = 0; i < k->n; i++)
		if (k->names[i][len] == '\0' && k->names[i][len - 1] != '\0' &&
		    k->names[i][0] == (char)tolower((unsigned char)name[0]) &&
		    strncasecmp(k->names[i], name, len) == 0)
			return 1;
	return 0;
}

/* A field's name is complete (name[0..len): pend, or the whole line's): a kept field starts
 * (its value follows), or the field is passed over. Returns 0, or -1 with status 431 when a
 * wanted one cannot be kept. */
static int
name_done(struct lg_http *h, const char *name, size_t len)
{
	struct lg_http_req *r = &h->req;
	struct lg_http_field *f;

	if (!wanted(h, name, len)) {
		r->kept_open = 3;
		return 0;
	}
	if (r->nkept == LG_HTTP_KEPT || len > LG_HTTP_FIELD_BUF - (r->fbuf_len - r->fbase)) {
		if (h->lim->keep != NULL)
			return keep_full(h);
		r->kept_open = -1; /* every field kept: the first ones that fit, no more */
		r->kept_short = 1;
		return 0;
	}
	f = &r->kept[r->nkept++];
	*f = (struct lg_http_field){ (uint16_t)r->fbuf_len, (uint16_t)len,
	    (uint16_t)(r->fbuf_len + len), 0 };
	memcpy(r->fbuf + r->fbuf_len, name, len);
	r->fbuf_len += len;
	r->kept_open = 2;
	return 0;
}

/* A piece of a field name (http/frame.h name hook): gathered in pend until the value
 * starts. Trailer fields are not reported: the request view is taken at the head. */
static int
on_name(void *ctx, const char *at, size_t len)
{
	struct lg_http *h = ctx;
	struct lg_http_req *r = &h->req;

	if (r->kept_open == -1) {
		r->kept_short = 1;
		return 0;
	}
	if (r->kept_open != 1) {
		r->kept_open = 1;
		r->pend_len = 0;
	}
	size_t n = len < LG_HTTP_KEEP_NAME - r->pend_len ? len : LG_HTTP_KEEP_NAME - r->pend_len;
	memcpy(r->pend + r->pend_len, at, n);
	r->pend_len += n; /* LG_HTTP_KEEP_NAME: longer than any kept name */
	return 0;
}

/* A piece of the value of the field being kept (if one is) goes into fbuf. Returns 0, or -1
 * with status 431 when it does not fit and the field is one the server reads. */
static int
keep_value(struct lg_http *h, const char *at, size_t len)
{
	struct lg_http_req *r = &h->req;
	struct lg_http_field *f;

	if (r->kept_open != 2)
		return 0;
	f = &r->kept[r->nkept - 1];
	if (len > LG_HTTP_FIELD_BUF - (r->fbuf_len - r->fbase)) {
		if (h->lim->keep != NULL)
			return keep_full(h);
		r->fbuf_len = f->name_off; /* does not fit: forget this field and keep no more */
		r->nkept--;
		r->kept_open = -1;
		r->kept_short = 1;
		return 0;
	}
	memcpy(r->fbuf + r->fbuf_len, at, len);
	r->fbuf_len += len;
	f->value_len = (uint16_t)(f->value_len + len);
	return 0;
}

/* A piece of a field value (the value hook: at least one per line, leading OWS left out). */
static int
on_value(void *ctx, const char *at, size_t len)
{
	struct lg_http *h = ctx;
	struct lg_http_req *r = &h->req;

	if (r->kept_open == 1 && name_done(h, r->pend, r->pend_len) == -1)
		return -1;
	return keep_value(h, at, len);
}

const char *
lg_http_field_next(const struct lg_http_req *r, const char *name, unsigned *pos, size_t *len)
{
	size_t nl = strlen(name);

	for (unsigned i = *pos; i < r->nkept; i++) {
		const struct lg_http_field *f = &r->kept[i];
		const char *v = r->fbuf + f->value_off;
		size_t vl = f->value_len;

		if (f->name_len != nl || strncasecmp(r->fbuf + f->name_off, name, nl) != 0)
			continue;
		while (vl > 0 && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		*len = vl;
		*pos = i + 1;
		return v;
	}
	*pos = r->nkept;
	return NULL;
}

const char *
lg_http_field_get(const struct lg_http_req *r, const char *name, size_t *len)
{
	unsigned pos = 0;

	return lg_http_field_next(r, name, &pos, len);
}

static int
split_target(struct lg_http_req *r)
{
	const char *p = r->target, *end = r->target + r->target_len, *q;

	/* Origin-form (RFC 9112 section 3.2.1); absolute-form, which a server must accept
	 * (section 3.2.2): the path starts after scheme and authority, and an empty one is "/"
	 * (RFC 9110 section 4.2.3); asterisk-form for OPTIONS (section 3.2.4), whose path is "*".
	 * Authority-form is for CONNECT, which this server does not offer. */
	if (p[0] != '/' && (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0)) {
		const char *auth = strstr(p, "://") + 3;

		for (p = auth; p < end && *p != '/' && *p != '?'; p++)
			;
		if (p == auth)
			return -1;
	} else if (r->target_len == 1 && p[0] == '*' && r->method == HTTP_OPTIONS) {
		r->path = p;
		r->path_len = 1;
		return 0;
	} else if (r->target_len == 0 || p[0] != '/') {
		return -1;
	}
	q = memchr(p, '?', (size_t)(end - p));
	r->path_len = (size_t)((q ? q : end) - p);
	r->path = r->path_len ? p : "/";
	if (r->path_len == 0)
		r->path_len = 1;
	r->query = q ? q + 1 : NULL;
	r->query_len = q ? (size_t)(end - q - 1) : 0;
	return 0;
}

/* The path normalized in place (http/path.h), and the target made "path?query" again behind
 * it: everything after the request line sees the one form. Returns 0, or -1 with *why set. */
static int
normalize_path(struct lg_http_req *r, int keep_slashes, const char **why)
{
	size_t len = r->path_len;

	if (r->path[0] != '/' || r->path < r->target || r->path >= r->target + r->target_len)
		return 0; /* "*", or an empty absolute-form path taken as "/" (not in target) */
	char *p = r->target + (r->path - r->target);
	if (lg_path_normalize(p, &len, keep_slashes, why) == -1)
		return -1;
	if (len < r->path_len) { /* the rest (query, NUL) moves up behind the shorter path */
		size_t rest = r->target_len - (size_t)(p - r->target) - r->path_len;

		memmove(p + len, p + r->path_len, rest + 1);
		r->target_len -= r->path_len - len;
		if (r->query != NULL)
			r->query -= r->path_len - len;
		r->path_len = len;
	}
	return 0;
}

/* The request line is in: a message begins (its line is buf[0..n)). */
static void
take_line(struct lg_http *h, const char *buf)
{
	const struct lg_frame *f = &h->frame;
	struct lg_http_req *r = &h->req;

	h->body_seen = 0;
	r->method = (unsigned)f->method;
	r->major = 1;
	r->minor = (unsigned short)f->minor;
	memcpy(r->target, lg_frame_target(f, buf), f->target_len); /* <= LG_FRAME_TARGET_CAP */
	r->target_len = f->target_len;
	r->target[r->target_len] = '\0';
	r->fbase = r->fbuf_len = r->target_len + 1; /* the fields' bytes follow it */
}

/* The header section is in: the request as the framing read it, and the feed stops there
 * until the caller says where the body goes (lg_http_body_to). Returns 0, or -1 with
 * h->status set. */
static int
take_head(struct lg_http *h)
{
	const struct lg_frame *f = &h->frame;
	struct lg_http_req *r = &h->req;

	h->head_seen = 1;
	r->chunked = f->body == LG_FRAME_CHUNKED;
	r->content_length = f->body == LG_FRAME_LENGTH ? f->content_length : LG_HTTP_NO_LENGTH;
	r->expect_continue = f->expect_continue;
	r->nfields = f->nfields;
	r->keep_alive = lg_frame_keep_alive(f);
	r->conn_upgrade = f->conn_upgrade;
	if (split_target(r) == -1) {
		h->status = 400;
		h->why = "request-target is neither origin-form nor absolute-form";
		return -1;
	}
	if (normalize_path(r, h->lim->keep_slashes, &h->why) == -1) {
		h->status = 400;
		return -1;
	}
	h->head_wait = 1;
	return 0;
}

enum lg_http_stop
lg_http_body_to(struct lg_http *h, int action)
{
	h->head_wait = 0;
	switch (action) {
	case LG_HTTP_BODY_SELF:
		h->self_body = 1;
		h->complete = 1; /* the caller reads the body: the message is complete here */
		return LG_HTTP_DONE;
	case LG_HTTP_REJECT:
		h->rejected = 1;
		return LG_HTTP_ERROR;
	default:
		h->complete = lg_frame_msg_done(&h->frame);
		return h->complete ? LG_HTTP_DONE : LG_HTTP_MORE;
	}
}

/* The body hook: payload bytes for on_body. */
static int
on_data(void *ctx, const char *at, size_t len)
{
	struct lg_http *h = ctx;

	h->body_seen += len;
	if (h->on_body == NULL || h->on_body(h, h->ctx, at, len) == 0)
		return 0;
	if (h->status == 0) {
		h->status = 400;
		h->why = "body refused";
	}
	h->frame.status = h->status; /* the parse stops here */
	h->frame.why = h->why;
	return -1;
}

/* A field line read whole (the field hook): what on_name then on_value do with it, the name
 * judged and kept in place rather than gathered in pend first. */
static int
on_field(void *ctx, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct lg_http *h = ctx;
	struct lg_http_req *r = &h->req;

	if (r->kept_open == -1) {
		r->kept_short = 1;
		return 0;
	}
	if (name_done(h, name, nlen) == -1) /* wanted takes no name of LG_HTTP_KEEP_NAME or more */
		return -1;
	return keep_value(h, value, vlen);
}

static const struct lg_frame_hooks hooks = {
	.name = on_name, .value = on_value, .data = on_data, .field = on_field,
};

static const struct lg_http_limits default_limits = {
	.max_head = LG_HTTP_MAX_HEAD, .max_target = LG_HTTP_MAX_TARGET,
	.max_fields = LG_HTTP_MAX_FIELDS,
};

void
lg_http_init(struct lg_http *h, const struct lg_http_limits *lim)
{
	memset(h, 0, offsetof(struct lg_http, req));
	clear_req(&h->req);
	h->lim = lim ? lim : &default_limits;
	lg_frame_init(&h->frame, h->lim, &hooks, h);
}

void
lg_http_next(struct lg_http *h)
{
	h->complete = 0;
	h->head_seen = 0;
	h->head_wait = 0;
	h->self_body = 0;
	/* The answered request's view goes now, not at the next request line: a next message
	 * refused before its line is whole (400, 414) would otherwise be logged with the method,
	 * path, query and fields of the one before it. */
	clear_req(&h->req);
	lg_frame_reset(&h->frame, h->lim);
}

/* Reads what buf[0..len) holds of the current message: its request line once whole, head
 * bytes, or body bytes. Returns the bytes consumed: 0 while a request line is incomplete, or
 * with h->status set on a violation. */
static size_t
step(struct lg_http *h, const char *buf, size_t len)
{
	struct lg_frame *f = &h->frame;
	size_t n;

	if (!lg_frame_head_done(f) && f->head_bytes == 0) { /* the request line is pending */
		long r = lg_frame_request_line(f, buf, len);

		n = r > 0 ? (size_t)r : 0;
		if (n > 0)
			take_line(h, buf);
	} else if (!lg_frame_head_done(f)) {
		n = lg_frame_head(f, buf, len);
		if (lg_frame_head_done(f) && take_head(h) == -1)
			return 0;
	} else {
		n = lg_frame_body(f, buf, len);
		h->complete = lg_frame_msg_done(f);
	}
	if (f->status && h->status == 0) { /* a framing rule failed: nothing is consumed */
		h->status = f->status;
		h->why = f->why;
		return 0;
	}
	return n;
}

enum lg_http_stop
lg_http_feed(struct lg_http *h, const char *buf, size_t len, size_t *used)
{
	size_t done = 0;

	h->body_wait = 0;
	while (done < len && !h->status && !h->rejected && !h->complete && !h->head_wait) {
		size_t cap = len - done;

		if (h->head_seen && !h->self_body && h->body_room) {
			size_t room = h->body_room(h, h->ctx);

			if (h->status)
				break;
			if (room == 0) {
				h->body_wait = 1;
				break;
			}
			if (room < cap)
				cap = room;
		}
		size_t n = step(h, buf + done, cap);
		if (n == 0)
			break;
		done += n;
	}
	*used = done;
	if (h->status || h->rejected)
		return LG_HTTP_ERROR;
	if (h->head_wait)
		return LG_HTTP_HEAD_DONE;
	if (h->complete)
		return LG_HTTP_DONE;
	return h->body_wait ? LG_HTTP_BODY_WAIT : LG_HTTP_MORE;
}

/* Reason phrases of RFC 9110 section 15 (and 429, 431 of RFC 6585) for every status lagless
 * sends itself or a module may choose (set_status: any 2xx with LAGLESS_OK, any 4xx with
 * LAGLESS_BAD_INPUT). 418 is "(Unused)" in RFC 9110; we send the phrase clients know. A
 * registered code outside the table still goes out, as "Unknown". */
static const struct {
	int status;
	const char *reason;
} reasons[] = {
	{ 100, "Continue" },
	{ 200, "OK" }, { 201, "Created" }, { 202, "Accepted" },
	{ 203, "Non-Authoritative Information" }, { 204, "No Content" }, { 205, "Reset Content" },
	{ 206, "Partial Content" },
	{ 300, "Multiple Choices" }, { 301, "Moved Permanently" }, { 302, "Found" },
	{ 303, "See Other" }, { 304, "Not Modified" }, { 307, "Temporary Redirect" },
	{ 308, "Permanent Redirect" },
	{ 400, "Bad Request" }, { 401, "Unauthorized" }, { 402, "Payment Required" },
	{ 403, "Forbidden" }, { 404, "Not Found" }, { 405, "Method Not Allowed" },
	{ 406, "Not Acceptable" }, { 407, "Proxy Authentication Required" },
	{ 408, "Request Timeout" }, { 409, "Conflict" }, { 410, "Gone" },
	{ 411, "Length Required" }, { 412, "Precondition Failed" }, { 413, "Content Too Large" },
	{ 414, "URI Too Long" }, { 415, "Unsupported Media Type" }, { 416, "Range Not Satisfiable" },
	{ 417, "Expectation Failed" }, { 418, "I'm a teapot" }, { 421, "Misdirected Request" },
	{ 422, "Unprocessable Content" }, { 426, "Upgrade Required" },
	{ 428, "Precondition Required" }, { 429, "Too Many Requests" },
	{ 431, "Request Header Fields Too Large" },
	{ 500, "Internal Server Error" }, { 501, "Not Implemented" }, { 502, "Bad Gateway" },
	{ 503, "Service Unavailable" }, { 504, "Gateway Timeout" },
	{ 505, "HTTP Version Not Supported" },
};

const char *
lg_http_reason(int status)
{
	size_t lo = 0, hi = sizeof(reasons) / sizeof(reasons[0]);

	while (lo < hi) { /* the table is in ascending order: once per response, so bisected */
		size_t mid = lo + (hi - lo) / 2;

		if (reasons[mid].status == status)
			return reasons[mid].reason;
		if (reasons[mid].status < status)
			lo = mid + 1;
		else
			hi = mid;
	}
	return "Unknown";
}

const char *
lg_http_query_param(const struct lg_http_req *r, const char *name, size_t *len)
{
	return lg_query_param(r->query, r->query_len, name, len);
}
