/* Unit tests for shm/stats.c: histogram buckets, the status-code table, the loop-lag windows
 * and their quantiles, and one writer / another reader across a real fork. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/arena.h"
#include "shm/stats.h"

#define MS 1000000ull
#define S  1000000000ull

static struct lg_proc_page page;

static int
reset(void **state)
{
	memset(&page, 0, sizeof(page));
	return 0;
}

static uint64_t
bucket(const struct lg_hist *h, unsigned i)
{
	return atomic_load(&h->bucket[i]);
}

static void
test_bounds_ascending(void **state)
{
	assert_int_equal(lg_stats_lag_bounds[0], 50000);             /* 50 us */
	assert_int_equal(lg_stats_lag_bounds[LG_LAG_BOUNDS - 1], 5 * S); /* 5 s */
	for (unsigned i = 1; i < LG_LAG_BOUNDS; i++)
		assert_true(lg_stats_lag_bounds[i] > lg_stats_lag_bounds[i - 1]);
	for (unsigned i = 1; i < LG_STATS_BOUNDS; i++)
		assert_true(lg_stats_time_bounds[i] > lg_stats_time_bounds[i - 1]);
}

/* Prometheus buckets are "less than or equal": a value on a bound belongs to that bucket. */
static void
test_hist_edges(void **state)
{
	struct lg_hist *h = &page.lag;
	const uint64_t *b = lg_stats_lag_bounds;

	lg_hist_observe(h, b, LG_LAG_BOUNDS, 0);
	lg_hist_observe(h, b, LG_LAG_BOUNDS, b[0]);
	lg_hist_observe(h, b, LG_LAG_BOUNDS, b[0] + 1);
	lg_hist_observe(h, b, LG_LAG_BOUNDS, b[LG_LAG_BOUNDS - 1]);
	lg_hist_observe(h, b, LG_LAG_BOUNDS, b[LG_LAG_BOUNDS - 1] + 1);
	lg_hist_observe(h, b, LG_LAG_BOUNDS, UINT64_MAX / 4);
	assert_int_equal(bucket(h, 0), 2);
	assert_int_equal(bucket(h, 1), 1);
	assert_int_equal(bucket(h, LG_LAG_BOUNDS - 1), 1);
	assert_int_equal(bucket(h, LG_LAG_BOUNDS), 2); /* +Inf */
	assert_int_equal(lg_hist_count(h, LG_LAG_BOUNDS), 6);
	assert_int_equal(atomic_load(&h->sum_ns), 0 + b[0] + b[0] + 1 + 2 * b[LG_LAG_BOUNDS - 1] + 1 +
	    UINT64_MAX / 4);
}

static void
test_codes(void **state)
{
	static const int sent[] = { 200, 400, 404, 405, 413, 414, 431, 500, 502, 503, 504, 505 };

	for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++) {
		unsigned k = lg_stats_code_index(sent[i]);

		assert_true(k < LG_STATS_CODES - 1);
		assert_int_equal(lg_stats_code_at(k), sent[i]);
	}
	assert_int_equal(lg_stats_code_index(299), LG_STATS_CODES - 1);
	assert_int_equal(lg_stats_code_index(0), LG_STATS_CODES - 1);
	assert_int_equal(lg_stats_code_index(-1), LG_STATS_CODES - 1);
	assert_int_equal(lg_stats_code_at(LG_STATS_CODES - 1), 0);
	assert_int_equal(lg_stats_code_at(1000), 0);
	/* every column is distinct */
	for (unsigned i = 0; i < LG_STATS_CODES - 1; i++)
		assert_int_equal(lg_stats_code_index(lg_stats_code_at(i)), i);
}

static void
test_lag_recent_quantiles(void **state)
{
	struct lg_lag_summary s;
	uint64_t t = 1000 * S; /* inside one 10 s window */

	lg_stats_lag_recent(&page, t, &s);
	assert_int_equal(s.count, 0);
	assert_true(s.p50 == 0 && s.p99 == 0 && s.max == 0);
	for (int i = 0; i < 98; i++)
		lg_stats_lag(&page, t + (uint64_t)i * MS, 200000);     /* 200 us: (100, 250] us */
	lg_stats_lag(&page, t + 100 * MS, 30 * MS);                /* (25, 50] ms */
	lg_stats_lag(&page, t + 101 * MS, 700 * MS);               /* (500, 1000] ms */
	lg_stats_lag_recent(&page, t + 2 * S, &s);
	assert_int_equal(s.count, 100);
	assert_true(s.p50 > 100e-6 && s.p50 <= 250e-6);
	assert_true(s.p99 > 25e-3 && s.p99 <= 50e-3);
	assert_true(s.max > 0.699 && s.max < 0.701);
	assert_int_equal(lg_hist_count(&page.lag, LG_LAG_BOUNDS), 100);
}

