/* The JSON report (load/json.h). */
#include "load/json.h"
#include "load/jw.h"
#include "load/scenario.h"
#include "load/steps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/version.h"
#include "load/err.h"

/* the fields of one histogram, into the object open */
static void
json_hist(struct ll_jw *w, const struct ll_hist *h, double secs)
{
	ll_jw_u64(w, "count", h->total);
	ll_jw_g6(w, "rate_per_s", (double)h->total / secs);
	ll_jw_g6(w, "mean_ms", ll_hist_mean(h) / 1e6);
	ll_jw_g6(w, "p50_ms", (double)ll_hist_value_at(h, 50) / 1e6);
	ll_jw_g6(w, "p90_ms", (double)ll_hist_value_at(h, 90) / 1e6);
	ll_jw_g6(w, "p99_ms", (double)ll_hist_value_at(h, 99) / 1e6);
	ll_jw_g6(w, "p999_ms", (double)ll_hist_value_at(h, 99.9) / 1e6);
	ll_jw_g6(w, "max_ms", (double)h->max / 1e6);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
ll_json_seconds(const struct ll_engine *e, unsigned route, unsigned nsec, struct ll_second *out)
{
	/* one pass to count per second, one to place each latency in its second's segment, then
	 * each segment sorted: O(n log n) however long the run */
	uint64_t *lat = malloc((e->nsamples + 1) * sizeof(*lat));
	size_t *off = calloc(nsec + 1, sizeof(*off)), *fill = calloc(nsec + 1, sizeof(*fill)), i;
	unsigned t;

	if (lat == NULL || off == NULL || fill == NULL) {
		free(lat);
		free(off);
		free(fill);
		errno = ENOMEM;
		return -1;
	}
	memset(out, 0, nsec * sizeof(*out));
	for (i = 0; i < e->nsamples; i++) {
		const struct ll_sample *s = &e->samples[i];

		if (s->route != route || (t = (unsigned)(s->due_ns / 1000000000u)) >= nsec)
			continue;
		out[t].count++;
		out[t].n503 += s->status == 503;
		out[t].errors += s->status < 0;
	}
	for (t = 0; t < nsec; t++)
		off[t + 1] = off[t] + out[t].count;
	for (i = 0; i < e->nsamples; i++) {
		const struct ll_sample *s = &e->samples[i];

		if (s->route != route || (t = (unsigned)(s->due_ns / 1000000000u)) >= nsec)
			continue;
		lat[off[t] + fill[t]++] = s->latency_ns;
	}
	for (t = 0; t < nsec; t++) {
		uint64_t *v = lat + off[t];
		size_t n = out[t].count;

		if (n == 0)
			continue;
		qsort(v, n, sizeof(*v), cmp_u64);
		out[t].p50_ms = (double)v[(n - 1) / 2] / 1e6;
		out[t].p99_ms = (double)v[(size_t)ceil(0.99 * (double)n) - 1] / 1e6;
		out[t].max_ms = (double)v[n - 1] / 1e6;
	}
	free(lat);
	free(off);
	free(fill);
	return 0;
}

static void
json_calibration(struct ll_jw *w, const struct ll_report *r, const struct ll_route *rt)
{
	const struct ll_rstats *st = &rt->st[LL_PH_RUN];

	if (rt->capacity_windows == 0) {
		ll_jw_null(w, "calibration");
		return;
	}
	ll_jw_map(w, "calibration");
	ll_jw_u64(w, "windows", rt->capacity_windows);
	ll_jw_num(w, "window_s", "%g", rt->capacity_window_s);
	ll_jw_g6(w, "sd_per_s", rt->capacity_sd_rps);
	ll_jw_g6(w, "min_per_s", rt->capacity_min_rps);
	ll_jw_g6(w, "max_per_s", rt->capacity_max_rps);
	ll_jw_g6(w, "run_over_capacity", rt->capacity_rps > 0 ?
	         (double)st->ok_in_time / r->duration_s / rt->capacity_rps : 0);
	ll_jw_bool(w, "off", ll_report_calibration_off(r, rt) > 0);
	ll_jw_end_map(w);
}

/* a rate that is only known when positive */
static void
json_rate(struct ll_jw *w, const char *key, double v)
{
	if (v > 0)
		ll_jw_g6(w, key, v);
	else
		ll_jw_null(w, key);
}

static void
json_route(struct ll_jw *w, const struct ll_report *r, unsigned i)
{
	const struct ll_route *rt = &r->e->routes[i];
	const struct ll_rstats *st = &rt->st[LL_PH_RUN];
	char buf[40];
	unsigned k;
	double n = (double)st->all.total;

	ll_jw_map(w, NULL);
	ll_jw_str(w, "path", rt->path);
	ll_jw_str(w, "method", rt->method);
	ll_jw_bool(w, "heavy", rt->heavy);
	snprintf(buf, sizeof(buf), "%g%s", rt->rate.value, rt->rate.relative ? "x" : "");
	ll_jw_str(w, "rate_spec", buf);
	ll_jw_g6(w, "rate_per_s", rt->rps);
	ll_jw_str(w, "arrival", rt->arrival == LL_ARRIVAL_POISSON ? "poisson" : "constant");
	ll_jw_u64(w, "body_bytes", rt->body_len);
	json_rate(w, "capacity_per_s", rt->capacity_rps);
	json_rate(w, "capacity_metrics_per_s", rt->capacity_metrics_rps);
	json_calibration(w, r, rt);
	ll_jw_map(w, "idle");
	json_hist(w, &rt->st[LL_PH_IDLE].all, r->idle_s > 0 ? r->idle_s : 1);
	ll_jw_end_map(w);
	ll_jw_u64(w, "issued", st->issued);
	ll_jw_map(w, "all");
	json_hist(w, &st->all, r->duration_s);
	ll_jw_end_map(w);
	ll_jw_g6(w, "share_503", n > 0 ? (double)ll_rstats_count(st, 503, 503) / n : 0);
	ll_jw_g6(w, "ok_per_s", (double)st->ok_in_time / r->duration_s);
	ll_jw_g6(w, "generator_delay_p50_ms", (double)ll_hist_value_at(&st->send_lag, 50) / 1e6);
	ll_jw_g6(w, "generator_delay_p99_ms", (double)ll_hist_value_at(&st->send_lag, 99) / 1e6);
	ll_jw_g6(w, "generator_delay_max_ms", (double)st->send_lag.max / 1e6);
	ll_jw_arr(w, "statuses");
	for (k = 0; k < st->ncodes; k++) {
		ll_jw_map(w, NULL);
		ll_jw_str(w, "status", ll_report_code(st->codes[k], buf));
		json_hist(w, &st->by_code[k], r->duration_s);
		ll_jw_end_map(w);
	}
	ll_jw_end_arr(w);
	ll_jw_end_map(w);
}

static int
json_series(struct ll_jw *w, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	unsigned nsec = (unsigned)ceil(r->span_s > 0 ? r->span_s : r->duration_s), i, t;
	struct ll_second *sec = calloc(nsec ? nsec : 1, sizeof(*sec));

	if (sec == NULL)
		return -1;
	ll_jw_arr(w, "series");
	for (i = 0; i < e->nroutes; i++) {
		if (ll_json_seconds(e, i, nsec, sec) == -1) {
			free(sec);
			return -1;
		}
		for (t = 0; t < nsec; t++) {
			ll_jw_map(w, NULL);
			ll_jw_u64(w, "t_s", t);
			ll_jw_u64(w, "route", i);
			ll_jw_u64(w, "count", sec[t].count);
			ll_jw_u64(w, "n503", sec[t].n503);
			ll_jw_u64(w, "errors", sec[t].errors);
			ll_jw_g6(w, "p50_ms", sec[t].p50_ms);
			ll_jw_g6(w, "p99_ms", sec[t].p99_ms);
			ll_jw_g6(w, "max_ms", sec[t].max_ms);
			ll_jw_end_map(w);
		}
	}
	ll_jw_end_arr(w);
	free(sec);
	return 0;
}

/* the fields of one scrape, into the object open */
static void
json_scrape(struct ll_jw *w, const struct ll_scrape *m)
{
	static const char *const keys[LL_SF_COUNT] = {
		"queue_depth", "queue_capacity", "inflight", "compute_busy", "compute_processes",
		"connections", "rejected_total", "timed_out_total", "failed_total", "restarts_total",
		"job_run_seconds_sum", "job_run_seconds_count", "job_slots",
		"job_queue_wait_seconds_sum", "job_queue_wait_seconds_count",
	};
	unsigned i;

	for (i = 0; i < LL_SF_COUNT; i++) {
		if (m->seen[i])
			ll_jw_g6(w, keys[i], m->v[i]);
		else
			ll_jw_null(w, keys[i]);
	}
}

static void
json_server(struct ll_jw *w, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	size_t i;

	if (!r->lagless) {
		ll_jw_null(w, "server");
		return;
	}
	ll_jw_map(w, "server");
	ll_jw_u64(w, "servers", r->after.nservers);
	ll_jw_u64(w, "servers_changed", ll_report_servers_changed(r));
	ll_jw_map(w, "before");
	json_scrape(w, &r->before);
	ll_jw_end_map(w);
	ll_jw_map(w, "after");
	json_scrape(w, &r->after);
	ll_jw_end_map(w);
	ll_jw_arr(w, "scrapes");
	for (i = 0; i < e->npoints; i++) {
		const struct ll_point *p = &e->points[i];

		ll_jw_map(w, NULL);
		ll_jw_num(w, "t_s", "%.4f", p->t_s);
		ll_jw_g6(w, "lag_mean_ms", p->lag_mean_s * 1e3);
		ll_jw_g6(w, "lag_max_ms", p->lag_max_s * 1e3);
		json_scrape(w, &p->m);
		ll_jw_end_map(w);
	}
	ll_jw_end_arr(w);
	ll_jw_end_map(w);
}

/* the run's header: the tool, the target, the connections, the generator, the samples */
static void
json_run(struct ll_jw *w, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;

	ll_jw_str(w, "tool", "lagless-load");
	ll_jw_str(w, "version", LG_VERSION);
	ll_jw_str(w, "target", r->url);
	ll_jw_bool(w, "lagless", r->lagless);
	ll_jw_g6(w, "duration_s", r->duration_s);
	ll_jw_g6(w, "idle_s", r->idle_s);
	ll_jw_u64(w, "start_monotonic_ns", e->origin_ns ? e->origin_ns : e->phase_start);
	ll_jw_bool(w, "ok", ll_report_ok(r));
	ll_jw_map(w, "connections");
	ll_jw_u64(w, "max", e->max_conns);
	ll_jw_u64(w, "peak", e->peak_conns);
	ll_jw_u64(w, "opened", e->opened);
	ll_jw_u64(w, "peak_waiting", e->peak_pending);
	ll_jw_end_map(w);
	ll_jw_map(w, "generator");
	ll_jw_g6(w, "delay_p99_ms", ll_report_generator_delay_ms(r));
	ll_jw_bool(w, "behind", ll_report_generator_delay_ms(r) > LL_REPORT_BEHIND_MS);
	ll_jw_end_map(w);
	ll_jw_map(w, "samples");
	ll_jw_u64(w, "kept", e->nsamples);
	ll_jw_u64(w, "dropped", e->samples_dropped);
	ll_jw_end_map(w);
}

int
ll_json_write(FILE *f, const struct ll_report *r, char *err, size_t len)
{
	struct ll_jw w;
	unsigned i;

	if (ll_jw_start(&w, f) == -1)
		return ll_fail(err, len, "%s", strerror(errno));
	ll_jw_map(&w, NULL);
	json_run(&w, r);
	ll_jw_arr(&w, "routes");
	for (i = 0; i < r->e->nroutes; i++)
		json_route(&w, r, i);
	ll_jw_end_arr(&w);
	ll_jw_map(&w, "verdicts");
	for (i = 0; i < LL_P_COUNT; i++) {
		ll_jw_map(&w, ll_report_promise_key(i));
		ll_jw_tri(&w, "pass", r->v[i].state);
		ll_jw_str(&w, "why", r->v[i].why);
		ll_jw_end_map(&w);
	}
	ll_jw_end_map(&w);
	ll_jw_arr(&w, "warnings");
	for (i = 0; i < r->nhints; i++) {
		ll_jw_map(&w, NULL);
		ll_jw_str(&w, "kind", r->hints[i].kind);
		ll_jw_u64(&w, "route", r->hints[i].route);
		ll_jw_str(&w, "text", r->hints[i].text);
		ll_jw_end_map(&w);
	}
	ll_jw_end_arr(&w);
	if (json_series(&w, r) == -1) {
		ll_jw_finish(&w, err, len);  /* frees it; "left unclosed" is not the cause */
		return ll_fail(err, len, "%s", strerror(ENOMEM));
	}
	json_server(&w, r);
	if (r->steps != NULL)
		ll_steps_json(&w, r->steps);
	if (r->scenario != NULL)
		ll_scenario_json(&w, r->scenario, r);
	ll_jw_end_map(&w);
	return ll_jw_finish(&w, err, len);
}
