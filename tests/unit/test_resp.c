/* Unit tests for http/resp.c, the strict response parser: a table of responses with the facts
 * or the refusal each must get, every one fed whole and in pieces of every size from one byte
 * up (the head presented again from its start as a connection's buffer grows, the body each
 * byte once), which must all give the same result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/chars.h"
#include "http/resp.h"

static const struct lg_resp_limits lim = { 512, 8 };

struct result {
	enum lg_resp_err err;
	int status, keep_alive, interim, done, cl_merged;
	unsigned minor, nfields;
	enum lg_resp_framing framing;
	uint64_t cl;
	size_t end;          /* bytes the message took */
	size_t body_len;
	char body[256];
};

/* Appends one payload span, checking it lies in the bytes the call took. */
static void
take_data(struct result *out, const char *buf, long n, const char *data, size_t dlen)
{
	if (dlen == 0)
		return;
	assert_true(data >= buf && data + dlen <= buf + n);
	assert_true(out->body_len + dlen <= sizeof(out->body));
	memcpy(out->body + out->body_len, data, dlen);
	out->body_len += dlen;
}

/* Feeds msg[0..len) in pieces of `piece` bytes; eof: the upstream closes after the last. */
static void
run(const char *msg, size_t len, size_t piece, int head_req, int eof, struct result *out)
{
	struct lg_resp r;
	struct lg_resp_field fields[8];
	size_t off = 0, avail = 0;
	int in_body = 0;

	memset(out, 0, sizeof(*out));
	lg_resp_init(&r, &lim, fields);
	lg_resp_start(&r, head_req);
	for (;;) {
		if (!in_body && avail > off) {
			long n = lg_resp_head(&r, msg + off, avail - off);

			if (n == LG_RESP_ERROR)
				break;
			if (n > 0) {
				off += (size_t)n;
				if (r.interim)
					out->interim++;
				else
					in_body = 1;
				continue;
			}
			assert_int_equal(n, LG_RESP_PARTIAL);
		} else if (in_body && !lg_resp_done(&r) && avail > off) {
			const char *data;
			size_t dlen;
			long n = lg_resp_body(&r, msg + off, avail - off, &data, &dlen);

			if (n == LG_RESP_ERROR)
				break;
			assert_true(n > 0 && (size_t)n <= avail - off);
			take_data(out, msg + off, n, data, dlen);
			off += (size_t)n;
			continue;
		}
		if (lg_resp_done(&r))
			break;
		if (avail == len) {
			if (eof)
				lg_resp_eof(&r);
			break;
		}
		avail = len - avail < piece ? len : avail + piece;
	}
	out->err = r.err;
	out->status = r.status;
	out->minor = r.minor;
	out->keep_alive = r.keep_alive;
	out->framing = r.framing;
	out->cl = r.content_length;
	out->cl_merged = r.cl_merged;
	out->nfields = r.nfields;
	out->done = lg_resp_done(&r);
	out->end = off;
}

static void
same(const struct result *a, const struct result *b, const char *what, size_t piece)
{
	if (a->err != b->err || a->status != b->status || a->keep_alive != b->keep_alive ||
	    a->framing != b->framing || a->cl != b->cl || a->interim != b->interim ||
	    a->done != b->done || (a->err == LG_RESP_OK && a->end != b->end) ||
	    a->body_len != b->body_len ||
	    memcmp(a->body, b->body, a->body_len) != 0)
		fail_msg("%s: piece %zu gives %s/%d/%zu, whole %s/%d/%zu", what, piece,
		    lg_resp_strerror(a->err), a->status, a->end, lg_resp_strerror(b->err),
		    b->status, b->end);
}

/* Runs msg whole, then in pieces of every size, requiring one result (where a refused message
 * stopped depends on the pieces: a call that fails reports no count); returns it. */
static void
run_all(const char *msg, size_t len, int head_req, int eof, struct result *whole)
{
	run(msg, len, len, head_req, eof, whole);
	for (size_t piece = 1; piece < len; piece++) {
		struct result part;

		run(msg, len, piece, head_req, eof, &part);
		same(&part, whole, msg, piece);
	}
}

struct ok_case {
	const char *msg;
	int head_req, eof, status, keep_alive, interim;
	enum lg_resp_framing framing;
	uint64_t cl;
	const char *body;
};

#define H11 "HTTP/1.1 "
#define TE_CH "Transfer-Encoding: chunked\r\n"

