/* HTTP/1.1 response parsing for the load generator, over nodejs http-parser (Debian
 * libhttp-parser-dev) in HTTP_RESPONSE mode. The server's http/http.h parses requests only
 * and is strict where a client must be lenient, so it is not reused here.
 *
 * Incremental: feed bytes as they arrive. One response per request (no pipelining): the parser
 * pauses at the end of a message, and bytes after it are an error. Framing follows RFC 9112
 * section 6.3: no body for a HEAD request, 1xx, 204 and 304; Content-Length; chunked; else
 * everything until the server closes (ll_resp_eof). An interim 1xx response is skipped. */
#ifndef LL_LOAD_RESP_H
#define LL_LOAD_RESP_H

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>

struct ll_resp {
	http_parser parser;
	int status;         /* status code once the head is in, else 0 */
	int head_done;      /* the final (non-1xx) header section was parsed */
	int complete;       /* a whole response was parsed */
	int keep_alive;     /* the connection may carry another request (RFC 9112 section 9.3) */
	int error;          /* the bytes are not an HTTP/1.x response */
	int head_request;   /* the request was HEAD: the response has no body */
	uint64_t body_len;  /* body bytes seen (after chunked decoding) */
	char *body;         /* optional capture of the body: caller-owned storage, may be NULL */
	size_t body_cap;    /* bytes of body storage; the last is kept for a NUL */
	int body_cut;       /* the body did not fit and was cut */
};

/* Readies r for the response to one request. head_request: the request was HEAD. body/cap:
 * where to copy the body (NUL-terminated), or NULL/0 to count it only. */
void ll_resp_init(struct ll_resp *r, int head_request, char *body, size_t cap);

/* Feeds len bytes. Returns the bytes consumed (all of them while the response is incomplete;
 * fewer when it completed inside buf) or -1 with r->error set on a parse error. */
long ll_resp_feed(struct ll_resp *r, const char *buf, size_t len);

/* The server closed the connection. Returns 0 when that completes the response (a body
 * delimited by the close, or a response already complete), -1 when it was cut short. */
int ll_resp_eof(struct ll_resp *r);

#endif
