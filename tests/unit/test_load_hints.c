/* Unit tests for load/hints.c: warnings that name the likely cause, on hand-made samples. A
 * cheap route slow at the same seconds as a heavy one (a shared wait); one slow at other
 * seconds (no warning); a templated route whose latency follows its key (work that grows
 * with the key), and one whose latency does not. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "load/hints.h"
#include "load/tmpl.h"
#include "tests/unit/load_rstats.h"

#define NS 600

struct fixture {
	struct ll_route routes[3];  /* 0: /ping cheap, 1: /heavy heavy, 2: /d?ms={rand:100} */
	struct ll_tmpl tmpl;
	struct ll_sample samples[NS];
	struct ll_engine e;
	struct ll_report r;
};

static int
setup(void **state)
{
	static struct fixture f;
	char err[128];

	memset(&f, 0, sizeof(f));
	f.routes[0].path = "/ping";
	f.routes[1].path = "/heavy";
	f.routes[1].heavy = 1;
	f.routes[2].path = "/d?ms={rand:100}";
	assert_int_equal(ll_tmpl_parse(&f.tmpl, f.routes[2].path, 1, 0, err, sizeof(err)), 0);
	f.routes[2].tmpl = &f.tmpl;
	routes_hists_init(f.routes, 3);
	put(&f.routes[0].st[LL_PH_IDLE], 200, 100, 0.5);
	f.e.routes = f.routes;
	f.e.nroutes = 3;
	f.e.samples = f.samples;
	f.r.e = &f.e;
	f.r.duration_s = 10;
	f.r.cheap_factor = 2;
	f.r.cheap_slack_ms = 1;
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	routes_hists_free(f->routes, 3);
	ll_tmpl_free(&f->tmpl);
	return 0;
}

static void
sample(struct fixture *f, double t_s, unsigned route, double ms, double value)
{
	assert_true(f->e.nsamples < NS);
	f->samples[f->e.nsamples++] = (struct ll_sample){ (uint64_t)(t_s * 1e9),
	                                                  (uint64_t)(ms * 1e6), 200, route, value };
}

/* ten seconds of /ping and /heavy, each slow in the seconds of its own list */
static void
run(struct fixture *f, const int *ping_slow, const int *heavy_slow)
{
	unsigned t, k;

	for (t = 0; t < 10; t++)
		for (k = 0; k < 10; k++) {
			sample(f, t + k / 10.0, 0, ping_slow[t] ? 300 : 0.6, NAN);
			sample(f, t + k / 10.0 + 0.05, 1, heavy_slow[t] ? 900 : 100, NAN);
		}
}

static void
test_shared_wait(void **state)
{
	static const int together[10] = { 0, 0, 1, 1, 0, 0, 0, 1, 0, 0 };
	static const int apart[10] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0 };
	struct fixture *f = *state;

	run(f, together, together);
	ll_hints_find(&f->r);
	assert_int_equal(f->r.nhints, 1);
	assert_string_equal(f->r.hints[0].kind, "shared_wait");
	assert_int_equal(f->r.hints[0].route, 0);
	assert_non_null(strstr(f->r.hints[0].text, "/ping: WARNING: its latency rose together "
	                                           "with /heavy's"));
	assert_non_null(strstr(f->r.hints[0].text, "shared pool or queue"));
	/* slow at other moments than the heavy route: no shared wait is suggested */
	f->e.nsamples = 0;
	run(f, apart, together);
	ll_hints_find(&f->r);
	assert_int_equal(f->r.nhints, 0);
}

static void
test_work_grows_with_key(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	for (i = 0; i < 100; i++)
		sample(f, i / 10.0, 2, 5 + (i * 37 % 100) * 0.9, i * 37 % 100);
	ll_hints_find(&f->r);
	assert_int_equal(f->r.nhints, 1);
	assert_string_equal(f->r.hints[0].kind, "work_grows_with_key");
	assert_int_equal(f->r.hints[0].route, 2);
	assert_non_null(strstr(f->r.hints[0].text, "grows with the value of {rand:100}"));
	/* the same keys answered in a time that does not follow them: nothing to say */
	f->e.nsamples = 0;
	for (i = 0; i < 100; i++)
		sample(f, i / 10.0, 2, 5 + (i % 7), i * 37 % 100);
	ll_hints_find(&f->r);
	assert_int_equal(f->r.nhints, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_shared_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_work_grows_with_key, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