static const struct ok_case oks[] = {
	{ H11 "200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 0, 200, 1, 0, LG_RESP_LENGTH, 5,
	  "hello" },
	/* an empty reason phrase, a body of zero bytes */
	{ H11 "200 \r\nContent-Length: 0\r\n\r\n", 0, 0, 200, 1, 0, LG_RESP_LENGTH, 0, "" },
	{ H11 "404 Not \x80\xff Found\t\r\nX-A:\r\nContent-Length:  2 \r\n\r\nno", 0, 0, 404, 1,
	  0, LG_RESP_LENGTH, 2, "no" },
	/* persistence (RFC 9112 9.3) */
	{ "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", 0, 0, 200, 0, 0, LG_RESP_LENGTH, 2,
	  "hi" },
	{ "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi", 0, 0, 200,
	  1, 0, LG_RESP_LENGTH, 2, "hi" },
	/* an empty list element is ignored (RFC 9110 5.6.1.2): the token after it counts */
	{ "HTTP/1.0 200 OK\r\nConnection: ,keep-alive\r\nContent-Length: 2\r\n\r\nhi", 0, 0, 200,
	  1, 0, LG_RESP_LENGTH, 2, "hi" },
	{ H11 "200 OK\r\nConnection: x, ,close\r\nContent-Length: 2\r\n\r\nhi", 0, 0, 200, 0, 0,
	  LG_RESP_LENGTH, 2, "hi" },
	{ H11 "200 OK\r\nConnection:\r\nContent-Length: 2\r\n\r\nhi", 0, 0, 200, 1, 0,
	  LG_RESP_LENGTH, 2, "hi" },
	{ H11 "200 OK\r\nProxy-Connection: x, Close\r\nContent-Length: 2\r\n\r\nhi", 0, 0,
	  200, 0, 0, LG_RESP_LENGTH, 2, "hi" },
	{ "HTTP/1.0 200 OK\r\nProxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
	  0, 0, 200, 0, 0, LG_RESP_LENGTH, 2, "hi" },
	/* close-delimited (RFC 9112 6.3 (8)) */
	{ H11 "200 OK\r\n\r\nuntil close", 0, 1, 200, 0, 0, LG_RESP_CLOSE, 0, "until close" },
	{ "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nx", 0, 1, 200, 0, 0, LG_RESP_CLOSE,
	  0, "x" },
	/* chunked (RFC 9112 7.1): extensions, BWS before ';', upper-case hex, zeros, trailers */
	{ H11 "200 OK\r\n" TE_CH "\r\n5\r\nhello\r\n6 ;a=b;c=\"d\"\r\n world\r\n0\r\n\r\n", 0, 0,
	  200, 1, 0, LG_RESP_CHUNKED, 0, "hello world" },
	{ H11 "200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n00A\r\n0123456789\r\n000;x\r\n"
	  "X-Sum: 1\r\nX-B:\t2 \r\n\r\n", 0, 0, 200, 1, 0, LG_RESP_CHUNKED, 0, "0123456789" },
	{ H11 "200 OK\r\n" TE_CH "\r\n0\r\n\r\n", 0, 0, 200, 1, 0, LG_RESP_CHUNKED, 0, "" },
	/* a Connection trailer is no connection management's, but the connection is not kept */
	{ H11 "200 OK\r\n" TE_CH "\r\n0\r\nConnection: keep-alive\r\n\r\n", 0, 0, 200, 0, 0,
	  LG_RESP_CHUNKED, 0, "" },
	{ H11 "200 OK\r\n" TE_CH "\r\n0\r\nproxy-connection: x\r\n\r\n", 0, 0, 200, 0, 0,
	  LG_RESP_CHUNKED, 0, "" },
	{ H11 "200 OK\r\n" TE_CH "\r\n1; a\t=\t\"b\\\"c\\\\\" ;d = e ;f\r\nx\r\n0;g=\"\"\r\n\r\n", 0, 0,
	  200, 1, 0, LG_RESP_CHUNKED, 0, "x" },
	/* no body whatever the fields say (RFC 9112 6.3 (1)) */
	{ H11 "200 OK\r\nContent-Length: 5\r\n\r\n", 1, 0, 200, 1, 0, LG_RESP_NONE, 5, "" },
	{ H11 "200 OK\r\n" TE_CH "\r\n", 1, 0, 200, 1, 0, LG_RESP_NONE, 0, "" },
	{ H11 "204 No Content\r\nContent-Length: 7\r\n\r\n", 0, 0, 204, 1, 0, LG_RESP_NONE, 7,
	  "" },
	{ H11 "304 Not Modified\r\n" TE_CH "\r\n", 0, 0, 304, 1, 0, LG_RESP_NONE, 0, "" },
	/* interim answers, then the final one */
	{ H11 "100 Continue\r\n\r\n" H11 "200 OK\r\nContent-Length: 1\r\n\r\nx", 0, 0, 200, 1, 1,
	  LG_RESP_LENGTH, 1, "x" },
	{ H11 "103 Early Hints\r\nLink: </a>; rel=preload\r\nContent-Length: 9\r\n\r\n"
	  H11 "100 \r\n\r\n" H11 "204 \r\n\r\n", 0, 0, 204, 1, 2, LG_RESP_NONE, 0, "" },
	{ H11 "100 Continue\r\n\r\n" H11 "200 OK\r\nContent-Length: 1\r\n\r\n", 1, 0, 200, 1, 1,
	  LG_RESP_NONE, 1, "" },
	/* 101: the bytes after the head are not this parser's */
	{ H11 "101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 0,
	  0, 101, 0, 0, LG_RESP_UPGRADE, 0, "" },
	/* identical Content-Length values are one (RFC 9110 8.6) */
	{ H11 "200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 0, 0, 200, 1, 0,
	  LG_RESP_LENGTH, 3, "abc" },
	{ H11 "200 OK\r\nContent-Length: 3 ,003\r\n\r\nabc", 0, 0, 200, 1, 0, LG_RESP_LENGTH, 3,
	  "abc" },
	{ H11 "200 OK\r\nContent-Length: 0000000000000000000000001\r\n\r\na", 0, 0, 200, 1, 0,
	  LG_RESP_LENGTH, 1, "a" },
	/* a message ends where its framing says: the bytes after it are the next one's */
	{ H11 "200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n", 0, 0, 200, 1, 0,
	  LG_RESP_LENGTH, 1, "x" },
	{ H11 "200 OK\r\n" TE_CH "\r\n1\r\ny\r\n0\r\n\r\nHTTP/1.1", 0, 0, 200, 1, 0,
	  LG_RESP_CHUNKED, 0, "y" },
};

