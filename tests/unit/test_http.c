/* Unit tests for http/http.c: the request view over the strict framing (http/frame.c).
 *
 * Every request is parsed from a heap copy of exactly its bytes, so ASan reports any read past
 * what the glue was given. Most requests are parsed twice, whole and one byte at a time, because
 * a socket may deliver them either way and the glue must not care. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/http.h"

/* What the test's router and body hook saw: the only window on what the worker would be told. */
struct cap {
	int action;          /* enum lg_http_head_action the router chooses at head complete */
	int heads;
	int body_calls;
	int body_after_complete;
	char body[4096];
	size_t body_len;
};

/* The test's router, called at LG_HTTP_HEAD_DONE as the connection core calls its own: counts
 * the head and returns the action chosen (no ctx: LG_HTTP_BODY_PARSER). */
static int
cap_head(struct lg_http *h, void *ctx)
{
	struct cap *c = ctx;

	if (c == NULL)
		return LG_HTTP_BODY_PARSER;
	assert_true(h->head_seen);
	assert_true(h->head_wait);
	assert_false(h->complete);
	c->heads++;
	return c->action;
}

static int
cap_body(struct lg_http *h, void *ctx, const char *at, size_t len)
{
	struct cap *c = ctx;

	c->body_calls++;
	if (h->complete)
		c->body_after_complete++;
	assert_true(len <= sizeof(c->body) - c->body_len);
	memcpy(c->body + c->body_len, at, len);
	c->body_len += len;
	return 0;
}

/* One feed as the connection core drives it (worker/core/conn.c): when the parser returns at
 * head complete, the test's router chooses where the body goes (lg_http_body_to) and the
 * feed goes on with the bytes after the head. Returns the bytes consumed. */
static size_t
feed_once(struct lg_http *h, const char *buf, size_t len)
{
	size_t used, more = 0;
	enum lg_http_stop st = lg_http_feed(h, buf, len, &used);

	assert_true(used <= len);
	if (st == LG_HTTP_HEAD_DONE &&
	    lg_http_body_to(h, cap_head(h, h->ctx)) == LG_HTTP_MORE && used < len)
		lg_http_feed(h, buf + used, len - used, &more);
	return used + more;
}

static void
start(struct lg_http *h, struct cap *c, int action)
{
	memset(c, 0, sizeof(*c));
	c->action = action;
	lg_http_init(h, NULL);
	h->on_body = cap_body;
	h->ctx = c;
}

/* Feeds len bytes of req in pieces of at most chunk bytes until the message completes, is
 * rejected or fails, or the glue stops taking bytes. Bytes the glue did not take are presented
 * again with the next piece, as a connection's read buffer does. Each call gets a heap copy of
 * exactly the bytes presented, so ASan sees any read past them. Returns the bytes consumed. */
static size_t
feed(struct lg_http *h, const char *req, size_t len, size_t chunk)
{
	size_t off = 0, avail = 0;

	while (!h->complete && !h->rejected && !h->status) {
		avail = len - avail < chunk ? len : avail + chunk;
		char *copy = malloc(avail - off ? avail - off : 1);
		assert_non_null(copy);
		memcpy(copy, req + off, avail - off);
		size_t used = feed_once(h, copy, avail - off);
		free(copy);
		assert_true(used <= avail - off);
		off += used;
		if (avail == len && (used == 0 || off == len))
			break;
	}
	return off;
}

static size_t
feed_str(struct lg_http *h, const char *req, size_t chunk)
{
	return feed(h, req, strlen(req), chunk);
}

/* Chunk sizes every well-formed request is tried with: whole, one byte, and an odd size that
 * splits tokens in the middle. */
static const size_t chunks[] = { SIZE_MAX, 1, 7 };
#define NCHUNKS (sizeof(chunks) / sizeof(chunks[0]))

/* With a keep set, only the named fields are stored and count against LG_HTTP_KEPT and
 * LG_HTTP_FIELD_BUF: one after 40 others and 5 KiB of their bytes is kept; a named one that
 * cannot be kept (past LG_HTTP_KEPT lines, with a --max-fields above it) is 431 (RFC 6585
 * section 5), not silently absent. */
static void
test_kept_only_listed(void **state)
{
	static struct lg_http_keep k;
	static const struct lg_http_limits lim = { LG_HTTP_MAX_HEAD, LG_HTTP_MAX_TARGET,
		LG_HTTP_KEPT + 10, 0, &k, 0 };
	static char req[16384];
	struct lg_http h;
	struct cap c;
	const char *v;
	size_t n, len;

	memset(&k, 0, sizeof(k));
	assert_int_equal(lg_http_keep_add(&k, "X-User"), 0);
	assert_int_equal(lg_http_keep_add(&k, "x-user"), 0);
	assert_int_equal(k.n, 1);
	assert_int_equal(lg_http_keep_add(&k, ""), -1);
	for (size_t ci = 0; ci < NCHUNKS; ci++) {
		for (int many = 0; many < 2; many++) {
			len = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: a\r\n");
			for (int i = 0; i < (many ? LG_HTTP_KEPT + 1 : 40); i++)
				len += (size_t)snprintf(req + len, sizeof(req) - len, many ?
				    "X-User: u%d\r\n" : "X-F%d: %0120d\r\n", i, 0);
			len += (size_t)snprintf(req + len, sizeof(req) - len,
			    "x-uSer: alice \r\n\r\n");
			memset(&c, 0, sizeof(c));
			lg_http_init(&h, &lim);
			h.ctx = &c;
			feed(&h, req, len, chunks[ci]);
			if (many) {
				assert_int_equal(h.status, 431);
				continue;
			}
			assert_int_equal(h.status, 0);
			assert_true(h.complete);
			assert_int_equal(h.req.nkept, 1);
			v = lg_http_field_get(&h.req, "X-User", &n);
			assert_non_null(v);
			assert_int_equal(n, 5);
			assert_memory_equal(v, "alice", 5);
			assert_null(lg_http_field_get(&h.req, "x-f0", &n));
		}
	}
}

