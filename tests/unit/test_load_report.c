/* Unit tests for load/report.c: the verdict rules of lagless-load on hand-made results (cheap
 * p99 against idle, fast refusal, queued-not-refused, the pool at capacity, timeouts). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "load/report.h"
#include "tests/unit/load_rstats.h"

struct fixture {
	struct ll_route routes[2];  /* 0: /ping cheap, 1: /heavy heavy */
	struct ll_engine e;
	struct ll_report r;
};

static int
setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	f.routes[0].path = "/ping";
	f.routes[0].rps = 100;
	f.routes[1].path = "/heavy";
	f.routes[1].heavy = 1;
	f.routes[1].rps = 20;
	f.routes[1].capacity_rps = 10;
	routes_hists_init(f.routes, 2);
	f.e.routes = f.routes;
	f.e.nroutes = 2;
	f.e.timeout_s = 10;
	f.r.e = &f.e;
	f.r.url = "http://test";
	f.r.duration_s = 10;
	f.r.cheap_factor = 2;
	f.r.cheap_slack_ms = 1;
	f.r.fast_ms = 10;
	f.r.capacity_share = 0.8;
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	routes_hists_free(f->routes, 2);
	return 0;
}

/* A well-behaved run: cheap p99 1.5 ms against 0.5 ms idle, 503s at 1 ms, 2xx at capacity. */
static void
good_run(struct fixture *f)
{
	put(&f->routes[0].st[LL_PH_IDLE], 200, 200, 0.5);
	put(&f->routes[0].st[LL_PH_RUN], 200, 1000, 1.5);
	put(&f->routes[1].st[LL_PH_RUN], 200, 95, 150);
	put(&f->routes[1].st[LL_PH_RUN], 503, 105, 1);
	f->routes[1].st[LL_PH_RUN].ok_in_time = 95;
}

static void
test_all_pass(void **state)
{
	struct fixture *f = *state;

	good_run(f);
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CHEAP].state, LL_V_PASS);
	assert_int_equal(f->r.v[LL_P_REFUSAL].state, LL_V_PASS);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_PASS);
	assert_int_equal(f->r.v[LL_P_TIMEOUTS].state, LL_V_PASS);
	assert_true(ll_report_ok(&f->r));
	assert_non_null(strstr(f->r.v[LL_P_TIMEOUTS].why, "not lagless"));
}

static void
test_cheap_slow_fails(void **state)
{
	struct fixture *f = *state;

	good_run(f);
	/* 2 % of /ping at 5 ms: p99 5 ms > 2 x 0.5 + 1 */
	put(&f->routes[0].st[LL_PH_RUN], 200, 21, 5);
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CHEAP].state, LL_V_FAIL);
	assert_false(ll_report_ok(&f->r));
}

static void
test_slow_refusal_fails(void **state)
{
	struct fixture *f = *state;

	good_run(f);
	put(&f->routes[1].st[LL_PH_RUN], 503, 10, 80);   /* > 1 % of the 503s at 80 ms */
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_REFUSAL].state, LL_V_FAIL);
}

static void
test_queued_not_refused(void **state)
{
	struct fixture *f = *state;

	/* 2x offered, no 503, only the capacity's worth answered in time: queued */
	put(&f->routes[1].st[LL_PH_RUN], 200, 200, 3000);
	f->routes[1].st[LL_PH_RUN].ok_in_time = 100;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_REFUSAL].state, LL_V_FAIL);
	assert_non_null(strstr(f->r.v[LL_P_REFUSAL].why, "queued, not refused"));
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_PASS);
	/* the cheap route has no idle phase: that verdict is n/a, not a pass */
	assert_int_equal(f->r.v[LL_P_CHEAP].state, LL_V_NA);
}

static void
test_kept_up_is_na(void **state)
{
	struct fixture *f = *state;

	/* no 503 but all 200 answered at the offered rate: the capacity was underestimated */
	put(&f->routes[1].st[LL_PH_RUN], 200, 200, 100);
	f->routes[1].st[LL_PH_RUN].ok_in_time = 200;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_REFUSAL].state, LL_V_NA);
	assert_non_null(strstr(f->r.v[LL_P_REFUSAL].why, "offer more"));
}

static void
test_pool_idle_fails(void **state)
{
	struct fixture *f = *state;

	good_run(f);
	f->routes[1].st[LL_PH_RUN].ok_in_time = 50;   /* 5/s against a capacity of 10/s */
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_FAIL);
	/* below the capacity the promise is not tested */
	f->routes[1].rps = 5;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_NA);
}

/* Against lagless the pool's busy gauge decides: a slow machine completing fewer jobs still
 * passes when the compute processes never idled, and an idle pool fails at any throughput. */
