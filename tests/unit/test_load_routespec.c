/* Unit tests for load/routespec.c: --rate PATH=RATE[,option...], body sizes and files, and the
 * target URL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "load/routespec.h"

static void
test_plain_and_relative(void **state)
{
	struct ll_route rt;
	char err[256];

	assert_int_equal(ll_routespec_parse("/ping=500", LL_ARRIVAL_CONSTANT, 1, &rt, err,
	                                    sizeof(err)), 0);
	assert_string_equal(rt.path, "/ping");
	assert_string_equal(rt.method, "GET");
	assert_true(rt.rate.value == 500 && !rt.rate.relative && !rt.heavy);
	assert_int_equal(rt.arrival, LL_ARRIVAL_CONSTANT);
	assert_null(rt.body);
	ll_routespec_free(&rt);
	/* '=' in the query: the rate is after the last one */
	assert_int_equal(ll_routespec_parse("/heavy?iterations=1000=2x", LL_ARRIVAL_POISSON, 1,
	                                    &rt, err, sizeof(err)), 0);
	assert_string_equal(rt.path, "/heavy?iterations=1000");
	assert_true(rt.rate.value == 2 && rt.rate.relative && rt.heavy);
	assert_int_equal(rt.arrival, LL_ARRIVAL_POISSON);
	ll_routespec_free(&rt);
}

static void
test_options(void **state)
{
	struct ll_route rt, again;
	char err[256];
	size_t i;
	unsigned zero = 0;

	assert_int_equal(ll_routespec_parse("/compress=20,method=POST,body=random:64K,heavy,poisson",
	                                    LL_ARRIVAL_CONSTANT, 9, &rt, err, sizeof(err)), 0);
	assert_string_equal(rt.path, "/compress");
	assert_string_equal(rt.method, "POST");
	assert_true(rt.heavy && !rt.rate.relative);
	assert_int_equal(rt.arrival, LL_ARRIVAL_POISSON);
	assert_int_equal(rt.body_len, 65536);
	for (i = 0; i < rt.body_len; i++)
		zero += rt.body[i] == 0;
	assert_true(zero < 1000);   /* random, not zeros (1/256 expected: ~256) */
	/* the same seed, the same bytes */
	assert_int_equal(ll_routespec_parse("/c=1,body=random:64K", LL_ARRIVAL_CONSTANT, 9, &again,
	                                    err, sizeof(err)), 0);
	assert_memory_equal(rt.body, again.body, rt.body_len);
	ll_routespec_free(&again);
	ll_routespec_free(&rt);
}

static void
test_body_file(void **state)
{
	char path[] = "/tmp/test_routespec.XXXXXX", arg[128], err[256];
	struct ll_route rt;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abc\0def", 7), 7);
	close(fd);
	snprintf(arg, sizeof(arg), "/upload=5,method=PUT,body=@%s", path);
	assert_int_equal(ll_routespec_parse(arg, LL_ARRIVAL_CONSTANT, 1, &rt, err, sizeof(err)), 0);
	assert_int_equal(rt.body_len, 7);
	assert_memory_equal(rt.body, "abc\0def", 7);
	ll_routespec_free(&rt);
	unlink(path);
	assert_int_equal(ll_routespec_parse(arg, LL_ARRIVAL_CONSTANT, 1, &rt, err, sizeof(err)), -1);
	assert_non_null(strstr(err, path));
	ll_routespec_free(&rt);
}

static void
test_bad_specs(void **state)
{
	static const char *const bad[] = {
		"ping=5", "/ping", "/ping=", "/ping=abc", "/x=5,bogus", "/x=2x,cheap", "/x=1,method=P-ST", "/x=1,header=NoColon", "/x=1,header=Bad Name: v", "/x=1,capacity=0", "/x=1,body=random:1TB",
		"/x=1,method=", "/x=1,body=random:2G", "/x=1,body=random:", "/x=1,body=random:-1",
		"/x=0", "/x=5,method=P0ST",
	};
	struct ll_route rt;
	char err[256];
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(ll_routespec_parse(bad[i], LL_ARRIVAL_CONSTANT, 1, &rt, err,
		                                    sizeof(err)), -1);
		assert_true(err[0] != '\0');
		ll_routespec_free(&rt);
	}
}

