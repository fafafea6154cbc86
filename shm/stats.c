#include "shm/stats.h"

#include <stdio.h>
#include <string.h>

#define US 1000ull
#define MS 1000000ull
#define S  1000000000ull
#define WINDOW_NS (10 * S)

const uint64_t lg_stats_lag_bounds[LG_LAG_BOUNDS] = {
	50 * US, 100 * US, 250 * US, 500 * US, 1 * MS, 2500 * US, 5 * MS, 10 * MS,
	25 * MS, 50 * MS, 100 * MS, 250 * MS, 500 * MS, 1 * S, 2500 * MS, 5 * S,
};

const uint64_t lg_stats_time_bounds[LG_STATS_BOUNDS] = {
	100 * US, 250 * US, 500 * US, 1 * MS, 2500 * US, 5 * MS, 10 * MS, 25 * MS, 50 * MS,
	100 * MS, 250 * MS, 500 * MS, 1 * S, 2500 * MS, 5 * S, 10 * S, 30 * S, 60 * S,
};

/* The codes lagless answers (README "Routes"), plus the ones the HTTP layer may grow into. */
static const int codes[LG_STATS_CODES - 1] = {
	200, 204, 304, 400, 404, 405, 408, 411, 413, 414, 417, 431, 500, 501, 502, 503, 504, 505,
	100,
};

