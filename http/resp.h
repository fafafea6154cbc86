/* Strict HTTP/1.1 response parsing: what an upstream app sends back to lagless as a reverse
 * proxy (RFC 9112, RFC 9110). The request side's twin (http/frame.h), with the same aim: every
 * byte read once, to the letter of the RFCs, and any framing two readers could take differently
 * refused rather than forwarded (RFC 9112 section 11.2). docs/HTTP.md "Responses from an
 * upstream" lists which rule refuses what.
 *
 * picohttpparser's contract, in two phases:
 *
 * - The head (status line and header section) is presented from its first byte each time, the
 *   buffer growing as bytes arrive; each call checks only the bytes past those it checked
 *   before (one pass), and returns the head's length once it is whole, LG_RESP_PARTIAL before,
 *   or LG_RESP_ERROR. The field index and the Connection options are offsets into that head,
 *   so the caller may move its buffer between calls.
 * - The body is presented as it comes, each byte once: each call returns how many bytes of buf
 *   belong to this message, and where in them the payload is (one span per call: chunk data
 *   without the chunk-size lines, CRLFs and trailer section), so a caller can forward the raw
 *   bytes or the payload without copying.
 *
 * Bounded: the head and a trailer section by lim->max_head bytes and lim->max_fields lines,
 * a chunk-size line (size, extensions) by LG_RESP_CHUNK_LINE bytes, the Connection options by
 * LG_RESP_CONN_MAX. No allocation; the parser holds no pointer into the caller's buffers. */
#ifndef LG_HTTP_RESP_H
#define LG_HTTP_RESP_H

#include <stddef.h>
#include <stdint.h>

#define LG_RESP_PARTIAL (-2)     /* lg_resp_head: more bytes are needed */
#define LG_RESP_ERROR (-1)       /* a rule failed: r->err says which */
#define LG_RESP_CHUNK_LINE 4096  /* a chunk-size line with its extensions, CRLF excluded */
#define LG_RESP_CONN_MAX 16      /* connection options kept (RFC 9110 section 7.6.1) */

/* Why a response was refused: one code per rule, for metrics labels and logs
 * (lg_resp_strerror). */
enum lg_resp_err {
	LG_RESP_OK = 0,
	LG_RESP_E_STATUS_LINE,     /* not HTTP-version SP 3DIGIT SP reason CRLF (RFC 9112 4) */
	LG_RESP_E_VERSION,         /* a well-formed version other than HTTP/1.0 and HTTP/1.1 */
	LG_RESP_E_STATUS_CODE,     /* a status code outside 100..599 (RFC 9110 15) */
	LG_RESP_E_FIELD_NAME,      /* a name not a token, empty, or a line without a colon */
	LG_RESP_E_SPACE_BEFORE_COLON, /* RFC 9112 5.1 */
	LG_RESP_E_OBS_FOLD,        /* a line starting with SP or HTAB (RFC 9112 5.2) */
	LG_RESP_E_BARE_CR,         /* CR not followed by LF (RFC 9112 2.2) */
	LG_RESP_E_BARE_LF,         /* LF not preceded by CR (RFC 9112 2.2: lagless accepts none) */
	LG_RESP_E_FIELD_VALUE,     /* NUL or another control byte but HTAB in a value (RFC 9110 5.5) */
	LG_RESP_E_HEAD_TOO_LARGE,  /* the head or trailer section past lim->max_head */
	LG_RESP_E_TOO_MANY_FIELDS, /* more field lines than lim->max_fields */
	LG_RESP_E_CONNECTION,      /* a Connection option not a token, or more than LG_RESP_CONN_MAX */
	LG_RESP_E_CL_INVALID,      /* Content-Length not 1#DIGIT, or beyond 19 digits */
	LG_RESP_E_CL_DIFFERENT,    /* Content-Length values that differ (RFC 9110 8.6) */
	LG_RESP_E_CL_AND_TE,       /* Content-Length with Transfer-Encoding (RFC 9112 6.3 (3)) */
	LG_RESP_E_TE_INVALID,      /* Transfer-Encoding malformed, empty element, chunked twice */
	LG_RESP_E_TE_NOT_CHUNKED,  /* a transfer coding other than chunked (RFC 9112 6.3 (4), 7) */
	LG_RESP_E_TE_HTTP10,       /* Transfer-Encoding in an HTTP/1.0 response (RFC 9112 6.1) */
	LG_RESP_E_CHUNK_SIZE,      /* a chunk size not 1*HEXDIG, or bytes after it not BWS ";" */
	LG_RESP_E_CHUNK_OVERFLOW,  /* a chunk size of 2^60 or more */
	LG_RESP_E_CHUNK_LINE,      /* a chunk-size line longer than LG_RESP_CHUNK_LINE */
	LG_RESP_E_CHUNK_EXT,       /* a control byte in a chunk extension (RFC 9112 7.1.1) */
	LG_RESP_E_CHUNK_CRLF,      /* chunk data not followed by CRLF (RFC 9112 7.1) */
	LG_RESP_E_TRAILER_FRAMING, /* Content-Length or Transfer-Encoding as a trailer (RFC 9110
	                            * 6.5.1) */
	LG_RESP_E_TRUNCATED,       /* the connection closed before the message ended */
	LG_RESP_E_MISUSE,          /* a call out of order (the head after the head, ...) */
	LG_RESP_E_COUNT
};

/* How the message body is delimited (RFC 9112 section 6.3). */
enum lg_resp_framing {
	LG_RESP_NONE = 0,   /* no body: an answer to HEAD, 1xx, 204, 304 (rule 1) */
	LG_RESP_LENGTH,     /* content_length bytes (rule 6; 0 is a message already complete) */
	LG_RESP_CHUNKED,    /* Transfer-Encoding: chunked (rule 4) */
	LG_RESP_CLOSE,      /* the body runs until the upstream closes (rule 8) */
	LG_RESP_UPGRADE,    /* 101: the bytes after the head are the new protocol's */
};

