/* Unit tests for load/json.c and load/jw.c: the JSON report of a hand-made run, byte for byte
 * as the hand-placed writer before yajl printed it (same keys in the same order, the same
 * number formats: %.6g, %.4f, %g, integers), strings escaped (RFC 8259 section 7), a value
 * that is not finite written null, and every failure of the generator or of the file
 * reported with its cause. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "common/version.h"
#include "load/json.h"
#include "load/jw.h"
#include "load/scenario.h"
#include "load/steps.h"
#include "tests/unit/load_rstats.h"

struct fixture {
	struct ll_route routes[2];  /* 0: /ping cheap, 1: /heavy heavy, calibrated */
	struct ll_sample samples[4];
	struct ll_point points[1];
	struct ll_steps steps;
	struct ll_scenario sc;
	struct ll_engine e;
	struct ll_report r;
};

static void
fill_routes(struct fixture *f)
{
	struct ll_route *h = &f->routes[1];

	f->routes[0].path = "/ping";
	f->routes[0].method = "GET";
	f->routes[0].rate.value = 100;
	f->routes[0].rps = 100;
	h->path = "/heavy?iterations=2";
	h->method = "POST";
	h->heavy = 1;
	h->rate = (struct ll_rate){ 1.5, 1 };
	h->rps = 15.000001;
	h->arrival = LL_ARRIVAL_POISSON;
	h->body_len = 4096;
	h->capacity_rps = 10.25;
	h->capacity_sd_rps = 1.0 / 3;
	h->capacity_min_rps = 9;
	h->capacity_max_rps = 1234567.5;
	h->capacity_windows = 8;
	h->capacity_window_s = 0.25;
	put(&f->routes[0].st[LL_PH_IDLE], 200, 20, 0.5);
	put(&f->routes[0].st[LL_PH_RUN], 200, 1000, 1.5);
	put(&h->st[LL_PH_RUN], 200, 95, 150);
	put(&h->st[LL_PH_RUN], 503, 105, 1);
	h->st[LL_PH_RUN].ok_in_time = 95;
	h->st[LL_PH_RUN].issued = 200;
	ll_hist_record(&h->st[LL_PH_RUN].send_lag, 123456);
}

static void
fill_steps(struct fixture *f)
{
	struct ll_step *k = f->steps.s;
	unsigned p;

	f->steps.n = 2;
	f->steps.seconds = 2.5;
	f->steps.knee = -1;
	f->steps.capacity = 0;
	f->steps.graceful = 0;
	f->steps.lagless = 1;
	k[0].level = (struct ll_rate){ 0.5, 1 };
	k[0].t1_s = 2.50004;
	k[0].offered_rps = 5.125;
	k[0].ok_rps = 5;
	k[0].cheap_p99_ms = 1.23456789;
	k[0].sf.lag_p99_ms = 0.001;
	k[0].pass = 1;
	k[1].level = (struct ll_rate){ 30, 0 };
	k[1].t0_s = 2.5;
	k[1].t1_s = 5;
	k[1].refused_rps = 20;
	k[1].share_503 = 0.666666666;
	k[1].capacity_rps = 10.25;
	k[1].cheap_p99_ms = -1;
	for (p = 0; p < LL_P_COUNT; p++) {
		k[0].v[p].state = LL_V_PASS;
		k[1].v[p].state = p % 3 - 1;
	}
	f->sc.file = "x.scn";
	f->sc.nexpect = 2;
	f->sc.expect[0] = (struct ll_expect){ LL_P_CHEAP, 1u << 2, 1 };
	f->sc.expect[1] = (struct ll_expect){ LL_P_TIMEOUTS, 1u << 0 | 1u << 2, 0 };
}

