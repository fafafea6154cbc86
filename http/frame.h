/* Strict HTTP/1.1 request framing: the one parser of the request path (RFC 9112).
 *
 * Where two parsers could read one byte stream as different messages, a request can be
 * smuggled past whichever of them is in front (RFC 9112 section 11.2). This module reads every
 * request byte once, to the letter of RFC 9112, and decides the message framing itself; what it
 * finds on the way (the method, the target, each header field's name and value, the payload
 * bytes of the body) it reports to http/http.c, which builds struct lg_http_req from them.
 * docs/HTTP.md lists which rule rejects what. A lenient parser (http-parser 2.9.4 as Debian
 * builds it) is kept only as a differential oracle at test time (tests/oracle/http_oracle.c,
 * run by fuzz_http and over the conformance corpus): it and this module must agree on every
 * message both accept.
 *
 * Incremental: the request line is checked once whole (the caller keeps unconsumed bytes and
 * presents them again with more), the header section and the body byte by byte as they come. */
#ifndef LG_HTTP_FRAME_H
#define LG_HTTP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define LG_FRAME_TARGET_CAP 8192  /* the largest request-target any configuration allows */
#define LG_FRAME_CHUNK_LINE 4096  /* chunk-size line with extensions; longer -> 400 */

struct lg_http_keep;

struct lg_http_limits {
	size_t max_head;      /* request line + header section bytes, CRLFs included; over -> 431 */
	size_t max_target;    /* request-target bytes, at most LG_FRAME_TARGET_CAP; over -> 414 */
	unsigned max_fields;  /* header field lines (and trailer lines); over -> 431 */
	uint64_t max_body;    /* payload bytes of a chunked body, checked as each chunk size is
	                       * read (RFC 9110 15.5.14); over -> 413. 0 = no limit here. */
	/* the header fields a request keeps for the server's own use and the kinds' views
	 * (http/http.h lg_http_keep), borrowed; NULL keeps every field while they fit */
	const struct lg_http_keep *keep;
	/* 1: a run of '/' in the path stays as it is; 0 (the default, nginx's merge_slashes):
	 * it is one '/' (http/path.h) */
	int keep_slashes;
};

enum lg_frame_body {
	LG_FRAME_NONE = 0,    /* no body: neither Content-Length nor Transfer-Encoding */
	LG_FRAME_LENGTH = 1,  /* Content-Length bytes */
	LG_FRAME_CHUNKED = 2, /* Transfer-Encoding: chunked (RFC 9112 section 7.1) */
};

/* What the parser reports as it reads, each called with the ctx given to lg_frame_init and a
 * span of the bytes being checked (valid only during the call). Each returns 0, or -1 to stop
 * the parse after setting f->status and f->why (else the parser sets 400). Any may be NULL.
 * name and value: the header section's field lines in order, each line as one or more pieces
 * of its name, then one or more of its value (at least one, maybe empty: the value starts at
 * its first byte that is not OWS, and runs to the CR, trailing OWS included). Trailer fields
 * are not reported. data: the payload bytes of the body (Content-Length bytes, or chunk data
 * without the chunk-size lines, CRLFs and trailers), in order, in one or more pieces. */
struct lg_frame_hooks {
	int (*name)(void *ctx, const char *at, size_t len);
	int (*value)(void *ctx, const char *at, size_t len);
	int (*data)(void *ctx, const char *at, size_t len);
	/* Optional: a field line of the header section that is read whole, its name[0..nlen)
	 * and its value[0..vlen) as the name and value hooks would get them in one piece each,
	 * in one call instead of those two (the other lines still come through them). */
	int (*field)(void *ctx, const char *name, size_t nlen, const char *value, size_t vlen);
};