struct lg_resp_limits {
	size_t max_head;     /* status line + header section bytes, CRLFs included, below 4 GiB
	                      * (the index's offsets are 32-bit); the same bound for a trailer
	                      * section */
	unsigned max_fields; /* field lines in the header section (the capacity of the index) and
	                      * in a trailer section */
};

/* A field's flags in the index. */
enum {
	LG_RESP_F_HOP = 1,     /* hop-by-hop: Connection, Keep-Alive, Proxy-Connection, TE,
	                        * Transfer-Encoding, Upgrade (RFC 9110 7.6.1), or a name the
	                        * Connection field lists; a proxy does not forward it */
	LG_RESP_F_FRAMING = 2, /* Content-Length or Transfer-Encoding: the proxy frames its own */
};

/* Where a piece of the head is: head[off..off+len). */
struct lg_resp_span {
	uint32_t off, len;
};

/* One field line of the header section, in order: the name, and the value without its
 * leading and trailing OWS (RFC 9110 5.5); line is the whole line with its CRLF. */
struct lg_resp_field {
	struct lg_resp_span name, value, line;
	unsigned flags;
};

struct lg_resp {
	/* the caller's, set by lg_resp_init (borrowed, must outlive r) */
	const struct lg_resp_limits *lim;
	struct lg_resp_field *fields;  /* lim->max_fields entries */
	/* what the head said: valid once lg_resp_head returned its length */
	int status;                    /* 100..599 */
	unsigned minor;                /* HTTP/1.minor: 0 or 1 */
	struct lg_resp_span reason;    /* the reason phrase, maybe empty */
	int interim;                   /* 1xx but 101: another head follows (lg_resp_head) */
	int keep_alive;                /* the connection may carry the next request once this
	                                * message is done (RFC 9112 9.3); final once it is */
	enum lg_resp_framing framing;
	uint64_t content_length;       /* LG_RESP_LENGTH: the body's bytes */
	int cl_merged;                 /* several identical Content-Length values made one */
	int trailer_conn;              /* a Connection (or Proxy-Connection) field in the trailer
	                                * section: keep_alive is cleared, whatever it lists */
	unsigned nfields;              /* entries of fields[] */
	unsigned nconn;                /* entries of conn[]: the Connection field's options but
	                                * keep-alive (its field is hop-by-hop by name) */
	struct lg_resp_span conn[LG_RESP_CONN_MAX];
	enum lg_resp_err err;          /* LG_RESP_OK until a rule fails; then every call fails */
	uint64_t body_bytes;           /* payload bytes reported so far */
	/* internal */
	int state, head_req;
	size_t scanned, line, colon, vstart, vend;
	int te_seen, te_chunked, cl_seen, conn_close, conn_keep;
	uint64_t remaining;
	size_t chunk_line, trailer_bytes;
	unsigned trailer_fields;
	unsigned tname_len;            /* a trailer name's bytes so far (its first 18 kept) */
	char tname[18];
};

/* Readies r for the answer to a first request, with the limits lim and the field index fields
 * (lim->max_fields entries; both borrowed, must outlive r). */
void lg_resp_init(struct lg_resp *r, const struct lg_resp_limits *lim,
    struct lg_resp_field *fields);

/* Readies r for the answer to the next request on the same connection; head_request: that
 * request's method was HEAD, so its answer has no body whatever its fields say (RFC 9112 6.3
 * (1)). Call before the first lg_resp_head of each answer. */
void lg_resp_start(struct lg_resp *r, int head_request);

/* Checks the head at the start of buf[0..len): the status line (RFC 9112 section 4), then the
 * field lines (RFC 9112 section 5) up to the empty line, decides the framing (RFC 9112 section
 * 6.3) and fills the facts above and the field index. buf begins with the same bytes as at the
 * previous call (only more of them). Returns the head's length with its final CRLF once it is
 * whole and valid, LG_RESP_PARTIAL, or LG_RESP_ERROR with r->err set.
 * An interim answer (r->interim: 100, 103, any 1xx but 101) is a whole message with no body:
 * the caller forwards or drops it and calls lg_resp_head again with the bytes after it, for
 * the next head of the same answer (the index is then rewritten). */
long lg_resp_head(struct lg_resp *r, const char *buf, size_t len);

/* Reads body bytes by r->framing, after the head: each call takes bytes of buf[0..len) (each
 * byte presented once) and returns how many belong to this message, or LG_RESP_ERROR with
 * r->err set (chunked framing errors, trailer errors). *data and *dlen (never NULL) are set to
 * the payload bytes among them, a part of buf (*dlen 0: none); a call returns after at most
 * one such span, so the caller loops while bytes remain and the message is not done. */
long lg_resp_body(struct lg_resp *r, const char *buf, size_t len, const char **data,
    size_t *dlen);

/* Whether the message is complete: its head is in and its body (if any) read to its end. */
int lg_resp_done(const struct lg_resp *r);

/* The upstream closed its side: returns 0 when that ends the message well (a close-delimited
 * body, RFC 9112 6.3 (8); or a message already done), else -1 with r->err
 * LG_RESP_E_TRUNCATED (a head or a length or chunked body cut short: RFC 9112 8). */
int lg_resp_eof(struct lg_resp *r);

/* A short lower_snake name of e ("cl_and_te"), static, for metrics labels and logs. */
const char *lg_resp_strerror(enum lg_resp_err e);

#endif