static int
setup(void **state)
{
	static struct fixture f;
	unsigned i;

	memset(&f, 0, sizeof(f));
	routes_hists_init(f.routes, 2);
	fill_routes(&f);
	fill_steps(&f);
	f.samples[0] = (struct ll_sample){ 100000000, 1500000, 200, 0, NAN };
	f.samples[1] = (struct ll_sample){ 1200000000, 2500000, 200, 0, NAN };
	f.samples[2] = (struct ll_sample){ 1300000000, 1000000, 503, 1, NAN };
	f.samples[3] = (struct ll_sample){ 1400000000, 9000000, -1, 1, NAN };
	f.e.samples = f.samples;
	f.e.nsamples = 4;
	f.e.samples_dropped = 3;
	f.e.routes = f.routes;
	f.e.nroutes = 2;
	f.e.max_conns = 64;
	f.e.peak_conns = 12;
	f.e.opened = 13;
	f.e.peak_pending = 2;
	f.e.origin_ns = UINT64_MAX - 1;
	f.points[0].t_s = 1.23456;
	f.points[0].lag_mean_s = 0.0001;
	f.points[0].lag_max_s = 0.25;
	f.points[0].m.seen[LL_SF_QUEUE_DEPTH] = 1;
	f.points[0].m.v[LL_SF_QUEUE_DEPTH] = 3;
	f.points[0].m.seen[LL_SF_REJECTED] = 1;
	f.points[0].m.v[LL_SF_REJECTED] = 1e9;
	f.e.points = f.points;
	f.e.npoints = 1;
	f.r.e = &f.e;
	f.r.url = "http://127.0.0.1:8080";
	f.r.duration_s = 2;
	f.r.idle_s = 0.5;
	f.r.lagless = 1;
	f.r.steps = &f.steps;
	f.r.scenario = &f.sc;
	f.r.nhints = 1;
	f.r.hints[0] = (struct ll_hint){ "shared_wait", 0, "/ping: WARNING: x" };
	f.r.after.seen[LL_SF_INFLIGHT] = 1;
	f.r.after.v[LL_SF_INFLIGHT] = 0.1;
	for (i = 0; i < LL_P_COUNT; i++) {
		f.r.v[i].state = i == 0 ? LL_V_FAIL : i == 1 ? LL_V_NA : LL_V_PASS;
		snprintf(f.r.v[i].why, sizeof(f.r.v[i].why), "why %u", i);
	}
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

/* the report of f as ll_json_write writes it, malloc'd; rc its return */
static char *
render(struct fixture *f, int *rc, char *err, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);

	assert_non_null(m);
	*rc = ll_json_write(m, &f->r, err, len);
	assert_int_equal(fclose(m), 0);
	return buf;
}

