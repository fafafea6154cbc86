/* Unit tests for http/fwd.c: the request head sent to an upstream.
 *
 * Each request is parsed by the real request parser (http/http.c) from its bytes, as a loop
 * worker parses it, so the head is built from exactly the view the server would hold (and what
 * the parser refuses, obs-fold, never reaches lg_fwd_head). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/fwd.h"

static struct lg_http parser;
static char out[16384];

/* Feeds raw's head: at head complete the body is left to the caller (the view is whole at
 * the head), as a proxy route's is read past it. */
static void
head_only(const char *raw)
{
	size_t used;

	if (lg_http_feed(&parser, raw, strlen(raw), &used) == LG_HTTP_HEAD_DONE)
		lg_http_body_to(&parser, LG_HTTP_BODY_SELF);
}

/* The request view of raw (a head; a body after it is left unread). */
static const struct lg_http_req *
parse(const char *raw)
{
	lg_http_init(&parser, NULL);
	head_only(raw);
	assert_int_equal(parser.status, 0);
	assert_true(parser.complete);
	return &parser.req;
}

static struct lg_fwd_opts
opts(void)
{
	return (struct lg_fwd_opts){ .client_addr = "10.0.0.9", .deadline_ms = -1 };
}

/* The head for raw with o, NUL-terminated in out. */
static const char *
fwd(const char *raw, const struct lg_fwd_opts *o)
{
	const struct lg_http_req *r = parse(raw);
	ssize_t got = lg_fwd_head(r, o, out, sizeof(out) - 1);

	assert_true(got > 0 && (size_t)got < sizeof(out));
	size_t n = (size_t)got % sizeof(out); /* < sizeof(out), as the compiler can see */
	out[n] = '\0';
	assert_true(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0);
	assert_ptr_equal(strstr(out, "\r\n\r\n"), out + n - 4); /* the one end of the head */
	return out;
}

/* Whether head h has the field line line exactly (name as written, case-sensitive). */
static int
has_line(const char *h, const char *line)
{
	char want[1024];

	snprintf(want, sizeof(want), "\r\n%s\r\n", line);
	return strstr(h, want) != NULL;
}

/* How many field lines of h are named name (case-insensitive). */
static int
count_field(const char *h, const char *name)
{
	char want[256];
	int n = 0;

	snprintf(want, sizeof(want), "\r\n%s:", name);
	for (const char *p = h; (p = strcasestr(p, want)) != NULL; p += strlen(want))
		n++;
	return n;
}

static void
test_request_line_and_host(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h = fwd("GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: example.com\r\n"
	    "Accept: */*\r\nUser-Agent:  t/1 \r\n\r\n", &o);

	assert_true(strncmp(h, "GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: example.com\r\n", 47) == 0);
	assert_true(has_line(h, "Accept: */*"));
	assert_true(has_line(h, "User-Agent: t/1")); /* the value without its OWS */
	assert_int_equal(count_field(h, "host"), 1);
	assert_int_equal(count_field(h, "content-length"), 0);
	assert_int_equal(count_field(h, "transfer-encoding"), 0);
	assert_int_equal(count_field(h, "connection"), 0); /* 1.1 persists by default */
	assert_int_equal(count_field(h, "x-request-id"), 0);
	assert_int_equal(count_field(h, LG_FWD_DEADLINE_FIELD), 0);
}

static void
test_absolute_form(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h = fwd("GET http://h.example:8080/p?q=1 HTTP/1.1\r\nHost: other\r\n\r\n", &o);

	/* RFC 9112 3.2.2: the target's authority is the host; origin-form goes upstream */
	assert_true(strncmp(h, "GET /p?q=1 HTTP/1.1\r\nHost: h.example:8080\r\n", 42) == 0);
	assert_true(has_line(h, "X-Forwarded-Host: h.example:8080"));
	assert_null(strstr(h, "other"));
	h = fwd("GET http://h.example?q=1 HTTP/1.1\r\nHost: h.example\r\n\r\n", &o);
	assert_true(strncmp(h, "GET /?q=1 HTTP/1.1\r\n", 20) == 0);
	h = fwd("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", &o);
	assert_true(strncmp(h, "OPTIONS * HTTP/1.1\r\n", 20) == 0);
}

