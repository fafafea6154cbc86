/* HTTP/1.1 requests: struct lg_http_req built from what the strict framing (http/frame.c, the
 * one parser of the request path: each request byte is read once) reports. Incremental and
 * bounded, in the manner of picohttpparser: feed bytes as they arrive, the parser keeps no
 * pointer into them.
 *
 * One request at a time: a feed stops at each complete header section (the caller then chooses
 * where the body goes: lg_http_body_to) and after each complete message, so pipelined
 * requests are answered strictly in order (RFC 9112 section 9.3.2). */
#ifndef LG_HTTP_HTTP_H
#define LG_HTTP_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/frame.h"
#include "http/method.h"

/* Default limits (a production server's picks; --max-uri, --max-head, --max-fields change them) */
#define LG_HTTP_MAX_TARGET 8192   /* request-target bytes; longer -> 414 (RFC 9112 section 3) */
#define LG_HTTP_MAX_HEAD   16384  /* request line + header section bytes; more -> 431 */
#define LG_HTTP_MAX_FIELDS 100    /* header fields; more -> 431 (RFC 6585 section 5) */
#define LG_HTTP_HEAD_CAP   (1u << 20) /* the largest --max-head accepted */
#define LG_HTTP_NO_LENGTH  UINT64_MAX

#define LG_HTTP_FIELD_BUF  16384 /* bytes of header field names and values kept per request (the
                                  * default --max-head: a head it accepts is kept whole) */
#define LG_HTTP_KEPT       100   /* header field lines kept per request (the default --max-fields) */
#define LG_HTTP_KEEP_NAMES 128   /* names in a struct lg_http_keep */
#define LG_HTTP_KEEP_NAME  64    /* bytes of a kept field's name, NUL included */

/* The header fields worth keeping: the ones the server reads itself and those the routes list
 * (fields =, coalescing keys). With a keep set in its limits, a request stores only the field
 * lines named there: only they count against LG_HTTP_KEPT lines and LG_HTTP_FIELD_BUF bytes,
 * and one of them that still does not fit refuses the request with 431 (RFC 6585 section 5)
 * rather than leaving the field silently absent. Names are lower case. */
struct lg_http_keep {
	unsigned n;
	char names[LG_HTTP_KEEP_NAMES][LG_HTTP_KEEP_NAME];
	uint64_t lens;  /* bit L set: a name of L bytes is among them (L < LG_HTTP_KEEP_NAME) */
};

/* Adds name (any case; stored lower case) to k unless already there. Returns 0, or -1 when the
 * name is empty, LG_HTTP_KEEP_NAME bytes or longer, or k is full. Build a keep set with it
 * alone (from a zeroed struct): it keeps names and lens in step. */
int lg_http_keep_add(struct lg_http_keep *k, const char *name);

struct lg_http_field {
	uint16_t name_off, name_len;  /* into fbuf */
	uint16_t value_off, value_len;
};

struct lg_http_req {
	unsigned method;              /* enum lg_http_method (http/method.h) */
	unsigned short major, minor;
	size_t target_len;
	const char *path;             /* into target (past scheme and authority for an
	                               * absolute-form target); not NUL-terminated */
	size_t path_len;
	const char *query;            /* into target after '?', or NULL */
	size_t query_len;
	uint64_t content_length;      /* LG_HTTP_NO_LENGTH when absent */
	int chunked;                  /* Transfer-Encoding: chunked (the only coding accepted) */
	int keep_alive;               /* the connection persists: RFC 9112 section 9.3 */
	int conn_upgrade;             /* Connection lists "upgrade" (RFC 9110 section 7.8) */
	int expect_continue;          /* Expect: 100-continue in HTTP/1.1 (RFC 9110 section 10.1.1) */
	unsigned nfields;             /* header field lines */
	unsigned nkept;               /* kept[] entries */
	int kept_open;                /* 1 name, 2 value kept, 3 value not kept, -1 keep no more */
	int kept_short;               /* without a keep set: fields past the limits were not kept */
	char *target;                 /* the request-target, NUL-terminated: fbuf's start */
	size_t fbase;                 /* where the kept fields' bytes start in fbuf: past the
	                               * target's NUL */
	size_t fbuf_len;              /* fbuf's bytes in use, the target's included */
	size_t pend_len;              /* LG_HTTP_KEEP_NAME: longer than any kept name */
	/* last, so that a new request clears every field before these arrays (kept and pend are
	 * read only up to nkept and pend_len, fbuf up to fbuf_len): a connection touches only the
	 * pages of them that its fields and target reach */
	char pend[LG_HTTP_KEEP_NAME]; /* the name being received, until it is complete */
	/* The header fields of the head that lim->keep names (every one when it is NULL, then
	 * the first LG_HTTP_KEPT that fit LG_HTTP_FIELD_BUF and no more), for lg_http_field_get. */
	struct lg_http_field kept[LG_HTTP_KEPT];
	/* The target and then the kept fields' bytes (at most LG_HTTP_FIELD_BUF of them), in one
	 * array so that a request's copies share their first page rather than each starting one
	 * of its own; the fields' offsets (struct lg_http_field) count from fbuf's start. */
	char fbuf[LG_FRAME_TARGET_CAP + 1 + LG_HTTP_FIELD_BUF];
};

/* The value of header field name (case-insensitive) among the kept ones, its length in *len
 * (surrounding white space removed); NULL when absent. Points into r. */
const char *lg_http_field_get(const struct lg_http_req *r, const char *name, size_t *len);

