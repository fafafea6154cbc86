/* Unit tests for http/cachectl.c: which proxied answers are shared with a flight's waiters and
 * stored, and for how long (RFC 9111), each rule and hostile Cache-Control values. The answers
 * are real response heads read by http/resp.c, as the upstream room reads them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/cachectl.h"

static const char keyh[][32] = { "accept", "x-tenant" };

static const struct lg_cc_rule route = {
	.ttl_ms = 60000, .negative_ttl_ms = 5000, .key_headers = keyh, .nkey_headers = 2,
};

/* Decides for the head `fields` (CRLF-separated lines, may be empty) with status under r. */
static unsigned
decide_r(int status, const char *fields, const struct lg_cc_rule *r, struct lg_cc_decision *d)
{
	static const struct lg_resp_limits lim = { .max_head = 1 << 20, .max_fields = 64 };
	struct lg_resp_field f[64];
	struct lg_resp resp;
	size_t cap = strlen(fields) + 128;
	char *head = malloc(cap);

	assert_non_null(head);
	int n = snprintf(head, cap, "HTTP/1.1 %d X\r\n%sContent-Length: 0\r\n\r\n", status, fields);

	lg_resp_init(&resp, &lim, f);
	lg_resp_start(&resp, 0);
	assert_int_equal(lg_resp_head(&resp, head, (size_t)n), n);
	unsigned flags = lg_cc_decide(resp.status, head, f, resp.nfields, r, d);

	free(head);
	return flags;
}

static unsigned
decide(int status, const char *fields, struct lg_cc_decision *d)
{
	return decide_r(status, fields, &route, d);
}

static void
test_plain_200_route_ttl(void **state)
{
	struct lg_cc_decision d;

	assert_int_equal(decide(200, "", &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 60000);
	assert_int_equal(d.swr_ms, UINT64_MAX);
}

static void
test_never_shared(void **state)
{
	static const struct { const char *f, *why; } no[] = {
		{ "Cache-Control: private\r\n", "private" },
		{ "Cache-Control: PRIVATE=\"set-cookie, x\"\r\n", "private" },
		{ "Cache-Control: no-store\r\n", "no-store" },
		{ "Cache-Control: public, max-age=60\r\nCache-Control: no-store\r\n", "no-store" },
		{ "Cache-Control: no-cache\r\n", "no-cache" },
		{ "Cache-Control: no-cache=\"x\"\r\n", "no-cache" },
		{ "Set-Cookie: a=b\r\n", "set-cookie" },
		{ "Cache-Control: public, s-maxage=60\r\nSet-Cookie: a=b\r\n", "set-cookie" },
		{ "Vary: *\r\n", "vary" },
		{ "Vary: Accept, Accept-Encoding\r\n", "vary" },
		{ "Vary: accept\r\nVary: Cookie\r\n", "vary" },
	};
	struct lg_cc_decision d;

	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		assert_int_equal(decide(200, no[i].f, &d), LG_CC_HFM);
		assert_string_equal(d.why, no[i].why);
		/* not even a failure is handed on with these */
		assert_int_equal(decide(503, no[i].f, &d), LG_CC_HFM);
	}
}