static void
test_simple_get(void **state)
{
	const char *req = "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n";

	for (size_t k = 0; k < NCHUNKS; k++) {
		struct lg_http h;
		struct cap c;

		start(&h, &c, LG_HTTP_BODY_PARSER);
		assert_int_equal(feed_str(&h, req, chunks[k]), strlen(req));
		assert_int_equal(h.status, 0);
		assert_true(h.complete);
		assert_false(h.rejected);
		assert_int_equal(c.heads, 1);
		assert_int_equal(c.body_calls, 0);
		assert_int_equal(h.req.method, HTTP_GET);
		assert_int_equal(h.req.major, 1);
		assert_int_equal(h.req.minor, 1);
		assert_string_equal(h.req.target, "/a/b?x=1&y=2");
		assert_int_equal(h.req.target_len, 12);
		assert_ptr_equal(h.req.path, h.req.target);
		assert_int_equal(h.req.path_len, 4);
		assert_ptr_equal(h.req.query, h.req.target + 5);
		assert_int_equal(h.req.query_len, 7);
		assert_memory_equal(h.req.query, "x=1&y=2", 7);
		assert_int_equal(h.req.content_length, LG_HTTP_NO_LENGTH);
		assert_false(h.req.chunked);
		assert_true(h.req.keep_alive);
		assert_false(h.req.expect_continue);
		assert_int_equal(h.req.nfields, 2);
		assert_int_equal(h.body_seen, 0);
	}
}

