/* Unit tests for common/query.c: finding a parameter of a raw query, and percent-decoding a
 * value (RFC 3986 section 2.1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/query.h"

static void
test_param(void **state)
{
	const char *q = "a=1&iterations=%31%30&b&c=";
	size_t len = 0;
	const char *v = lg_query_param(q, strlen(q), "iterations", &len);

	assert_non_null(v);
	assert_int_equal(len, 6);
	assert_memory_equal(v, "%31%30", 6);
	assert_null(lg_query_param(q, strlen(q), "b", &len)); /* no '=': never matches */
	assert_non_null(lg_query_param(q, strlen(q), "c", &len));
	assert_int_equal(len, 0);
	assert_null(lg_query_param(NULL, 0, "a", &len));
}

static void
test_decode(void **state)
{
	char out[8];

	assert_int_equal(lg_query_decode("%31%30", 6, out, sizeof(out)), 2);
	assert_memory_equal(out, "10", 2);
	assert_int_equal(lg_query_decode("a%2Fb%2f", 8, out, sizeof(out)), 4);
	assert_memory_equal(out, "a/b/", 4);
	assert_int_equal(lg_query_decode("a+b", 3, out, sizeof(out)), 3); /* '+' is not a space */
	assert_memory_equal(out, "a+b", 3);
	assert_int_equal(lg_query_decode("", 0, out, sizeof(out)), 0);
	assert_int_equal(lg_query_decode("%", 1, out, sizeof(out)), -1);
	assert_int_equal(lg_query_decode("%3", 2, out, sizeof(out)), -1);
	assert_int_equal(lg_query_decode("%3g", 3, out, sizeof(out)), -1);
	assert_int_equal(lg_query_decode("%g3", 3, out, sizeof(out)), -1);
	assert_int_equal(lg_query_decode("123456789", 9, out, sizeof(out)), -1); /* over cap */
	assert_int_equal(lg_query_decode("12345678", 8, out, sizeof(out)), 8);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_param),
		cmocka_unit_test(test_decode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