static void
test_pool_busy_by_gauge(void **state)
{
	struct fixture *f = *state;
	struct ll_point pts[4];
	unsigned i;

	good_run(f);
	f->routes[1].st[LL_PH_RUN].ok_in_time = 30;   /* 3/s against a capacity of 10/s */
	memset(pts, 0, sizeof(pts));
	for (i = 0; i < 4; i++) {
		pts[i].m.v[LL_SF_COMPUTE] = 2;
		pts[i].m.v[LL_SF_BUSY] = 2;
	}
	f->e.points = pts;
	f->e.npoints = 4;
	f->r.lagless = 1;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_PASS);
	assert_non_null(strstr(f->r.v[LL_P_CAPACITY].why, "busy 100 %"));
	for (i = 0; i < 4; i++)
		pts[i].m.v[LL_SF_BUSY] = i == 0;   /* busy 1 of 8 samples */
	f->routes[1].st[LL_PH_RUN].ok_in_time = 100;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_FAIL);
	f->e.points = NULL;
	f->e.npoints = 0;
}

static void
set_pool(struct ll_scrape *m, unsigned k, const char *name, double active, double procs,
         double depth, double qcap, double full)
{
	strcpy(m->pools[k].name, name);
	m->pools[k].v[LL_PF_ACTIVE] = active;
	m->pools[k].v[LL_PF_PROCS] = procs;
	m->pools[k].v[LL_PF_DEPTH] = depth;
	m->pools[k].v[LL_PF_QCAP] = qcap;
	m->pools[k].v[LL_PF_FULL] = full;
	if (m->npools < k + 1)
		m->npools = k + 1;
}

/* Named pools are judged one by one: the flooded batch pool busy 100 % beside an idle fast
 * pool passes (averaged over every compute process it read 50 % and failed); the flooded pool
 * idling half the time fails, whatever the other pool does. */
static void
test_pool_per_pool(void **state)
{
	struct fixture *f = *state;
	struct ll_point pts[4];
	unsigned i;

	good_run(f);
	memset(pts, 0, sizeof(pts));
	for (i = 0; i < 4; i++) {
		pts[i].m.v[LL_SF_COMPUTE] = 4;
		pts[i].m.v[LL_SF_BUSY] = 2;
		set_pool(&pts[i].m, 0, "batch", 2, 2, 4, 4, 10.0 * i);
		set_pool(&pts[i].m, 1, "fast", 0, 2, 0, 4, 0);
	}
	f->e.points = pts;
	f->e.npoints = 4;
	f->r.lagless = f->r.have_scrapes = 1;
	f->r.before = pts[0].m;
	f->r.after = pts[3].m;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_PASS);
	assert_non_null(strstr(f->r.v[LL_P_CAPACITY].why, "pool batch: flooded"));
	assert_non_null(strstr(f->r.v[LL_P_CAPACITY].why, "pool fast: busy 0 %, not flooded"));
	for (i = 0; i < 4; i++)
		pts[i].m.pools[0].v[LL_PF_ACTIVE] = i % 2;   /* batch busy 1 of 2, half the time */
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_FAIL);
	/* no pool flooded and the offer kept up with: the capacity was underestimated, n/a */
	for (i = 0; i < 4; i++) {
		pts[i].m.pools[0].v[LL_PF_DEPTH] = 0;
		pts[i].m.pools[0].v[LL_PF_FULL] = 0;
	}
	f->r.before = pts[0].m;
	f->r.after = pts[3].m;
	f->routes[1].st[LL_PH_RUN].ok_in_time = 200;     /* 20/s: all of the offer */
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_NA);
	assert_non_null(strstr(f->r.v[LL_P_CAPACITY].why, "underestimated"));
	/* ... and not kept up with: the work waited elsewhere (on the loop); the busiest pool,
	 * busy half the time, fails */
	f->routes[1].st[LL_PH_RUN].ok_in_time = 95;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_CAPACITY].state, LL_V_FAIL);
	f->e.points = NULL;
	f->e.npoints = 0;
}

/* The run's 2xx rate against the calibration: more than 20 % off warns, within does not; a
 * route not flooded or not calibrated is not compared. */
static void
test_calibration_off(void **state)
{
	struct fixture *f = *state;
	struct ll_route *h = &f->routes[1];
	char buf[128];

	good_run(f);
	h->capacity_windows = 4;
	h->st[LL_PH_RUN].ok_in_time = 95;                 /* 9.5/s against 10/s */
	assert_true(ll_report_calibration_off(&f->r, h) == 0);
	h->st[LL_PH_RUN].ok_in_time = 70;                 /* 7/s: 30 % off */
	assert_true(fabs(ll_report_calibration_off(&f->r, h) - 0.7) < 1e-9);
	h->st[LL_PH_RUN].ok_in_time = 130;                /* 13/s: 30 % off the other way */
	assert_true(fabs(ll_report_calibration_off(&f->r, h) - 1.3) < 1e-9);
	h->rps = 5;                                       /* below the capacity: not compared */
	assert_true(ll_report_calibration_off(&f->r, h) == 0);
	h->rps = 20;
	h->capacity_windows = 0;                          /* --capacity given: nothing to compare */
	assert_true(ll_report_calibration_off(&f->r, h) == 0);
	assert_string_equal(ll_report_statuses(&h->st[LL_PH_RUN], buf, sizeof(buf)),
	                    "200 x 95, 503 x 105");
}

