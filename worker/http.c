#include "worker/http.h"

#include <limits.h>
#include <string.h>
#include <strings.h>

static struct lg_http *
of(http_parser *p)
{
	return p->data;
}

static int
on_message_begin(http_parser *p)
{
	struct lg_http *h = of(p);

	memset(&h->req, 0, sizeof(h->req));
	h->req.content_length = LG_HTTP_NO_LENGTH;
	h->body_seen = 0;
	h->field_len = 0;
	h->field_done = 0;
	return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
	struct lg_http *h = of(p);

	if (len > LG_HTTP_MAX_TARGET - h->req.target_len) {
		h->status = 414;
		return -1;
	}
	memcpy(h->req.target + h->req.target_len, at, len);
	h->req.target_len += len;
	h->req.target[h->req.target_len] = '\0';
	return 0;
}

static int
on_header_field(http_parser *p, const char *at, size_t len)
{
	struct lg_http *h = of(p);

	if (h->field_done) { /* a new field begins */
		h->field_len = 0;
		h->field_done = 0;
	}
	if (h->field_len == 0 && ++h->req.nfields > LG_HTTP_MAX_FIELDS) {
		h->status = 431;
		return -1;
	}
	/* Debian builds http-parser with HTTP_PARSER_STRICT=0, which lets spaces into field names
	 * and so reads "Content-Length : 5" as Content-Length. RFC 9112 section 5.1 requires a 400
	 * for whitespace before the colon: parsers that disagree on it smuggle requests. */
	if (memchr(at, ' ', len) != NULL) {
		h->status = 400;
		return -1;
	}
	size_t n = len < sizeof(h->field) - 1 - h->field_len ? len :
	    sizeof(h->field) - 1 - h->field_len;
	memcpy(h->field + h->field_len, at, n);
	h->field_len += n;
	h->field[h->field_len] = '\0';
	return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t len)
{
	struct lg_http *h = of(p);

	h->field_done = 1;
	/* Expect's only defined expectation is "100-continue" (RFC 9110 section 10.1.1); values
	 * arrive in pieces only across reads, where a prefix test is good enough. */
	if (strcasecmp(h->field, "expect") == 0 && len >= 12 &&
	    strncasecmp(at, "100-continue", 12) == 0)
		h->req.expect_continue = 1;
	return 0;
}

static int
split_target(struct lg_http_req *r)
{
	char *q;

	/* Origin-form only (RFC 9112 section 3.2.1): absolute-form and authority-form are for
	 * proxies, and asterisk-form for OPTIONS *, none of which this server is. */
	if (r->target_len == 0 || r->target[0] != '/')
		return -1;
	r->path = r->target;
	q = memchr(r->target, '?', r->target_len);
	r->path_len = q ? (size_t)(q - r->target) : r->target_len;
	r->query = q ? q + 1 : NULL;
	r->query_len = q ? r->target_len - r->path_len - 1 : 0;
	return 0;
}

static int
on_headers_complete(http_parser *p)
{
	struct lg_http *h = of(p);
	struct lg_http_req *r = &h->req;

	r->method = p->method;
	r->major = p->http_major;
	r->minor = p->http_minor;
	if (r->major != 1 || r->minor > 1) {
		h->status = 505;
		return -1;
	}
	if (split_target(r) == -1) {
		h->status = 400;
		return -1;
	}
	r->chunked = (p->flags & F_CHUNKED) != 0;
	if ((p->flags & F_CONTENTLENGTH) || (!r->chunked && p->content_length != ULLONG_MAX))
		r->content_length = p->content_length;
	r->keep_alive = http_should_keep_alive(p);
	switch (h->on_head ? h->on_head(h, h->ctx) : LG_HTTP_BODY_PARSER) {
	case LG_HTTP_BODY_SELF:
		return 1; /* F_SKIPBODY: the message completes here */
	case LG_HTTP_REJECT:
		h->rejected = 1;
		http_parser_pause(p, 1);
		return 0;
	default:
		return 0;
	}
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct lg_http *h = of(p);

	h->body_seen += len;
	return h->on_body ? h->on_body(h, h->ctx, at, len) : 0;
}

static int
on_message_complete(http_parser *p)
{
	struct lg_http *h = of(p);

	h->complete = 1;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

void
lg_http_init(struct lg_http *h)
{
	/* The parser enforces the head limit itself (HPE_HEADER_OVERFLOW -> 431), counting every
	 * byte of the request line and header section. parser.nread cannot serve from the hooks:
	 * http-parser 2.9 counts in a local copy and stores it only when execute returns, so a
	 * head that arrived in one read was never seen over the limit. The limit is process-wide;
	 * this glue is the only http-parser user. */
	http_parser_set_max_header_size(LG_HTTP_MAX_HEAD);
	memset(h, 0, sizeof(*h));
	http_parser_init(&h->parser, HTTP_REQUEST);
	h->parser.data = h;
}

void
lg_http_next(struct lg_http *h)
{
	h->complete = 0;
	http_parser_pause(&h->parser, 0);
}

size_t
lg_http_feed(struct lg_http *h, const char *buf, size_t len)
{
	size_t n;
	enum http_errno e;

	if (h->status || h->rejected || h->complete || len == 0)
		return 0;
	n = http_parser_execute(&h->parser, &settings, buf, len);
	e = HTTP_PARSER_ERRNO(&h->parser);
	if (e != HPE_OK && e != HPE_PAUSED && h->status == 0)
		h->status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
	return n;
}

const char *
lg_http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}