struct lg_frame {
	const struct lg_http_limits *lim;
	const struct lg_frame_hooks *hooks; /* borrowed, kept across lg_frame_reset; may be NULL */
	void *ctx;                 /* passed to the hooks */
	int state;                 /* internal */
	int status;                /* the error status once a rule failed, else 0 */
	const char *why;           /* which rule failed (static text, for logs and tests) */
	/* request line */
	size_t rl_scanned;         /* bytes of the pending request line already checked */
	int method;                /* enum lg_http_method (http/method.h), once the line is in */
	size_t method_len, target_off, target_len;
	unsigned minor;            /* HTTP/1.minor */
	int head_method;           /* the method token is HEAD (known as soon as "HEAD " is in, so
	                            * even a refusal of a HEAD request carries no body) */
	int asterisk;              /* the target is "*" (OPTIONS only, RFC 9112 section 3.2.4) */
	/* header section */
	uint64_t head_bytes;
	unsigned nfields;
	int field;                 /* which interesting field the current line is */
	int vstarted;              /* the current value's first byte past leading OWS was seen */
	size_t val_len;            /* bytes in val */
	int val_long;
	int host_ok;               /* the current Host value is known valid (a plain reg-name or
	                            * IPv4 address and a port, judged whole by the fast path) */
	/* what the head said */
	int host_count, cl_count, te_count;
	uint64_t content_length;
	int te_chunked_last, te_chunked_before, te_other;
	int expect_continue, expect_other;
	int conn_close, conn_keep_alive; /* Connection options (RFC 9110 section 7.6.1) */
	int conn_upgrade;          /* Connection lists "upgrade" (RFC 9110 section 7.8) */
	enum lg_frame_body body;
	/* body */
	uint64_t remaining;        /* bytes left in a Content-Length body or the current chunk */
	size_t line_len;           /* bytes of the current chunk-size or trailer line */
	uint64_t body_bytes;       /* payload bytes of the message so far (chunk data only) */
	/* last: lg_frame_init clears what is above it, this is read only up to val_len */
	char val[128];             /* value of an interesting field; longer is flagged */
};

/* Readies f for a first message with the limits lim and the hooks (both borrowed, must outlive
 * f; hooks may be NULL), hooks called with ctx. */
void lg_frame_init(struct lg_frame *f, const struct lg_http_limits *lim,
    const struct lg_frame_hooks *hooks, void *ctx);

/* Readies f for the next message with the limits lim (borrowed, must outlive f), keeping its
 * hooks and ctx. */
static inline void
lg_frame_reset(struct lg_frame *f, const struct lg_http_limits *lim)
{
	lg_frame_init(f, lim, f->hooks, f->ctx);
}

/* Checks the request line at the start of buf[0..len) (RFC 9112 sections 2.2, 3): optional
 * leading CRLFs, method token, one SP, request-target of visible ASCII minus the characters
 * RFC 3986 excludes, one SP, "HTTP/" DIGIT "." DIGIT, CRLF. buf must begin with the same bytes
 * as the previous call (the caller consumed nothing). Returns the request line's length with its
 * CRLF once it is whole and valid, 0 when more bytes are needed, or -1 with f->status set: 400,
 * 414 for a long target, 501 for a well-formed method not in http/method.h, 505 for a
 * well-formed version other than 1.0 and 1.1. */
long lg_frame_request_line(struct lg_frame *f, const char *buf, size_t len);

/* Where the request-target is within the request line returned above. */
static inline const char *
lg_frame_target(const struct lg_frame *f, const char *line)
{
	return line + f->target_off;
}

/* Whether the connection persists after this request (RFC 9112 section 9.3): HTTP/1.1 unless a
 * Connection field lists "close"; HTTP/1.0 only when it lists "keep-alive" and not "close".
 * Read by this module from the Connection field (a list: OWS of SP or HTAB around elements,
 * empty elements ignored, RFC 9110 section 5.6.1). Valid once lg_frame_head_done(). */
int lg_frame_keep_alive(const struct lg_frame *f);

/* Checks header-section bytes (RFC 9112 section 5, RFC 9110 section 5.5), reporting each field
 * line to the name and value hooks. Returns the bytes accepted: all of len, or fewer when the
 * head ends inside buf (the count then includes the final CRLF, and lg_frame_head_done() is
 * true), or a rule failed or a hook stopped (f->status: 400, 431, or at the end of the head 400
 * for ambiguous framing, 501 for an unknown transfer coding, 417 for an expectation other than
 * 100-continue). */
size_t lg_frame_head(struct lg_frame *f, const char *buf, size_t len);

int lg_frame_head_done(const struct lg_frame *f);

/* Checks body bytes by the framing the head declared (after lg_frame_head_done), handing the
 * payload bytes to the data hook. Returns the bytes that belong to this message;
 * lg_frame_msg_done() is then true when the message ended inside buf. Chunked framing errors
 * (bad or overflowing size, bad extension, missing CRLF, framing fields in the trailer section)
 * set f->status 400, a chunk size past lim->max_body 413. */
size_t lg_frame_body(struct lg_frame *f, const char *buf, size_t len);

int lg_frame_msg_done(const struct lg_frame *f);

#endif