/* Windows older than a minute drop out; a reused window slot starts from zero. */
static void
test_lag_windows_age_out(void **state)
{
	struct lg_lag_summary s;
	uint64_t t0 = 5000 * S;

	lg_stats_lag(&page, t0, 2 * S);
	lg_stats_lag(&page, t0 + 30 * S, 1 * MS);
	lg_stats_lag_recent(&page, t0 + 31 * S, &s);
	assert_int_equal(s.count, 2);
	assert_true(s.max >= 2.0);
	lg_stats_lag_recent(&page, t0 + 65 * S, &s);  /* the 2 s sample is over a minute old */
	assert_int_equal(s.count, 1);
	assert_true(s.max < 0.0011);
	/* 60 s after t0 the same window slot is reused: the old 2 s sample must be gone */
	lg_stats_lag(&page, t0 + 60 * S, 100000);
	lg_stats_lag_recent(&page, t0 + 61 * S, &s);
	assert_int_equal(s.count, 2);
	assert_true(s.max < 0.0011);
	lg_stats_lag_recent(&page, t0 + 200 * S, &s);
	assert_int_equal(s.count, 0);
	/* the cumulative histogram keeps everything */
	assert_int_equal(lg_hist_count(&page.lag, LG_LAG_BOUNDS), 3);
}

/* A child process writes its page in a shared arena; the parent reads the same numbers. */
static void
test_shared_writer_reader(void **state)
{
	struct lg_arena a;
	pid_t pid;
	int st;

	assert_int_equal(lg_arena_create(&a, 1, 2, LG_PAGE, LG_PAGE), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lg_route_stats *rs = lg_arena_route_stats(&a, 1, 2);

		for (int i = 0; i < 1000; i++) {
			lg_stats_add(&rs->responses[lg_stats_code_index(404)], 1);
			lg_hist_observe(&rs->duration, lg_stats_time_bounds, LG_STATS_BOUNDS, MS);
		}
		lg_stats_add(&a.master->restarts[1][LG_RESTART_CRASH], 7);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct lg_route_stats *seen = lg_arena_route_stats(&a, 1, 2);
	assert_int_equal(atomic_load(&seen->responses[lg_stats_code_index(404)]), 1000);
	assert_int_equal(lg_hist_count(&seen->duration, LG_STATS_BOUNDS), 1000);
	assert_int_equal(atomic_load(&seen->duration.sum_ns), 1000 * MS);
	assert_int_equal(atomic_load(&a.master->restarts[1][LG_RESTART_CRASH]), 7);
	assert_int_equal(atomic_load(&a.procs[0].requests), 0); /* the other page untouched */
	lg_arena_destroy(&a);
}

/* A kind's quarantine is read from the master page's kinds table: unknown kinds and ended
 * quarantines read 0, a running one the ns left; reason labels come from one table. */
static void
test_quarantine_left(void **state)
{
	struct lg_arena a;

	assert_int_equal(lg_arena_create(&a, 1, 1, LG_PAGE, LG_PAGE), 0);
	assert_null(lg_stats_kind_health(a.master, 2, 0));
	assert_int_equal(lg_stats_quarantine_left(a.master, 2, 0, 1000), 0);
	atomic_store(&a.master->kinds[0].kind, 64);
	a.master->kinds[1].route = 3;
	atomic_store(&a.master->kinds[1].kind, 2);
	atomic_store(&a.master->kinds[1].until_ns, 5000);
	assert_ptr_equal(lg_stats_kind_health(a.master, 2, 3), &a.master->kinds[1]);
	assert_int_equal(lg_stats_quarantine_left(a.master, 2, 3, 1000), 4000);
	assert_int_equal(lg_stats_quarantine_left(a.master, 2, 3, 5000), 0);
	assert_int_equal(lg_stats_quarantine_left(a.master, 64, 0, 1000), 0);
	assert_int_equal(lg_stats_quarantine_left(a.master, 0, 0, 1000), 0);
	/* by route as well as kind (module ABI 1.2): the same kind on another route runs */
	assert_null(lg_stats_kind_health(a.master, 2, 4));
	assert_int_equal(lg_stats_quarantine_left(a.master, 2, 4, 1000), 0);
	assert_string_equal(lg_stats_restart_reason(LG_RESTART_CLIENT_GONE), "client_gone");
	assert_string_equal(lg_stats_restart_reason(LG_RESTART_REASONS), "?");
	for (unsigned r = 0; r < LG_RESTART_REASONS; r++)
		assert_non_null(lg_stats_restart_reason(r));
	lg_arena_destroy(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_bounds_ascending, reset),
		cmocka_unit_test_setup(test_hist_edges, reset),
		cmocka_unit_test_setup(test_codes, reset),
		cmocka_unit_test_setup(test_lag_recent_quantiles, reset),
		cmocka_unit_test_setup(test_lag_windows_age_out, reset),
		cmocka_unit_test_setup(test_shared_writer_reader, reset),
		cmocka_unit_test_setup(test_quarantine_left, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
