/* Warnings that name a likely cause (load/hints.h). */
#include "load/hints.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "load/json.h"

/* Pearson's correlation of (x[i], y[i]) for i < n; 0 when either does not vary. */
static double
correlation(const double *x, const double *y, size_t n)
{
	double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		mx += x[i] / (double)n;
		my += y[i] / (double)n;
	}
	for (i = 0; i < n; i++) {
		sxy += (x[i] - mx) * (y[i] - my);
		sxx += (x[i] - mx) * (x[i] - mx);
		syy += (y[i] - my) * (y[i] - my);
	}
	return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

static void __attribute__((format(printf, 4, 5)))
add(struct ll_report *r, const char *kind, unsigned route, const char *fmt, ...)
{
	struct ll_hint *h;
	va_list ap;

	if (r->nhints == LL_REPORT_HINTS)
		return;
	h = &r->hints[r->nhints++];
	h->kind = kind;
	h->route = route;
	va_start(ap, fmt);
	vsnprintf(h->text, sizeof(h->text), fmt, ap);
	va_end(ap);
}

/* Cheap route c against every heavy route over the seconds both answered in (sec: nsec rows
 * per route): the best correlated heavy route when above the threshold, with its figures. */
static void
shared_wait_of(struct ll_report *r, const struct ll_second *sec, unsigned nsec, unsigned c,
               double *x, double *y)
{
	const struct ll_engine *e = r->e;
	const struct ll_route *rt = &e->routes[c];
	double idle = (double)ll_hist_value_at(&rt->st[LL_PH_IDLE].all, 99) / 1e6, peak = 0;
	double best = LL_HINTS_SHARED_CORR, k;
	unsigned t, h, n, besth = 0, bestn = 0;

	for (t = 0; t < nsec; t++)
		peak = fmax(peak, sec[c * nsec + t].p99_ms);
	if (rt->st[LL_PH_IDLE].all.total == 0 || peak <= r->cheap_factor * idle + r->cheap_slack_ms)
		return;   /* it did not rise above what the cheap verdict allows */
	for (h = 0; h < e->nroutes; h++) {
		if (!e->routes[h].heavy)
			continue;
		for (n = 0, t = 0; t < nsec; t++)
			if (sec[c * nsec + t].count > 0 && sec[h * nsec + t].count > 0) {
				x[n] = sec[c * nsec + t].p99_ms;
				y[n++] = sec[h * nsec + t].p99_ms;
			}
		if (n >= LL_HINTS_MIN_SECONDS && (k = correlation(x, y, n)) >= best)
			best = k, besth = h, bestn = n;
	}
	if (bestn > 0)
		add(r, "shared_wait", c, "%s: WARNING: its latency rose together with %s's (per-second "
		    "p99 correlation %.2f over %u s; up to %.1f ms against %.3f ms idle): the cheap "
		    "route likely waits on something the heavy one fills, a shared pool or queue, or "
		    "heavy work on the event loop; give the heavy route a pool of its own (lagless "
		    "--pool) and check that it is offloaded", rt->path, e->routes[besth].path, best,
		    bestn, peak, idle);
}

static void
shared_wait(struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	unsigned nsec = (unsigned)ceil(r->span_s > 0 ? r->span_s : r->duration_s), i;
	struct ll_second *sec = calloc((size_t)nsec * e->nroutes + 1, sizeof(*sec));
	double *x = calloc(nsec + 1, sizeof(*x)), *y = calloc(nsec + 1, sizeof(*y));

	for (i = 0; sec && x && y && i < e->nroutes; i++)
		if (ll_json_seconds(e, i, nsec, sec + (size_t)i * nsec) == -1)
			break;
	for (i = 0; sec && x && y && nsec >= LL_HINTS_MIN_SECONDS && i < e->nroutes; i++)
		if (!e->routes[i].heavy)
			shared_wait_of(r, sec, nsec, i, x, y);
	free(sec);
	free(x);
	free(y);
}

/* Route i's 2xx latencies against its template's value. */
static void
work_grows_of(struct ll_report *r, unsigned i, double *x, double *y)
{
	const struct ll_engine *e = r->e;
	const struct ll_route *rt = &e->routes[i];
	char name[64];
	size_t j, n = 0;
	double k;

	for (j = 0; j < e->nsamples; j++) {
		const struct ll_sample *s = &e->samples[j];

		if (s->route == i && s->status >= 200 && s->status < 300 && isfinite(s->tvalue)) {
			x[n] = s->tvalue;
			y[n++] = (double)s->latency_ns / 1e6;
		}
	}
	if (n < LL_HINTS_MIN_SAMPLES || (k = correlation(x, y, n)) < LL_HINTS_KEY_CORR)
		return;
	ll_tmpl_part_name(rt->tmpl, (unsigned)rt->tmpl->value_part, name, sizeof(name));
	add(r, "work_grows_with_key", i, "%s: WARNING: its latency grows with the value of %s "
	    "(correlation %.2f over %zu 2xx answers): the work likely grows with the key (a size "
	    "or a count in it), so the route's percentiles mix small and large jobs; load one "
	    "size per route, or set latency against the value (--samples)%s", rt->path, name, k, n,
	    rt->tmpl->parts[rt->tmpl->value_part].kind == LL_TP_SEQ ? "; {seq} also grows with "
	    "time, and a queue building up over the run looks the same" : "");
}

static void
work_grows(struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	double *x = malloc((e->nsamples + 1) * sizeof(*x));
	double *y = malloc((e->nsamples + 1) * sizeof(*y));
	unsigned i;

	for (i = 0; x && y && i < e->nroutes; i++)
		if (e->routes[i].tmpl != NULL && e->routes[i].tmpl->value_part >= 0)
			work_grows_of(r, i, x, y);
	free(x);
	free(y);
}

void
ll_hints_find(struct ll_report *r)
{
	r->nhints = 0;
	if (r->e == NULL)
		return;
	shared_wait(r);
	work_grows(r);
}
