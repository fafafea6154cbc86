/* Shared by the unit tests that build lagless-load results by hand (test_load_report,
 * test_load_json): recording results into a route's figures, and the histograms of routes
 * made and freed. Include after <cmocka.h>. */
#ifndef LL_TESTS_LOAD_RSTATS_H
#define LL_TESTS_LOAD_RSTATS_H

#include "load/engine.h"

/* n results of code, each ms milliseconds, into s (codes table kept in step with engine.c) */
static inline void
put(struct ll_rstats *s, int code, unsigned n, double ms)
{
	unsigned i, k;

	for (k = 0; k < s->ncodes && s->codes[k] != code; k++)
		;
	if (k == s->ncodes) {
		assert_int_equal(ll_hist_init(&s->by_code[k]), 0);
		s->codes[s->ncodes++] = code;
	}
	for (i = 0; i < n; i++) {
		ll_hist_record(&s->by_code[k], (uint64_t)(ms * 1e6));
		ll_hist_record(&s->all, (uint64_t)(ms * 1e6));
	}
}

/* every phase's all and send_lag histograms of routes[0..n) (zeroed) made */
static inline void
routes_hists_init(struct ll_route *routes, unsigned n)
{
	unsigned i, ph;

	for (i = 0; i < n; i++)
		for (ph = 0; ph < LL_PH_COUNT; ph++) {
			assert_int_equal(ll_hist_init(&routes[i].st[ph].all), 0);
			assert_int_equal(ll_hist_init(&routes[i].st[ph].send_lag), 0);
		}
}

/* every histogram of routes[0..n) freed, the per-status ones put made among them */
static inline void
routes_hists_free(struct ll_route *routes, unsigned n)
{
	unsigned i, ph, k;

	for (i = 0; i < n; i++)
		for (ph = 0; ph < LL_PH_COUNT; ph++) {
			struct ll_rstats *s = &routes[i].st[ph];

			for (k = 0; k < s->ncodes; k++)
				ll_hist_free(&s->by_code[k]);
			ll_hist_free(&s->all);
			ll_hist_free(&s->send_lag);
		}
}

#endif