/* The query split at its edges: none, empty, and a '?' inside the query itself. */
static void
test_path_query_split(void **state)
{
	static const struct {
		const char *target;
		size_t path_len;
		const char *query; /* NULL when there is no '?' */
	} cases[] = {
		{ "/", 1, NULL },
		{ "/plain/path", 11, NULL },
		{ "/p?", 2, "" },
		{ "/?q", 1, "q" },
		{ "/p?a=1?b=2", 2, "a=1?b=2" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lg_http h;
		struct cap c;
		char req[256];

		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", cases[i].target);
		start(&h, &c, LG_HTTP_BODY_PARSER);
		assert_int_equal(feed_str(&h, req, SIZE_MAX), strlen(req));
		assert_true(h.complete);
		assert_string_equal(h.req.target, cases[i].target);
		assert_int_equal(h.req.path_len, cases[i].path_len);
		if (cases[i].query == NULL) {
			assert_null(h.req.query);
			assert_int_equal(h.req.query_len, 0);
		} else {
			assert_non_null(h.req.query);
			assert_int_equal(h.req.query_len, strlen(cases[i].query));
			assert_memory_equal(h.req.query, cases[i].query, h.req.query_len);
		}
	}
}

/* RFC 9112 section 9.3: 1.1 persists unless "close", 1.0 only with "keep-alive". */
static void
test_keep_alive(void **state)
{
	static const struct {
		const char *version;
		const char *connection; /* NULL: no Connection field */
		int keep_alive;
	} cases[] = {
		{ "1.1", NULL, 1 },
		{ "1.1", "close", 0 },
		{ "1.1", "Close", 0 },
		{ "1.1", "keep-alive", 1 },
		{ "1.0", NULL, 0 },
		{ "1.0", "keep-alive", 1 },
		{ "1.0", "Keep-Alive", 1 },
		{ "1.0", "close", 0 },
		/* OWS is SP or HTAB (RFC 9110 5.6.3); empty elements are ignored (5.6.1) */
		{ "1.1", "close\t", 0 },
		{ "1.1", "\tclose", 0 },
		{ "1.1", "keep-alive,\tclose", 0 },
		{ "1.1", ", close", 0 },
		{ "1.1", "upgrade, ,close ,", 0 },
		{ "1.1", "closed", 1 },
		{ "1.1", "x-close", 1 },
		{ "1.0", "keep-alive\t", 1 },
		{ "1.0", ",keep-alive", 1 },
		{ "1.0", "keep-alive, close", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t k = 0; k < NCHUNKS; k++) {
			struct lg_http h;
			struct cap c;
			char req[256];

			if (cases[i].connection)
				snprintf(req, sizeof(req), "GET / HTTP/%s\r\nHost: x\r\nConnection: %s\r\n\r\n",
				    cases[i].version, cases[i].connection);
			else
				snprintf(req, sizeof(req), "GET / HTTP/%s\r\nHost: x\r\n\r\n", cases[i].version);
			start(&h, &c, LG_HTTP_BODY_PARSER);
			assert_int_equal(feed_str(&h, req, chunks[k]), strlen(req));
			assert_true(h.complete);
			assert_int_equal(h.status, 0);
			assert_int_equal(h.req.minor, cases[i].version[2] - '0');
			assert_int_equal(h.req.keep_alive, cases[i].keep_alive);
		}
	}
}

/* The same request whole and byte by byte leaves the same request behind, field for field. */
static void
test_byte_at_a_time(void **state)
{
	const char *req = "DELETE /items/42?force=yes&why=test HTTP/1.1\r\n"
	    "Host: example.org\r\nUser-Agent: unit/1.0\r\nX-Empty:\r\n"
	    "Connection: keep-alive\r\n\r\n";
	struct lg_http whole, bytes;
	struct cap cw, cb;

	start(&whole, &cw, LG_HTTP_BODY_PARSER);
	start(&bytes, &cb, LG_HTTP_BODY_PARSER);
	assert_int_equal(feed_str(&whole, req, SIZE_MAX), strlen(req));
	assert_int_equal(feed_str(&bytes, req, 1), strlen(req));
	assert_true(whole.complete);
	assert_true(bytes.complete);
	assert_int_equal(bytes.status, 0);
	assert_int_equal(cb.heads, 1);
	assert_int_equal(bytes.req.method, HTTP_DELETE);
	assert_int_equal(bytes.req.method, whole.req.method);
	assert_int_equal(bytes.req.major, whole.req.major);
	assert_int_equal(bytes.req.minor, whole.req.minor);
	assert_string_equal(bytes.req.target, whole.req.target);
	assert_int_equal(bytes.req.target_len, whole.req.target_len);
	assert_int_equal(bytes.req.path - bytes.req.target, whole.req.path - whole.req.target);
	assert_int_equal(bytes.req.path_len, whole.req.path_len);
	assert_int_equal(bytes.req.query - bytes.req.target, whole.req.query - whole.req.target);
	assert_int_equal(bytes.req.query_len, whole.req.query_len);
	assert_int_equal(bytes.req.content_length, whole.req.content_length);
	assert_int_equal(bytes.req.chunked, whole.req.chunked);
	assert_int_equal(bytes.req.keep_alive, whole.req.keep_alive);
	assert_int_equal(bytes.req.expect_continue, whole.req.expect_continue);
	assert_int_equal(bytes.req.nfields, 4);
	assert_int_equal(bytes.req.nfields, whole.req.nfields);
	assert_string_equal(bytes.req.target, "/items/42?force=yes&why=test");
}

/* Pipelined requests (RFC 9112 section 9.3.2) are handed over one at a time: the glue stops at
 * the exact end of the first, takes nothing more until lg_http_next, then parses the second
 * with none of the first's state left over. */
static void
test_pipelined(void **state)
{
	const char *m1 = "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc";
	const char *m2 = "GET /two?z HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t l1 = strlen(m1), l2 = strlen(m2);
	char *buf = malloc(l1 + l2);
	struct lg_http h;
	struct cap c;

	assert_non_null(buf);
	memcpy(buf, m1, l1);
	memcpy(buf + l1, m2, l2);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	assert_int_equal(feed_once(&h, buf, l1 + l2), l1);
	assert_true(h.complete);
	assert_int_equal(h.status, 0);
	assert_string_equal(h.req.target, "/one");
	assert_true(h.req.expect_continue);
	assert_int_equal(h.req.content_length, 3);
	assert_int_equal(c.body_len, 3);
	assert_memory_equal(c.body, "abc", 3);
	/* Until the caller has answered the first, the second stays in its buffer. */
	assert_int_equal(feed_once(&h, buf + l1, l2), 0);

	lg_http_next(&h);
	assert_false(h.complete);
	assert_int_equal(feed_once(&h, buf + l1, l2), l2);
	assert_true(h.complete);
	assert_int_equal(h.status, 0);
	assert_int_equal(c.heads, 2);
	assert_int_equal(h.req.method, HTTP_GET);
	assert_string_equal(h.req.target, "/two?z");
	assert_int_equal(h.req.query_len, 1);
	assert_false(h.req.expect_continue);
	assert_int_equal(h.req.content_length, LG_HTTP_NO_LENGTH);
	assert_int_equal(h.req.nfields, 1);
	assert_int_equal(h.body_seen, 0);
	free(buf);
}

/* The caller reads the body itself: the message is complete at the end of the head, and not one
 * body byte is consumed or shown to on_body. The next request then parses normally. */
static void
test_body_self(void **state)
{
	const char *head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
	const char *body = "0123456789";
	const char *next = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t hl = strlen(head);
	char req[256];

	snprintf(req, sizeof(req), "%s%s", head, body);
	for (size_t k = 0; k < NCHUNKS; k++) {
		struct lg_http h;
		struct cap c;

		start(&h, &c, LG_HTTP_BODY_SELF);
		assert_int_equal(feed_str(&h, req, chunks[k]), hl);
		assert_true(h.complete);
		assert_int_equal(h.status, 0);
		assert_int_equal(h.req.method, HTTP_POST);
		assert_int_equal(h.req.content_length, 10);
		assert_int_equal(c.body_calls, 0);
		assert_int_equal(h.body_seen, 0);
		/* The caller has read its 10 bytes; the connection goes on. */
		lg_http_next(&h);
		assert_int_equal(feed_str(&h, next, chunks[k]), strlen(next));
		assert_true(h.complete);
		assert_int_equal(h.status, 0);
		assert_string_equal(h.req.target, "/after");
		assert_int_equal(h.req.content_length, LG_HTTP_NO_LENGTH);
	}
}

static void
test_body_parser(void **state)
{
	const char *req = "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz";

	for (size_t k = 0; k < NCHUNKS; k++) {
		struct lg_http h;
		struct cap c;

		start(&h, &c, LG_HTTP_BODY_PARSER);
		assert_int_equal(feed_str(&h, req, chunks[k]), strlen(req));
		assert_true(h.complete);
		assert_int_equal(h.status, 0);
		assert_int_equal(h.req.content_length, 26);
		assert_false(h.req.chunked);
		assert_int_equal(h.body_seen, 26);
		assert_int_equal(c.body_len, 26);
		assert_memory_equal(c.body, "abcdefghijklmnopqrstuvwxyz", 26);
		assert_int_equal(c.body_after_complete, 0);
	}
}

/* Chunked framing (RFC 9112 section 7.1) is removed before on_body: sizes, extensions and the
 * trailer section never reach it. */
static void
test_chunked(void **state)
{
	const char *req = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n"
	    "1;ext=val\r\n \r\n"
	    "A\r\nchunked!!!\r\n"
	    "0\r\nX-Trailer: t\r\n\r\n";

	for (size_t k = 0; k < NCHUNKS; k++) {
		struct lg_http h;
		struct cap c;

		start(&h, &c, LG_HTTP_BODY_PARSER);
		assert_int_equal(feed_str(&h, req, chunks[k]), strlen(req));
		assert_true(h.complete);
		assert_int_equal(h.status, 0);
		assert_true(h.req.chunked);
		assert_int_equal(h.req.content_length, LG_HTTP_NO_LENGTH);
		assert_int_equal(c.body_len, 16);
		assert_memory_equal(c.body, "hello chunked!!!", 16);
		assert_int_equal(h.body_seen, 16);
	}
}

/* body_room bounds the input fed to the parser inside a body: the feed stops with body_wait
 * set when it gives 0 (the connection waits for more memory to be backed) and goes on when
 * fed again; on_body is never given more than the room allowed. The hook here, as the
 * server's, gives the body bytes "backed" (budget) and not yet received. */
static size_t budget;

static size_t
room_hook(struct lg_http *h, void *ctx)
{
	const struct cap *c = ctx;

	return budget == SIZE_MAX ? SIZE_MAX : budget > c->body_len ? budget - c->body_len : 0;
}

static void
test_body_room(void **state)
{
	const char *req = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n"
	    "A\r\nchunked!!!\r\n"
	    "0\r\n\r\n";
	size_t head = strstr(req, "\r\n\r\n") + 4 - req, len = strlen(req), off;
	struct lg_http h;
	struct cap c;

	start(&h, &c, LG_HTTP_BODY_PARSER);
	h.body_room = room_hook;
	budget = 0;
	off = feed_once(&h, req, len);
	assert_int_equal(off, head); /* the head, then nothing of the body */
	assert_true(h.body_wait);
	assert_false(h.complete);
	assert_int_equal(c.body_len, 0);
	budget = 3; /* "5\r\n" then "hel" */
	off += feed_once(&h, req + off, len - off);
	assert_true(h.body_wait);
	assert_int_equal(c.body_len, 3);
	assert_memory_equal(c.body, "hel", 3);
	budget = SIZE_MAX;
	off += feed_once(&h, req + off, len - off);
	assert_false(h.body_wait);
	assert_true(h.complete);
	assert_int_equal(off, len);
	assert_int_equal(c.body_len, 15);
	assert_memory_equal(c.body, "hellochunked!!!", 15);
}

/* A body_room hook may refuse: the feed stops with its status. */
static size_t
room_refuse(struct lg_http *h, void *ctx)
{
	h->status = 503;
	return 0;
}

static void
test_body_room_refuses(void **state)
{
	const char *req = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\nhello\r\n0\r\n\r\n";
	struct lg_http h;
	struct cap c;

	start(&h, &c, LG_HTTP_BODY_PARSER);
	h.body_room = room_refuse;
	feed_once(&h, req, strlen(req));
	assert_int_equal(h.status, 503);
	assert_false(h.complete);
	assert_int_equal(c.body_calls, 0);
}

/* Content-Length with chunked is a smuggling vector (RFC 9112 section 6.3): refused, not
 * guessed at. */
static void
test_chunked_with_length(void **state)
{
	const char *req = "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\n";
	struct lg_http h;
	struct cap c;

	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, req, SIZE_MAX);
	assert_int_equal(h.status, 400);
	assert_false(h.complete);
	assert_int_equal(c.body_calls, 0);
}

