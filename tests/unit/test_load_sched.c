/* Unit tests for load/sched.c: rate and arrival parsing, constant schedules without drift,
 * Poisson arrivals with the right mean, spread and dispersion, reproducible from the seed. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "load/sched.h"

static void
test_parse_rate(void **state)
{
	static const char *const bad[] = {
		"", "x", "2xx", "-1", "0", "0x", "abc", "1e8", "2x5", "2 x", " 2", "+2", "1001x",
		"nan", "inf", "5/0s", "5/", "10/s/s", "5/q", "5/3", "0x10", "5/-1s",
	};
	struct ll_rate r;
	unsigned i;

	assert_int_equal(ll_sched_parse_rate("500", &r), 0);
	assert_true(r.value == 500 && !r.relative);
	assert_int_equal(ll_sched_parse_rate("500/s", &r), 0);
	assert_true(r.value == 500 && !r.relative);
	assert_int_equal(ll_sched_parse_rate("12.5", &r), 0);
	assert_true(r.value == 12.5 && !r.relative);
	/* vegeta's frequency/period */
	assert_int_equal(ll_sched_parse_rate("500/1s", &r), 0);
	assert_true(r.value == 500 && !r.relative);
	assert_int_equal(ll_sched_parse_rate("30/m", &r), 0);
	assert_true(fabs(r.value - 0.5) < 1e-12 && !r.relative);
	assert_int_equal(ll_sched_parse_rate("30/2m", &r), 0);
	assert_true(fabs(r.value - 0.25) < 1e-12);
	assert_int_equal(ll_sched_parse_rate("100/500ms", &r), 0);
	assert_true(fabs(r.value - 200) < 1e-9);
	assert_int_equal(ll_sched_parse_rate("2x", &r), 0);
	assert_true(r.value == 2 && r.relative);
	assert_int_equal(ll_sched_parse_rate("0.5x", &r), 0);
	assert_true(r.value == 0.5 && r.relative);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_int_equal(ll_sched_parse_rate(bad[i], &r), -1);
		assert_int_equal(errno, EINVAL);
	}
}

static void
test_parse_arrival(void **state)
{
	enum ll_arrival a;

	assert_int_equal(ll_sched_parse_arrival("constant", &a), 0);
	assert_int_equal(a, LL_ARRIVAL_CONSTANT);
	assert_int_equal(ll_sched_parse_arrival("poisson", &a), 0);
	assert_int_equal(a, LL_ARRIVAL_POISSON);
	assert_int_equal(ll_sched_parse_arrival("Poisson", &a), -1);
}

static void
test_constant_no_drift(void **state)
{
	struct ll_sched s;
	uint64_t start = 5000000000ull, t = 0, i;

	ll_sched_init(&s, LL_ARRIVAL_CONSTANT, 3000, start, 1);
	assert_int_equal(ll_sched_peek(&s), start);
	for (i = 0; i <= 3000000; i++) {
		t = ll_sched_take(&s);
		/* request i is due at start + i / rate, to the nanosecond, however many came first */
		assert_true(t == start + (uint64_t)((double)i * 1e9 / 3000));
	}
	assert_true(t == start + 1000000000000ull);
}

static void
test_poisson_statistics(void **state)
{
	struct ll_sched s;
	const double rate = 1000;
	const unsigned n = 200000;
	uint64_t prev, t, start = 1000;
	double sum = 0, sumsq = 0, over_mean = 0;
	unsigned i, win[2000] = { 0 };

	ll_sched_init(&s, LL_ARRIVAL_POISSON, rate, start, 42);
	prev = start;
	for (i = 0; i < n; i++) {
		double gap;

		t = ll_sched_take(&s);
		assert_true(t >= prev);
		gap = (double)(t - prev) / 1e9;
		sum += gap;
		sumsq += gap * gap;
		over_mean += gap > 1 / rate;
		if ((t - start) / 100000000u < 2000)   /* 100 ms windows */
			win[(t - start) / 100000000u]++;
		prev = t;
	}
	/* exponential gaps: mean 1/rate, standard deviation 1/rate, P(gap > mean) = 1/e */
	assert_true(fabs(sum / n - 1 / rate) / (1 / rate) < 0.01);
	assert_true(fabs(sqrt(sumsq / n - (sum / n) * (sum / n)) * rate - 1) < 0.02);
	assert_true(fabs(over_mean / n - exp(-1)) < 0.01);
	/* counts per window: Poisson, variance equal to the mean (dispersion index ~ 1) */
	{
		double m = 0, v = 0;
		unsigned w, nw = 1900;

		for (w = 0; w < nw; w++)
			m += win[w];
		m /= nw;
		for (w = 0; w < nw; w++)
			v += (win[w] - m) * (win[w] - m);
		v /= nw - 1;
		assert_true(fabs(m - 100) < 2);
		assert_true(v / m > 0.85 && v / m < 1.15);
	}
}

static void
test_poisson_seeded(void **state)
{
	struct ll_sched a, b, c;
	unsigned i, same = 1, differ = 0;

	ll_sched_init(&a, LL_ARRIVAL_POISSON, 50, 0, 7);
	ll_sched_init(&b, LL_ARRIVAL_POISSON, 50, 0, 7);
	ll_sched_init(&c, LL_ARRIVAL_POISSON, 50, 0, 8);
	for (i = 0; i < 100; i++) {
		uint64_t x = ll_sched_take(&a), y = ll_sched_take(&b), z = ll_sched_take(&c);

		same &= x == y;
		differ += x != z;
	}
	assert_true(same);
	assert_true(differ > 90);
}

static void
test_uniform_range(void **state)
{
	uint64_t x = 0;
	unsigned i;

	for (i = 0; i < 100000; i++) {
		double u = ll_sched_uniform(&x);

		assert_true(u > 0 && u <= 1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_rate),
		cmocka_unit_test(test_parse_arrival),
		cmocka_unit_test(test_constant_no_drift),
		cmocka_unit_test(test_poisson_statistics),
		cmocka_unit_test(test_poisson_seeded),
		cmocka_unit_test(test_uniform_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