static void
test_accepted(void **state)
{
	for (size_t i = 0; i < sizeof(oks) / sizeof(oks[0]); i++) {
		const struct ok_case *c = &oks[i];
		struct result res;
		size_t len = strlen(c->msg);

		run_all(c->msg, len, c->head_req, c->eof, &res);
		if (res.err != LG_RESP_OK || !res.done)
			fail_msg("case %zu: %s, done %d", i, lg_resp_strerror(res.err), res.done);
		assert_int_equal(res.status, c->status);
		assert_int_equal(res.keep_alive, c->keep_alive);
		assert_int_equal(res.interim, c->interim);
		assert_int_equal(res.framing, c->framing);
		assert_int_equal(res.cl, c->cl);
		assert_int_equal(res.body_len, strlen(c->body));
		assert_memory_equal(res.body, c->body, res.body_len);
		const char *next = strstr(c->msg + 1, "HTTP/1.1");
		while (next != NULL && strstr(next + 1, "HTTP/1.1") != NULL)
			next = strstr(next + 1, "HTTP/1.1");
		if (c->interim == 0 && next != NULL) /* the trailing next message is not taken */
			assert_int_equal(res.end, (size_t)(next - c->msg));
		else
			assert_int_equal(res.end, len);
	}
}

struct err_case {
	const char *msg;
	size_t len;          /* a literal's bytes: some have a NUL */
	int eof;
	enum lg_resp_err err;
};

#define E(msg, eof, err) { msg, sizeof(msg) - 1, eof, err }

