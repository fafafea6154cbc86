/* Unit tests for load/hist.c: bucket layout, 3 significant digits from 1 us to 60 s, nearest-rank
 * percentiles, merge, values beyond the top. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "load/hist.h"

static void
test_bucket_bounds(void **state)
{
	uint64_t v;
	unsigned i, prev = 0;

	/* every bucket holds its own bounds, buckets tile the range without gap or overlap */
	for (i = 0; i + 1 < LL_HIST_BUCKETS; i++) {
		assert_int_equal(ll_hist_index(ll_hist_lowest(i)), i);
		assert_int_equal(ll_hist_index(ll_hist_highest(i)), i);
		assert_int_equal(ll_hist_highest(i) + 1, ll_hist_lowest(i + 1));
	}
	for (v = 1; v < (1ull << 36); v = v * 3 / 2 + 1) {
		i = ll_hist_index(v);
		assert_true(i >= prev);
		prev = i;
		assert_true(ll_hist_lowest(i) <= v && v <= ll_hist_highest(i));
		/* a bucket is at most 1/1024 of its lowest value wide: < 0.1 % error */
		if (v >= LL_HIST_EXACT)
			assert_true((double)(ll_hist_highest(i) - ll_hist_lowest(i) + 1) /
			            (double)ll_hist_lowest(i) <= 1.0 / 1024);
		else
			assert_int_equal(ll_hist_highest(i), v);
	}
}

/* One value alone, from 1 us to 60 s: every percentile reports it to 3 significant digits and
 * never below it. */
static void
test_three_digits_1us_to_60s(void **state)
{
	struct ll_hist h;
	double v;

	assert_int_equal(ll_hist_init(&h), 0);
	for (v = 1e3; v <= 60e9; v *= 1.37) {
		uint64_t x = (uint64_t)v, got;

		ll_hist_reset(&h);
		ll_hist_record(&h, x);
		ll_hist_record(&h, x);
		got = ll_hist_value_at(&h, 50);
		assert_true(got >= x);
		assert_true((double)(got - x) / (double)x < 1e-3);
		assert_int_equal(ll_hist_value_at(&h, 100), x);
		assert_int_equal(ll_hist_value_at(&h, 0), x);
	}
	ll_hist_free(&h);
}

static void
test_percentiles_of_uniform(void **state)
{
	struct ll_hist h;
	uint64_t i;
	static const double pct[] = { 50, 90, 99, 99.9 };
	unsigned k;

	assert_int_equal(ll_hist_init(&h), 0);
	for (i = 1; i <= 100000; i++)   /* 1 us .. 100 ms, one each */
		ll_hist_record(&h, i * 1000);
	assert_int_equal(h.total, 100000);
	assert_int_equal(h.min, 1000);
	assert_int_equal(h.max, 100000000);
	for (k = 0; k < 4; k++) {
		/* nearest rank: the value at rank ceil(p/100 * n) */
		double want = pct[k] / 100 * 100000 * 1000;
		double got = (double)ll_hist_value_at(&h, pct[k]);

		assert_true(got >= want);
		assert_true((got - want) / want < 1e-3);
	}
	assert_true(ll_hist_mean(&h) > 50000499.0 && ll_hist_mean(&h) < 50000501.0);
	ll_hist_free(&h);
}

static void
test_nearest_rank_small(void **state)
{
	struct ll_hist h;

	assert_int_equal(ll_hist_init(&h), 0);
	assert_int_equal(ll_hist_value_at(&h, 99), 0);   /* empty */
	/* 99 fast, 1 slow: p99 is still fast, p99.1 is the slow one */
	for (int i = 0; i < 99; i++)
		ll_hist_record(&h, 1000);
	ll_hist_record(&h, 1000000000);
	assert_int_equal(ll_hist_value_at(&h, 99), 1000);
	assert_int_equal(ll_hist_value_at(&h, 99.1), 1000000000);
	assert_int_equal(ll_hist_value_at(&h, 50), 1000);
	ll_hist_free(&h);
}

static void
test_merge_and_top(void **state)
{
	struct ll_hist a, b;

	assert_int_equal(ll_hist_init(&a), 0);
	assert_int_equal(ll_hist_init(&b), 0);
	ll_hist_record(&a, 5000);
	ll_hist_record(&b, 7000);
	ll_hist_record(&b, 100ull * 1000000000);    /* 100 s: beyond the top bucket */
	ll_hist_merge(&a, &b);
	assert_int_equal(a.total, 3);
	assert_int_equal(a.min, 5000);
	assert_int_equal(a.max, 100ull * 1000000000);
	assert_int_equal(ll_hist_value_at(&a, 100), 100ull * 1000000000);
	/* the top bucket reports the exact maximum, not its own bound below it */
	assert_int_equal(ll_hist_value_at(&a, 90), 100ull * 1000000000);
	assert_true(ll_hist_value_at(&a, 50) >= 7000 && ll_hist_value_at(&a, 50) < 7010);
	ll_hist_free(&a);
	ll_hist_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_bounds),
		cmocka_unit_test(test_three_digits_1us_to_60s),
		cmocka_unit_test(test_percentiles_of_uniform),
		cmocka_unit_test(test_nearest_rank_small),
		cmocka_unit_test(test_merge_and_top),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