static void
test_vary_in_key_shared(void **state)
{
	struct lg_cc_decision d;

	assert_int_equal(decide(200, "Vary: ACCEPT, x-tenant\r\n", &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(decide(200, "Vary: \r\n", &d), LG_CC_SHARE | LG_CC_STORE);
}

static void
test_statuses(void **state)
{
	static const int pos[] = { 200, 203, 204, 300, 301 };
	static const int fail[] = { 302, 307, 400, 403, 429, 500, 502, 503, 504 };
	struct lg_cc_decision d;

	for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
		assert_int_equal(decide(pos[i], "", &d), LG_CC_SHARE | LG_CC_STORE);
		assert_int_equal(d.ttl_ms, 60000);
	}
	assert_int_equal(decide(404, "", &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 5000);
	assert_int_equal(decide(410, "Cache-Control: max-age=2\r\n", &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 2000);
	/* failures: shared with the waiters, never stored, whatever they say */
	for (size_t i = 0; i < sizeof(fail) / sizeof(fail[0]); i++) {
		assert_int_equal(decide(fail[i], "Cache-Control: public, max-age=600\r\n", &d),
		    LG_CC_SHARE);
		assert_int_equal(d.ttl_ms, 0);
	}
	/* without a negative ttl, 404 is shared, not stored */
	struct lg_cc_rule r = route;

	r.negative_ttl_ms = 0;
	assert_int_equal(decide_r(404, "", &r, &d), LG_CC_SHARE);
	r.ttl_ms = 0; /* coalescing only */
	assert_int_equal(decide_r(200, "Cache-Control: max-age=60\r\n", &r, &d), LG_CC_SHARE);
}

static void
test_freshness_shortens_never_lengthens(void **state)
{
	struct lg_cc_decision d;

	assert_int_equal(decide(200, "Cache-Control: max-age=10\r\n", &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 10000);
	assert_int_equal(decide(200, "Cache-Control: max-age=3600\r\n", &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 60000);
	/* s-maxage over max-age (RFC 9111 5.2.2.10), both ways */
	decide(200, "Cache-Control: max-age=5, s-maxage=20\r\n", &d);
	assert_int_equal(d.ttl_ms, 20000);
	decide(200, "Cache-Control: s-maxage=3\r\nCache-Control: max-age=50\r\n", &d);
	assert_int_equal(d.ttl_ms, 3000);
	/* Age counts (RFC 9111 4.2.3) */
	decide(200, "Cache-Control: max-age=10\r\nAge: 4\r\n", &d);
	assert_int_equal(d.ttl_ms, 6000);
	decide(200, "Age: 7\r\n", &d);
	assert_int_equal(d.ttl_ms, 53000);
	/* already stale: not shared */
	assert_int_equal(decide(200, "Cache-Control: max-age=10\r\nAge: 10\r\n", &d), LG_CC_HFM);
	assert_int_equal(decide(200, "Cache-Control: max-age=0\r\n", &d), LG_CC_HFM);
	assert_int_equal(decide(200, "Cache-Control: s-maxage=0, max-age=60\r\n", &d), LG_CC_HFM);
	/* older than the route's ttl, no explicit freshness: shared, not stored */
	assert_int_equal(decide(200, "Age: 600\r\n", &d), LG_CC_SHARE);
	/* Expires without max-age: not read, so taken as stale; with max-age, ignored */
	assert_int_equal(decide(200, "Expires: Thu, 01 Jan 2099 00:00:00 GMT\r\n", &d), LG_CC_HFM);
	assert_int_equal(decide(200, "Expires: 0\r\nCache-Control: max-age=5\r\n", &d),
	    LG_CC_SHARE | LG_CC_STORE);
}

/* Field lines read back from Redis (another replica's stored answer) are written into a head
 * only when they are whole lines of fields a stored answer holds (issue 37 item 5). */
static void
test_fields_ok(void **state)
{
	static const char *good[] = {
		"",
		"Content-Type: text/plain\r\n",
		"Content-Type: text/plain\r\nCache-Control: max-age=5\r\nETag: \"x\"\r\n",
		"X-Empty:\r\n",
	};
	static const char *bad[] = {
		"Content-Type: text/plain",                  /* no CRLF */
		"Content-Type: text/plain\n",                /* bare LF */
		"Content-Type: a\rb\r\n",                   /* bare CR */
		"Content-Type: text/plain\r\n folded\r\n",  /* obs-fold */
		": x\r\n",                                  /* no name */
		"Bad Name: x\r\n",
		"X-A: 1\r\nContent-Length: 5\r\n",           /* framing: lagless frames its own */
		"Transfer-Encoding: chunked\r\n",
		"connection: close\r\n",
		"Age: 5\r\n",                               /* lagless writes its own */
		"X-Cache: hit\r\n",
		"Date: Thu, 01 Jan 2099 00:00:00 GMT\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(lg_cc_fields_ok(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(lg_cc_fields_ok(bad[i], strlen(bad[i])));
	assert_false(lg_cc_fields_ok("X-A: a\0b\r\n", 11)); /* NUL */
}

static void
test_hostile_values(void **state)
{
	static const char *stale[] = {
		"Cache-Control: max-age=-1\r\n",
		"Cache-Control: max-age=1.5\r\n",
		"Cache-Control: max-age=\r\n",
		"Cache-Control: max-age\r\n",
		"Cache-Control: max-age=10, max-age=20\r\n",
		"Cache-Control: max-age=10\r\nCache-Control: max-age=20\r\n",
		"Cache-Control: max-age=\"1\\0\"\r\n",
		"Cache-Control: max-age=\"10\r\n",          /* unclosed quote */
		"Cache-Control: =10\r\n",
		"Cache-Control: max-age=10 20\r\n",
		"Age: -3\r\n",
		"Age: 3\r\nAge: 4\r\n",
	};
	struct lg_cc_decision d;

	for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++) {
		assert_int_equal(decide(200, stale[i], &d), LG_CC_HFM);
		assert_string_equal(d.why, "invalid");
	}
	/* saturates at 2^31 s (RFC 9111 1.2.2): the route's ttl holds */
	assert_int_equal(decide(200, "Cache-Control: max-age=99999999999999999999999999\r\n", &d),
	    LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 60000);
	decide(200, "Age: 99999999999999999999\r\n", &d); /* 2^31 s old: older than the ttl */
	assert_int_equal(d.flags, LG_CC_SHARE);
	/* commas and directive names inside quoted arguments are not directives */
	assert_int_equal(decide(200, "Cache-Control: community=\"private, no-store\", max-age=7\r\n",
	    &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 7000);
	assert_int_equal(decide(200, "Cache-Control: x=\"a\\\"private\", max-age=8\r\n", &d),
	    LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 8000);
	/* the same value twice, empty elements, case, quoted delta: accepted */
	assert_int_equal(decide(200, "Cache-Control: ,, MAX-AGE=\"9\" ,max-age=9,\r\n", &d),
	    LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 9000);
	/* RFC 5861 windows are reported */
	decide(200, "Cache-Control: max-age=1, stale-while-revalidate=30, stale-if-error=60\r\n", &d);
	assert_int_equal(d.swr_ms, 30000);
	assert_int_equal(d.sie_ms, 60000);
	assert_false(d.no_stale);
	/* RFC 9111 5.2.2.2, 5.2.2.8, 5.2.2.10: never served stale */
	decide(200, "Cache-Control: max-age=1, must-revalidate\r\n", &d);
	assert_true(d.no_stale);
	decide(200, "Cache-Control: proxy-revalidate\r\n", &d);
	assert_true(d.no_stale);
	decide(200, "Cache-Control: s-maxage=5\r\n", &d);
	assert_true(d.no_stale);
}

static void
test_huge_cache_control(void **state)
{
	size_t n = 200000;
	char *f = malloc(n + 64);
	struct lg_cc_decision d;

	assert_non_null(f);
	strcpy(f, "Cache-Control: ");
	size_t off = strlen(f);

	while (off < n) {
		memcpy(f + off, "foo=\"a,b\", ", 11);
		off += 11;
	}
	strcpy(f + off, "max-age=12\r\n");
	assert_int_equal(decide(200, f, &d), LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(d.ttl_ms, 12000);
	/* the same with no-store at the very end */
	strcpy(f + off, "no-store\r\n");
	assert_int_equal(decide(200, f, &d), LG_CC_HFM);
	free(f);
}

static void
test_credentials(void **state)
{
	struct lg_cc_rule r = route;
	struct lg_cc_decision d;

	r.credentials = 1;
	/* RFC 9111 3.5 */
	assert_int_equal(decide_r(200, "", &r, &d), LG_CC_HFM);
	assert_string_equal(d.why, "credentials");
	assert_int_equal(decide_r(200, "Cache-Control: public\r\n", &r, &d),
	    LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(decide_r(200, "Cache-Control: s-maxage=5\r\n", &r, &d),
	    LG_CC_SHARE | LG_CC_STORE);
	assert_int_equal(decide_r(200, "Cache-Control: must-revalidate\r\n", &r, &d),
	    LG_CC_SHARE | LG_CC_STORE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_200_route_ttl),
		cmocka_unit_test(test_never_shared),
		cmocka_unit_test(test_vary_in_key_shared),
		cmocka_unit_test(test_statuses),
		cmocka_unit_test(test_freshness_shortens_never_lengthens),
		cmocka_unit_test(test_hostile_values),
		cmocka_unit_test(test_fields_ok),
		cmocka_unit_test(test_huge_cache_control),
		cmocka_unit_test(test_credentials),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