/* A body hook's failure stops the parse with the status the hook chose. */
static int
body_fail(struct lg_http *h, void *ctx, const char *at, size_t len)
{
	h->status = 413;
	return -1;
}

static void
test_body_hook_fails(void **state)
{
	const char *req = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd";
	struct lg_http h;
	struct cap c;

	start(&h, &c, LG_HTTP_BODY_PARSER);
	h.on_body = body_fail;
	feed_str(&h, req, SIZE_MAX);
	assert_int_equal(h.status, 413);
	assert_false(h.complete);
	assert_int_equal(feed_once(&h, "x", 1), 0);
}

/* The parser returns at head complete (picohttpparser's contract): LG_HTTP_HEAD_DONE with
 * exactly the head's bytes consumed and no body byte shown to on_body; it takes nothing more
 * until the caller says where the body goes (lg_http_body_to); then the body goes to on_body
 * and the message ends where its framing says, a pipelined request after it left unread. A
 * body-less head is complete at lg_http_body_to, a BODY_SELF head too, its body left to the
 * caller. An error in the head returns LG_HTTP_ERROR and never LG_HTTP_HEAD_DONE. */
static void
test_head_done(void **state)
{
	const char *head = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n";
	const char *next = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
	char req[256];
	struct lg_http h;
	struct cap c;
	size_t used, hl = strlen(head), len;

	len = (size_t)snprintf(req, sizeof(req), "%sbody%s", head, next);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	assert_int_equal(lg_http_feed(&h, req, len, &used), LG_HTTP_HEAD_DONE);
	assert_int_equal(used, hl);
	assert_true(h.head_seen);
	assert_false(h.complete);
	assert_int_equal(h.req.content_length, 4);
	assert_int_equal(h.body_seen, 0);
	assert_int_equal(c.body_calls, 0);
	assert_int_equal(lg_http_feed(&h, req + hl, len - hl, &used), LG_HTTP_HEAD_DONE);
	assert_int_equal(used, 0); /* nothing until the caller decided */
	assert_int_equal(lg_http_body_to(&h, LG_HTTP_BODY_PARSER), LG_HTTP_MORE);
	assert_int_equal(lg_http_feed(&h, req + hl, len - hl, &used), LG_HTTP_DONE);
	assert_int_equal(used, 4);
	assert_int_equal(c.body_len, 4);
	assert_memory_equal(c.body, "body", 4);
	assert_int_equal(lg_http_feed(&h, req + hl + 4, len - hl - 4, &used), LG_HTTP_DONE);
	assert_int_equal(used, 0); /* one message at a time */
	lg_http_next(&h);
	assert_int_equal(lg_http_feed(&h, next, strlen(next), &used), LG_HTTP_HEAD_DONE);
	assert_int_equal(used, strlen(next));
	assert_int_equal(lg_http_body_to(&h, LG_HTTP_BODY_PARSER), LG_HTTP_DONE);
	assert_true(h.complete);

	start(&h, &c, LG_HTTP_BODY_SELF);
	assert_int_equal(lg_http_feed(&h, req, len, &used), LG_HTTP_HEAD_DONE);
	assert_int_equal(lg_http_body_to(&h, LG_HTTP_BODY_SELF), LG_HTTP_DONE);
	assert_true(h.complete && h.self_body);
	assert_int_equal(lg_http_feed(&h, req + hl, len - hl, &used), LG_HTTP_DONE);
	assert_int_equal(used, 0); /* the body is the caller's */

	start(&h, &c, LG_HTTP_BODY_PARSER);
	assert_int_equal(lg_http_feed(&h, "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
	    "Content-Length: 2\r\n\r\n", 66, &used), LG_HTTP_ERROR);
	assert_int_equal(h.status, 400);
	assert_false(h.head_seen);
	assert_int_equal(lg_http_feed(&h, "GET / HTTP/1.1\r\n", 16, &used), LG_HTTP_ERROR);
	assert_int_equal(used, 0);
}

