/* Reading a lagless server's own view from its /metrics (Prometheus text format 0.0.4): the
 * gauges and counters lagless-load puts on the same time axis as its latencies. Every series of
 * a wanted name is summed over its labels (so per-pool or per-worker series add up), and the
 * loop-lag histogram is summed per bucket bound over the loop workers. */
#ifndef LL_LOAD_SCRAPE_H
#define LL_LOAD_SCRAPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

#define LL_SCRAPE_LAG_BOUNDS 32
#define LL_SCRAPE_POOLS LG_MAX_POOLS /* named pools kept (lagless --pool); more are summed only */
#define LL_SCRAPE_POOL_NAME 32
#define LL_SCRAPE_SERVERS 16  /* servers whose /metrics one scrape may sum (--metrics URL,...) */

enum ll_pool_field {
	LL_PF_ACTIVE,          /* lagless_pool_processes{state="active"}: running a job */
	LL_PF_PROCS,           /* lagless_pool_processes, every state: alive */
	LL_PF_DEPTH,           /* lagless_pool_queue_depth */
	LL_PF_QCAP,            /* lagless_pool_queue_capacity */
	LL_PF_FULL,            /* lagless_pool_full_total: 503s because the pool was full */
	LL_PF_COUNT
};

struct ll_scrape_pool {
	char name[LL_SCRAPE_POOL_NAME];
	double v[LL_PF_COUNT];
};

enum ll_scrape_field {
	LL_SF_QUEUE_DEPTH,     /* lagless_queue_depth */
	LL_SF_QUEUE_CAPACITY,  /* lagless_queue_capacity */
	LL_SF_INFLIGHT,        /* lagless_inflight_requests */
	LL_SF_BUSY,            /* lagless_compute_busy */
	LL_SF_COMPUTE,         /* lagless_compute_processes */
	LL_SF_CONNS,           /* lagless_connections_open */
	LL_SF_REJECTED,        /* lagless_jobs_rejected_total, all reasons */
	LL_SF_TIMED_OUT,       /* lagless_jobs_timed_out_total */
	LL_SF_FAILED,          /* lagless_jobs_failed_total, all reasons */
	LL_SF_RESTARTS,        /* lagless_process_restarts_total, all roles and reasons */
	LL_SF_RUN_SUM,         /* lagless_job_run_seconds_sum, all kinds */
	LL_SF_RUN_COUNT,       /* lagless_job_run_seconds_count, all kinds */
	LL_SF_SLOTS,           /* lagless_job_slots */
	LL_SF_WAIT_SUM,        /* lagless_job_queue_wait_seconds_sum, all kinds */
	LL_SF_WAIT_COUNT,      /* lagless_job_queue_wait_seconds_count, all kinds */
	LL_SF_COUNT
};

struct ll_scrape {
	int lagless;                       /* lagless_build_info was present */
	double v[LL_SF_COUNT];
	int seen[LL_SF_COUNT];             /* the name appeared */
	unsigned nlag;                     /* loop-lag bucket bounds, ascending, +Inf last */
	double lag_le[LL_SCRAPE_LAG_BOUNDS];
	double lag_cum[LL_SCRAPE_LAG_BOUNDS];  /* cumulative counts summed over workers */
	double lag_sum, lag_count;         /* seconds, samples */
	unsigned npools;                   /* pools in the order they first appeared */
	struct ll_scrape_pool pools[LL_SCRAPE_POOLS];
	/* which servers answered: lagless_start_time_seconds of each text summed in, in order (a
	 * text without it counts as 0); two scrapes may be subtracted only when these agree */
	unsigned nservers;
	double start_s[LL_SCRAPE_SERVERS];
};

/* Parses a /metrics body of len bytes (need not be NUL-terminated) into s, one server's:
 * s->nservers is 1 and s->start_s[0] its lagless_start_time_seconds (0 when absent). Lines it
 * does not know are skipped; malformed ones too. Returns 0, or -1 when the text has no sample
 * line at all (not Prometheus text). */
int ll_scrape_parse(struct ll_scrape *s, const char *text, size_t len);

/* Adds scrape b (one server's, or a sum) into sum, as one scrape of several replicas: every
 * gauge and counter summed, the loop-lag buckets summed per bound, pools summed by name,
 * lagless only when both are, b's servers appended (up to LL_SCRAPE_SERVERS). An empty sum
 * (zeroed, nservers 0) takes b as it is. */
void ll_scrape_add(struct ll_scrape *sum, const struct ll_scrape *b);

/* 1 when a and b came from the same servers in the same order (their start times agree), so
 * that b minus a is what those servers did in between; 0 when a load balancer sent the two
 * scrapes to different replicas, or a server restarted (a new start time) in between. */
int ll_scrape_same(const struct ll_scrape *a, const struct ll_scrape *b);

/* Loop lag between two scrapes of the same server (later minus earlier): the mean in seconds,
 * and the upper bound of the highest bucket that gained samples (the interval's maximum to
 * the bucket's resolution; +Inf reported as the last finite bound). Both 0 without samples. */
void ll_scrape_lag_delta(const struct ll_scrape *earlier, const struct ll_scrape *later,
                         double *mean_s, double *max_s);

/* The q-quantile (0 < q <= 1) of the loop-lag samples taken between two scrapes, from the
 * buckets' counts: linear within the bucket it falls in (between the bound below and its own;
 * the +Inf bucket gives the last finite bound). A loop whose samples sit at 0.1-1 ms thus reads
 * about that, where the bucket bound alone would read the bound. Seconds; 0 without samples. */
double ll_scrape_lag_quantile(const struct ll_scrape *earlier, const struct ll_scrape *later,
                              double q);

/* The increase of a counter between two samples of it, earlier prev and later cur: cur - prev,
 * or cur when the counter went down, which means it restarted from 0 in between (a lagless
 * reload starts its counters again, docs/OPERATIONS.md): the rule of Prometheus' rate() and
 * increase(). Never negative for counters that are not. */
double ll_counter_increase(double prev, double cur);

/* The pool called name in s, or NULL. */
const struct ll_scrape_pool *ll_scrape_pool(const struct ll_scrape *s, const char *name);

#endif