static const struct err_case errs[] = {
	/* the status line (RFC 9112 4, RFC 9110 15) */
	E(H11 "200\r\n\r\n", 0, LG_RESP_E_STATUS_LINE), /* the SP before the reason is due */
	E(H11 "200\r\n", 0, LG_RESP_E_STATUS_LINE),
	E(H11 "20 OK\r\n\r\n", 0, LG_RESP_E_STATUS_CODE),
	E(H11 "2000 OK\r\n\r\n", 0, LG_RESP_E_STATUS_CODE),
	E(H11 "099 OK\r\n\r\n", 0, LG_RESP_E_STATUS_CODE),
	E(H11 "600 OK\r\n\r\n", 0, LG_RESP_E_STATUS_CODE),
	E(H11 " 200 OK\r\n\r\n", 0, LG_RESP_E_STATUS_CODE),
	E(H11 "2x0 OK\r\n\r\n", 0, LG_RESP_E_STATUS_CODE),
	E("HTTP/2.0 200 OK\r\n\r\n", 0, LG_RESP_E_VERSION),
	E("HTTP/1.2 200 OK\r\n\r\n", 0, LG_RESP_E_VERSION),
	E("HTTP/0.9 200 OK\r\n\r\n", 0, LG_RESP_E_VERSION),
	E("http/1.1 200 OK\r\n\r\n", 0, LG_RESP_E_STATUS_LINE),
	E("HTTP/1.10 200 OK\r\n\r\n", 0, LG_RESP_E_STATUS_LINE),
	E("HTTP/1 200 OK\r\n\r\n", 0, LG_RESP_E_STATUS_LINE),
	E("\r\nHTTP/1.1 200 OK\r\n\r\n", 0, LG_RESP_E_STATUS_LINE),
	E("HTTP/1.1\t200 OK\r\n\r\n", 0, LG_RESP_E_STATUS_LINE),
	E(H11 "200 O\x01K\r\n\r\n", 0, LG_RESP_E_STATUS_LINE),
	E(H11 "200 OK\n\r\n", 0, LG_RESP_E_BARE_LF),
	E(H11 "200 OK\rX\n\r\n", 0, LG_RESP_E_BARE_CR),
	/* field lines (RFC 9112 5, RFC 9110 5.1, 5.5) */
	E(H11 "200 OK\r\nX-A : 1\r\n\r\n", 0, LG_RESP_E_SPACE_BEFORE_COLON),
	E(H11 "200 OK\r\nX-A\t: 1\r\n\r\n", 0, LG_RESP_E_SPACE_BEFORE_COLON),
	E(H11 "200 OK\r\nX-A: 1\r\n 2\r\n\r\n", 0, LG_RESP_E_OBS_FOLD),
	E(H11 "200 OK\r\n\tX-A: 1\r\n\r\n", 0, LG_RESP_E_OBS_FOLD),
	E(H11 "200 OK\r\nX-A: 1\r2\r\n\r\n", 0, LG_RESP_E_BARE_CR),
	E(H11 "200 OK\r\nX-A: 1\r\n\r\r\n", 0, LG_RESP_E_BARE_CR),
	E(H11 "200 OK\r\nX-A: 1\nX-B: 2\r\n\r\n", 0, LG_RESP_E_BARE_LF),
	E(H11 "200 OK\r\nX-A: 1\r\n\n", 0, LG_RESP_E_BARE_LF),
	E(H11 "200 OK\r\nX-A: 1\x00" "2\r\n\r\n", 0, LG_RESP_E_FIELD_VALUE),
	E(H11 "200 OK\r\nX-A: 1\x7f\r\n\r\n", 0, LG_RESP_E_FIELD_VALUE),
	E(H11 "200 OK\r\nX-A: \x1b\r\n\r\n", 0, LG_RESP_E_FIELD_VALUE),
	E(H11 "200 OK\r\nX(A): 1\r\n\r\n", 0, LG_RESP_E_FIELD_NAME),
	E(H11 "200 OK\r\n: 1\r\n\r\n", 0, LG_RESP_E_FIELD_NAME),
	E(H11 "200 OK\r\nNoColon\r\n\r\n", 0, LG_RESP_E_FIELD_NAME),
	E(H11 "200 OK\r\nX-\xc3\xa9: 1\r\n\r\n", 0, LG_RESP_E_FIELD_NAME),
	E(H11 "200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\n"
	  "I: 9\r\n\r\n", 0, LG_RESP_E_TOO_MANY_FIELDS),
	E(H11 "200 OK\r\nConnection: close, \"x\"\r\n\r\n", 0, LG_RESP_E_CONNECTION),
	E(H11 "200 OK\r\nConnection: a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q\r\n\r\n", 0,
	  LG_RESP_E_CONNECTION),
	/* framing (RFC 9112 6.1, 6.3; RFC 9110 8.6) */
	E(H11 "200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 0,
	  LG_RESP_E_CL_DIFFERENT),
	E(H11 "200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd", 0, LG_RESP_E_CL_DIFFERENT),
	E(H11 "200 OK\r\nContent-Length: -1\r\n\r\n", 0, LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length: +1\r\n\r\n", 0, LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length: 1 2\r\n\r\n", 0, LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length: 0x5\r\n\r\n", 0, LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length:\r\n\r\n", 0, LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length: 1,\r\n\r\n", 0, LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length: 12345678901234567890\r\n\r\n", 0,
	  LG_RESP_E_CL_INVALID),
	E(H11 "200 OK\r\nContent-Length: 3\r\n" TE_CH "\r\n", 0, LG_RESP_E_CL_AND_TE),
	E(H11 "200 OK\r\n" TE_CH "Content-Length: 3\r\n\r\n", 0, LG_RESP_E_CL_AND_TE),
	E(H11 "304 Not Modified\r\n" TE_CH "Content-Length: 3\r\n\r\n", 0,
	  LG_RESP_E_CL_AND_TE),
	E("HTTP/1.0 200 OK\r\n" TE_CH "\r\n0\r\n\r\n", 0, LG_RESP_E_TE_HTTP10),
	E(H11 "200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, LG_RESP_E_TE_NOT_CHUNKED),
	E(H11 "200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0,
	  LG_RESP_E_TE_NOT_CHUNKED),
	E(H11 "200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 0,
	  LG_RESP_E_TE_NOT_CHUNKED),
	E(H11 "200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 0, LG_RESP_E_TE_INVALID),
	E(H11 "200 OK\r\n" TE_CH TE_CH "\r\n", 0, LG_RESP_E_TE_INVALID),
	E(H11 "200 OK\r\nTransfer-Encoding: ,chunked\r\n\r\n", 0, LG_RESP_E_TE_INVALID),
	E(H11 "200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", 0, LG_RESP_E_TE_INVALID),
	E(H11 "200 OK\r\nTransfer-Encoding:\r\n\r\n", 0, LG_RESP_E_TE_INVALID),
	E(H11 "200 OK\r\nTransfer-Encodingx: chunked\r\n\r\n", 0, LG_RESP_E_TE_INVALID),
	/* chunked bodies (RFC 9112 7.1) */
	E(H11 "200 OK\r\n" TE_CH "\r\ng\r\n", 0, LG_RESP_E_CHUNK_SIZE),
	E(H11 "200 OK\r\n" TE_CH "\r\n-1\r\n", 0, LG_RESP_E_CHUNK_SIZE),
	E(H11 "200 OK\r\n" TE_CH "\r\n0x5\r\n", 0, LG_RESP_E_CHUNK_SIZE),
	E(H11 "200 OK\r\n" TE_CH "\r\n1 \r\nx\r\n0\r\n\r\n", 0, LG_RESP_E_CHUNK_SIZE),
	E(H11 "200 OK\r\n" TE_CH "\r\n\r\n", 0, LG_RESP_E_CHUNK_SIZE),
	E(H11 "200 OK\r\n" TE_CH "\r\n1\n", 0, LG_RESP_E_BARE_LF),
	E(H11 "200 OK\r\n" TE_CH "\r\n1\rx", 0, LG_RESP_E_BARE_CR),
	E(H11 "200 OK\r\n" TE_CH "\r\n1000000000000000\r\n", 0, LG_RESP_E_CHUNK_OVERFLOW),
	E(H11 "200 OK\r\n" TE_CH "\r\nffffffffffffffffff\r\n", 0, LG_RESP_E_CHUNK_OVERFLOW),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a\x01\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a\nx\r\n", 0, LG_RESP_E_BARE_LF),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a \r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a=\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a=b \r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a=b c\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a=\"b\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a=\"b\"c\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;a=(\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1;;a\r\nx\r\n", 0, LG_RESP_E_CHUNK_EXT),
	E(H11 "200 OK\r\n" TE_CH "\r\n1\r\nxy\r\n", 0, LG_RESP_E_CHUNK_CRLF),
	E(H11 "200 OK\r\n" TE_CH "\r\n1\r\nx\n0\r\n", 0, LG_RESP_E_CHUNK_CRLF),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nContent-Length: 1\r\n\r\n", 0,
	  LG_RESP_E_TRAILER_FRAMING),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\ntransfer-ENCODING: chunked\r\n\r\n", 0,
	  LG_RESP_E_TRAILER_FRAMING),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nTransfer-Encoding-X: 1\r\n\r\n", 0,
	  LG_RESP_E_TRAILER_FRAMING),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nX: 1\r\n 2\r\n\r\n", 0, LG_RESP_E_OBS_FOLD),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nX : 1\r\n\r\n", 0, LG_RESP_E_SPACE_BEFORE_COLON),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nX: 1\n\r\n", 0, LG_RESP_E_BARE_LF),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nX: \x00\r\n\r\n", 0, LG_RESP_E_FIELD_VALUE),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\n"
	  "G: 7\r\nH: 8\r\nI: 9\r\n\r\n", 0, LG_RESP_E_TOO_MANY_FIELDS),
	/* the upstream closed early (RFC 9112 8) */
	E(H11 "200 OK\r\nContent-Length: 5\r\n\r\nabc", 1, LG_RESP_E_TRUNCATED),
	E(H11 "200 OK\r\nContent-Le", 1, LG_RESP_E_TRUNCATED),
	E("", 1, LG_RESP_E_TRUNCATED),
	E(H11 "200 OK\r\n" TE_CH "\r\n3\r\nabc\r\n", 1, LG_RESP_E_TRUNCATED),
	E(H11 "200 OK\r\n" TE_CH "\r\n0\r\nX: 1\r\n", 1, LG_RESP_E_TRUNCATED),
	E(H11 "100 Continue\r\n\r\n", 1, LG_RESP_E_TRUNCATED),
};