/* What the hand-placed writer (fprintf, before yajl) printed for the fixture. */
static const char before[] =
	"{\"tool\":\"lagless-load\",\"version\":\""
	LG_VERSION
	"\",\"target\":\"http://127.0.0.1:8080\",\"lagless\":true,\"duration_s\":2,\"idle_s\":0.5"
	",\"start_monotonic_ns\":18446744073709551614,\"ok\":false,\"connections\":{\"max\":64,\""
	"peak\":12,\"opened\":13,\"peak_waiting\":2},\"generator\":{\"delay_p99_ms\":0.123456,\"b"
	"ehind\":false},\"samples\":{\"kept\":4,\"dropped\":3},\"routes\":[{\"path\":\"/ping\",\""
	"method\":\"GET\",\"heavy\":false,\"rate_spec\":\"100\",\"rate_per_s\":100,\"arrival\":\""
	"constant\",\"body_bytes\":0,\"capacity_per_s\":null,\"capacity_metrics_per_s\":null,\"ca"
	"libration\":null,\"idle\":{\"count\":20,\"rate_per_s\":40,\"mean_ms\":0.5,\"p50_ms\":0.5"
	",\"p90_ms\":0.5,\"p99_ms\":0.5,\"p999_ms\":0.5,\"max_ms\":0.5},\"issued\":0,\"all\":{\"c"
	"ount\":1000,\"rate_per_s\":500,\"mean_ms\":1.5,\"p50_ms\":1.5,\"p90_ms\":1.5,\"p99_ms\":"
	"1.5,\"p999_ms\":1.5,\"max_ms\":1.5},\"share_503\":0,\"ok_per_s\":0,\"generator_delay_p50"
	"_ms\":0,\"generator_delay_p99_ms\":0,\"generator_delay_max_ms\":0,\"statuses\":[{\"statu"
	"s\":\"200\",\"count\":1000,\"rate_per_s\":500,\"mean_ms\":1.5,\"p50_ms\":1.5,\"p90_ms\":"
	"1.5,\"p99_ms\":1.5,\"p999_ms\":1.5,\"max_ms\":1.5}]},{\"path\":\"/heavy?iterations=2\","
	"\"method\":\"POST\",\"heavy\":true,\"rate_spec\":\"1.5x\",\"rate_per_s\":15,\"arrival\":"
	"\"poisson\",\"body_bytes\":4096,\"capacity_per_s\":10.25,\"capacity_metrics_per_s\":null"
	",\"calibration\":{\"windows\":8,\"window_s\":0.25,\"sd_per_s\":0.333333,\"min_per_s\":9,"
	"\"max_per_s\":1.23457e+06,\"run_over_capacity\":4.63415,\"off\":true},\"idle\":{\"count"
	"\":0,\"rate_per_s\":0,\"mean_ms\":0,\"p50_ms\":0,\"p90_ms\":0,\"p99_ms\":0,\"p999_ms\":0"
	",\"max_ms\":0},\"issued\":200,\"all\":{\"count\":200,\"rate_per_s\":100,\"mean_ms\":71.7"
	"75,\"p50_ms\":1.00045,\"p90_ms\":150,\"p99_ms\":150,\"p999_ms\":150,\"max_ms\":150},\"sh"
	"are_503\":0.525,\"ok_per_s\":47.5,\"generator_delay_p50_ms\":0.123456,\"generator_delay_"
	"p99_ms\":0.123456,\"generator_delay_max_ms\":0.123456,\"statuses\":[{\"status\":\"200\","
	"\"count\":95,\"rate_per_s\":47.5,\"mean_ms\":150,\"p50_ms\":150,\"p90_ms\":150,\"p99_ms"
	"\":150,\"p999_ms\":150,\"max_ms\":150},{\"status\":\"503\",\"count\":105,\"rate_per_s\":"
	"52.5,\"mean_ms\":1,\"p50_ms\":1,\"p90_ms\":1,\"p99_ms\":1,\"p999_ms\":1,\"max_ms\":1}]}]"
	",\"verdicts\":{\"cheap_stays_cheap\":{\"pass\":false,\"why\":\"why 0\"},\"refusal_is_fas"
	"t\":{\"pass\":null,\"why\":\"why 1\"},\"pool_used_to_capacity\":{\"pass\":true,\"why\":"
	"\"why 2\"},\"nothing_timed_out\":{\"pass\":true,\"why\":\"why 3\"}},\"warnings\":[{\"kin"
	"d\":\"shared_wait\",\"route\":0,\"text\":\"/ping: WARNING: x\"}],\"series\":[{\"t_s\""
	":0,\"route\":0,\"count\":1,\"n503\":0,\"errors\":0,\"p50_ms\":1.5,\"p99_ms\":1.5,\"max_m"
	"s\":1.5},{\"t_s\":1,\"route\":0,\"count\":1,\"n503\":0,\"errors\":0,\"p50_ms\":2.5,\"p99"
	"_ms\":2.5,\"max_ms\":2.5},{\"t_s\":0,\"route\":1,\"count\":0,\"n503\":0,\"errors\":0,\"p"
	"50_ms\":0,\"p99_ms\":0,\"max_ms\":0},{\"t_s\":1,\"route\":1,\"count\":2,\"n503\":1,\"err"
	"ors\":1,\"p50_ms\":1,\"p99_ms\":9,\"max_ms\":9}],\"server\":{\"servers\":0,\"servers_changed\":0,"
	"\"before\":{\"queue_depth\""
	":null,\"queue_capacity\":null,\"inflight\":null,\"compute_busy\":null,\"compute_processe"
	"s\":null,\"connections\":null,\"rejected_total\":null,\"timed_out_total\":null,\"failed_"
	"total\":null,\"restarts_total\":null,\"job_run_seconds_sum\":null,\"job_run_seconds_coun"
	"t\":null,\"job_slots\":null,\"job_queue_wait_seconds_sum\":null,\"job_queue_wait_seconds"
	"_count\":null},\"after\":{\"queue_depth\":null,\"queue_capacity\":null,\"inflight\":0.1,"
	"\"compute_busy\":null,\"compute_processes\":null,\"connections\":null,\"rejected_total\""
	":null,\"timed_out_total\":null,\"failed_total\":null,\"restarts_total\":null,\"job_run_s"
	"econds_sum\":null,\"job_run_seconds_count\":null,\"job_slots\":null,\"job_queue_wait_sec"
	"onds_sum\":null,\"job_queue_wait_seconds_count\":null},\"scrapes\":[{\"t_s\":1.2346,\"la"
	"g_mean_ms\":0.1,\"lag_max_ms\":250,\"queue_depth\":3,\"queue_capacity\":null,\"inflight"
	"\":null,\"compute_busy\":null,\"compute_processes\":null,\"connections\":null,\"rejected"
	"_total\":1e+09,\"timed_out_total\":null,\"failed_total\":null,\"restarts_total\":null,\""
	"job_run_seconds_sum\":null,\"job_run_seconds_count\":null,\"job_slots\":null,\"job_queue"
	"_wait_seconds_sum\":null,\"job_queue_wait_seconds_count\":null}]},\"steps\":{\"seconds\""
	":2.5,\"goodput_threshold\":0.9,\"knee\":null,\"capacity\":{\"ok_per_s\":5,\"level\":0,"
	"\"reached\":false},\"graceful_level\":0,\"levels\":[{\"level\":0.5,\"relative\":true,"
	"\"t0_s\":0.0000,\"t1_s\":2.5000,\"offered_per_s\":5.125,\"ok_per_s\":5,\"refused_per_s\""
	":0,\"goodput_share\":0.97561,\"share_503\":0,\"capaci"
	"ty_per_s\":0,\"cheap_p99_ms\":1.23457,\"server\":{\"lag_p99_ms\":0.001,\"lag_bound_ms\":"
	"0,\"lag_mean_ms\":0,\"queue_wait_mean_ms\":0,\"queue_depth_max\":0},\"pass\":true,\"verd"
	"icts\":{\"cheap_stays_cheap\":true,\"refusal_is_fast\":true,\"pool_used_to_capacity\":tr"
	"ue,\"nothing_timed_out\":true}},{\"level\":30,\"relative\":false,\"t0_s\":2.5000,\"t1_s"
	"\":5.0000,\"offered_per_s\":0,\"ok_per_s\":0,\"refused_per_s\":20,\"goodput_share\":1,"
	"\"share_503\":0.666667"
	",\"capacity_per_s\":10.25,\"cheap_p99_ms\":null,\"server\":{\"lag_p99_ms\":0,\"lag_bound"
	"_ms\":0,\"lag_mean_ms\":0,\"queue_wait_mean_ms\":0,\"queue_depth_max\":0},\"pass\":false"
	",\"verdicts\":{\"cheap_stays_cheap\":null,\"refusal_is_fast\":false,\"pool_used_to_capac"
	"ity\":true,\"nothing_timed_out\":null}}]},\"scenario\":{\"expectations\":[{\"verdict\":"
	"\"cheap_stays_cheap\",\"expected\":\"pass\",\"got\":\"fail\",\"met\":true},{\"verdict\":"
	"\"nothing_timed_out\",\"expected\":\"n/a|pass\",\"got\":\"pass\",\"met\":false}]}}\n";

