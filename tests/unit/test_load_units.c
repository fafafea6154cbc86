/* Unit tests for load/units.c: durations, rates and sizes as load-testers type them. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "load/units.h"

static void
near(double a, double b)
{
	assert_true(fabs(a - b) <= 1e-9 * fmax(1, fabs(b)));
}

static void
test_duration(void **state)
{
	static const char *const bad[] = {
		"", "s", "10x", "-1s", "inf", "nan", "10 s", "1.2.3s", "0x10", "10sec", "5m3",
		"ms", ".s", "1s-",
	};
	double v;
	unsigned i;

	assert_int_equal(ll_units_duration("10", 1, &v), 0);
	near(v, 10);
	assert_int_equal(ll_units_duration("10s", 1, &v), 0);
	near(v, 10);
	assert_int_equal(ll_units_duration("500ms", 1, &v), 0);
	near(v, 0.5);
	assert_int_equal(ll_units_duration("1m", 1, &v), 0);
	near(v, 60);
	assert_int_equal(ll_units_duration("1m30s", 1, &v), 0);
	near(v, 90);
	assert_int_equal(ll_units_duration("1h", 1, &v), 0);
	near(v, 3600);
	assert_int_equal(ll_units_duration("250us", 1, &v), 0);
	near(v, 250e-6);
	assert_int_equal(ll_units_duration("1.5s", 1, &v), 0);
	near(v, 1.5);
	/* a bare number in the caller's unit: --scrape-ms 250 */
	assert_int_equal(ll_units_duration("250", 1e-3, &v), 0);
	near(v, 0.25);
	assert_int_equal(ll_units_duration("1s", 1e-3, &v), 0);
	near(v, 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_int_equal(ll_units_duration(bad[i], 1, &v), -1);
		assert_int_equal(errno, EINVAL);
	}
}

static void
test_rate(void **state)
{
	static const char *const bad[] = { "", "/s", "5/", "5/0s", "5/x", "5/3", "-5", "5/s/s" };
	double v;
	unsigned i;

	assert_int_equal(ll_units_rate("500", &v), 0);
	near(v, 500);
	assert_int_equal(ll_units_rate("500/s", &v), 0);
	near(v, 500);
	assert_int_equal(ll_units_rate("500/1s", &v), 0);
	near(v, 500);
	assert_int_equal(ll_units_rate("30/m", &v), 0);
	near(v, 0.5);
	assert_int_equal(ll_units_rate("60/1m", &v), 0);
	near(v, 1);
	assert_int_equal(ll_units_rate("100/500ms", &v), 0);
	near(v, 200);
	assert_int_equal(ll_units_rate("3600/h", &v), 0);
	near(v, 1);
	assert_int_equal(ll_units_rate("2.5e2/s", &v), 0);   /* an exponent, as before */
	near(v, 250);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ll_units_rate(bad[i], &v), -1);
}

static void
test_size(void **state)
{
	uint64_t v;

	assert_int_equal(ll_units_size("4096", 1ull << 30, &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(ll_units_size("64K", 1ull << 30, &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(ll_units_size("64KB", 1ull << 30, &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(ll_units_size("64kib", 1ull << 30, &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(ll_units_size("1M", 1ull << 30, &v), 0);
	assert_int_equal(v, 1u << 20);
	assert_int_equal(ll_units_size("1MB", 1ull << 30, &v), 0);
	assert_int_equal(v, 1u << 20);
	assert_int_equal(ll_units_size("1GB", 1ull << 30, &v), 0);
	assert_int_equal(v, 1u << 30);
	errno = 0;
	assert_int_equal(ll_units_size("2G", 1ull << 30, &v), -1);
	assert_int_equal(errno, ERANGE);
	errno = 0;
	assert_int_equal(ll_units_size("1TB", 1ull << 30, &v), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ll_units_size("KB", 1ull << 30, &v), -1);
	assert_int_equal(ll_units_size("1 KB", 1ull << 30, &v), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