/* The next kept field line named name (case-insensitive) from index *pos on (start with 0), in
 * the order received; its trimmed value and length as lg_http_field_get, and *pos set past it
 * for the next call. NULL at the end. For a list field sent as several field lines, which
 * RFC 9110 section 5.3 combines, in order, into one comma-separated list. */
const char *lg_http_field_next(const struct lg_http_req *r, const char *name, unsigned *pos,
    size_t *len);

/* Finds name=value in r's query string (RFC 3986 section 3.4, '&'-separated pairs). Returns
 * the value (not NUL-terminated, pointing into r) and its length in *len, or NULL when the
 * name is absent. */
const char *lg_http_query_param(const struct lg_http_req *r, const char *name, size_t *len);

/* Where lg_http_feed stopped (picohttpparser's contract: the parser returns at "head
 * complete"; the caller then decides where the body goes and feeds on). */
enum lg_http_stop {
	LG_HTTP_MORE = 0,       /* every byte given was consumed, or a request line is still
	                         * partial: feed again with more bytes */
	LG_HTTP_HEAD_DONE = 1,  /* the header section is in (h->req is the request view): call
	                         * lg_http_body_to before feeding again */
	LG_HTTP_DONE = 2,       /* a whole message was read (h->complete) */
	LG_HTTP_BODY_WAIT = 3,  /* body_room gave 0 (h->body_wait): feed again once it has room */
	LG_HTTP_ERROR = 4,      /* h->status was set, or the caller rejected the head: answer and
	                         * close */
};

/* Where the caller sends the body of a head (lg_http_body_to after LG_HTTP_HEAD_DONE). */
enum lg_http_head_action {
	LG_HTTP_BODY_PARSER = 0,  /* the parser reads it and passes it to on_body */
	LG_HTTP_BODY_SELF = 1,    /* the caller reads Content-Length bytes itself after the head */
	LG_HTTP_REJECT = 2,       /* stop: the caller answers with a status of its own and closes */
};

struct lg_http {
	const struct lg_http_limits *lim; /* borrowed; defaults unless given to lg_http_init */
	struct lg_frame frame;     /* the parser (http/frame.h) */
	int status;                /* an error status to answer (400, 414, 431, 413...), else 0 */
	const char *why;           /* the rule behind status, static text (NULL when a hook set it) */
	int head_seen;             /* the header section of this message is in */
	int head_wait;             /* ... and lg_http_body_to has not been called for it yet */
	int self_body;             /* lg_http_body_to chose LG_HTTP_BODY_SELF */
	int complete;              /* a whole message (head, and body unless BODY_SELF) was parsed */
	int rejected;              /* lg_http_body_to was given LG_HTTP_REJECT */
	uint64_t body_seen;        /* body bytes passed to on_body for this message */
	/* The body sink, called from inside lg_http_feed while it reads a body (never before
	 * lg_http_body_to chose where the body goes); ctx is passed back unchanged. on_body
	 * returns 0, or -1 after setting h->status. */
	int (*on_body)(struct lg_http *h, void *ctx, const char *at, size_t len);
	/* Optional, called before each piece of a parser-read body is fed: how many more input
	 * bytes may go to the parser now (an input byte carries at most one body byte, so this
	 * bounds what on_body is given). 0 stops the feed with body_wait set until the caller
	 * feeds again; it may also set status to refuse. NULL: no bound. */
	size_t (*body_room)(struct lg_http *h, void *ctx);
	int body_wait;             /* the last lg_http_feed stopped because body_room gave 0 */
	void *ctx;
	struct lg_http_req req;    /* last: see its target */
};

/* Prepares h for a new connection with the limits lim (borrowed; NULL: the defaults above).
 * Hooks and ctx are set by the caller afterwards. */
void lg_http_init(struct lg_http *h, const struct lg_http_limits *lim);

/* Readies h for the next request on the same connection (after a complete message): the
 * request view is emptied, as on a new connection, until the next request line is read. */
void lg_http_next(struct lg_http *h);

/* Feeds len bytes; *used is set to the number consumed: the caller keeps the rest and
 * presents it again, followed by newer bytes, on the next call (a request line is taken only
 * whole, so 0 is a normal count while one arrives). Returns where the feed stopped:
 * LG_HTTP_HEAD_DONE once the header section is in, the head's bytes consumed and nothing of
 * its body (the feed goes no further, and consumes nothing, until lg_http_body_to); LG_HTTP_DONE
 * when a message is complete; LG_HTTP_BODY_WAIT when body_room gave 0; LG_HTTP_MORE when the
 * bytes ran out; LG_HTTP_ERROR with h->status on an error: 400 for bad syntax or ambiguous
 * framing (http/frame.h, docs/HTTP.md), 414 for a long target, 417 for an unknown expectation,
 * 431 for a long head or too many fields, 501 for an unknown method or transfer coding, 505 for
 * an HTTP version other than 1.0 or 1.1 (and, with h->status 0, after a head the caller
 * rejected). After an error or a rejection the connection must be answered and closed. */
enum lg_http_stop lg_http_feed(struct lg_http *h, const char *buf, size_t len, size_t *used);

/* The caller's answer to LG_HTTP_HEAD_DONE: where the body of the head just read goes (an enum
 * lg_http_head_action). Returns LG_HTTP_DONE when the message is complete with it (no body,
 * or LG_HTTP_BODY_SELF), LG_HTTP_ERROR for LG_HTTP_REJECT, else LG_HTTP_MORE (feed the body).
 * Called only once per head, between LG_HTTP_HEAD_DONE and the next feed. */
enum lg_http_stop lg_http_body_to(struct lg_http *h, int action);

/* Standard reason phrase of an HTTP status code (RFC 9110 section 15), "Unknown" otherwise. */
const char *lg_http_reason(int status);

#endif
