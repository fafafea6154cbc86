/* The JSON report (load/json.h). */
#include "load/json.h"
#include "load/scenario.h"
#include "load/steps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/version.h"

static void
jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* a finite number, or null (JSON has no NaN or infinity) */
static void
jnum(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

static void
jhist(FILE *f, const struct ll_hist *h, double secs)
{
	fprintf(f, "\"count\":%" PRIu64 ",\"rate_per_s\":", h->total);
	jnum(f, (double)h->total / secs);
	fprintf(f, ",\"mean_ms\":%.6g,\"p50_ms\":%.6g,\"p90_ms\":%.6g,\"p99_ms\":%.6g,"
	        "\"p999_ms\":%.6g,\"max_ms\":%.6g", ll_hist_mean(h) / 1e6,
	        (double)ll_hist_value_at(h, 50) / 1e6, (double)ll_hist_value_at(h, 90) / 1e6,
	        (double)ll_hist_value_at(h, 99) / 1e6, (double)ll_hist_value_at(h, 99.9) / 1e6,
	        (double)h->max / 1e6);
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
json_route(FILE *f, const struct ll_report *r, unsigned i)
{
	const struct ll_route *rt = &r->e->routes[i];
	const struct ll_rstats *st = &rt->st[LL_PH_RUN];
	char buf[12];
	unsigned k;
	double n = (double)st->all.total;

	fprintf(f, "{\"path\":");
	jstr(f, rt->path);
	fprintf(f, ",\"method\":");
	jstr(f, rt->method);
	fprintf(f, ",\"heavy\":%s,\"rate_spec\":\"%g%s\",\"rate_per_s\":", rt->heavy ? "true" : "false",
	        rt->rate.value, rt->rate.relative ? "x" : "");
	jnum(f, rt->rps);
	fprintf(f, ",\"arrival\":\"%s\",\"body_bytes\":%zu,\"capacity_per_s\":",
	        rt->arrival == LL_ARRIVAL_POISSON ? "poisson" : "constant", rt->body_len);
	if (rt->capacity_rps > 0)
		jnum(f, rt->capacity_rps);
	else
		fputs("null", f);
	fprintf(f, ",\"capacity_metrics_per_s\":");
	if (rt->capacity_metrics_rps > 0)
		jnum(f, rt->capacity_metrics_rps);
	else
		fputs("null", f);
	fprintf(f, ",\"calibration\":");
	if (rt->capacity_windows > 0)
		fprintf(f, "{\"windows\":%u,\"window_s\":%g,\"sd_per_s\":%.6g,\"min_per_s\":%.6g,"
		        "\"max_per_s\":%.6g,\"run_over_capacity\":%.6g,\"off\":%s}",
		        rt->capacity_windows, rt->capacity_window_s, rt->capacity_sd_rps, rt->capacity_min_rps,
		        rt->capacity_max_rps, rt->capacity_rps > 0 ? (double)st->ok_in_time /
		        r->duration_s / rt->capacity_rps : 0,
		        ll_report_calibration_off(r, rt) > 0 ? "true" : "false");
	else
		fputs("null", f);
	fprintf(f, ",\"idle\":{");
	jhist(f, &rt->st[LL_PH_IDLE].all, r->idle_s > 0 ? r->idle_s : 1);
	fprintf(f, "},\"issued\":%" PRIu64 ",\"all\":{", st->issued);
	jhist(f, &st->all, r->duration_s);
	fprintf(f, "},\"share_503\":");
	jnum(f, n > 0 ? (double)ll_rstats_count(st, 503, 503) / n : 0);
	fprintf(f, ",\"ok_per_s\":");
	jnum(f, (double)st->ok_in_time / r->duration_s);
	fprintf(f, ",\"generator_delay_p50_ms\":%.6g,\"generator_delay_p99_ms\":%.6g,"
	        "\"generator_delay_max_ms\":%.6g", (double)ll_hist_value_at(&st->send_lag, 50) / 1e6,
	        (double)ll_hist_value_at(&st->send_lag, 99) / 1e6, (double)st->send_lag.max / 1e6);
	fprintf(f, ",\"statuses\":[");
	for (k = 0; k < st->ncodes; k++) {
		fprintf(f, "%s{\"status\":\"%s\",", k ? "," : "", ll_report_code(st->codes[k], buf));
		jhist(f, &st->by_code[k], r->duration_s);
		fputc('}', f);
	}
	fputs("]}", f);
}

static int
json_series(FILE *f, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	unsigned nsec = (unsigned)ceil(r->span_s > 0 ? r->span_s : r->duration_s), i, t;
	struct ll_second *sec = calloc(nsec ? nsec : 1, sizeof(*sec));

	if (sec == NULL)
		return -1;
	fputs(",\"series\":[", f);
	for (i = 0; i < e->nroutes; i++) {
		if (ll_json_seconds(e, i, nsec, sec) == -1) {
			free(sec);
			return -1;
		}
		for (t = 0; t < nsec; t++)
			fprintf(f, "%s{\"t_s\":%u,\"route\":%u,\"count\":%u,\"n503\":%u,\"errors\":%u,"
			        "\"p50_ms\":%.6g,\"p99_ms\":%.6g,\"max_ms\":%.6g}",
			        i || t ? "," : "", t, i, sec[t].count, sec[t].n503, sec[t].errors,
			        sec[t].p50_ms, sec[t].p99_ms, sec[t].max_ms);
	}
	fputs("]", f);
	free(sec);
	return 0;
}

static void
json_scrape(FILE *f, const struct ll_scrape *m)
{
	static const char *const keys[LL_SF_COUNT] = {
		"queue_depth", "queue_capacity", "inflight", "compute_busy", "compute_processes",
		"connections", "rejected_total", "timed_out_total", "failed_total", "restarts_total",
		"job_run_seconds_sum", "job_run_seconds_count", "job_slots",
		"job_queue_wait_seconds_sum", "job_queue_wait_seconds_count",
	};
	unsigned i;

	for (i = 0; i < LL_SF_COUNT; i++) {
		fprintf(f, "%s\"%s\":", i ? "," : "", keys[i]);
		if (m->seen[i])
			jnum(f, m->v[i]);
		else
			fputs("null", f);
	}
}

static void
json_server(FILE *f, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	size_t i;

	fputs(",\"server\":", f);
	if (!r->lagless) {
		fputs("null", f);
		return;
	}
	fputs("{\"before\":{", f);
	json_scrape(f, &r->before);
	fputs("},\"after\":{", f);
	json_scrape(f, &r->after);
	fputs("},\"scrapes\":[", f);
	for (i = 0; i < e->npoints; i++) {
		const struct ll_point *p = &e->points[i];

		fprintf(f, "%s{\"t_s\":%.4f,\"lag_mean_ms\":%.6g,\"lag_max_ms\":%.6g,", i ? "," : "",
		        p->t_s, p->lag_mean_s * 1e3, p->lag_max_s * 1e3);
		json_scrape(f, &p->m);
		fputc('}', f);
	}
	fputs("]}", f);
}

int
ll_json_write(FILE *f, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	unsigned i;

	fprintf(f, "{\"tool\":\"lagless-load\",\"version\":\"%s\",\"target\":", LG_VERSION);
	jstr(f, r->url);
	fprintf(f, ",\"lagless\":%s,\"duration_s\":%.6g,\"idle_s\":%.6g,"
	        "\"start_monotonic_ns\":%" PRIu64 ",\"ok\":%s", r->lagless ? "true" : "false",
	        r->duration_s, r->idle_s, e->origin_ns ? e->origin_ns : e->phase_start, ll_report_ok(r) ? "true" : "false");
	fprintf(f, ",\"connections\":{\"max\":%u,\"peak\":%u,\"opened\":%" PRIu64
	        ",\"peak_waiting\":%u}", e->max_conns, e->peak_conns, e->opened, e->peak_pending);
	fprintf(f, ",\"generator\":{\"delay_p99_ms\":%.6g,\"behind\":%s}",
	        ll_report_generator_delay_ms(r),
	        ll_report_generator_delay_ms(r) > LL_REPORT_BEHIND_MS ? "true" : "false");
	fprintf(f, ",\"samples\":{\"kept\":%zu,\"dropped\":%" PRIu64 "}", e->nsamples,
	        e->samples_dropped);
	fputs(",\"routes\":[", f);
	for (i = 0; i < e->nroutes; i++) {
		if (i)
			fputc(',', f);
		json_route(f, r, i);
	}
	fputs("],\"verdicts\":{", f);
	for (i = 0; i < LL_P_COUNT; i++) {
		fprintf(f, "%s\"%s\":{\"pass\":%s,\"why\":", i ? "," : "", ll_report_promise_key(i),
		        r->v[i].state == LL_V_NA ? "null" : r->v[i].state ? "true" : "false");
		jstr(f, r->v[i].why);
		fputc('}', f);
	}
	fputc('}', f);
	if (json_series(f, r) == -1)
		return -1;
	json_server(f, r);
	if (r->steps != NULL)
		ll_steps_json(f, r->steps);
	if (r->scenario != NULL)
		ll_scenario_json(f, r->scenario, r);
	fputs("}\n", f);
	return ferror(f) ? -1 : 0;
}