static void
test_reject(void **state)
{
	const char *head = "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n";
	char req[256];

	snprintf(req, sizeof(req), "%sbody", head);
	for (size_t k = 0; k < NCHUNKS; k++) {
		struct lg_http h;
		struct cap c;
		size_t n;

		start(&h, &c, LG_HTTP_REJECT);
		n = feed_str(&h, req, chunks[k]);
		assert_true(h.rejected);
		assert_false(h.complete);
		assert_int_equal(h.status, 0); /* the status is the caller's own */
		assert_int_equal(c.heads, 1);
		assert_int_equal(c.body_calls, 0);
		/* It stops at the end of the head: the parser returned there. */
		assert_int_equal(n, strlen(head));
		assert_int_equal(h.req.content_length, 999999);
		/* Nothing more is taken. */
		assert_int_equal(feed_once(&h, req + n, strlen(req) - n), 0);
		assert_int_equal(c.body_calls, 0);
	}
}

/* RFC 9110 section 10.1.1; the field name and the expectation are case-insensitive, and the
 * whole value is compared however it is split. Any other expectation is a 417; in HTTP/1.0 the
 * field is ignored. */
static void
test_expect_continue(void **state)
{
	static const struct {
		const char *version;
		const char *field;
		int expect;
		int status;
	} cases[] = {
		{ "1.1", "Expect: 100-continue\r\n", 1, 0 },
		{ "1.1", "expect: 100-Continue\r\n", 1, 0 },
		{ "1.1", "EXPECT:100-continue \r\n", 1, 0 },
		{ "1.1", "X-Expect: 100-continue\r\n", 0, 0 },
		{ "1.1", "Expect: 100-continue-not\r\n", 0, 417 },
		{ "1.1", "Expect: 200-ok\r\n", 0, 417 },
		{ "1.1", "Expect:\r\n", 0, 417 },
		{ "1.0", "Expect: 100-continue\r\n", 0, 0 },
		{ "1.0", "Expect: 200-ok\r\n", 0, 0 },
		{ "1.1", "", 0, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t k = 0; k < NCHUNKS; k++) {
			struct lg_http h;
			struct cap c;
			char req[256];

			snprintf(req, sizeof(req),
			    "POST / HTTP/%s\r\nHost: x\r\n%sContent-Length: 2\r\n\r\nok",
			    cases[i].version, cases[i].field);
			start(&h, &c, LG_HTTP_BODY_SELF);
			feed_str(&h, req, chunks[k]);
			assert_int_equal(h.status, cases[i].status);
			assert_int_equal(h.complete, cases[i].status == 0);
			assert_int_equal(h.req.expect_continue, cases[i].expect);
		}
	}
}

/* Builds "GET /<pad> HTTP/1.1\r\nHost: x\r\n<fields>\r\n" with a target of target_len bytes.
 * Caller frees. */
static char *
build(size_t target_len, const char *fields)
{
	size_t cap = target_len + strlen(fields) + 64;
	char *req = malloc(cap);
	size_t n;

	assert_non_null(req);
	n = (size_t)snprintf(req, cap, "GET /");
	memset(req + n, 'a', target_len - 1);
	n += target_len - 1;
	snprintf(req + n, cap - n, " HTTP/1.1\r\nHost: x\r\n%s\r\n", fields);
	return req;
}

/* Parses req whole, one byte at a time and in 4 KiB pieces, and checks the status each time;
 * heads is how many times the parser must have returned at head complete (an error in the
 * head stops before it). */
static void
check_status(const char *req, int status, int heads)
{
	static const size_t sizes[] = { SIZE_MAX, 1, 4096 };

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct lg_http h;
		struct cap c;

		start(&h, &c, LG_HTTP_BODY_PARSER);
		feed_str(&h, req, sizes[k]);
		assert_int_equal(h.status, status);
		assert_int_equal(h.complete, status == 0);
		assert_int_equal(c.heads, heads);
		if (status != 0)
			/* After an error the glue takes nothing more. */
			assert_int_equal(feed_once(&h, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 0);
	}
}

static void
expect_status(const char *req, int status)
{
	check_status(req, status, status == 0);
}

/* Targets past the limit are 414 however they arrive, even longer than the whole head limit:
 * the request line is checked whole before the header section is counted. */
