/* Unit tests for load/scrape.c: reading lagless's /metrics text, series summed over labels,
 * the loop-lag histogram summed over workers, and the lag between two scrapes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "load/scrape.h"

static const char text_a[] =
	"# HELP lagless_build_info Always 1.\n"
	"# TYPE lagless_build_info gauge\n"
	"lagless_build_info{version=\"0.1.0\"} 1\n"
	"lagless_compute_processes 3\n"
	"lagless_compute_busy 2\n"
	"lagless_inflight_requests 7\n"
	"lagless_queue_depth{pool=\"default\"} 4\n"
	"lagless_queue_depth{pool=\"images\"} 1\n"
	"lagless_queue_capacity 6\n"
	"lagless_job_slots 9\n"
	"lagless_jobs_rejected_total{reason=\"queue_full\"} 10\n"
	"lagless_jobs_rejected_total{reason=\"too_large\"} 2\n"
	"lagless_jobs_timed_out_total 0\n"
	"lagless_process_restarts_total{role=\"loop\",reason=\"crash\"} 1\n"
	"lagless_process_restarts_total{role=\"compute\",reason=\"deadline\"} 2\n"
	"lagless_job_run_seconds_sum{kind=\"heavy\"} 1.5\n"
	"lagless_job_run_seconds_count{kind=\"heavy\"} 10\n"
	"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 90\n"
	"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.01\"} 99\n"
	"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 100\n"
	"lagless_loop_lag_seconds_sum{worker=\"0\"} 0.2\n"
	"lagless_loop_lag_seconds_count{worker=\"0\"} 100\n"
	"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.001\"} 100\n"
	"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.01\"} 100\n"
	"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"+Inf\"} 100\n"
	"lagless_loop_lag_seconds_sum{worker=\"1\"} 0.05\n"
	"lagless_loop_lag_seconds_count{worker=\"1\"} 100";   /* no final newline */

static void
test_parse_lagless(void **state)
{
	struct ll_scrape s;

	assert_int_equal(ll_scrape_parse(&s, text_a, strlen(text_a)), 0);
	assert_true(s.lagless);
	assert_true(s.v[LL_SF_COMPUTE] == 3 && s.v[LL_SF_BUSY] == 2);
	assert_true(s.v[LL_SF_INFLIGHT] == 7);
	assert_true(s.v[LL_SF_QUEUE_DEPTH] == 5);     /* summed over pools */
	assert_true(s.v[LL_SF_REJECTED] == 12);       /* summed over reasons */
	assert_true(s.v[LL_SF_RESTARTS] == 3);
	assert_true(s.v[LL_SF_SLOTS] == 9);
	assert_true(s.seen[LL_SF_TIMED_OUT] && s.v[LL_SF_TIMED_OUT] == 0);
	assert_false(s.seen[LL_SF_CONNS]);
	assert_int_equal(s.nlag, 3);
	assert_true(s.lag_le[0] == 0.001 && s.lag_cum[0] == 190);
	assert_true(s.lag_le[1] == 0.01 && s.lag_cum[1] == 199);
	assert_true(isinf(s.lag_le[2]) && s.lag_cum[2] == 200);
	assert_true(fabs(s.lag_sum - 0.25) < 1e-12 && s.lag_count == 200);
	assert_true(s.v[LL_SF_RUN_SUM] == 1.5 && s.v[LL_SF_RUN_COUNT] == 10);
}

static void
test_not_prometheus(void **state)
{
	static const char html[] = "<html><title>404 Not Found</title>\n<p>nope 3</p>\n";
	static const char other[] = "# TYPE x counter\nhttp_requests_total{code=\"200\"} 5 1700\n";
	struct ll_scrape s;

	assert_int_equal(ll_scrape_parse(&s, html, strlen(html)), -1);
	assert_false(s.lagless);
	/* another server's Prometheus text: parsed (with a timestamp), but not lagless */
	assert_int_equal(ll_scrape_parse(&s, other, strlen(other)), 0);
	assert_false(s.lagless);
}