static unsigned
bucket_of(const uint64_t *bounds, unsigned nb, uint64_t v)
{
	unsigned lo = 0, hi = nb;

	/* first bound >= v (Prometheus buckets are "less than or equal"); most observations
	 * (a request, a lag probe) fall in the first bucket, which is tried first */
	if (nb > 0 && v <= bounds[0])
		return 0;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (bounds[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void
lg_hist_observe(struct lg_hist *h, const uint64_t *bounds, unsigned nb, uint64_t v)
{
	unsigned b = bucket_of(bounds, nb, v);

	atomic_store_explicit(&h->sum_ns, atomic_load_explicit(&h->sum_ns,
	    memory_order_relaxed) + v, memory_order_relaxed);
	lg_stats_add(&h->bucket[b], 1);
}

uint64_t
lg_hist_count(const struct lg_hist *h, unsigned nb)
{
	uint64_t n = 0;

	for (unsigned i = 0; i <= nb; i++)
		n += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
	return n;
}

unsigned
lg_stats_code_index(int status)
{
	for (unsigned i = 0; i < LG_STATS_CODES - 1; i++)
		if (codes[i] == status)
			return i;
	return LG_STATS_CODES - 1;
}

int
lg_stats_code_at(unsigned i)
{
	return i < LG_STATS_CODES - 1 ? codes[i] : 0;
}

void
lg_stats_lag(struct lg_proc_page *p, uint64_t now_ns, uint64_t lag_ns)
{
	uint32_t epoch = (uint32_t)(now_ns / WINDOW_NS) + 1;
	struct lg_lag_window *w = &p->lag_recent[epoch % LG_LAG_WINDOWS];
	unsigned b = bucket_of(lg_stats_lag_bounds, LG_LAG_BOUNDS, lag_ns);
	uint64_t us = lag_ns / US;

	lg_hist_observe(&p->lag, lg_stats_lag_bounds, LG_LAG_BOUNDS, lag_ns);
	if (atomic_load_explicit(&w->epoch, memory_order_relaxed) != epoch) {
		/* A reader may catch the window half cleared: /status is a snapshot. */
		for (unsigned i = 0; i <= LG_LAG_BOUNDS; i++)
			atomic_store_explicit(&w->count[i], 0, memory_order_relaxed);
		atomic_store_explicit(&w->max_us, 0, memory_order_relaxed);
		atomic_store_explicit(&w->epoch, epoch, memory_order_release);
	}
	atomic_store_explicit(&w->count[b], atomic_load_explicit(&w->count[b],
	    memory_order_relaxed) + 1, memory_order_relaxed);
	if (us > atomic_load_explicit(&w->max_us, memory_order_relaxed))
		atomic_store_explicit(&w->max_us, us > UINT32_MAX ? UINT32_MAX : (uint32_t)us,
		    memory_order_relaxed);
}

/* The q-quantile (0 < q <= 1) of counts over the lag buckets, interpolated linearly inside
 * the bucket holding it; the +Inf bucket and the top of the range are capped at max_s. */
static double
quantile(const uint64_t *counts, uint64_t total, double q, double max_s)
{
	double rank = q * (double)total, below = 0;

	for (unsigned b = 0; b <= LG_LAG_BOUNDS; b++) {
		if (counts[b] == 0 || below + (double)counts[b] < rank) {
			below += (double)counts[b];
			continue;
		}
		double lo = b == 0 ? 0 : (double)lg_stats_lag_bounds[b - 1] / 1e9;
		double hi = b < LG_LAG_BOUNDS ? (double)lg_stats_lag_bounds[b] / 1e9 : max_s;
		double v = lo + (hi - lo) * (rank - below) / (double)counts[b];

		return v > max_s ? max_s : v;
	}
	return max_s;
}

void
lg_stats_lag_recent(const struct lg_proc_page *p, uint64_t now_ns, struct lg_lag_summary *out)
{
	uint32_t cur = (uint32_t)(now_ns / WINDOW_NS) + 1;
	uint64_t counts[LG_LAG_BOUNDS + 1];
	uint32_t max_us = 0;

	memset(out, 0, sizeof(*out));
	memset(counts, 0, sizeof(counts));
	for (unsigned k = 0; k < LG_LAG_WINDOWS; k++) {
		const struct lg_lag_window *w = &p->lag_recent[k];
		uint32_t e = atomic_load_explicit(&w->epoch, memory_order_acquire);

		if (e == 0 || e > cur || cur - e >= LG_LAG_WINDOWS)
			continue;
		for (unsigned i = 0; i <= LG_LAG_BOUNDS; i++) {
			uint32_t n = atomic_load_explicit(&w->count[i], memory_order_relaxed);

			counts[i] += n;
			out->count += n;
		}
		uint32_t m = atomic_load_explicit(&w->max_us, memory_order_relaxed);
		max_us = m > max_us ? m : max_us;
	}
	if (out->count == 0)
		return;
	out->max = (double)max_us / 1e6;
	out->p50 = quantile(counts, out->count, 0.50, out->max);
	out->p99 = quantile(counts, out->count, 0.99, out->max);
}

const struct lg_kind_health *
lg_stats_kind_health(const struct lg_master_page *mp, uint32_t kind, uint32_t route)
{
	for (unsigned i = 0; i < LG_KIND_HEALTH && kind != 0; i++) {
		uint32_t k = atomic_load_explicit(&mp->kinds[i].kind, memory_order_acquire);

		if (k == kind && mp->kinds[i].route == route)
			return &mp->kinds[i];
		if (k == 0)
			break; /* rows are filled in order */
	}
	return NULL;
}

uint64_t
lg_stats_quarantine_left(const struct lg_master_page *mp, uint32_t kind, uint32_t route,
    uint64_t now_ns)
{
	const struct lg_kind_health *h = lg_stats_kind_health(mp, kind, route);
	uint64_t until;

	if (h == NULL)
		return 0;
	until = atomic_load_explicit(&h->until_ns, memory_order_relaxed);
	return until > now_ns ? until - now_ns : 0;
}

const char *
lg_stats_restart_reason(unsigned r)
{
	static const char *const names[LG_RESTART_REASONS] = {
		[LG_RESTART_CRASH] = "crash", [LG_RESTART_EXIT] = "exit",
		[LG_RESTART_DEADLINE] = "deadline", [LG_RESTART_JOB] = "job",
		[LG_RESTART_CLIENT_GONE] = "client_gone", [LG_RESTART_STUCK] = "stuck",
	};

	return r < LG_RESTART_REASONS ? names[r] : "?";
}

void
lg_stats_init_cause(int32_t cause, char *buf, size_t cap)
{
	if (cause > 0)
		snprintf(buf, cap, "was killed by signal %d (%s)", (int)cause, strsignal((int)cause));
	else if (cause < 0)
		snprintf(buf, cap, "exited with status %d", (int)(-cause - 1));
	else
		snprintf(buf, cap, "failed");
}

const char *
lg_stats_kind_name(const struct lg_stats_names *nm, uint32_t kind)
{
	return kind < nm->nkinds && nm->kind[kind] != NULL ? nm->kind[kind] : "unknown";
}