static void
test_http10_without_host(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h = fwd("POST /x HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", &o);

	assert_true(strncmp(h, "POST /x HTTP/1.1\r\nHost:\r\n", 25) == 0); /* RFC 9112 3.2 */
	assert_int_equal(count_field(h, "x-forwarded-host"), 0);
	assert_int_equal(count_field(h, "content-length"), 0); /* the option says none */
}

static void
test_hop_by_hop_removed(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h = fwd("POST /u HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n"
	    "Keep-Alive: timeout=5\r\nTE: trailers\r\nTrailer: X-Sum\r\nUpgrade: websocket\r\n"
	    "Proxy-Connection: keep-alive\r\nExpect: 100-continue\r\nContent-Length: 5\r\n"
	    "X-Kept: yes\r\n\r\nhello", &o);

	static const char *const gone[] = { "connection", "keep-alive", "te", "trailer",
		"upgrade", "proxy-connection", "expect", "content-length" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		assert_int_equal(count_field(h, gone[i]), 0);
	assert_true(has_line(h, "X-Kept: yes"));
	assert_null(strstr(h, "websocket"));
	assert_null(strstr(h, "100-continue"));
}

static void
test_transfer_encoding_removed(void **state)
{
	struct lg_fwd_opts o = opts();

	o.body = LG_FWD_BODY_LENGTH;
	o.content_length = 5;
	const char *h = fwd("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", &o);
	assert_int_equal(count_field(h, "transfer-encoding"), 0);
	assert_true(has_line(h, "Content-Length: 5"));
	assert_int_equal(count_field(h, "content-length"), 1);
}

static void
test_framing_option(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *raw = "PUT /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
	const char *h;

	o.body = LG_FWD_BODY_LENGTH;
	o.content_length = 18446744073709551614ull;
	h = fwd(raw, &o);
	assert_true(has_line(h, "Content-Length: 18446744073709551614"));
	assert_int_equal(count_field(h, "content-length"), 1);
	o.body = LG_FWD_BODY_CHUNKED;
	h = fwd(raw, &o);
	assert_true(has_line(h, "Transfer-Encoding: chunked"));
	assert_int_equal(count_field(h, "content-length"), 0);
	o.body = LG_FWD_BODY_NONE;
	h = fwd(raw, &o);
	assert_int_equal(count_field(h, "content-length"), 0);
	assert_int_equal(count_field(h, "transfer-encoding"), 0);
}

static void
test_connection_names_several(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h = fwd("GET / HTTP/1.1\r\nHost: a\r\nX-Foo: 1\r\nX-BAR: 2\r\nx-baz: 3\r\n"
	    "Connection: x-foo ,  X-Bar,,\tKEEP-ALIVE\r\nconnection: X-BAZ\r\nX-Keep: 4\r\n"
	    "X-Foo-Not: 5\r\n\r\n", &o);

	assert_int_equal(count_field(h, "x-foo"), 0);
	assert_int_equal(count_field(h, "x-bar"), 0);
	assert_int_equal(count_field(h, "x-baz"), 0);
	assert_int_equal(count_field(h, "connection"), 0);
	assert_true(has_line(h, "X-Keep: 4"));
	assert_true(has_line(h, "X-Foo-Not: 5")); /* a name, not a prefix */
}

static void
test_case_variants(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h;

	o.deadline_ms = 250;
	h = fwd("GET / HTTP/1.1\r\nhOsT: a\r\ncOnNeCtIoN: X-sEcReT\r\nx-SECRET: s\r\n"
	    "UPGRADE: h2c\r\nkeep-ALIVE: 1\r\nte: trailers\r\nTRAILER: x\r\nPROXY-connection: x\r\n"
	    "x-lagless-DEADLINE-ms: 999999\r\nX-Forwarded-FOR: 6.6.6.6\r\n\r\n", &o);
	assert_true(strncmp(h, "GET / HTTP/1.1\r\nHost: a\r\n", 25) == 0);
	static const char *const gone[] = { "connection", "x-secret", "upgrade", "keep-alive",
		"te", "trailer", "proxy-connection" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		assert_int_equal(count_field(h, gone[i]), 0);
	assert_int_equal(count_field(h, LG_FWD_DEADLINE_FIELD), 1);
	assert_true(has_line(h, "X-Lagless-Deadline-Ms: 250"));
	assert_null(strstr(h, "999999"));
	assert_null(strstr(h, "6.6.6.6"));
	assert_int_equal(count_field(h, "host"), 1);
}

static void
test_upgrade_tunnel(void **state)
{
	struct lg_fwd_opts o = opts();

	o.tunnel = 1;
	const char *h = fwd("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, X-Hop\r\n"
	    "Upgrade: websocket\r\nX-Hop: 1\r\n\r\n", &o);
	assert_true(has_line(h, "Upgrade: websocket"));
	assert_true(has_line(h, "Connection: upgrade"));
	assert_int_equal(count_field(h, "connection"), 1);
	assert_int_equal(count_field(h, "x-hop"), 0);
}

static void
test_xff_untrusted(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h = fwd("GET / HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 1.1.1.1\r\n"
	    "X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n"
	    "Forwarded: for=1.1.1.1\r\n\r\n", &o);

	assert_true(has_line(h, "X-Forwarded-For: 10.0.0.9"));
	assert_true(has_line(h, "X-Forwarded-Proto: http"));
	assert_true(has_line(h, "X-Forwarded-Host: example.com"));
	assert_int_equal(count_field(h, "x-forwarded-for"), 1);
	assert_int_equal(count_field(h, "x-forwarded-proto"), 1);
	assert_int_equal(count_field(h, "x-forwarded-host"), 1);
	assert_int_equal(count_field(h, "forwarded"), 0);
	assert_null(strstr(h, "1.1.1.1"));
	assert_null(strstr(h, "evil"));
}

static void
test_xff_trusted(void **state)
{
	struct lg_fwd_opts o = opts();

	o.trusted = 1;
	o.tls = 1;
	const char *h = fwd("GET / HTTP/1.1\r\nHost: example.com\r\n"
	    "X-Forwarded-For: 1.1.1.1, 2.2.2.2\r\nX-Forwarded-Proto: https\r\n"
	    "x-forwarded-for: 3.3.3.3\r\nX-Forwarded-For:\r\n\r\n", &o);
	assert_true(has_line(h, "X-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.9"));
	assert_int_equal(count_field(h, "x-forwarded-for"), 1);
	assert_true(has_line(h, "X-Forwarded-Proto: https")); /* the trusted proxy's */
	assert_int_equal(count_field(h, "x-forwarded-proto"), 1);
	assert_true(has_line(h, "X-Forwarded-Host: example.com"));
}

static void
test_xff_trusted_but_named_by_connection(void **state)
{
	struct lg_fwd_opts o = opts();

	o.trusted = 1;
	const char *h = fwd("GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Forwarded-For\r\n"
	    "X-Forwarded-For: 1.1.1.1\r\n\r\n", &o);
	assert_true(has_line(h, "X-Forwarded-For: 10.0.0.9")); /* hop-by-hop first */
}

static void
test_proto_tls(void **state)
{
	struct lg_fwd_opts o = opts();

	o.tls = 1;
	assert_true(has_line(fwd("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &o),
	    "X-Forwarded-Proto: https"));
}

static void
test_forwarded_ipv4(void **state)
{
	struct lg_fwd_opts o = opts();

	o.style = LG_FWD_FORWARDED;
	o.client_addr = "192.0.2.7";
	const char *h = fwd("GET / HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 1.1.1.1\r\n"
	    "Forwarded: for=1.1.1.1\r\n\r\n", &o);
	assert_true(has_line(h, "Forwarded: for=192.0.2.7;proto=http;host=example.com"));
	assert_int_equal(count_field(h, "forwarded"), 1);
	assert_int_equal(count_field(h, "x-forwarded-for"), 0);
	assert_int_equal(count_field(h, "x-forwarded-proto"), 0);
	assert_int_equal(count_field(h, "x-forwarded-host"), 0);
	assert_null(strstr(h, "1.1.1.1"));
}

static void
test_forwarded_ipv6(void **state)
{
	struct lg_fwd_opts o = opts();

	o.style = LG_FWD_FORWARDED;
	o.client_addr = "2001:db8::1";
	o.tls = 1;
	const char *h = fwd("GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", &o);
	/* RFC 7239 section 6: an IPv6 node bracketed, and so quoted; a host with ':' quoted */
	assert_true(has_line(h,
	    "Forwarded: for=\"[2001:db8::1]\";proto=https;host=\"example.com:8080\""));
	h = fwd("GET / HTTP/1.1\r\nHost: [2001:db8::2]:80\r\n\r\n", &o);
	assert_true(has_line(h,
	    "Forwarded: for=\"[2001:db8::1]\";proto=https;host=\"[2001:db8::2]:80\""));
}

static void
test_forwarded_trusted_chain(void **state)
{
	struct lg_fwd_opts o = opts();

	o.style = LG_FWD_FORWARDED;
	o.trusted = 1;
	const char *h = fwd("GET / HTTP/1.1\r\nHost: a\r\nForwarded: for=1.2.3.4;proto=https\r\n"
	    "X-Forwarded-For: 5.5.5.5\r\n\r\n", &o);
	assert_true(has_line(h, "Forwarded: for=1.2.3.4;proto=https, for=10.0.0.9;proto=http;host=a"));
	assert_true(has_line(h, "X-Forwarded-For: 5.5.5.5")); /* a trusted peer's passes as is */
}

static void
test_unknown_client(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *raw = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";

	o.client_addr = NULL;
	assert_true(has_line(fwd(raw, &o), "X-Forwarded-For: unknown"));
	o.client_addr = "unix";
	assert_true(has_line(fwd(raw, &o), "X-Forwarded-For: unknown"));
	o.client_addr = "1.2.3.4\r\nX-Evil: 1";
	assert_true(has_line(fwd(raw, &o), "X-Forwarded-For: unknown"));
	o.style = LG_FWD_FORWARDED;
	assert_true(has_line(fwd(raw, &o), "Forwarded: for=unknown;proto=http;host=a"));
}

static void
test_request_id(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *raw = "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: client-said\r\n\r\n";
	const char *h;

	o.request_id = "r-0001";
	h = fwd(raw, &o);
	assert_true(has_line(h, "X-Request-Id: r-0001"));
	assert_int_equal(count_field(h, "x-request-id"), 1);
	assert_null(strstr(h, "client-said"));
	o.request_id = NULL;
	h = fwd(raw, &o);
	assert_true(has_line(h, "X-Request-Id: client-said"));
}

static void
test_deadline(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *raw = "GET / HTTP/1.1\r\nHost: a\r\nX-Lagless-Deadline-Ms: 100000\r\n\r\n";
	const char *h;

	h = fwd(raw, &o); /* no deadline: none sent, the client's removed all the same */
	assert_int_equal(count_field(h, LG_FWD_DEADLINE_FIELD), 0);
	o.deadline_ms = 0;
	assert_true(has_line(fwd(raw, &o), "X-Lagless-Deadline-Ms: 0"));
	o.deadline_ms = 1999;
	h = fwd(raw, &o);
	assert_true(has_line(h, "X-Lagless-Deadline-Ms: 1999"));
	assert_int_equal(count_field(h, LG_FWD_DEADLINE_FIELD), 1);
}

static void
test_host_option(void **state)
{
	struct lg_fwd_opts o = opts();

	o.host = "app.internal:8001";
	const char *h = fwd("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", &o);
	assert_true(strncmp(h, "GET / HTTP/1.1\r\nHost: app.internal:8001\r\n", 41) == 0);
	assert_int_equal(count_field(h, "host"), 1);
	assert_true(has_line(h, "X-Forwarded-Host: example.com"));
}

static void
test_buffer_too_small(void **state)
{
	struct lg_fwd_opts o = opts();
	const struct lg_http_req *r = parse("POST /p HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n"
	    "Content-Length: 2\r\n\r\nhi");
	char buf[1024];
	ssize_t full;

	o.body = LG_FWD_BODY_LENGTH;
	o.content_length = 2;
	o.request_id = "id";
	o.deadline_ms = 5;
	full = lg_fwd_head(r, &o, buf, sizeof(buf));
	assert_true(full > 0);
	for (size_t cap = 0; cap < (size_t)full; cap++) {
		memset(buf, 'Z', sizeof(buf));
		errno = 0;
		assert_int_equal(lg_fwd_head(r, &o, buf, cap), -1);
		assert_int_equal(errno, ENOSPC);
		for (size_t i = cap; i < sizeof(buf); i++) /* nothing written past cap */
			assert_int_equal(buf[i], 'Z');
	}
	assert_int_equal(lg_fwd_head(r, &o, buf, (size_t)full), full);
	assert_int_equal(lg_fwd_head(r, &o, NULL, 0), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(lg_fwd_head_size(r, &o), full); /* sizes the buffer first */
	errno = 0;
	assert_int_equal(lg_fwd_head_size(NULL, &o), -1);
	assert_int_equal(errno, EINVAL);
}

static void
test_invalid(void **state)
{
	struct lg_fwd_opts o = opts();
	const struct lg_http_req *r = parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
	char buf[512];

	errno = 0;
	assert_int_equal(lg_fwd_head(NULL, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lg_fwd_head(r, NULL, buf, sizeof(buf)), -1);
	o.host = "a\r\nX-Evil: 1";
	errno = 0;
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
	o.host = "a b";
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	o.host = "a/b";
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	o = opts();
	o.request_id = "id\r\nX-Evil: 1";
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	o.request_id = "";
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	o = opts();
	o.body = 7;
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	o = opts();
	o.style = 9;
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
	o = opts();
	r = parse("CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n");
	errno = 0;
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
}

/* Which requests ask for a tunnel (RFC 9110 7.8, RFC 6455 4.1): a bodiless HTTP/1.1 GET whose
 * Connection lists "upgrade" (any case, among other options, over several lines) and whose
 * Upgrade names no h2c (RFC 9113 3.1 removed that upgrade). */
static void
test_upgrade_request(void **state)
{
	static const struct {
		const char *raw;
		int want;
	} cases[] = {
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		  1 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, UPGRADE\r\n"
		  "Upgrade: WebSocket\r\n\r\n", 1 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: upgrade\r\n"
		  "Upgrade: foo/2, bar\r\n\r\n", 1 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", 0 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n", 0 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgraded\r\nUpgrade: websocket\r\n\r\n",
		  0 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
		  "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", 0 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket, H2C\r\n\r\n",
		  0 },
		{ "POST /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
		  "Content-Length: 0\r\n\r\n", 0 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
		  "Content-Length: 3\r\n\r\nabc", 0 },
		{ "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
		  "Content-Length: 0\r\n\r\n", 1 },
		{ "GET /ws HTTP/1.0\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		  0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct lg_http_req *r = parse(cases[i].raw);

		if (lg_fwd_upgrade_request(r) != cases[i].want)
			fail_msg("case %zu: want %d", i, cases[i].want);
	}
	assert_int_equal(lg_fwd_upgrade_request(NULL), 0);
}

/* A 101's Upgrade must name only protocols the request offered (RFC 9110 7.8). */
static void
test_upgrade_match(void **state)
{
	const struct lg_http_req *r = parse("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n"
	    "Upgrade: websocket, foo/2\r\n\r\n");

#define M(lit) lg_fwd_upgrade_match(r, (lit), sizeof(lit) - 1)
	assert_int_equal(M("websocket"), 1);
	assert_int_equal(M("WebSocket"), 1);
	assert_int_equal(M(" foo/2 "), 1);
	assert_int_equal(M("websocket, foo/2"), 1);
	assert_int_equal(M("foo"), 0);
	assert_int_equal(M("foo/3"), 0);
	assert_int_equal(M("websocket, other"), 0);
	assert_int_equal(M("h2c"), 0);
	assert_int_equal(M(""), 0);
	assert_int_equal(M(" , "), 0);
#undef M
}

/* With opts->tunnel the Upgrade field passes with Connection: upgrade, the client's
 * Connection still dropped. */
static void
test_upgrade_head(void **state)
{
	struct lg_fwd_opts o = opts();
	const char *h;

	o.tunnel = 1;
	h = fwd("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
	    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", &o);
	assert_non_null(strstr(h, "\r\nUpgrade: websocket\r\n"));
	assert_non_null(strstr(h, "\r\nConnection: upgrade\r\n"));
	assert_null(strstr(h, "Connection: Upgrade"));
	assert_non_null(strstr(h, "\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
	o.tunnel = 0;
	h = fwd("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	    &o);
	assert_null(strcasestr(h, "upgrade"));
}

/* A view that lost fields (more than LG_HTTP_KEPT lines) cannot be forwarded. */
static void
test_fields_not_kept(void **state)
{
	struct lg_fwd_opts o = opts();
	/* more field lines than are kept: only with a --max-fields above LG_HTTP_KEPT */
	struct lg_http_limits lim = { LG_HTTP_MAX_HEAD, LG_HTTP_MAX_TARGET, LG_HTTP_KEPT + 10, 0,
		NULL, 0 };
	char raw[8192];
	size_t n = (size_t)snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\n");
	char buf[8192];

	for (int i = 0; i < LG_HTTP_KEPT + 3; i++)
		n += (size_t)snprintf(raw + n, sizeof(raw) - n, "X-F%d: v\r\n", i);
	snprintf(raw + n, sizeof(raw) - n, "\r\n");
	lg_http_init(&parser, &lim);
	head_only(raw);
	assert_int_equal(parser.status, 0);
	const struct lg_http_req *r = &parser.req;
	assert_true(r->kept_short);
	errno = 0;
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
}

/* A view parsed with a keep set (as a loop worker's kind routes are) holds only the named
 * fields, without kept_short: lg_fwd_head sees nkept < nfields and refuses it. */
static void
test_keep_set_view_refused(void **state)
{
	static struct lg_http_keep keep;
	struct lg_http_limits lim = { LG_HTTP_MAX_HEAD, LG_HTTP_MAX_TARGET, LG_HTTP_MAX_FIELDS, 0,
		&keep, 0 };
	const char *raw = "GET / HTTP/1.1\r\nHost: a\r\nCookie: c=1\r\nX-Other: 2\r\n\r\n";
	struct lg_fwd_opts o = opts();
	char buf[1024];

	assert_int_equal(lg_http_keep_add(&keep, "host"), 0);
	lg_http_init(&parser, &lim);
	head_only(raw);
	assert_true(parser.complete);
	assert_int_equal(parser.req.nkept, 1);
	assert_int_equal(parser.req.nfields, 3);
	assert_false(parser.req.kept_short);
	errno = 0;
	assert_int_equal(lg_fwd_head(&parser.req, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
}

/* A field name of LG_HTTP_KEEP_NAME bytes or more is never kept, even without a keep set and
 * without kept_short: the count of field lines tells. */
static void
test_long_name_not_kept_refused(void **state)
{
	struct lg_fwd_opts o = opts();
	char raw[512], name[LG_HTTP_KEEP_NAME + 8], buf[1024];

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\n%s: v\r\n\r\n", name);
	const struct lg_http_req *r = parse(raw);
	assert_false(r->kept_short);
	assert_int_equal(r->nkept + 1, r->nfields);
	errno = 0;
	assert_int_equal(lg_fwd_head(r, &o, buf, sizeof(buf)), -1);
	assert_int_equal(errno, EINVAL);
}

/* obs-fold (RFC 9112 section 5.2) never reaches lg_fwd_head: the parser refuses the request,
 * so a folded value cannot be forwarded as two lines or smuggle a field. */
static void
test_obs_fold_refused(void **state)
{
	static const char *const raws[] = {
		"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n X-B: 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\tX-B: 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n x-b\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(raws) / sizeof(raws[0]); i++) {
		lg_http_init(&parser, NULL);
		head_only(raws[i]);
		assert_int_equal(parser.status, 400);
		assert_false(parser.complete);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_line_and_host),
		cmocka_unit_test(test_absolute_form),
		cmocka_unit_test(test_http10_without_host),
		cmocka_unit_test(test_hop_by_hop_removed),
		cmocka_unit_test(test_transfer_encoding_removed),
		cmocka_unit_test(test_framing_option),
		cmocka_unit_test(test_connection_names_several),
		cmocka_unit_test(test_case_variants),
		cmocka_unit_test(test_upgrade_tunnel),
		cmocka_unit_test(test_xff_untrusted),
		cmocka_unit_test(test_xff_trusted),
		cmocka_unit_test(test_xff_trusted_but_named_by_connection),
		cmocka_unit_test(test_proto_tls),
		cmocka_unit_test(test_forwarded_ipv4),
		cmocka_unit_test(test_forwarded_ipv6),
		cmocka_unit_test(test_forwarded_trusted_chain),
		cmocka_unit_test(test_unknown_client),
		cmocka_unit_test(test_request_id),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_host_option),
		cmocka_unit_test(test_buffer_too_small),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_upgrade_request),
		cmocka_unit_test(test_upgrade_match),
		cmocka_unit_test(test_upgrade_head),
		cmocka_unit_test(test_fields_not_kept),
		cmocka_unit_test(test_keep_set_view_refused),
		cmocka_unit_test(test_long_name_not_kept_refused),
		cmocka_unit_test(test_obs_fold_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