static void
test_lag_delta(void **state)
{
	static const char text_b[] =
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 140\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.01\"} 149\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 150\n"
		"lagless_loop_lag_seconds_sum{worker=\"0\"} 0.3\n"
		"lagless_loop_lag_seconds_count{worker=\"0\"} 150\n"
		"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.001\"} 145\n"
		"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.01\"} 150\n"
		"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"+Inf\"} 150\n"
		"lagless_loop_lag_seconds_sum{worker=\"1\"} 0.1\n"
		"lagless_loop_lag_seconds_count{worker=\"1\"} 150\n";
	static const char text_c[] =
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 140\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.01\"} 149\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 151\n"
		"lagless_loop_lag_seconds_sum{worker=\"0\"} 2.3\n"
		"lagless_loop_lag_seconds_count{worker=\"0\"} 151\n";
	struct ll_scrape a, b, c;
	double mean, max;

	assert_int_equal(ll_scrape_parse(&a, text_a, strlen(text_a)), 0);
	assert_int_equal(ll_scrape_parse(&b, text_b, strlen(text_b)), 0);
	/* 100 new samples, 0.15 s more: mean 1.5 ms; the highest bucket that grew is le=0.01 */
	ll_scrape_lag_delta(&a, &b, &mean, &max);
	assert_true(fabs(mean - 0.0015) < 1e-9);
	assert_true(max == 0.01);
	/* a sample in +Inf reports the last finite bound */
	assert_int_equal(ll_scrape_parse(&c, text_c, strlen(text_c)), 0);
	b.v[0] = 0;
	ll_scrape_lag_delta(&b, &c, &mean, &max);   /* worker 1 vanished: counts went down */
	assert_true(max == 0 && mean == 0);
	assert_int_equal(ll_scrape_parse(&b, text_c, strlen(text_c)), 0);
	c.lag_cum[2] += 1;
	c.lag_count += 1;
	c.lag_sum += 0.5;
	ll_scrape_lag_delta(&b, &c, &mean, &max);
	assert_true(max == 0.01);
	assert_true(fabs(mean - 0.5) < 1e-9);
	/* no new samples */
	ll_scrape_lag_delta(&a, &a, &mean, &max);
	assert_true(mean == 0 && max == 0);
}

/* The interval's quantiles from the buckets' counts: 95 of 100 new samples at or below 1 ms
 * read as about 0.5 ms at p50, where the highest bucket bound alone would say 10 ms. */
static void
test_lag_quantile(void **state)
{
	static const char text_b[] =
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 140\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.01\"} 149\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 150\n"
		"lagless_loop_lag_seconds_sum{worker=\"0\"} 0.3\n"
		"lagless_loop_lag_seconds_count{worker=\"0\"} 150\n"
		"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.001\"} 145\n"
		"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.01\"} 150\n"
		"lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"+Inf\"} 150\n"
		"lagless_loop_lag_seconds_sum{worker=\"1\"} 0.1\n"
		"lagless_loop_lag_seconds_count{worker=\"1\"} 150\n";
	struct ll_scrape a, b;

	assert_int_equal(ll_scrape_parse(&a, text_a, strlen(text_a)), 0);
	assert_int_equal(ll_scrape_parse(&b, text_b, strlen(text_b)), 0);
	/* per bound, samples gained: <=1 ms 95, <=10 ms 100, +Inf 100 */
	assert_true(fabs(ll_scrape_lag_quantile(&a, &b, 0.5) - 0.001 * 50 / 95) < 1e-12);
	assert_true(fabs(ll_scrape_lag_quantile(&a, &b, 0.99) - (0.001 + 0.009 * 4 / 5)) < 1e-12);
	assert_true(fabs(ll_scrape_lag_quantile(&a, &b, 1.0) - 0.01) < 1e-12);
	assert_true(ll_scrape_lag_quantile(&a, &a, 0.5) == 0);
}

/* Named pools are kept apart: a saturated pool beside an idle one is seen as such. */
static void
test_pools(void **state)
{
	static const char text[] =
		"lagless_build_info{version=\"0.1.0\"} 1\n"
		"lagless_pool_processes{pool=\"batch\",state=\"idle\"} 0\n"
		"lagless_pool_processes{pool=\"batch\",state=\"active\"} 2\n"
		"lagless_pool_processes{pool=\"fast\",state=\"idle\"} 2\n"
		"lagless_pool_processes{pool=\"fast\",state=\"active\"} 0\n"
		"lagless_pool_processes_target{pool=\"batch\"} 2\n"
		"lagless_pool_queue_depth{pool=\"batch\"} 4\n"
		"lagless_pool_queue_depth{pool=\"fast\"} 0\n"
		"lagless_pool_queue_capacity{pool=\"batch\"} 4\n"
		"lagless_pool_full_total{pool=\"batch\"} 17\n"
		"lagless_compute_busy 2\n";
	const struct ll_scrape_pool *p;
	struct ll_scrape s;

	assert_int_equal(ll_scrape_parse(&s, text, strlen(text)), 0);
	assert_int_equal(s.npools, 2);
	assert_non_null(p = ll_scrape_pool(&s, "batch"));
	assert_true(p->v[LL_PF_ACTIVE] == 2 && p->v[LL_PF_PROCS] == 2);
	assert_true(p->v[LL_PF_DEPTH] == 4 && p->v[LL_PF_QCAP] == 4 && p->v[LL_PF_FULL] == 17);
	assert_non_null(p = ll_scrape_pool(&s, "fast"));
	assert_true(p->v[LL_PF_ACTIVE] == 0 && p->v[LL_PF_PROCS] == 2 && p->v[LL_PF_FULL] == 0);
	assert_null(ll_scrape_pool(&s, "other"));
	assert_true(s.v[LL_SF_BUSY] == 2);
}