static void
test_refused(void **state)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		struct result res;
		const char *m = errs[i].msg;

		run_all(m, errs[i].len, 0, errs[i].eof, &res);
		if (res.err != errs[i].err)
			fail_msg("case %zu (%s): %s, want %s", i, m, lg_resp_strerror(res.err),
			    lg_resp_strerror(errs[i].err));
	}
}

/* Limits that need long inputs: the head size, a chunk-size line. */
static void
test_limits(void **state)
{
	char msg[8192];
	struct result res;
	int n;

	n = snprintf(msg, sizeof(msg), H11 "200 OK\r\nX-A: %0*d\r\n\r\n", 512 - 25, 0);
	run_all(msg, (size_t)n, 0, 0, &res);
	assert_int_equal(res.err, LG_RESP_E_HEAD_TOO_LARGE);
	n = snprintf(msg, sizeof(msg), H11 "200 OK\r\nX-A: %0*d\r\n\r\n", 512 - 26, 0);
	assert_int_equal(n, 512); /* exactly the limit */
	run_all(msg, (size_t)n, 0, 1, &res);
	assert_int_equal(res.err, LG_RESP_OK);
	assert_int_equal(res.framing, LG_RESP_CLOSE);
	/* a chunk line of LG_RESP_CHUNK_LINE bytes passes, one more does not */
	for (int extra = 0; extra < 2; extra++) {
		n = snprintf(msg, sizeof(msg), H11 "200 OK\r\n" TE_CH "\r\n1;%0*d\r\nx\r\n0\r\n\r\n",
		    LG_RESP_CHUNK_LINE - 2 + extra, 0);
		run(msg, (size_t)n, (size_t)n, 0, 0, &res);
		assert_int_equal(res.err, extra ? LG_RESP_E_CHUNK_LINE : LG_RESP_OK);
		run(msg, (size_t)n, 7, 0, 0, &res);
		assert_int_equal(res.err, extra ? LG_RESP_E_CHUNK_LINE : LG_RESP_OK);
	}
	/* a trailer section has the head's size limit */
	n = snprintf(msg, sizeof(msg), H11 "200 OK\r\n" TE_CH "\r\n0\r\nX: %0*d\r\n\r\n", 600, 0);
	run_all(msg, (size_t)n, 0, 0, &res);
	assert_int_equal(res.err, LG_RESP_E_HEAD_TOO_LARGE);
}