static void
test_timeouts_fail(void **state)
{
	struct fixture *f = *state;

	good_run(f);
	put(&f->routes[1].st[LL_PH_RUN], LL_LERR_TIMEOUT, 1, 10000);
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_TIMEOUTS].state, LL_V_FAIL);
	teardown(state);
	setup(state);
	f = *state;
	good_run(f);
	put(&f->routes[1].st[LL_PH_RUN], 504, 1, 30000);
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_TIMEOUTS].state, LL_V_FAIL);
	/* against lagless, a job past its deadline on the server fails it too */
	teardown(state);
	setup(state);
	f = *state;
	good_run(f);
	f->r.lagless = f->r.have_scrapes = 1;
	f->r.after.v[LL_SF_TIMED_OUT] = 2;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_TIMEOUTS].state, LL_V_FAIL);
}

/* A reload mid-run restarts the server's counters: a decrease is a restart from 0, so the
 * increase is the new value (Prometheus' rate() rule), never a negative count. */
static void
test_counter_reset_mid_run(void **state)
{
	struct fixture *f = *state;
	struct ll_point pts[2];

	good_run(f);
	memset(pts, 0, sizeof(pts));
	f->r.lagless = f->r.have_scrapes = 1;
	f->r.before.v[LL_SF_TIMED_OUT] = 5;    /* from before the run */
	f->r.before.v[LL_SF_REJECTED] = 5;
	pts[0].m.v[LL_SF_REJECTED] = 7;         /* +2 */
	pts[1].m.v[LL_SF_REJECTED] = 1;         /* reload: +1 since it */
	pts[0].m.seen[LL_SF_REJECTED] = pts[1].m.seen[LL_SF_REJECTED] = 1;
	f->r.after.v[LL_SF_REJECTED] = 2;       /* +1 */
	f->r.after.v[LL_SF_TIMED_OUT] = 0;      /* reset, no deadline missed since */
	f->e.points = pts;
	f->e.npoints = 2;
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_TIMEOUTS].state, LL_V_PASS);
	assert_true(ll_report_counter_increase(&f->r, LL_SF_REJECTED) == 4);
	assert_true(ll_report_counter_increase(&f->r, LL_SF_TIMED_OUT) == 0);
	f->r.after.v[LL_SF_TIMED_OUT] = 3;      /* three since the reset */
	ll_report_judge(&f->r);
	assert_int_equal(f->r.v[LL_P_TIMEOUTS].state, LL_V_FAIL);
	assert_true(ll_counter_increase(10, 12) == 2 && ll_counter_increase(10, 4) == 4);
	f->e.points = NULL;
	f->e.npoints = 0;
}

/* Behind a load balancer the scrapes alternate between replicas: a pair of scrapes of
 * different servers (their start times differ) adds nothing, where one replica's counter
 * minus the other's would add 43 rejections that never happened; the report says so once. */
static void
test_counter_across_replicas(void **state)
{
	struct fixture *f = *state;
	struct ll_point pts[2];
	char *text = NULL;
	size_t len = 0;
	FILE *m;

	good_run(f);
	memset(pts, 0, sizeof(pts));
	f->r.lagless = f->r.have_scrapes = 1;
	f->r.before.nservers = pts[0].m.nservers = pts[1].m.nservers = f->r.after.nservers = 1;
	f->r.before.start_s[0] = pts[0].m.start_s[0] = 100;       /* replica A */
	pts[1].m.start_s[0] = f->r.after.start_s[0] = 200;         /* replica B */
	f->r.before.v[LL_SF_REJECTED] = 5;
	pts[0].m.v[LL_SF_REJECTED] = 7;          /* A: +2 */
	pts[1].m.v[LL_SF_REJECTED] = 50;         /* B: not comparable with A */
	f->r.after.v[LL_SF_REJECTED] = 52;       /* B: +2 */
	pts[0].m.seen[LL_SF_REJECTED] = pts[1].m.seen[LL_SF_REJECTED] = 1;
	f->e.points = pts;
	f->e.npoints = 2;
	f->e.servers_changed = 1;                /* the engine saw A then B */
	assert_true(ll_report_counter_increase(&f->r, LL_SF_REJECTED) == 4);
	assert_int_equal(ll_report_servers_changed(&f->r), 2);   /* and before A, after B */
	ll_report_judge(&f->r);
	assert_non_null(m = open_memstream(&text, &len));
	ll_report_text(m, &f->r);
	fclose(m);
	assert_non_null(strstr(text, "different servers"));
	assert_null(strstr(strstr(text, "different servers") + 1, "different servers"));
	free(text);
	f->e.points = NULL;
	f->e.npoints = 0;
	f->e.servers_changed = 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_all_pass, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cheap_slow_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_refusal_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queued_not_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_up_is_na, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_idle_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_busy_by_gauge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_per_pool, setup, teardown),
		cmocka_unit_test_setup_teardown(test_calibration_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeouts_fail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counter_reset_mid_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counter_across_replicas, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