static void
test_target_limit(void **state)
{
	char *ok = build(LG_HTTP_MAX_TARGET, "");
	char *over = build(LG_HTTP_MAX_TARGET + 1, "");
	char *way_over = build(LG_HTTP_MAX_HEAD - 64, "");
	char *past_head = build(LG_HTTP_MAX_HEAD + 64, "");
	struct lg_http h;
	struct cap c;

	expect_status(ok, 0);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, ok, SIZE_MAX);
	assert_int_equal(h.req.target_len, LG_HTTP_MAX_TARGET);
	assert_int_equal(strlen(h.req.target), LG_HTTP_MAX_TARGET);
	expect_status(over, 414);
	expect_status(way_over, 414);
	/* The target is judged before the head as a whole, however the bytes arrive. */
	expect_status(past_head, 414);
	free(ok);
	free(over);
	free(way_over);
	free(past_head);
}

/* A header section of exactly n bytes (n >= 4) in fields of about 1000 bytes, well under the
 * field count limit. Caller frees. */
static char *
fields_of(size_t n)
{
	size_t k = n / 1000 + 1, off = 0;
	char *f = malloc(n + 1);

	assert_non_null(f);
	for (size_t i = 0; i < k; i++) {
		size_t len = n / k + (i < n % k);

		memcpy(f + off, "X:", 2);
		memset(f + off + 2, 'v', len - 4);
		memcpy(f + off + len - 2, "\r\n", 2);
		off += len;
	}
	f[n] = '\0';
	return f;
}

/* The head limit counts every byte of the request line and the header section, up to and
 * including the blank line, however the bytes arrive. */
static void
test_head_limit(void **state)
{
	const char *line = "GET / HTTP/1.1\r\nHost: x\r\n";
	size_t frame = strlen(line) + 2; /* request line + the blank line */
	char *fit = fields_of(LG_HTTP_MAX_HEAD - frame);
	char *over = fields_of(LG_HTTP_MAX_HEAD + 1 - frame);
	char *one_value = malloc(LG_HTTP_MAX_HEAD + 64);
	char *req;

	req = build(1, fit);
	assert_int_equal(strlen(req), LG_HTTP_MAX_HEAD);
	expect_status(req, 0);
	free(req);
	req = build(1, over);
	assert_int_equal(strlen(req), LG_HTTP_MAX_HEAD + 1);
	expect_status(req, 431);
	free(req);

	/* One value longer than the whole limit. */
	assert_non_null(one_value);
	memcpy(one_value, "X-Big: ", 7);
	memset(one_value + 7, 'b', LG_HTTP_MAX_HEAD + 1);
	memcpy(one_value + 7 + LG_HTTP_MAX_HEAD + 1, "\r\n", 3);
	req = build(1, one_value);
	expect_status(req, 431);
	/* And a head that never ends: the limit holds before the header section is complete. */
	req[strlen(req) - 4] = '\0';
	expect_status(req, 431);
	free(req);
	/* A long target counts too: within the target limit, over the head limit. */
	free(one_value);
	one_value = fields_of(LG_HTTP_MAX_HEAD - LG_HTTP_MAX_TARGET);
	req = build(LG_HTTP_MAX_TARGET, one_value);
	expect_status(req, 431);
	free(req);
	free(one_value);
	free(fit);
	free(over);
}

static char *
n_fields(unsigned n)
{
	char *f = malloc(n * 16 + 1);
	size_t off = 0;

	assert_non_null(f);
	f[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		off += (size_t)sprintf(f + off, "X-F%u: %u\r\n", i, i);
	return f;
}

static void
test_field_limit(void **state)
{
	char *max = n_fields(LG_HTTP_MAX_FIELDS - 1); /* build() adds Host */
	char *over = n_fields(LG_HTTP_MAX_FIELDS);
	char *req;
	struct lg_http h;
	struct cap c;

	req = build(1, max);
	expect_status(req, 0);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, req, SIZE_MAX);
	assert_int_equal(h.req.nfields, LG_HTTP_MAX_FIELDS);
	free(req);
	req = build(1, over);
	expect_status(req, 431);
	free(req);
	free(max);
	free(over);
}

/* http-parser 2.9.4 accepts any single-digit major.minor and leaves the choice to the glue,
 * which answers 505 for anything but 1.0 and 1.1 (RFC 9110 section 15.6.6). */
