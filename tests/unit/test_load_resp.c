/* Unit tests for load/resp.c, the response parser of lagless-load: framing by Content-Length,
 * chunked and close, bodiless responses (HEAD, 204, 304), interim 1xx, keep-alive decisions,
 * byte-at-a-time input, errors and body capture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "load/resp.h"

static long
feed_str(struct ll_resp *r, const char *s)
{
	return ll_resp_feed(r, s, strlen(s));
}

static void
test_content_length(void **state)
{
	const char *msg = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
	struct ll_resp r;
	char body[16];

	ll_resp_init(&r, 0, body, sizeof(body));
	assert_int_equal(feed_str(&r, msg), (long)strlen(msg));
	assert_true(r.complete);
	assert_int_equal(r.status, 200);
	assert_true(r.keep_alive);
	assert_int_equal(r.body_len, 5);
	assert_string_equal(body, "hello");
	assert_false(r.body_cut);
}

static void
test_byte_at_a_time(void **state)
{
	const char *msg = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nX: y\r\n\r\nabc";
	struct ll_resp r;
	size_t i;

	ll_resp_init(&r, 0, NULL, 0);
	for (i = 0; i < strlen(msg); i++) {
		assert_false(r.complete);
		assert_int_equal(ll_resp_feed(&r, msg + i, 1), 1);
	}
	assert_true(r.complete);
	assert_int_equal(r.status, 404);
	assert_int_equal(r.body_len, 3);
}

static void
test_chunked(void **state)
{
	struct ll_resp r;
	char body[32];

	ll_resp_init(&r, 0, body, sizeof(body));
	assert_true(feed_str(&r, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki") > 0);
	assert_false(r.complete);
	assert_true(feed_str(&r, "\r\n5\r\npedia\r\n0\r\n\r\n") > 0);
	assert_true(r.complete);
	assert_string_equal(body, "wikipedia");
	assert_true(r.keep_alive);
}

static void
test_close_delimited(void **state)
{
	struct ll_resp r;

	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nsome bytes") > 0);
	assert_false(r.complete);
	assert_int_equal(ll_resp_eof(&r), 0);
	assert_true(r.complete);
	assert_false(r.keep_alive);
	assert_int_equal(r.body_len, 10);
}

static void
test_lagless_refusal_closes(void **state)
{
	const char *msg = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
	                  "Connection: close\r\nContent-Length: 12\r\n\r\nqueue full\r\n";
	struct ll_resp r;

	ll_resp_init(&r, 0, NULL, 0);
	assert_int_equal(feed_str(&r, msg), (long)strlen(msg));
	assert_true(r.complete);
	assert_int_equal(r.status, 503);
	assert_false(r.keep_alive);
}

static void
test_bodiless(void **state)
{
	struct ll_resp r;

	/* HEAD: the Content-Length describes the GET's body, none follows */
	ll_resp_init(&r, 1, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n") > 0);
	assert_true(r.complete);
	assert_int_equal(r.body_len, 0);
	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.1 204 No Content\r\n\r\n") > 0);
	assert_true(r.complete);
	assert_true(r.keep_alive);
	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n") > 0);
	assert_true(r.complete);
}

static void
test_interim_skipped(void **state)
{
	struct ll_resp r;

	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.1 100 Continue\r\n\r\n") > 0);
	assert_false(r.complete);
	assert_true(feed_str(&r, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n") > 0);
	assert_true(r.complete);
	assert_int_equal(r.status, 201);
}

static void
test_http10(void **state)
{
	struct ll_resp r;

	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n") > 0);
	assert_true(r.complete);
	assert_false(r.keep_alive);
	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"
	                         "Content-Length: 0\r\n\r\n") > 0);
	assert_true(r.keep_alive);
}

static void
test_errors(void **state)
{
	const char *two = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\n";
	struct ll_resp r;

	ll_resp_init(&r, 0, NULL, 0);
	assert_int_equal(feed_str(&r, "<html>hello</html>\r\n"), -1);
	assert_true(r.error);
	/* cut short: the server closed inside the body */
	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc") > 0);
	assert_int_equal(ll_resp_eof(&r), -1);
	assert_false(r.complete);
	/* bytes after the response (nothing was pipelined): fewer consumed than given */
	ll_resp_init(&r, 0, NULL, 0);
	assert_true(feed_str(&r, two) < (long)strlen(two));
	assert_true(r.complete);
	assert_int_equal(ll_resp_feed(&r, "x", 1), -1);
}

static void
test_body_cut(void **state)
{
	struct ll_resp r;
	char body[4];

	ll_resp_init(&r, 0, body, sizeof(body));
	assert_true(feed_str(&r, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabcdef") > 0);
	assert_true(r.complete);
	assert_true(r.body_cut);
	assert_string_equal(body, "abc");
	assert_int_equal(r.body_len, 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_byte_at_a_time),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_close_delimited),
		cmocka_unit_test(test_lagless_refusal_closes),
		cmocka_unit_test(test_bodiless),
		cmocka_unit_test(test_interim_skipped),
		cmocka_unit_test(test_http10),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_body_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