static void
test_size(void **state)
{
	uint64_t v;

	assert_int_equal(ll_routespec_size("4096", &v), 0);
	assert_true(v == 4096);
	assert_int_equal(ll_routespec_size("64K", &v), 0);
	assert_true(v == 65536);
	assert_int_equal(ll_routespec_size("1M", &v), 0);
	assert_true(v == 1048576);
	assert_int_equal(ll_routespec_size("1G", &v), 0);
	assert_int_equal(ll_routespec_size("2G", &v), -1);
	assert_int_equal(ll_routespec_size("K", &v), -1);
	assert_int_equal(ll_routespec_size("1KB", &v), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(ll_routespec_size("2mb", &v), 0);
	assert_int_equal(v, 2u << 20);
	assert_int_equal(ll_routespec_size("1KQ", &v), -1);
}

static void
test_url(void **state)
{
	char host[64], port[8], hdr[80];

	assert_int_equal(ll_routespec_url("http://127.0.0.1:8080", host, sizeof(host), port,
	                                  sizeof(port), hdr, sizeof(hdr)), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_string_equal(port, "8080");
	assert_string_equal(hdr, "127.0.0.1:8080");
	assert_int_equal(ll_routespec_url("http://[::1]:9/ignored", host, sizeof(host), port,
	                                  sizeof(port), hdr, sizeof(hdr)), 0);
	assert_string_equal(host, "::1");
	assert_string_equal(port, "9");
	assert_string_equal(hdr, "[::1]:9");
	assert_int_equal(ll_routespec_url("http://localhost", host, sizeof(host), port,
	                                  sizeof(port), hdr, sizeof(hdr)), 0);
	assert_string_equal(host, "localhost");
	assert_string_equal(port, "80");
	assert_int_equal(ll_routespec_url("http://[::1]", host, sizeof(host), port, sizeof(port),
	                                  hdr, sizeof(hdr)), 0);
	assert_string_equal(port, "80");
	assert_int_equal(ll_routespec_url("https://x", host, 64, port, 8, hdr, 80), -1);
	assert_int_equal(ll_routespec_url("http://", host, 64, port, 8, hdr, 80), -1);
	assert_int_equal(ll_routespec_url("http://h:abc", host, 64, port, 8, hdr, 80), -1);
	assert_int_equal(ll_routespec_url("http://h:", host, 64, port, 8, hdr, 80), -1);
	assert_int_equal(ll_routespec_url("http://[::1", host, 64, port, 8, hdr, 80), -1);
	assert_int_equal(ll_routespec_url("http://[::1]x", host, 64, port, 8, hdr, 80), -1);
	assert_int_equal(ll_routespec_url("ftp://x", host, 64, port, 8, hdr, 80), -1);
}

/* habits: a method in either case, headers per route, a route's own capacity */
static void
test_habits(void **state)
{
	struct ll_route rt;
	char err[256], *list = NULL;

	assert_int_equal(ll_routespec_parse("/login=40,method=post,header=Content-Type: "
	                                    "application/json,H=X-Trace:  7,capacity=12.5",
	                                    LL_ARRIVAL_CONSTANT, 1, &rt, err, sizeof(err)), 0);
	assert_string_equal(rt.method, "POST");
	assert_string_equal(rt.headers, "Content-Type: application/json\r\nX-Trace: 7\r\n");
	assert_true(rt.capacity_given == 12.5);
	ll_routespec_free(&rt);
	/* the message says what was wrong and the unit */
	assert_int_equal(ll_routespec_parse("/x=1,capacity=-3", LL_ARRIVAL_CONSTANT, 1, &rt, err,
	                                    sizeof(err)), -1);
	assert_non_null(strstr(err, "requests per second"));
	ll_routespec_free(&rt);
	assert_int_equal(ll_routespec_header(&list, "Accept: */*", err, sizeof(err)), 0);
	assert_int_equal(ll_routespec_header(&list, "X-A:b, c", err, sizeof(err)), 0);
	assert_string_equal(list, "Accept: */*\r\nX-A: b, c\r\n");
	assert_int_equal(ll_routespec_header(&list, ": v", err, sizeof(err)), -1);
	assert_int_equal(ll_routespec_header(&list, "X: a\r\nEvil: 1", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "CR or LF"));
	free(list);
}

/* a path in the target URL is every route's prefix, not dropped */
static void
test_url_prefix(void **state)
{
	struct ll_route rt;
	char p[64], err[256];

	assert_int_equal(ll_routespec_url_prefix("http://h:8080", p, sizeof(p)), 0);
	assert_string_equal(p, "");
	assert_int_equal(ll_routespec_url_prefix("http://h:8080/", p, sizeof(p)), 0);
	assert_string_equal(p, "");
	assert_int_equal(ll_routespec_url_prefix("http://[::1]:9/api/v1/", p, sizeof(p)), 0);
	assert_string_equal(p, "/api/v1");
	assert_int_equal(ll_routespec_url_prefix("http://h/api?x=1", p, sizeof(p)), -1);
	assert_int_equal(ll_routespec_url_prefix("http://h/api#f", p, sizeof(p)), -1);
	assert_int_equal(ll_routespec_url_prefix("http://h/a-long-prefix", p, 4), -1);
	assert_int_equal(ll_routespec_parse("/users?id=1=5", LL_ARRIVAL_CONSTANT, 1, &rt, err,
	                                    sizeof(err)), 0);
	assert_int_equal(ll_routespec_prefix(&rt, "/api/v1"), 0);
	assert_string_equal(rt.path, "/api/v1/users?id=1");
	ll_routespec_free(&rt);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_and_relative),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_body_file),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_size),
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_habits),
		cmocka_unit_test(test_url_prefix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