static void
test_same_bytes_as_before(void **state)
{
	char err[160] = "", *out;
	int rc;

	out = render(*state, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_string_equal(err, "");
	assert_string_equal(out, before);
	free(out);
}

/* a value of a parsed document by its path of keys */
static yajl_val
at(yajl_val doc, const char **path)
{
	yajl_val v = yajl_tree_get(doc, path, yajl_t_any);

	assert_non_null(v);
	return v;
}

static void
test_parses_with_its_numbers(void **state)
{
	static const char *ns[] = { "start_monotonic_ns", NULL };
	static const char *knee[] = { "steps", "graceful_level", NULL };
	static const char *srv[] = { "server", "after", "inflight", NULL };
	char err[160], *out;
	yajl_val doc;
	int rc;

	out = render(*state, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	doc = yajl_tree_parse(out, err, sizeof(err));
	assert_non_null(doc);
	assert_true(YAJL_IS_OBJECT(doc));
	/* an integer past 2^63 as printed, not rounded through a double */
	assert_string_equal(YAJL_GET_NUMBER(at(doc, ns)), "18446744073709551614");
	assert_true(YAJL_IS_INTEGER(at(doc, knee)));
	assert_true(YAJL_IS_DOUBLE(at(doc, srv)));
	yajl_tree_free(doc);
	free(out);
}

static void
test_strings_escaped(void **state)
{
	static const char *path[] = { "routes", NULL }, *key[] = { "path", NULL };
	struct fixture *f = *state;
	const char *raw = "/a\"b\\c\nd\x01" "e\x7f/\xc3\xa9\t";
	char err[160], *out;
	yajl_val doc, routes;
	int rc;

	f->routes[0].path = (char *)raw;
	out = render(f, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	/* RFC 8259 section 7: quote, backslash and controls escaped, the rest as it is */
	assert_non_null(strstr(out, "\"path\":\"/a\\\"b\\\\c\\nd\\u0001e\x7f/\xc3\xa9\\t\""));
	doc = yajl_tree_parse(out, err, sizeof(err));
	assert_non_null(doc);
	routes = at(doc, path);
	assert_true(YAJL_IS_ARRAY(routes));
	assert_string_equal(YAJL_GET_STRING(at(routes->u.array.values[0], key)), raw);
	yajl_tree_free(doc);
	free(out);
}

static void
test_not_finite_is_null(void **state)
{
	struct fixture *f = *state;
	char err[160], *out;
	yajl_val doc;
	int rc;

	f->r.duration_s = 0;     /* every rate: n / 0 */
	f->r.idle_s = NAN;
	f->steps.s[0].ok_rps = INFINITY;
	out = render(f, &rc, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "\"duration_s\":0,\"idle_s\":null,"));
	assert_non_null(strstr(out, "\"all\":{\"count\":1000,\"rate_per_s\":null,"));
	assert_non_null(strstr(out, "\"ok_per_s\":null,\"refused_per_s\":0,"));
	doc = yajl_tree_parse(out, err, sizeof(err));
	assert_non_null(doc);
	yajl_tree_free(doc);
	free(out);
}

static void
test_write_error_reported(void **state)
{
	FILE *full = fopen("/dev/full", "w");
	char err[160] = "";

	if (full == NULL)
		skip();
	assert_int_equal(ll_json_write(full, &((struct fixture *)*state)->r, err, sizeof(err)), -1);
	assert_string_equal(err, strerror(ENOSPC));
	fclose(full);
}

/* the message ll_jw_finish gives after steps(w), or "" when it succeeded */
static void
jw_case(void (*steps)(struct ll_jw *), const char *want_err, const char *want_out)
{
	char err[160] = "", *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);
	struct ll_jw w;

	assert_non_null(m);
	assert_int_equal(ll_jw_start(&w, m), 0);
	steps(&w);
	assert_int_equal(ll_jw_finish(&w, err, sizeof(err)), *want_err ? -1 : 0);
	assert_string_equal(err, want_err);
	assert_int_equal(fclose(m), 0);
	assert_string_equal(buf, want_out);
	free(buf);
}

static void
no_key(struct ll_jw *w)
{
	ll_jw_map(w, NULL);
	ll_jw_u64(w, NULL, 1);
	ll_jw_str(w, "after", "the failure: not written");
	ll_jw_end_map(w);
}

static void
unclosed(struct ll_jw *w)
{
	ll_jw_arr(w, NULL);
	ll_jw_bool(w, NULL, 1);
}

static void
two_documents(struct ll_jw *w)
{
	ll_jw_null(w, NULL);
	ll_jw_tri(w, NULL, -1);
}

static void
too_long(struct ll_jw *w)
{
	ll_jw_map(w, NULL);
	ll_jw_num(w, "wide", "%.80f", 1);
	ll_jw_end_map(w);
}

static void
nothing(struct ll_jw *w)
{
}

static void
every_kind(struct ll_jw *w)
{
	ll_jw_map(w, NULL);
	ll_jw_arr(w, "a");
	ll_jw_tri(w, NULL, -1);
	ll_jw_tri(w, NULL, 0);
	ll_jw_tri(w, NULL, 7);
	ll_jw_g6(w, NULL, 1.0 / 3);
	ll_jw_num(w, NULL, "%.4f", 2);
	ll_jw_num(w, NULL, "%g", -INFINITY);
	ll_jw_u64(w, NULL, UINT64_MAX);
	ll_jw_end_arr(w);
	ll_jw_map(w, "m");
	ll_jw_end_map(w);
	ll_jw_end_map(w);
}

static void
test_generator_errors_reported(void **state)
{
	jw_case(every_kind, "", "{\"a\":[null,false,true,0.333333,2.0000,null,"
	        "18446744073709551615],\"m\":{}}\n");
	jw_case(no_key, "JSON generator: a key that is not a string at \"value\"", "{");
	jw_case(unclosed, "JSON generator: the document is left unclosed", "[true");
	jw_case(two_documents, "JSON generator: value after the end of the document at \"value\"",
	        "null");
	jw_case(too_long, "JSON generator: not a number at \"wide\"", "{\"wide\"");
	jw_case(nothing, "JSON generator: the document is empty", "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_bytes_as_before, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parses_with_its_numbers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_strings_escaped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_finite_is_null, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_error_reported, setup, teardown),
		cmocka_unit_test(test_generator_errors_reported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