static void
test_version(void **state)
{
	expect_status("GET / HTTP/1.0\r\n\r\n", 0);
	expect_status("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0);
	expect_status("GET / HTTP/2.0\r\n\r\n", 505);
	expect_status("GET / HTTP/1.2\r\n\r\n", 505);
	expect_status("GET / HTTP/1.9\r\n\r\n", 505);
	expect_status("GET / HTTP/0.9\r\n\r\n", 505);
	expect_status("GET / HTTP/3.0\r\n\r\n", 505);
	/* Not HTTP-version syntax at all (RFC 9112 section 2.3: one digit each). */
	expect_status("GET / HTTP/10.0\r\n\r\n", 400);
	expect_status("GET / HTTP/1.10\r\n\r\n", 400);
	expect_status("GET / HTTP/x.1\r\n\r\n", 400);
}

/* Origin-form and absolute-form targets are served (RFC 9112 sections 3.2.1, 3.2.2: a server
 * must accept absolute-form); authority-form and asterisk-form are not. */
static void
test_target_forms(void **state)
{
	struct lg_http h;
	struct cap c;

	expect_status("GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 0);
	expect_status("GET http://x/path?q HTTP/1.1\r\nHost: x\r\n\r\n", 0);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, "GET HTTP://example:80/ping?a=1 HTTP/1.1\r\nHost: y\r\n\r\n", SIZE_MAX);
	assert_true(h.complete);
	assert_int_equal(h.req.path_len, 5);
	assert_memory_equal(h.req.path, "/ping", 5);
	assert_int_equal(h.req.query_len, 3);
	expect_status("GET ftp://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	expect_status("GET http:///p HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	expect_status("GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	expect_status("OPTIONS *x HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	expect_status("CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 400);
	/* An empty path is "/" (RFC 9110 section 4.2.3), with a port or a query too. */
	static const struct { const char *target, *query; } empty[] = {
		{ "http://x", NULL }, { "http://x:8080", NULL }, { "https://x?a=1", "a=1" },
		{ "http://x:1?", "" },
	};
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		char req[128];

		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: y\r\n\r\n", empty[i].target);
		start(&h, &c, LG_HTTP_BODY_PARSER);
		feed_str(&h, req, SIZE_MAX);
		assert_true(h.complete);
		assert_int_equal(h.req.path_len, 1);
		assert_memory_equal(h.req.path, "/", 1);
		if (empty[i].query == NULL) {
			assert_null(h.req.query);
		} else {
			assert_int_equal(h.req.query_len, strlen(empty[i].query));
			assert_memory_equal(h.req.query, empty[i].query, h.req.query_len);
		}
	}
	/* asterisk-form, for OPTIONS only (RFC 9112 section 3.2.4) */
	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", SIZE_MAX);
	assert_true(h.complete);
	assert_int_equal(h.req.method, HTTP_OPTIONS);
	assert_int_equal(h.req.path_len, 1);
	assert_memory_equal(h.req.path, "*", 1);
	assert_null(h.req.query);
}

/* HTAB where OWS or BWS may be: http-parser 2.9.4 refuses it after a Content-Length or a chunk
 * size and misses "chunked" before it, so the glue shows it SP; both must then agree, whole and
 * byte by byte, and the body must arrive unchanged (a body HTAB is never replaced). */
static void
test_htab_ows(void **state)
{
	static const struct { const char *req, *body; int chunked; } cases[] = {
		{ "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\t3\t \t\r\n\r\na\tb", "a\tb", 0 },
		{ "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\t\r\n\r\n"
		  "3\t;e=\tv\r\n\t\t\t\r\n0\r\nT:\t1\t\r\n\r\n", "\t\t\t", 1 },
		{ "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \tchunked \t\r\n\r\n"
		  "1 \t ;x\r\n\t\r\n0\r\n\r\n", "\t", 1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t k = 0; k < NCHUNKS; k++) {
			struct lg_http h;
			struct cap c;

			start(&h, &c, LG_HTTP_BODY_PARSER);
			assert_int_equal(feed_str(&h, cases[i].req, chunks[k]), strlen(cases[i].req));
			if (h.status != 0)
				fail_msg("case %zu chunk %zu: %d (%s)", i, k, h.status, h.why);
			assert_true(h.complete);
			assert_int_equal(h.req.chunked, cases[i].chunked);
			assert_int_equal(c.body_len, strlen(cases[i].body));
			assert_memory_equal(c.body, cases[i].body, c.body_len);
		}
	}
}

/* The method is known to be HEAD as soon as "HEAD " is in, even when the request line is then
 * refused, so that the refusal is sent without a body (RFC 9110 section 9.3.2). */
static void
test_head_method_known_early(void **state)
{
	struct lg_http h;
	struct cap c;

	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, "HEAD /x HTTP/1.1 junk\r\n\r\n", SIZE_MAX);
	assert_int_equal(h.status, 400);
	assert_true(h.frame.head_method);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, "HEAD /x HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", SIZE_MAX);
	assert_int_equal(h.status, 400);
	assert_true(h.frame.head_method);
	start(&h, &c, LG_HTTP_BODY_PARSER);
	feed_str(&h, "HEADX /x HTTP/1.1\r\nHost: x\r\n\r\n", SIZE_MAX);
	assert_false(h.frame.head_method);
}

static void
test_garbage(void **state)
{
	static const char bin[] = "\x01\x02\x03\xff\r\n\r\n";

	expect_status("garbage\r\n\r\n", 400);
	expect_status(bin, 400);
	expect_status("GET\r\n\r\n", 400);
	expect_status("GET / FTP/1.1\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: x\r\nHo\tst: v\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400);
	/* A bad chunk size is found in the body, after the head was returned. */
	check_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, 1);
}

/* RFC 9112 section 5.1: whitespace between a field name and its colon is a 400, because a
 * parser that reads "Content-Length : 5" as Content-Length and one that ignores it disagree on
 * where the next request starts. The Debian http-parser build is lenient here; the glue is
 * not. */
