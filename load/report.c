/* Table, verdicts and JSON of a run (load/report.h). */
#include "load/report.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/version.h"

static const char *const promise_names[LL_P_COUNT] = {
	"cheap stays cheap", "refusal is fast", "pool used to capacity", "nothing timed out",
};
static const char *const promise_keys[LL_P_COUNT] = {
	"cheap_stays_cheap", "refusal_is_fast", "pool_used_to_capacity", "nothing_timed_out",
};

const char *
ll_report_promise(enum ll_promise p)
{
	return promise_names[p];
}

const char *
ll_report_promise_key(enum ll_promise p)
{
	return promise_keys[p];
}

static double
ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static void
why_add(struct ll_verdict *v, const char *fmt, ...)
{
	size_t len = strlen(v->why);
	va_list ap;

	if (len > 0 && len + 2 < sizeof(v->why)) {
		memcpy(v->why + len, "; ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(v->why + len, sizeof(v->why) - len, fmt, ap);
	va_end(ap);
}

/* state of v after one more check: any failure fails, any pass passes, else n/a */
static void
mark(struct ll_verdict *v, int pass)
{
	if (!pass)
		v->state = LL_V_FAIL;
	else if (v->state == LL_V_NA)
		v->state = LL_V_PASS;
}

static double
capacity(const struct ll_route *rt)
{
	return rt->capacity_rps > 0 ? rt->capacity_rps : rt->capacity_metrics_rps;
}

static void
judge_cheap(struct ll_report *r, struct ll_verdict *v)
{
	const struct ll_engine *e = r->e;
	unsigned i;

	for (i = 0; i < e->nroutes; i++) {
		const struct ll_route *rt = &e->routes[i];
		double idle, run, limit;

		if (rt->heavy)
			continue;
		if (rt->st[LL_PH_IDLE].all.total == 0) {
			why_add(v, "%s: no idle measurement", rt->path);
			continue;
		}
		idle = ms(ll_hist_value_at(&rt->st[LL_PH_IDLE].all, 99));
		run = ms(ll_hist_value_at(&rt->st[LL_PH_RUN].all, 99));
		limit = r->cheap_factor * idle + r->cheap_slack_ms;
		mark(v, run <= limit);
		why_add(v, "%s p99 %.3f ms %s %.3f ms (%.3g x idle p99 %.3f ms + %.3g ms)", rt->path,
		        run, run <= limit ? "<=" : ">", limit, r->cheap_factor, idle,
		        r->cheap_slack_ms);
	}
	if (v->why[0] == '\0')
		why_add(v, "no cheap route (every route is heavy)");
}

static void
judge_refusal(struct ll_report *r, struct ll_verdict *v)
{
	const struct ll_engine *e = r->e;
	struct ll_hist h;
	unsigned i;

	if (ll_hist_init(&h) == -1)
		return;
	for (i = 0; i < e->nroutes; i++) {
		const struct ll_route *rt = &e->routes[i];
		uint64_t n503 = ll_rstats_count(&rt->st[LL_PH_RUN], 503, 503);
		double cap = capacity(rt), p99;

		if (!rt->heavy)
			continue;
		if (n503 == 0) {
			double ok = (double)rt->st[LL_PH_RUN].ok_in_time / r->duration_s;

			/* offered beyond the capacity, neither done nor refused: it waited in a queue */
			if (cap > 0 && rt->rps > 1.2 * cap && ok < 0.9 * rt->rps) {
				mark(v, 0);
				why_add(v, "%s: no 503 although %.1f/s were offered against a capacity "
				        "of %.1f/s and %.1f/s were answered: the overload was queued, not "
				        "refused", rt->path, rt->rps, cap, ok);
			} else if (cap > 0 && rt->rps > 1.2 * cap) {
				why_add(v, "%s: no 503; the server kept up with %.1f/s, more than the "
				        "measured capacity %.1f/s (offer more)", rt->path, ok, cap);
			} else {
				why_add(v, "%s: no 503 (offered %.1f/s, capacity %s)", rt->path, rt->rps,
				        cap > 0 ? "known" : "unknown");
			}
			continue;
		}
		ll_rstats_merge(&rt->st[LL_PH_RUN], 503, 503, &h);
		p99 = ms(ll_hist_value_at(&h, 99));
		mark(v, p99 <= r->fast_ms);
		why_add(v, "%s: %" PRIu64 " refused, 503 p99 %.3f ms %s %.3g ms, max %.3f ms",
		        rt->path, n503, p99, p99 <= r->fast_ms ? "<=" : ">", r->fast_ms,
		        ms(h.max));
	}
	ll_hist_free(&h);
	if (v->why[0] == '\0')
		why_add(v, "no heavy route (give one a rate like 2x)");
}

/* The scrapes of this report's run (a step level's, or every one) */
static const struct ll_point *
run_points(const struct ll_report *r, size_t *n)
{
	const struct ll_engine *e = r->e;
	size_t p1 = r->p1 && r->p1 <= e->npoints ? r->p1 : e->npoints;
	size_t p0 = r->p0 < p1 ? r->p0 : p1;

	*n = p1 - p0;
	return e->points + p0;
}

double
ll_report_counter_increase(const struct ll_report *r, enum ll_scrape_field k)
{
	const struct ll_scrape *prev;
	const struct ll_point *pt;
	double sum = 0;
	size_t i, n;

	if (!r->have_scrapes)
		return 0;
	pt = run_points(r, &n);
	prev = &r->before;
	/* a pair of scrapes of different servers (replicas behind a balancer) is skipped: one
	 * server's counter minus another's is no increase of either */
	for (i = 0; i < n; i++) {
		if (!pt[i].m.seen[k])
			continue;
		if (ll_scrape_same(prev, &pt[i].m))
			sum += ll_counter_increase(prev->v[k], pt[i].m.v[k]);
		prev = &pt[i].m;
	}
	if (ll_scrape_same(prev, &r->after))
		sum += ll_counter_increase(prev->v[k], r->after.v[k]);
	return sum;
}

/* Against lagless the pool's own gauges answer the question directly: were its compute
 * processes busy while the heavy routes were over capacity? That holds however the machine's
 * other load slows each job, where a throughput figure moves with it. pool < 0: every compute
 * process (lagless_compute_busy); else named pool number pool (lagless_pool_processes). */
static int
busy_share(const struct ll_report *r, int pool, double *share)
{
	const struct ll_point *pt;
	double busy = 0, procs = 0;
	size_t i, n;

	pt = run_points(r, &n);
	for (i = 0; i < n; i++) {
		const struct ll_scrape_pool *p = pool < 0 ? NULL :
		    ll_scrape_pool(&pt[i].m, r->after.pools[pool].name);

		if (pool < 0) {
			busy += pt[i].m.v[LL_SF_BUSY];
			procs += pt[i].m.v[LL_SF_COMPUTE];
		} else if (p != NULL) {
			busy += p->v[LL_PF_ACTIVE];
			procs += p->v[LL_PF_PROCS];
		}
	}
	if (n < 2 || procs <= 0)
		return -1;
	*share = busy / procs;
	return 0;
}

/* A named pool was flooded during the run: it refused jobs because it was full, or its queue
 * reached its capacity at a scrape. */
static int
pool_flooded(const struct ll_report *r, unsigned k, double *full, double *depth)
{
	const struct ll_scrape_pool *b = ll_scrape_pool(&r->before, r->after.pools[k].name);
	const struct ll_point *pt;
	size_t i, n;
	int at_cap = 0;

	pt = run_points(r, &n);
	*full = ll_scrape_same(&r->before, &r->after) ?
	        r->after.pools[k].v[LL_PF_FULL] - (b ? b->v[LL_PF_FULL] : 0) : 0;
	*depth = 0;
	for (i = 0; i < n; i++) {
		const struct ll_scrape_pool *p = ll_scrape_pool(&pt[i].m, r->after.pools[k].name);

		if (p == NULL)
			continue;
		*depth = p->v[LL_PF_DEPTH] > *depth ? p->v[LL_PF_DEPTH] : *depth;
		at_cap |= p->v[LL_PF_QCAP] > 0 && p->v[LL_PF_DEPTH] >= p->v[LL_PF_QCAP];
	}
	return *full > 0 || at_cap;
}

/* Per named pool: each flooded pool must be busy >= the share. Without a flooded pool: when
 * the server kept up with the offer (kept_up), the offer never reached a pool's capacity (the
 * calibration came out low): nothing to judge, as a refusal verdict without 503s; when it did
 * not, the work waited somewhere else than in a pool (on the loop: --inline-heavy), and the
 * busiest pool is judged. Returns 0 when the pools were looked at, -1 when the server names
 * no pool. */
static int
judge_pools(struct ll_report *r, struct ll_verdict *v, int kept_up)
{
	double share, full, depth, best = -1;
	unsigned k, judged = 0, seen = 0;
	int bestk = -1;

	if (!r->have_scrapes || r->after.npools == 0)
		return -1;
	for (k = 0; k < r->after.npools; k++) {
		const char *name = r->after.pools[k].name;

		if (busy_share(r, (int)k, &share) == -1)
			continue;
		seen++;
		if (share > best)
			best = share, bestk = (int)k;
		if (!pool_flooded(r, k, &full, &depth)) {
			why_add(v, "pool %s: busy %.0f %%, not flooded (not judged)", name, 100 * share);
			continue;
		}
		judged++;
		mark(v, share >= r->capacity_share);
		why_add(v, "pool %s: flooded (%.0f refused full, queue depth max %.0f), its processes "
		        "busy %.0f %% of the run (judged: at least %.0f %%)", name, full, depth,
		        100 * share, 100 * r->capacity_share);
	}
	if (judged == 0 && seen > 0 && kept_up) {
		why_add(v, "no pool was flooded (none refused for being full, no queue reached its "
		        "capacity) and the server kept up: the capacity was underestimated (offer "
		        "more)");
	} else if (judged == 0 && bestk >= 0) {
		mark(v, best >= r->capacity_share);
		why_add(v, "no pool was flooded, yet the offer was not kept up with: the busiest pool, "
		        "%s, busy %.0f %% (judged: at least %.0f %%)", r->after.pools[bestk].name,
		        100 * best, 100 * r->capacity_share);
	}
	return seen > 0 ? 0 : -1;
}

static void
judge_capacity(struct ll_report *r, struct ll_verdict *v)
{
	const struct ll_engine *e = r->e;
	double busy = 0;
	int flooded = 0, kept_up = 1, metrics = r->lagless && busy_share(r, -1, &busy) == 0;
	unsigned i;

	for (i = 0; i < e->nroutes; i++) {
		const struct ll_route *rt = &e->routes[i];
		double cap = capacity(rt);
		double ok = (double)rt->st[LL_PH_RUN].ok_in_time / r->duration_s;

		if (!rt->heavy)
			continue;
		if (cap <= 0) {
			why_add(v, "%s: capacity unknown (measured only for an Nx rate; or give "
			        "--capacity or capacity=RPS)", rt->path);
			continue;
		}
		if (rt->rps < cap) {
			why_add(v, "%s: offered %.1f/s is below the capacity %.1f/s", rt->path, rt->rps,
			        cap);
			continue;
		}
		flooded = 1;
		kept_up &= ok >= 0.9 * rt->rps;
		if (!metrics)
			mark(v, ok >= r->capacity_share * cap);
		why_add(v, "%s: 2xx at %.1f/s = %.0f %% of the capacity %.1f/s%s", rt->path, ok,
		        100 * ok / cap, cap, metrics ? "" : " (judged: at least that share)");
	}
	if (flooded && metrics && judge_pools(r, v, kept_up) == -1) {
		mark(v, busy >= r->capacity_share);
		why_add(v, "compute processes busy %.0f %% of the run by the server's gauge (judged: "
		        "at least %.0f %%)", 100 * busy, 100 * r->capacity_share);
	}
	if (v->why[0] == '\0')
		why_add(v, "no heavy route");
}

static void
judge_timeouts(struct ll_report *r, struct ll_verdict *v)
{
	const struct ll_engine *e = r->e;
	uint64_t to = 0, g504 = 0, err = 0;
	unsigned i;

	for (i = 0; i < e->nroutes; i++) {
		const struct ll_rstats *st = &e->routes[i].st[LL_PH_RUN];

		to += ll_rstats_count(st, LL_LERR_TIMEOUT, LL_LERR_TIMEOUT);
		g504 += ll_rstats_count(st, 504, 504);
		err += ll_rstats_count(st, LL_LERR_TIMEOUT + 1, -1);
	}
	mark(v, to == 0 && g504 == 0);
	why_add(v, "%" PRIu64 " client timeouts (%.3g s), %" PRIu64 " 504, %" PRIu64
	        " connection errors", to, e->timeout_s, g504, err);
	if (r->have_scrapes) {
		double d = ll_report_counter_increase(r, LL_SF_TIMED_OUT);

		mark(v, d == 0);
		why_add(v, "server: %.0f jobs past their deadline", d);
	} else {
		why_add(v, "server deadlines: n/a (%s)",
		        r->lagless ? "no /metrics scrape" : "not lagless");
	}
}

double
ll_report_generator_delay_ms(const struct ll_report *r)
{
	double worst = 0;
	unsigned i;

	for (i = 0; i < r->e->nroutes; i++)
		worst = fmax(worst, ms(ll_hist_value_at(&r->e->routes[i].st[LL_PH_RUN].send_lag, 99)));
	return worst;
}

void
ll_report_judge(struct ll_report *r)
{
	double late = ll_report_generator_delay_ms(r);
	unsigned i;

	for (i = 0; i < LL_P_COUNT; i++) {
		r->v[i].state = LL_V_NA;
		r->v[i].why[0] = '\0';
	}
	judge_cheap(r, &r->v[LL_P_CHEAP]);
	judge_refusal(r, &r->v[LL_P_REFUSAL]);
	judge_capacity(r, &r->v[LL_P_CAPACITY]);
	judge_timeouts(r, &r->v[LL_P_TIMEOUTS]);
	/* a latency verdict that failed while the generator itself was late may be the machine's
	 * doing, not the server's: say so beside it */
	for (i = LL_P_CHEAP; i <= LL_P_REFUSAL; i++)
		if (r->v[i].state == LL_V_FAIL && late > LL_REPORT_BEHIND_MS)
			why_add(&r->v[i], "the generator was %.3f ms behind its schedule at p99: part of "
			        "this is this machine's (pin it with --cpu, or a quieter machine)", late);
}

int
ll_report_ok(const struct ll_report *r)
{
	unsigned i;

	for (i = 0; i < LL_P_COUNT; i++)
		if (r->v[i].state == LL_V_FAIL)
			return 0;
	return 1;
}

const char *
ll_report_code(int code, char *buf)
{
	if (code < 0)
		return ll_lconn_err_name(code);
	snprintf(buf, 12, "%d", code);
	return buf;
}

const char *
ll_report_statuses(const struct ll_rstats *s, char *buf, size_t len)
{
	size_t n = 0;
	unsigned k;
	char code[12];

	buf[0] = '\0';
	for (k = 0; k < s->ncodes && n + 40 < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s x %" PRIu64, k ? ", " : "",
		                      ll_report_code(s->codes[k], code), s->by_code[k].total);
	return buf;
}

double
ll_report_calibration_off(const struct ll_report *r, const struct ll_route *rt)
{
	double ok = (double)rt->st[LL_PH_RUN].ok_in_time / r->duration_s, ratio;

	if (!rt->heavy || rt->capacity_windows == 0 || rt->capacity_rps <= 0 ||
	    rt->rps < rt->capacity_rps)
		return 0;
	ratio = ok / rt->capacity_rps;
	return fabs(ratio - 1) > LL_REPORT_CALIB_OFF ? ratio : 0;
}

static void
row(FILE *f, int w, const char *path, const char *code, const struct ll_hist *h, double secs)
{
	fprintf(f, "%-*s %-7s %8" PRIu64 " %8.1f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
	        w, path, code, h->total, (double)h->total / secs, ms(ll_hist_value_at(h, 50)),
	        ms(ll_hist_value_at(h, 90)), ms(ll_hist_value_at(h, 99)),
	        ms(ll_hist_value_at(h, 99.9)), ms(h->max));
}

static void
text_table(FILE *f, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	char buf[12];
	unsigned i, k;
	int w = 6;

	/* the route column as wide as the longest path (a query can make it long) */
	for (i = 0; i < e->nroutes; i++)
		if ((int)strlen(e->routes[i].path) > w)
			w = (int)strlen(e->routes[i].path) > 60 ? 60 : (int)strlen(e->routes[i].path);
	fprintf(f, "%-*s %-7s %8s %8s %9s %9s %9s %9s %9s\n", w, "route", "status", "count",
	        "rate/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms");
	for (i = 0; i < e->nroutes; i++) {
		const struct ll_rstats *st = &e->routes[i].st[LL_PH_RUN];

		for (k = 0; k < st->ncodes; k++)
			row(f, w, e->routes[i].path, ll_report_code(st->codes[k], buf), &st->by_code[k],
			    r->duration_s);
		if (st->ncodes != 1)
			row(f, w, e->routes[i].path, "all", &st->all, r->duration_s);
	}
}

static void
text_figures(FILE *f, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	unsigned i;

	for (i = 0; i < e->nroutes; i++) {
		const struct ll_route *rt = &e->routes[i];
		const struct ll_rstats *st = &rt->st[LL_PH_RUN];
		double n = (double)st->all.total, cap = capacity(rt);
		double ok = (double)st->ok_in_time / r->duration_s;

		fprintf(f, "%s: offered %.1f/s (%s), 503 share %.1f %%", rt->path, rt->rps,
		        rt->arrival == LL_ARRIVAL_POISSON ? "poisson" : "constant",
		        n > 0 ? 100.0 * (double)ll_rstats_count(st, 503, 503) / n : 0.0);
		if (rt->heavy) {
			fprintf(f, "; 2xx done in the run %.1f/s against a pool capacity of ", ok);
			if (cap > 0)
				fprintf(f, "%.1f/s (%.0f %%)", cap, 100 * ok / cap);
			else
				fprintf(f, "n/a");
			if (rt->capacity_rps > 0)
				fprintf(f, " [calibrated %.1f/s", rt->capacity_rps);
			if (rt->capacity_metrics_rps > 0)
				fprintf(f, "%s server metrics %.1f/s", rt->capacity_rps > 0 ? "," : " [",
				        rt->capacity_metrics_rps);
			else if (!r->lagless)
				fprintf(f, "%s from server metrics: n/a, not lagless",
				        rt->capacity_rps > 0 ? "," : " [");
			if (rt->capacity_rps > 0 || rt->capacity_metrics_rps > 0 || !r->lagless)
				fprintf(f, "]");
		} else if (rt->st[LL_PH_IDLE].all.total > 0) {
			double idle = ms(ll_hist_value_at(&rt->st[LL_PH_IDLE].all, 99));
			double run = ms(ll_hist_value_at(&st->all, 99));

			fprintf(f, "; p99 %.3f ms against %.3f ms idle (%.2fx)", run, idle,
			        idle > 0 ? run / idle : 0.0);
		}
		fprintf(f, "; generator delay p99 %.3f ms\n",
		        ms(ll_hist_value_at(&st->send_lag, 99)));
		if (rt->capacity_windows > 0)
			fprintf(f, "%s: calibration spread over %u windows of %.2f s: sd %.1f/s (%.0f %%), "
			        "slowest %.1f/s, fastest %.1f/s\n", rt->path, rt->capacity_windows,
			        rt->capacity_window_s, rt->capacity_sd_rps, 100 * rt->capacity_sd_rps /
			        rt->capacity_rps, rt->capacity_min_rps, rt->capacity_max_rps);
		if (ll_report_calibration_off(r, rt) > 0)
			fprintf(f, "%s: WARNING: 2xx at %.1f/s in the run, %.0f %% of the calibrated "
			        "%.1f/s (more than %.0f %% off): the machine's load changed, so the %gx "
			        "offer was really %.2fx of what the server did\n", rt->path, ok,
			        100 * ll_report_calibration_off(r, rt), rt->capacity_rps,
			        100 * LL_REPORT_CALIB_OFF, rt->rate.value, ok > 0 ? rt->rps / ok : 0.0);
		if (n > 0 && ll_rstats_count(st, 200, 299) == 0) {
			char buf[256];

			fprintf(f, "%s: no 2xx answer at all: %s\n", rt->path,
			        ll_report_statuses(st, buf, sizeof(buf)));
		}
	}
}

static void
text_pools(FILE *f, const struct ll_report *r)
{
	double share, full, depth;
	unsigned k;

	for (k = 0; r->have_scrapes && k < r->after.npools; k++) {
		int flooded = pool_flooded(r, k, &full, &depth);

		fprintf(f, "server: pool %s: ", r->after.pools[k].name);
		if (busy_share(r, (int)k, &share) == 0)
			fprintf(f, "busy %.0f %% of %.0f processes", 100 * share,
			        r->after.pools[k].v[LL_PF_PROCS]);
		else
			fprintf(f, "busy n/a");
		fprintf(f, ", queue depth max %.0f of %.0f, %.0f refused full%s\n", depth,
		        r->after.pools[k].v[LL_PF_QCAP], full, flooded ? " (flooded)" : "");
	}
}

void
ll_report_server_figures(const struct ll_report *r, struct ll_server_figures *sf)
{
	const struct ll_point *pt;
	double lag_sum = 0, lag_n = 0;
	size_t i, n;
	int same;

	memset(sf, 0, sizeof(*sf));
	pt = run_points(r, &n);
	sf->npoints = n;
	for (i = 0; i < n; i++) {
		sf->depth_max = fmax(sf->depth_max, pt[i].m.v[LL_SF_QUEUE_DEPTH]);
		sf->busy_mean += pt[i].m.v[LL_SF_BUSY] / (double)n;
		if (!pt[i].has_lag)
			continue;
		sf->lag_bound_ms = fmax(sf->lag_bound_ms, pt[i].lag_max_s * 1e3);
		lag_sum += pt[i].lag_mean_s;
		lag_n++;
	}
	/* the run's p99 from the buckets' counts between its first and last scrape, when both
	 * are of the same servers */
	same = n >= 2 && ll_scrape_same(&pt[0].m, &pt[n - 1].m);
	if (same && pt[0].seg == pt[n - 1].seg)
		sf->lag_p99_ms = 1e3 * ll_scrape_lag_quantile(&pt[0].m, &pt[n - 1].m, 0.99);
	sf->lag_mean_ms = lag_n > 0 ? 1e3 * lag_sum / lag_n : 0;
	if (same && pt[n - 1].m.v[LL_SF_WAIT_COUNT] > pt[0].m.v[LL_SF_WAIT_COUNT])
		sf->wait_mean_ms = 1e3 * (pt[n - 1].m.v[LL_SF_WAIT_SUM] - pt[0].m.v[LL_SF_WAIT_SUM]) /
		                   (pt[n - 1].m.v[LL_SF_WAIT_COUNT] - pt[0].m.v[LL_SF_WAIT_COUNT]);
	else if (r->have_scrapes && ll_scrape_same(&r->before, &r->after) &&
	         r->after.v[LL_SF_WAIT_COUNT] > r->before.v[LL_SF_WAIT_COUNT])
		sf->wait_mean_ms = 1e3 * (r->after.v[LL_SF_WAIT_SUM] - r->before.v[LL_SF_WAIT_SUM]) /
		                   (r->after.v[LL_SF_WAIT_COUNT] - r->before.v[LL_SF_WAIT_COUNT]);
}

static void
text_server(FILE *f, const struct ll_report *r)
{
	struct ll_server_figures sf;

	if (!r->lagless) {
		fprintf(f, "server: not lagless (no lagless /metrics): loop lag, queue depth, "
		        "in-flight, rejections, restarts and the pool's own capacity are n/a\n");
		return;
	}
	ll_report_server_figures(r, &sf);
	fprintf(f, "server: %zu scrapes during the run; loop lag p99 %.3f ms (from the buckets' "
	        "counts over the run; highest bucket bound reached %.3f ms), mean %.3f ms; "
	        "queue wait mean %.3f ms; queue depth max %.0f of %.0f; compute busy %.2f of %.0f on "
	        "average", sf.npoints, sf.lag_p99_ms, sf.lag_bound_ms, sf.lag_mean_ms,
	        sf.wait_mean_ms, sf.depth_max, r->after.v[LL_SF_QUEUE_CAPACITY], sf.busy_mean,
	        r->after.v[LL_SF_COMPUTE]);
	if (r->have_scrapes)
		fprintf(f, "; rejected %.0f, restarts %.0f, jobs failed %.0f",
		        ll_report_counter_increase(r, LL_SF_REJECTED),
		        ll_report_counter_increase(r, LL_SF_RESTARTS),
		        ll_report_counter_increase(r, LL_SF_FAILED));
	fprintf(f, "\n");
	text_pools(f, r);
	ll_report_servers_text(f, r);
}

void
ll_report_hints_text(FILE *f, const struct ll_report *r)
{
	unsigned i;

	for (i = 0; i < r->nhints; i++)
		fprintf(f, "%s\n", r->hints[i].text);
}

unsigned
ll_report_servers_changed(const struct ll_report *r)
{
	return r->e->servers_changed +
	       (r->have_scrapes && !ll_scrape_same(&r->before, &r->after));
}

void
ll_report_servers_text(FILE *f, const struct ll_report *r)
{
	unsigned n = ll_report_servers_changed(r);

	if (n == 0)
		return;
	fprintf(f, "server: WARNING: /metrics answered from different servers between scrapes "
	        "(lagless_start_time_seconds changed %u times): several replicas behind one "
	        "address (a load balancer), or a restart; no difference is taken over such a pair "
	        "of scrapes (loop lag, queue wait, counters), so those figures cover less of the "
	        "run; give every replica's metrics URL with --metrics URL,...\n", n);
}

void
ll_report_text(FILE *f, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	static const char *const word[] = { "FAIL", "PASS" };
	unsigned i;

	fprintf(f, "lagless-load %s: %s, %.1f s run, up to %u connections (peak %u, opened %"
	        PRIu64 ")\n\n", LG_VERSION, r->url, r->duration_s, e->max_conns, e->peak_conns,
	        e->opened);
	text_table(f, r);
	fprintf(f, "\n");
	text_figures(f, r);
	text_server(f, r);
	if (ll_report_generator_delay_ms(r) > LL_REPORT_BEHIND_MS)
		fprintf(f, "generator: BEHIND its schedule, delay p99 %.3f ms (its CPU was taken, or "
		        "every connection was busy): the latencies include it\n",
		        ll_report_generator_delay_ms(r));
	else
		fprintf(f, "generator: kept its schedule, delay p99 %.3f ms at worst\n",
		        ll_report_generator_delay_ms(r));
	if (e->peak_pending > 0)
		fprintf(f, "generator: up to %u requests waited for a connection (bound %u); their "
		        "wait counts in their latency\n", e->peak_pending, e->max_conns);
	ll_report_hints_text(f, r);
	fprintf(f, "\n");
	for (i = 0; i < LL_P_COUNT; i++)
		fprintf(f, "%-4s %s: %s\n", r->v[i].state == LL_V_NA ? "n/a" : word[r->v[i].state],
		        promise_names[i], r->v[i].why);
}