/* The index of fields, the Connection options and the hop-by-hop flags: what a proxy needs to
 * copy the head without the fields that must not cross (RFC 9110 7.6.1). */
static void
test_index(void **state)
{
	static const char head[] = H11 "200 OK\r\nDate: x\r\nConnection: X-Secret, close\r\n"
	    "Keep-Alive: timeout=5\r\nx-secret:  a b \r\nContent-Length: 0\r\nUpgrade: h2c\r\n"
	    "Empty:\r\n\r\n";
	static const struct { const char *name, *value; unsigned flags; } want[] = {
		{ "Date", "x", 0 }, { "Connection", "X-Secret, close", LG_RESP_F_HOP },
		{ "Keep-Alive", "timeout=5", LG_RESP_F_HOP }, { "x-secret", "a b", LG_RESP_F_HOP },
		{ "Content-Length", "0", LG_RESP_F_FRAMING }, { "Upgrade", "h2c", LG_RESP_F_HOP },
		{ "Empty", "", 0 },
	};
	struct lg_resp r;
	struct lg_resp_field fields[8];
	size_t off = 0;

	lg_resp_init(&r, &lim, fields);
	assert_int_equal(lg_resp_head(&r, head, sizeof(head) - 1), sizeof(head) - 1);
	assert_int_equal(r.nfields, 7);
	for (unsigned i = 0; i < r.nfields; i++) {
		const struct lg_resp_field *f = &fields[i];

		assert_int_equal(f->name.len, strlen(want[i].name));
		assert_memory_equal(head + f->name.off, want[i].name, f->name.len);
		assert_int_equal(f->value.len, strlen(want[i].value));
		assert_memory_equal(head + f->value.off, want[i].value, f->value.len);
		assert_int_equal(f->flags, want[i].flags);
		off = i == 0 ? f->line.off : off;
		assert_int_equal(f->line.off, off); /* lines are contiguous, CRLF included */
		off += f->line.len;
		assert_memory_equal(head + f->line.off + f->line.len - 2, "\r\n", 2);
	}
	assert_int_equal(off, sizeof(head) - 3);
	assert_int_equal(r.nconn, 2);
	assert_memory_equal(head + r.conn[0].off, "X-Secret", r.conn[0].len);
	assert_memory_equal(head + r.conn[1].off, "close", r.conn[1].len);
	assert_int_equal(r.keep_alive, 0);
	assert_memory_equal(head + r.reason.off, "OK", r.reason.len);
	assert_true(lg_resp_done(&r));
	/* the head again after it: a misuse, refused */
	assert_int_equal(lg_resp_head(&r, head, sizeof(head) - 1), LG_RESP_ERROR);
	assert_int_equal(r.err, LG_RESP_E_MISUSE);
}

