/* Unit tests for stats/offered.c: the offered-load arithmetic (rates from cumulative counters,
 * the mean run time, the smoothing) and the damped agent weight. Times are explicit (ns). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stats/offered.h"

#define MS 1000000ull
#define S  (1000 * MS)

/* Feeds a pool of `computes` processes for `secs` seconds, sampled every 500 ms: per second
 * `done` jobs of run_ms each completed and `refused` refused. Returns the last smoothed load. */
static double
feed(struct lg_offered *st, struct lg_offered_counts *c, uint64_t *t, int secs, uint64_t done,
    uint64_t refused, uint64_t run_ms, uint32_t computes)
{
	double load = 0;

	for (int i = 0; i < secs * 2; i++) {
		c->jobs += done / 2;
		c->run_ns += done / 2 * run_ms * MS;
		c->refused += refused / 2;
		*t += 500 * MS;
		load = lg_offered_step(st, c, *t, computes, LG_OFFERED_TAU_NS);
	}
	return load;
}

static void
test_first_sample_only_primes(void **state)
{
	struct lg_offered st;
	struct lg_offered_counts c = { 1000, 1000 * 100 * MS, 50 };

	(void)state;
	memset(&st, 0, sizeof(st));
	assert_true(lg_offered_step(&st, &c, 5 * S, 1, LG_OFFERED_TAU_NS) == 0.0);
	assert_int_equal(st.last_ns, 5 * S);
}

/* 10 jobs/s of 100 ms on one process: exactly full. */
static void
test_exactly_full_converges_to_one(void **state)
{
	struct lg_offered st;
	struct lg_offered_counts c = { 0, 0, 0 };
	uint64_t t = S;

	(void)state;
	memset(&st, 0, sizeof(st));
	lg_offered_step(&st, &c, t, 1, LG_OFFERED_TAU_NS);
	assert_float_equal(feed(&st, &c, &t, 30, 10, 0, 100, 1), 1.0, 0.01);
}

/* Saturated at three times capacity: 10 done and 20 refused per second on one process reads
 * 3.0, though utilisation is 1.0; two processes doing 20 done + 40 refused of 100 ms: 3.0. */
static void
test_keeps_rising_past_saturation(void **state)
{
	struct lg_offered st;
	struct lg_offered_counts c = { 0, 0, 0 };
	uint64_t t = S;

	(void)state;
	memset(&st, 0, sizeof(st));
	lg_offered_step(&st, &c, t, 1, LG_OFFERED_TAU_NS);
	assert_float_equal(feed(&st, &c, &t, 30, 10, 20, 100, 1), 3.0, 0.03);
	memset(&st, 0, sizeof(st));
	memset(&c, 0, sizeof(c));
	lg_offered_step(&st, &c, t, 2, LG_OFFERED_TAU_NS);
	assert_float_equal(feed(&st, &c, &t, 30, 20, 40, 100, 2), 3.0, 0.03);
}

/* The smoothing: a step from 1 to 3 shows about 63% of the change after one time constant. */
static void
test_smoothing_time_constant(void **state)
{
	struct lg_offered st;
	struct lg_offered_counts c = { 0, 0, 0 };
	uint64_t t = S;
	double l;

	(void)state;
	memset(&st, 0, sizeof(st));
	lg_offered_step(&st, &c, t, 1, LG_OFFERED_TAU_NS);
	feed(&st, &c, &t, 40, 10, 0, 100, 1);
	l = feed(&st, &c, &t, (int)(LG_OFFERED_TAU_NS / S), 10, 20, 100, 1);
	assert_float_equal(l, 1.0 + 2.0 * 0.632, 0.05);
}

/* No job completes in an interval (everything refused, or long jobs): the last known mean run
 * time still prices the refused ones; counters going backwards re-prime instead of wrapping. */
static void
test_mean_kept_and_reset_reprimes(void **state)
{
	struct lg_offered st;
	struct lg_offered_counts c = { 0, 0, 0 };
	uint64_t t = S;
	double l;

	(void)state;
	memset(&st, 0, sizeof(st));
	lg_offered_step(&st, &c, t, 1, LG_OFFERED_TAU_NS);
	feed(&st, &c, &t, 20, 10, 0, 100, 1);
	l = feed(&st, &c, &t, 30, 0, 20, 100, 1);
	assert_float_equal(l, 2.0, 0.05);
	c.jobs = c.run_ns = c.refused = 0;
	t += 500 * MS;
	assert_float_equal(lg_offered_step(&st, &c, t, 1, LG_OFFERED_TAU_NS), l, 1e-9);
}

/* A closed-loop client retrying its 503s at once: 10 done and 30,000 refused a second on one
 * process of 100 ms jobs read 3,001 before the ceiling; now LG_OFFERED_CEIL, while 2x (10 done,
 * 10 refused) still reads 2. Issue 39 section 3. */
static void
test_retry_storm_reads_at_most_the_ceiling(void **state)
{
	struct lg_offered st;
	struct lg_offered_counts c = { 0, 0, 0 };
	uint64_t t = S;

	(void)state;
	memset(&st, 0, sizeof(st));
	lg_offered_step(&st, &c, t, 1, LG_OFFERED_TAU_NS);
	assert_float_equal(feed(&st, &c, &t, 30, 10, 10, 100, 1), 2.0, 0.02);
	assert_float_equal(feed(&st, &c, &t, 30, 10, 30000, 100, 1), LG_OFFERED_CEIL, 0.01);
	assert_true(st.load <= LG_OFFERED_CEIL);
	assert_float_equal(feed(&st, &c, &t, 30, 10, 10, 100, 1), 2.0, 0.02);
}

static void
test_weight_curve(void **state)
{
	(void)state;
	assert_int_equal(lg_offered_weight(0.0, 0), 100);
	assert_int_equal(lg_offered_weight(1.0, 0), 100);
	assert_int_equal(lg_offered_weight(1.25, 0), 64);
	assert_int_equal(lg_offered_weight(2.0, 0), 25);
	assert_int_equal(lg_offered_weight(3.0, 0), 11);
	assert_int_equal(lg_offered_weight(1000.0, 0), LG_WEIGHT_MIN);
}

/* Hysteresis: a load wobbling between 1.95 and 2.05 keeps the weight it had; a real change
 * moves it; well below full it returns to 100. */
static void
test_weight_damped(void **state)
{
	int w = lg_offered_weight(2.0, 0);

	(void)state;
	for (int i = 0; i < 10; i++) {
		w = lg_offered_weight(i % 2 ? 1.95 : 2.05, w);
		assert_int_equal(w, 25);
	}
	w = lg_offered_weight(1.5, w);
	assert_int_equal(w, 44);
	w = lg_offered_weight(4.0, w);
	assert_int_equal(w, LG_WEIGHT_MIN);
	w = lg_offered_weight(0.95, w);
	assert_int_equal(w, 100);
	w = lg_offered_weight(1.05, w);
	assert_int_equal(w, 100);
	w = lg_offered_weight(0.5, 88);
	assert_int_equal(w, 100);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_sample_only_primes),
		cmocka_unit_test(test_exactly_full_converges_to_one),
		cmocka_unit_test(test_keeps_rising_past_saturation),
		cmocka_unit_test(test_smoothing_time_constant),
		cmocka_unit_test(test_mean_kept_and_reset_reprimes),
		cmocka_unit_test(test_retry_storm_reads_at_most_the_ceiling),
		cmocka_unit_test(test_weight_curve),
		cmocka_unit_test(test_weight_damped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
