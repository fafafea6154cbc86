/* The open-loop engine of lagless-load: routes on their schedules, a bounded set of keep-alive
 * connections shared by every route, a FIFO of requests due while every connection is busy,
 * per-route and per-status histograms, a sample log for plots, and the server's /metrics
 * scrapes on the same time axis (taken by load/scraper.h).
 *
 * A request is due at its scheduled time (load/sched.h) and its latency runs from then to the
 * last byte of its response, whether it waited for a connection, for the server to accept, or
 * for the server to answer. Nothing the server does can slow the schedule down. */
#ifndef LL_LOAD_ENGINE_H
#define LL_LOAD_ENGINE_H

#include <ev.h>
#include <stdint.h>
#include <sys/socket.h>

#include "load/conn.h"
#include "load/hist.h"
#include "load/sched.h"
#include "load/scrape.h"
#include "load/tmpl.h"

#define LL_MAX_STATUSES 16      /* distinct results kept per route and phase */

enum ll_phase { LL_PH_CALIBRATE, LL_PH_IDLE, LL_PH_RUN, LL_PH_COUNT };

/* Results of one route in one phase. codes[] holds HTTP statuses and negative LL_LERR_*. */
struct ll_rstats {
	unsigned ncodes;
	int codes[LL_MAX_STATUSES];
	struct ll_hist by_code[LL_MAX_STATUSES];
	struct ll_hist all;
	uint64_t other;            /* results beyond LL_MAX_STATUSES distinct codes */
	uint64_t issued;           /* requests that came due */
	uint64_t ok_in_time;       /* 2xx complete before the phase's schedule ended: the work the
	                            * server did in the phase (late answers were queued) */
	struct ll_hist send_lag;   /* actual first-byte write minus due time: the generator's own
	                            * delay (waiting for a connection included) */
};

struct ll_route {
	char *spec;                /* storage of path (load/routespec.c), owned */
	char *path;                /* as given, with its query */
	const char *method;        /* "GET", "POST", ... (upper-case) */
	char method_buf[24];       /* storage of a method given on the command line */
	char *headers;             /* "Name: value\r\n"... of this route, malloc'd, or NULL */
	char *prefixed;            /* storage of path behind the target URL's path, or NULL */
	double capacity_given;     /* capacity=RPS of this route (0: none) */
	struct ll_tmpl *tmpl;      /* path template expanded per request (load/tmpl.h), or NULL;
	                            * owned */
	int heavy;                 /* its rate was relative, or it was marked heavy */
	struct ll_rate rate;
	double rps;                /* requests per second once resolved */
	enum ll_arrival arrival;
	char *head;                /* the request head, built once */
	size_t head_len;
	char *body;                /* request body (file contents or random bytes), or NULL */
	size_t body_len;
	struct ll_sched sched;
	double capacity_rps;       /* measured by calibration, 0 when not measured */
	double capacity_metrics_rps; /* computed from the server's metrics, 0 when unknown */
	double capacity_sd_rps;    /* calibration's spread: sd of the 2xx rate per window */
	double capacity_min_rps, capacity_max_rps;  /* its slowest and fastest window */
	unsigned capacity_windows; /* windows it had, 0 when not calibrated */
	double capacity_window_s;  /* their length */
	struct ll_rstats st[LL_PH_COUNT];
};

struct ll_sample {            /* one request of the measured run, for plots and --samples */
	uint64_t due_ns;          /* relative to the run's start */
	uint64_t latency_ns;
	int32_t status;
	uint32_t route;
	double tvalue;            /* its path template's value (load/tmpl.h), NaN without one */
};

struct ll_point {             /* one /metrics scrape during the run */
	double t_s;               /* seconds since the run's start (the same axis as samples) */
	struct ll_scrape m;
	unsigned seg;             /* which run phase (a step level) it belongs to, from 0 */
	int has_lag;              /* the lag figures below are from an interval of this phase */
	double lag_mean_s, lag_max_s;  /* since the previous scrape; max: the bucket bound */
	double lag_p50_s, lag_p99_s;   /* interpolated from the buckets' counts */
};

#define LL_CALIB_BINS 256     /* calibration completions per 0.25 s, for the spread */
#define LL_CALIB_BIN_S 0.25

