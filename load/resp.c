/* HTTP/1.1 response parser over http-parser (load/resp.h). */
#include "load/resp.h"

#include <string.h>

static int
on_headers_complete(http_parser *p)
{
	struct ll_resp *r = p->data;

	r->status = p->status_code;
	if (p->status_code >= 100 && p->status_code < 200 && p->status_code != 101)
		return 0;  /* interim response: http-parser starts over after it */
	r->head_done = 1;
	/* returning 1 tells http-parser the message has no body (RFC 9112 section 6.3 rule 1) */
	return r->head_request || p->status_code == 204 || p->status_code == 304 ? 1 : 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	struct ll_resp *r = p->data;

	if (r->body != NULL && r->body_cap > 0) {
		size_t used = r->body_len < r->body_cap - 1 ? r->body_len : r->body_cap - 1;
		size_t room = r->body_cap - 1 - used;
		size_t n = len < room ? len : room;

		if (n < len)
			r->body_cut = 1;
		memcpy(r->body + used, at, n);
		r->body[used + n] = '\0';
	}
	r->body_len += len;
	return 0;
}

static int
on_message_complete(http_parser *p)
{
	struct ll_resp *r = p->data;

	if (!r->head_done)
		return 0;  /* the end of an interim 1xx */
	r->complete = 1;
	r->keep_alive = http_should_keep_alive(p);
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

void
ll_resp_init(struct ll_resp *r, int head_request, char *body, size_t cap)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->parser, HTTP_RESPONSE);
	r->parser.data = r;
	r->head_request = head_request;
	r->body = body;
	r->body_cap = cap;
	if (body != NULL && cap > 0)
		body[0] = '\0';
}

long
ll_resp_feed(struct ll_resp *r, const char *buf, size_t len)
{
	size_t n;

	if (r->error)
		return -1;
	if (r->complete)
		return len == 0 ? 0 : (r->error = 1, -1);
	n = http_parser_execute(&r->parser, &settings, buf, len);
	if (HTTP_PARSER_ERRNO(&r->parser) == HPE_PAUSED)
		return (long)n;
	if (HTTP_PARSER_ERRNO(&r->parser) != HPE_OK || n != len) {
		r->error = 1;
		return -1;
	}
	return (long)n;
}

int
ll_resp_eof(struct ll_resp *r)
{
	if (r->complete)
		return 0;
	if (r->error)
		return -1;
	/* a zero-length execute tells http-parser the stream ended (close-delimited body) */
	http_parser_execute(&r->parser, &settings, NULL, 0);
	if (r->complete) {
		r->keep_alive = 0;
		return 0;
	}
	return -1;
}