/* Two replicas' texts summed as one scrape: counters, gauges, lag buckets and pools add up,
 * and the start times say which servers answered, so that a scrape of other servers (a load
 * balancer's choice, or a restart) is never subtracted from this one. */
static void
test_replicas_summed_and_told_apart(void **state)
{
	static const char r1[] =
		"lagless_build_info{version=\"0.1.0\"} 1\n"
		"lagless_start_time_seconds 1700000000.125\n"
		"lagless_compute_processes 1\n"
		"lagless_jobs_rejected_total{reason=\"queue_full\"} 10\n"
		"lagless_pool_queue_depth{pool=\"batch\"} 2\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 90\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 100\n"
		"lagless_loop_lag_seconds_sum{worker=\"0\"} 0.2\n"
		"lagless_loop_lag_seconds_count{worker=\"0\"} 100\n";
	static const char r2[] =
		"lagless_build_info{version=\"0.1.0\"} 1\n"
		"lagless_start_time_seconds 1700000001.5\n"
		"lagless_compute_processes 2\n"
		"lagless_jobs_rejected_total{reason=\"queue_full\"} 5\n"
		"lagless_pool_queue_depth{pool=\"batch\"} 1\n"
		"lagless_pool_queue_depth{pool=\"fast\"} 3\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 10\n"
		"lagless_loop_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 50\n"
		"lagless_loop_lag_seconds_sum{worker=\"0\"} 1\n"
		"lagless_loop_lag_seconds_count{worker=\"0\"} 50\n";
	struct ll_scrape a, b, sum, again;

	assert_int_equal(ll_scrape_parse(&a, r1, strlen(r1)), 0);
	assert_int_equal(ll_scrape_parse(&b, r2, strlen(r2)), 0);
	assert_int_equal(a.nservers, 1);
	assert_true(a.start_s[0] == 1700000000.125);
	/* a scrape of replica 2 after one of replica 1: not the same server, not subtracted */
	assert_false(ll_scrape_same(&a, &b));
	assert_true(ll_scrape_same(&a, &a));
	memset(&sum, 0, sizeof(sum));
	ll_scrape_add(&sum, &a);
	ll_scrape_add(&sum, &b);
	assert_true(sum.lagless);
	assert_true(sum.v[LL_SF_COMPUTE] == 3 && sum.v[LL_SF_REJECTED] == 15);
	assert_int_equal(sum.nlag, 2);
	assert_true(sum.lag_cum[0] == 100 && sum.lag_cum[1] == 150 && sum.lag_count == 150);
	assert_true(fabs(sum.lag_sum - 1.2) < 1e-12);
	assert_int_equal(sum.npools, 2);
	assert_true(ll_scrape_pool(&sum, "batch")->v[LL_PF_DEPTH] == 3);
	assert_true(ll_scrape_pool(&sum, "fast")->v[LL_PF_DEPTH] == 3);
	assert_int_equal(sum.nservers, 2);
	/* the same two replicas again: comparable; in the other order or one alone: not */
	memset(&again, 0, sizeof(again));
	ll_scrape_add(&again, &a);
	ll_scrape_add(&again, &b);
	assert_true(ll_scrape_same(&sum, &again));
	assert_false(ll_scrape_same(&sum, &a));
	memset(&again, 0, sizeof(again));
	ll_scrape_add(&again, &b);
	ll_scrape_add(&again, &a);
	assert_false(ll_scrape_same(&sum, &again));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_lagless),
		cmocka_unit_test(test_not_prometheus),
		cmocka_unit_test(test_lag_delta),
		cmocka_unit_test(test_lag_quantile),
		cmocka_unit_test(test_pools),
		cmocka_unit_test(test_replicas_summed_and_told_apart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