/* A keep-alive connection: the next answer after lg_resp_start, and one payload span per
 * call, pointing into the caller's buffer. */
static void
test_next_and_spans(void **state)
{
	static const char two[] = H11 "200 OK\r\nContent-Length: 3\r\n\r\nabc"
	    H11 "200 OK\r\n" TE_CH "\r\n2\r\nde\r\n1\r\nf\r\n0\r\n\r\n";
	struct lg_resp r;
	struct lg_resp_field fields[8];
	const char *data;
	size_t dlen, off;
	long n;

	lg_resp_init(&r, &lim, fields);
	n = lg_resp_head(&r, two, sizeof(two) - 1);
	assert_true(n > 0);
	off = (size_t)n;
	n = lg_resp_body(&r, two + off, sizeof(two) - 1 - off, &data, &dlen);
	assert_int_equal(n, 3);
	assert_ptr_equal(data, two + off);
	assert_int_equal(dlen, 3);
	assert_true(lg_resp_done(&r));
	off += 3;
	lg_resp_start(&r, 0);
	n = lg_resp_head(&r, two + off, sizeof(two) - 1 - off);
	assert_true(n > 0);
	off += (size_t)n;
	n = lg_resp_body(&r, two + off, sizeof(two) - 1 - off, &data, &dlen);
	assert_int_equal(n, 5); /* "2\r\nde": stops after the span */
	assert_ptr_equal(data, two + off + 3);
	assert_int_equal(dlen, 2);
	off += 5;
	n = lg_resp_body(&r, two + off, sizeof(two) - 1 - off, &data, &dlen);
	assert_int_equal(n, 6); /* "\r\n1\r\nf" */
	assert_int_equal(dlen, 1);
	assert_int_equal(*data, 'f');
	off += 6;
	n = lg_resp_body(&r, two + off, sizeof(two) - 1 - off, &data, &dlen);
	assert_int_equal(n, 7);
	assert_int_equal(dlen, 0);
	assert_true(lg_resp_done(&r));
	assert_int_equal(off + 7, sizeof(two) - 1);
	assert_int_equal(r.body_bytes, 3);
}

/* 101: the head is the message, the bytes after it are the new protocol's; calls out of order
 * are refused; the close after a complete message is no error. */
