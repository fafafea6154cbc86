/* Unit tests for common/value.c: the one grammar of configuration values. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/value.h"

static void
test_uint(void **state)
{
	uint64_t v = 7;
	char err[128];

	(void)state;
	assert_int_equal(lg_value_uint("0", 0, 10, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 0);
	assert_int_equal(lg_value_uint("18446744073709551615", 0, UINT64_MAX, &v, err,
	    sizeof(err)), 0);
	assert_true(v == UINT64_MAX);
	/* one past 2^64-1 overflows and is refused, not wrapped */
	v = 7;
	assert_int_equal(lg_value_uint("18446744073709551616", 0, UINT64_MAX, &v, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ERANGE);
	assert_int_equal(v, 7);
	static const char *const bad[] = { "", "-1", "+1", " 1", "1 ", "0x10", "1K", "1.5",
	    "abc" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(lg_value_uint(bad[i], 0, 100, &v, err, sizeof(err)), -1);
		assert_int_equal(errno, EINVAL);
	}
	assert_int_equal(lg_value_uint("11", 1, 10, &v, err, sizeof(err)), -1);
	assert_int_equal(errno, ERANGE);
	assert_string_equal(err, "expected a whole number from 1 to 10");
	assert_int_equal(lg_value_uint("0", 1, 10, &v, NULL, 0), -1);
}

static void
test_size(void **state)
{
	uint64_t v;
	char err[128];

	(void)state;
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "16k", 16384 }, { "16K", 16384 },
		{ "64m", 64ull << 20 }, { "64M", 64ull << 20 }, { "2g", 2ull << 30 },
		{ "2G", 2ull << 30 },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(lg_value_size(good[i].s, 0, UINT64_MAX, &v, err, sizeof(err)), 0);
		assert_true(v == good[i].v);
	}
	static const char *const bad[] = { "K", "1KB", "1T", "1 K", "k1", "-1K", "1.5M", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(lg_value_size(bad[i], 0, UINT64_MAX, &v, err, sizeof(err)), -1);
	/* the product is checked, not only the digits: 2^34 G overflows 64 bits */
	assert_int_equal(lg_value_size("17179869184G", 0, UINT64_MAX, &v, err, sizeof(err)), -1);
	assert_int_equal(errno, ERANGE);
	assert_int_equal(lg_value_size("65M", 0, 64ull << 20, &v, err, sizeof(err)), -1);
	assert_int_equal(errno, ERANGE);
	assert_non_null(strstr(err, "from 0 to 67108864"));
	assert_non_null(strstr(err, "K, M or G"));
	assert_int_equal(lg_value_size("64M", 0, 64ull << 20, &v, err, sizeof(err)), 0);
	assert_int_equal(lg_value_size("255", 256, 1024, &v, err, sizeof(err)), -1);
}

static void
test_duration(void **state)
{
	uint64_t v;
	char err[128];

	(void)state;
	assert_int_equal(lg_value_duration_ms("30000", 1, 86400000, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 30000);
	assert_int_equal(lg_value_duration_ms("0", 1, 86400000, &v, err, sizeof(err)), -1);
	assert_string_equal(err, "expected a whole number of milliseconds from 1 to 86400000");
	/* a duration is milliseconds only: no size suffix, no unit words */
	assert_int_equal(lg_value_duration_ms("1K", 0, 86400000, &v, err, sizeof(err)), -1);
	assert_int_equal(lg_value_duration_ms("5s", 0, 86400000, &v, err, sizeof(err)), -1);
	assert_int_equal(errno, EINVAL);
}

static void
test_bool(void **state)
{
	static const char *const yes[] = { "yes", "true", "on", "1", "YES", "True", "On" };
	static const char *const no[] = { "no", "false", "off", "0", "NO", "False", "OFF" };
	char err[128];
	int b;

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		b = 0;
		assert_int_equal(lg_value_bool(yes[i], &b, err, sizeof(err)), 0);
		assert_int_equal(b, 1);
		assert_int_equal(lg_value_bool(no[i], &b, err, sizeof(err)), 0);
		assert_int_equal(b, 0);
	}
	static const char *const bad[] = { "", "y", "n", "2", "enabled", "yes ", "of" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = 5;
		assert_int_equal(lg_value_bool(bad[i], &b, err, sizeof(err)), -1);
		assert_int_equal(b, 5);
		assert_int_equal(errno, EINVAL);
	}
	assert_string_equal(err, "expected yes, no, true, false, on, off, 1 or 0");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_size),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_bool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