struct ll_engine {
	struct ev_loop *loop;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct ll_route *routes;
	unsigned nroutes;
	unsigned max_conns;
	double timeout_s;
	uint64_t seed;
	/* connections */
	unsigned nconns, peak_conns;
	uint64_t opened;
	struct ll_lconn *idle;               /* keep-alive connections free for a request */
	struct ll_lreq *pend_head, *pend_tail;
	unsigned npending, peak_pending;
	unsigned outstanding;                /* requests due and not finished */
	/* the current phase */
	enum ll_phase phase;
	uint64_t phase_start, phase_end;     /* ns, CLOCK_MONOTONIC */
	int scheduling;                      /* routes still issue requests */
	int closed_route;                    /* calibration: route kept closed-loop, else -1 */
	uint64_t warm_end;                   /* calibration: completions count after this */
	uint64_t calib_ok;
	uint32_t calib_bins[LL_CALIB_BINS];  /* 2xx completed per LL_CALIB_BIN_S after warm_end */
	unsigned char *active;               /* per route: in this phase */
	int timerfd;
	ev_io tick;
	ev_timer stop;
	/* every run phase (step levels) on one axis: samples and scrapes from origin_ns */
	uint64_t origin_ns;                  /* the first run phase's start, 0 before */
	unsigned nruns;                      /* run phases started */
	/* samples of the run phase */
	struct ll_sample *samples;
	size_t nsamples, samples_cap;
	uint64_t samples_dropped;
	/* /metrics scrapes of the run phases, taken by load/scraper.h */
	struct ll_point *points;
	size_t npoints, points_cap;
	unsigned servers_changed;            /* scrapes from other servers than the one before */
	/* progress */
	void (*progress)(struct ll_engine *e, void *ctx);
	void *progress_ctx;
	ev_timer progress_timer;
	const char *host;                    /* Host header value */
	const char *headers;                 /* -H "Name: value\r\n"... for every request, or NULL */
};

/* Prepares e for routes[0..n) (caller-owned, kept until ll_engine_free) against addr, with
 * headers ("Name: value\r\n"..., caller-owned, or NULL) in every request. Builds
 * each route's request head and its histograms. Returns 0, or -1 with errno (ENOMEM, or the
 * timerfd_create(2) error). */
int ll_engine_init(struct ll_engine *e, const struct sockaddr *addr, socklen_t addrlen,
                   const char *host, const char *headers, struct ll_route *routes, unsigned n,
                   unsigned max_conns,
                   double timeout_s, uint64_t seed, size_t max_samples);

void ll_engine_free(struct ll_engine *e);

/* One GET of path on a connection of its own, for probes (/metrics, /status) before a run:
 * the body (NUL-terminated, cut to cap - 1 bytes) into buf. Returns the status, or a negative
 * LL_LERR_* code. */
int ll_engine_fetch(struct ll_engine *e, const char *path, char *buf, size_t cap);

/* Runs routes with active[i] != 0 on their schedules for seconds, then waits for every request
 * still out (each bounded by the timeout). Results go to phase ph of each route; the run phase
 * also logs samples. Returns 0, or -1 with errno. */
int ll_engine_run(struct ll_engine *e, enum ll_phase ph, const unsigned char *active,
                  double seconds);

/* Keeps scrape m (copied) as a point of the current run phase, answered between sent_ns and
 * end_ns (CLOCK_MONOTONIC): placed at their middle on the samples' axis, with the loop lag
 * since the previous point when both are of this phase and of the same servers
 * (ll_scrape_same; else e->servers_changed counts it). A scrape outside the run's schedule
 * is dropped. Returns 0, or -1 with errno ENOMEM. */
int ll_engine_add_point(struct ll_engine *e, const struct ll_scrape *m, uint64_t sent_ns,
                        uint64_t end_ns);

/* "GET path" with host (NULL: the target's Host) and the -H headers of every request, as the
 * routes' heads are built. Returns a malloc'd head (its length in *len; the caller frees it),
 * or NULL (ENOMEM). */
char *ll_engine_get_head(const struct ll_engine *e, const char *path, const char *host,
                         size_t *len);

/* Empties phase ph's results of every route (a step level starts afresh); samples and scrapes
 * are kept. Returns 0, or -1 with errno ENOMEM. */
int ll_engine_reset(struct ll_engine *e, enum ll_phase ph);

/* Ends the current phase's schedule now (SIGINT): requests out are still waited for. */
void ll_engine_stop(struct ll_engine *e);

/* Calibration of route r: conc requests kept outstanding (closed loop) for seconds; returns the
 * 2xx completions per second after the first warm seconds (0 when none). e->calib_bins holds
 * the completions per LL_CALIB_BIN_S after warm, for the spread. */
double ll_engine_calibrate(struct ll_engine *e, unsigned r, unsigned conc, double seconds,
                           double warm);

/* Count of results with code in [lo, hi] (HTTP statuses; negative codes for errors). */
uint64_t ll_rstats_count(const struct ll_rstats *s, int lo, int hi);

/* Merged histogram of the results with code in [lo, hi] into out (initialised, emptied). */
void ll_rstats_merge(const struct ll_rstats *s, int lo, int hi, struct ll_hist *out);

/* 1 when route i (< e->nroutes) is the one a stepped or ramped run steps: a heavy route, or
 * any route when none is heavy. */
int ll_engine_route_stepped(const struct ll_engine *e, unsigned i);

#endif