static void
test_upgrade_and_order(void **state)
{
	static const char up[] = H11 "101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\n\r\n\x81\x05hello";
	static const char ok[] = H11 "204 \r\n\r\n";
	struct lg_resp r;
	struct lg_resp_field fields[8];
	const char *data;
	size_t dlen;

	lg_resp_init(&r, &lim, fields);
	assert_int_equal(lg_resp_head(&r, up, sizeof(up) - 1), sizeof(up) - 1 - 7);
	assert_int_equal(r.framing, LG_RESP_UPGRADE);
	assert_int_equal(r.keep_alive, 0);
	assert_int_equal(r.fields[0].flags, LG_RESP_F_HOP); /* Upgrade */
	assert_int_equal(r.fields[1].flags, LG_RESP_F_HOP); /* Connection */
	assert_true(lg_resp_done(&r));
	assert_int_equal(lg_resp_eof(&r), 0);
	/* the body before the head */
	lg_resp_start(&r, 0);
	assert_int_equal(lg_resp_body(&r, ok, sizeof(ok) - 1, &data, &dlen), LG_RESP_ERROR);
	assert_int_equal(r.err, LG_RESP_E_MISUSE);
	assert_null(data);
	assert_int_equal(dlen, 0);
	/* a refusal sticks until the next answer */
	assert_int_equal(lg_resp_head(&r, ok, sizeof(ok) - 1), LG_RESP_ERROR);
	lg_resp_start(&r, 0);
	assert_int_equal(lg_resp_head(&r, ok, sizeof(ok) - 1), sizeof(ok) - 1);
	assert_int_equal(lg_resp_body(&r, ok, 0, &data, &dlen), 0);
	assert_int_equal(lg_resp_eof(&r), 0);
}

static void
test_strerror(void **state)
{
	for (int i = 0; i < LG_RESP_E_COUNT; i++) {
		assert_non_null(lg_resp_strerror(i));
		for (int j = 0; j < i; j++)
			assert_string_not_equal(lg_resp_strerror(i), lg_resp_strerror(j));
	}
	assert_string_equal(lg_resp_strerror(LG_RESP_E_CL_AND_TE), "cl_and_te");
	assert_string_equal(lg_resp_strerror(LG_RESP_E_COUNT), "unknown");
}

/* Connection: keep-alive names the Keep-Alive field, hop-by-hop by its own name: it is taken
 * (conn_keep) and not listed, so a head whose only option it is marks no other field. */
static void
test_keep_alive_option(void **state)
{
	static const char head[] = H11 "200 OK\r\nConnection: keep-alive, x-a\r\n"
	    "Keep-Alive: timeout=5\r\nX-A: 1\r\nX-B: 2\r\nContent-Length: 0\r\n\r\n";
	static const char alone[] = "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n"
	    "X-B: 2\r\nContent-Length: 0\r\n\r\n";
	struct lg_resp r;
	struct lg_resp_field fields[8];

	(void)state;
	lg_resp_init(&r, &lim, fields);
	assert_int_equal(lg_resp_head(&r, head, sizeof(head) - 1), sizeof(head) - 1);
	assert_int_equal(r.nconn, 1);
	assert_memory_equal(head + r.conn[0].off, "x-a", r.conn[0].len);
	assert_int_equal(fields[1].flags, LG_RESP_F_HOP); /* Keep-Alive */
	assert_int_equal(fields[2].flags, LG_RESP_F_HOP); /* X-A, listed */
	assert_int_equal(fields[3].flags, 0);             /* X-B */
	assert_int_equal(r.keep_alive, 1);
	lg_resp_init(&r, &lim, fields);
	assert_int_equal(lg_resp_head(&r, alone, sizeof(alone) - 1), sizeof(alone) - 1);
	assert_int_equal(r.nconn, 0);
	assert_int_equal(fields[1].flags, 0);
	assert_int_equal(r.keep_alive, 1); /* HTTP/1.0 kept by its keep-alive option */
}

/* lg_value_end against the class table it stands for: every byte value at every place of
 * runs of every length up to 40 from every start, so the 16-byte path, its tail and the
 * table's agree and nothing past stop is judged. */
static void
test_value_end(void **state)
{
	unsigned char b[48];

	(void)state;
	for (int c = 0; c < 256; c++)
		for (size_t len = 0; len <= 40; len++)
			for (size_t at = 0; at < len; at++)
				for (size_t j = 0; j <= at; j += 3) {
					memset(b, 'v', sizeof(b));
					b[len] = '\r'; /* beyond stop: never the answer */
					b[at] = (unsigned char)c;
					assert_int_equal(lg_value_end(b, j, len),
					    lg_ch((unsigned char)c, LG_CH_VALUE) ? len : at);
				}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_next_and_spans),
		cmocka_unit_test(test_upgrade_and_order),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_keep_alive_option),
		cmocka_unit_test(test_value_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