static void
test_space_before_colon(void **state)
{
	expect_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello", 400);
	expect_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400);
	expect_status("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400);
	/* Whitespace before the first field (RFC 9112 section 2.2: reject, or ignore the line). */
	expect_status("GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400);
	/* Whitespace after the colon is optional whitespace, and fine. */
	expect_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length:5\r\n\r\nhello", 0);
	expect_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length:  5 \r\n\r\nhello", 0);
	/* HTAB is OWS too (RFC 9110 section 5.6.3): http-parser 2.9.4 is shown SP instead. */
	expect_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\t5\t\r\n\r\nhello", 0);
}

/* Feeding nothing is a no-op, not an end of stream. */
static void
test_empty_feed(void **state)
{
	struct lg_http h;
	struct cap c;

	start(&h, &c, LG_HTTP_BODY_PARSER);
	assert_int_equal(feed_once(&h, "", 0), 0);
	assert_int_equal(h.status, 0);
	assert_false(h.complete);
	assert_int_equal(feed_str(&h, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", SIZE_MAX), 27);
	assert_true(h.complete);
}

/* A parser without a body hook still parses: a caller that chose LG_HTTP_BODY_PARSER (here
 * feed_once, no ctx) has the body read and dropped. */
static void
test_no_hooks(void **state)
{
	const char *req = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
	struct lg_http h;

	lg_http_init(&h, NULL);
	assert_int_equal(feed_str(&h, req, SIZE_MAX), strlen(req));
	assert_true(h.complete);
	assert_int_equal(h.body_seen, 3);
}

/* One method vocabulary (http/method.h): a set parses from any token of the list (exact case,
 * RFC 9110 section 9.1) and prints GET, HEAD, POST, PUT, DELETE, PATCH first, the others by
 * number, whole names only. */
static void
test_method_sets(void **state)
{
	char buf[512];
	uint64_t all = 0;

	assert_int_equal(lg_http_methods_parse("GET, OPTIONS\tM-SEARCH  PROPFIND,"),
	    LG_HTTP_METHOD_BIT(HTTP_GET) | LG_HTTP_METHOD_BIT(HTTP_OPTIONS) |
	    LG_HTTP_METHOD_BIT(HTTP_MSEARCH) | LG_HTTP_METHOD_BIT(HTTP_PROPFIND));
	assert_int_equal(lg_http_methods_parse("get"), 0);
	assert_int_equal(lg_http_methods_parse("GET, FOO"), 0);
	assert_int_equal(lg_http_methods_parse(" , "), 0);
	lg_http_methods_str(lg_http_methods_parse("OPTIONS PATCH DELETE PUT POST HEAD GET"), buf,
	    sizeof(buf));
	assert_string_equal(buf, "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS");
	assert_int_equal(lg_http_methods_str(LG_HTTP_METHOD_BIT(HTTP_GET) |
	    LG_HTTP_METHOD_BIT(HTTP_HEAD) | LG_HTTP_METHOD_BIT(HTTP_POST), buf, 15), 9);
	assert_string_equal(buf, "GET, HEAD"); /* ", POST" does not fit whole */
	for (unsigned m = 0; m < LG_HTTP_NMETHODS; m++) {
		lg_http_methods_str(LG_HTTP_METHOD_BIT(m), buf, sizeof(buf));
		assert_string_equal(buf, lg_http_method_str(m));
		assert_int_equal(lg_http_methods_parse(buf), LG_HTTP_METHOD_BIT(m));
		all |= LG_HTTP_METHOD_BIT(m);
	}
	lg_http_methods_str(all, buf, sizeof(buf));
	assert_int_equal(lg_http_methods_parse(buf), all);
}

static void
test_reason(void **state)
{
	assert_string_equal(lg_http_reason(100), "Continue");
	assert_string_equal(lg_http_reason(200), "OK");
	assert_string_equal(lg_http_reason(400), "Bad Request");
	assert_string_equal(lg_http_reason(404), "Not Found");
	/* the redirects a kind may answer with (module ABI 1.2), and 304 */
	assert_string_equal(lg_http_reason(301), "Moved Permanently");
	assert_string_equal(lg_http_reason(302), "Found");
	assert_string_equal(lg_http_reason(303), "See Other");
	assert_string_equal(lg_http_reason(304), "Not Modified");
	assert_string_equal(lg_http_reason(307), "Temporary Redirect");
	assert_string_equal(lg_http_reason(308), "Permanent Redirect");
	assert_string_equal(lg_http_reason(413), "Content Too Large");
	assert_string_equal(lg_http_reason(414), "URI Too Long");
	assert_string_equal(lg_http_reason(431), "Request Header Fields Too Large");
	assert_string_equal(lg_http_reason(503), "Service Unavailable");
	assert_string_equal(lg_http_reason(504), "Gateway Timeout");
	assert_string_equal(lg_http_reason(505), "HTTP Version Not Supported");
	/* every 2xx and 4xx of RFC 9110 section 15 a module may choose with set_status */
	static const int rfc9110[] = { 200, 201, 202, 203, 204, 205, 206, 400, 401, 402, 403, 404,
		405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421, 422, 426 };
	for (size_t i = 0; i < sizeof(rfc9110) / sizeof(rfc9110[0]); i++)
		assert_string_not_equal(lg_http_reason(rfc9110[i]), "Unknown");
	assert_string_equal(lg_http_reason(201), "Created");
	assert_string_equal(lg_http_reason(204), "No Content");
	assert_string_equal(lg_http_reason(409), "Conflict");
	assert_string_equal(lg_http_reason(418), "I'm a teapot");
	assert_string_equal(lg_http_reason(422), "Unprocessable Content");
	assert_string_equal(lg_http_reason(429), "Too Many Requests");
	/* the lookup bisects: the first, the last and codes between or around entries */
	assert_string_equal(lg_http_reason(502), "Bad Gateway");
	assert_string_equal(lg_http_reason(0), "Unknown");
	assert_string_equal(lg_http_reason(99), "Unknown");
	assert_string_equal(lg_http_reason(207), "Unknown");
	assert_string_equal(lg_http_reason(430), "Unknown");
	assert_string_equal(lg_http_reason(506), "Unknown");
	assert_string_equal(lg_http_reason(-1), "Unknown");
	assert_string_equal(lg_http_reason(0), "Unknown");
	assert_string_equal(lg_http_reason(299), "Unknown");
	assert_string_equal(lg_http_reason(-1), "Unknown");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_get),
		cmocka_unit_test(test_kept_only_listed),
		cmocka_unit_test(test_path_query_split),
		cmocka_unit_test(test_keep_alive),
		cmocka_unit_test(test_byte_at_a_time),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_body_self),
		cmocka_unit_test(test_body_parser),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_head_done),
		cmocka_unit_test(test_method_sets),
		cmocka_unit_test(test_body_room),
		cmocka_unit_test(test_body_room_refuses),
		cmocka_unit_test(test_chunked_with_length),
		cmocka_unit_test(test_body_hook_fails),
		cmocka_unit_test(test_reject),
		cmocka_unit_test(test_expect_continue),
		cmocka_unit_test(test_target_limit),
		cmocka_unit_test(test_head_limit),
		cmocka_unit_test(test_field_limit),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_target_forms),
		cmocka_unit_test(test_htab_ows),
		cmocka_unit_test(test_head_method_known_early),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_space_before_colon),
		cmocka_unit_test(test_empty_feed),
		cmocka_unit_test(test_no_hooks),
		cmocka_unit_test(test_reason),
	};

	alarm(10); /* watchdog: a parser that stops making progress fails the run, not hangs it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
