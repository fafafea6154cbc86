/* Statistics in the proc pages: fixed-bucket histograms, counters and the recent loop-lag
 * windows (layout in shm/layout.h). Every field has exactly one writer, the process holding the
 * page, so writers use relaxed load + store instead of read-modify-write instructions; readers
 * (the /metrics and /status renderers in any loop worker) load each field relaxed and may see a
 * histogram mid-update, which costs at most one observation of skew in one scrape.
 *
 * Buckets follow Prometheus histogram conventions (the exposition format's cumulative `le`
 * buckets are built by the renderer; see prometheus.io/docs/instrumenting/exposition_formats). */
#ifndef LG_SHM_STATS_H
#define LG_SHM_STATS_H

#include <stdint.h>

#include "shm/layout.h"

/* The labels the renderers (/metrics, /status) print, given by their caller so that they need
 * no router or kind table: route[0..nroutes-1] are the statistics rows (the last is "none",
 * requests that matched no route), kind[k] the name of job kind number k (NULL or k >= nkinds:
 * "unknown"). The caller owns the strings. */
struct lg_stats_names {
	unsigned nroutes;
	const char *const *route;
	unsigned nkinds;
	const char *const *kind;
};

/* Name of job kind `kind` in nm, "unknown" when nm has none for it. Static storage (nm's). */
const char *lg_stats_kind_name(const struct lg_stats_names *nm, uint32_t kind);

/* Why a module's init failed, from struct lg_module_health.cause, as "failed", "was killed by
 * signal 6 (Aborted)" or "exited with status 3", into buf (cap bytes, NUL-terminated). */
void lg_stats_init_cause(int32_t cause, char *buf, size_t cap);

/* Upper bounds in ns of the loop-lag buckets: 50 us, 100 us, 250 us ... 5 s (LG_LAG_BOUNDS). */
extern const uint64_t lg_stats_lag_bounds[LG_LAG_BOUNDS];

/* Upper bounds in ns of the request and job time buckets: 100 us ... 60 s (LG_STATS_BOUNDS). */
extern const uint64_t lg_stats_time_bounds[LG_STATS_BOUNDS];

/* Single-writer counter add (relaxed load + relaxed store). Only the page's process may call it. */
static inline void
lg_stats_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
	    memory_order_relaxed);
}

/* Adds one observation of v ns to h, whose finite upper bounds are bounds[0..nb-1] (ascending,
 * nb <= LG_STATS_BOUNDS); values above the last bound go to bucket nb (+Inf). Single writer. */
void lg_hist_observe(struct lg_hist *h, const uint64_t *bounds, unsigned nb, uint64_t v);

/* Total observations in h (the sum of its nb + 1 buckets). */
uint64_t lg_hist_count(const struct lg_hist *h, unsigned nb);

/* Index into the responses table for an HTTP status code: codes the server sends have their
 * own column, anything else goes to LG_STATS_CODES - 1 ("other"). */
unsigned lg_stats_code_index(int status);

/* The status code of column i, or 0 for the "other" column (and for i out of range). */
int lg_stats_code_at(unsigned i);

/* Records one loop-lag sample: lag_ns into p->lag and into the 10 s window of now_ns
 * (CLOCK_MONOTONIC) in p->lag_recent, clearing a window that held an older epoch. */
void lg_stats_lag(struct lg_proc_page *p, uint64_t now_ns, uint64_t lag_ns);

struct lg_lag_summary {
	uint64_t count;     /* samples in the windows read */
	double p50, p99;    /* seconds; interpolated within the bucket, as Prometheus does */
	double max;         /* seconds; exact to the microsecond */
};

/* Summarises p's lag samples from the windows of the last minute as of now_ns (the current
 * window and the five before it, so 50 to 60 s of samples). Zero summary when there are none. */
void lg_stats_lag_recent(const struct lg_proc_page *p, uint64_t now_ns,
    struct lg_lag_summary *out);

/* Label of a restart reason (enum lg_restart_reason): "crash", "exit", "deadline", "job",
 * "client_gone", "stuck"; "?" out of range. Static storage. */
const char *lg_stats_restart_reason(unsigned r);

/* The row of mp->kinds for job kind `kind` on route `route` (its registry index), or NULL
 * when the master never recorded a death of that pair. Lock-free read; the master is the only
 * writer (rows are filled once, never moved; a row's route is written before its kind). */
const struct lg_kind_health *lg_stats_kind_health(const struct lg_master_page *mp, uint32_t kind,
    uint32_t route);

/* Nanoseconds left of the quarantine of job kind `kind` on route `route` at now_ns
 * (CLOCK_MONOTONIC), 0 when that pair is not quarantined: quarantine is by kind and route
 * (module ABI 1.2), so the same kind on another route still runs. A quarantined pair is
 * refused with 503 at head time and not run when it was already queued (docs/OPERATIONS.md,
 * "Poison jobs"). */
uint64_t lg_stats_quarantine_left(const struct lg_master_page *mp, uint32_t kind,
    uint32_t route, uint64_t now_ns);

#endif
