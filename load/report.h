/* What lagless-load concludes from a run: the table per route and status, the figures around
 * it (503 share, heavy throughput against the pool's capacity, the cheap routes' p99 against
 * their idle p99, the generator's own delay), one verdict per promise of DESIGN.md, and the
 * same as JSON. Server-side figures come from /metrics and exist only against lagless; the
 * text says so when a figure cannot be obtained. */
#ifndef LL_LOAD_REPORT_H
#define LL_LOAD_REPORT_H

#include <stdio.h>

#include "load/engine.h"

enum ll_verdict_state { LL_V_NA = -1, LL_V_FAIL = 0, LL_V_PASS = 1 };

enum ll_promise {
	LL_P_CHEAP,      /* cheap stays cheap: run p99 <= factor x idle p99 + slack */
	LL_P_REFUSAL,    /* refusal is fast: a heavy route's 503 p99 <= fast_ms, and overload is
	                  * refused rather than queued */
	LL_P_CAPACITY,   /* the pool is used to capacity: heavy 2xx rate >= share x capacity */
	LL_P_TIMEOUTS,   /* nothing timed out: no client timeout, no 504, no server deadline */
	LL_P_COUNT
};

struct ll_steps;
struct ll_scenario;

struct ll_verdict {
	enum ll_verdict_state state;
	char why[512];
};

/* A warning that names the likely cause of what was measured (load/hints.h finds them). */
#define LL_REPORT_HINTS 8
struct ll_hint {
	const char *kind;            /* "shared_wait", "work_grows_with_key": static */
	unsigned route;              /* the route it is about */
	char text[640];              /* one line, without its newline */
};

struct ll_report {
	const struct ll_engine *e;
	const char *url;
	double duration_s;
	double idle_s;
	int lagless;                 /* the target answered /metrics as lagless */
	int have_scrapes;            /* /metrics before and after the run */
	struct ll_scrape before, after;
	size_t p0, p1;               /* the engine's scrapes of this run: [p0, p1); p1 0 for all */
	double span_s;               /* the samples' axis: the run, or every step level's */
	const struct ll_steps *steps;  /* step mode's levels, or NULL (load/steps.h) */
	const struct ll_scenario *scenario;  /* --scenario with its expectations, or NULL */
	/* thresholds (options) */
	double cheap_factor, cheap_slack_ms, fast_ms, capacity_share;
	struct ll_verdict v[LL_P_COUNT];
	unsigned nhints;
	struct ll_hint hints[LL_REPORT_HINTS];
};

/* The generator's own delay (first byte written minus due time) at p99, the worst route's, in
 * ms. Above LL_REPORT_BEHIND_MS the generator did not keep its schedule (its CPU was taken, or
 * every connection up to --max-conns was busy) and the report says so: the latencies include
 * that delay, as they must, but it is not the server's. */
#define LL_REPORT_BEHIND_MS 2.0
double ll_report_generator_delay_ms(const struct ll_report *r);

/* How much server counter k (a *_total of load/scrape.h) rose over the run: the increases
 * between the scrape before it, every scrape during it and the one after, each a restart from 0
 * when the counter went down (ll_counter_increase: a reload mid-run). 0 without scrapes. */
double ll_report_counter_increase(const struct ll_report *r, enum ll_scrape_field k);

/* The server's figures over this run's scrapes only (not the drain after it). ms. */
struct ll_server_figures {
	size_t npoints;
	double lag_p99_ms;     /* the run's p99, interpolated from the bucket counts */
	double lag_bound_ms;   /* worst interval's highest bucket bound that gained samples */
	double lag_mean_ms;    /* mean of the intervals' means */
	double wait_mean_ms;   /* mean queue wait of the jobs started during the run */
	double depth_max;      /* queue depth, every pool */
	double busy_mean;      /* busy compute processes */
};
void ll_report_server_figures(const struct ll_report *r, struct ll_server_figures *sf);

/* Pairs of consecutive scrapes of the run (before, during, after) that came from different
 * servers (ll_scrape_same): a load balancer's replicas answering /metrics in turn, or a
 * restart. No difference is taken over such a pair. */
unsigned ll_report_servers_changed(const struct ll_report *r);

/* The hints of r (r->hints), one line each. */
void ll_report_hints_text(FILE *f, const struct ll_report *r);

/* One WARNING line saying so, when ll_report_servers_changed is not 0; else nothing. */
void ll_report_servers_text(FILE *f, const struct ll_report *r);

/* Fills r->v from the engine's results. */
void ll_report_judge(struct ll_report *r);

/* 1 when no verdict failed. */
int ll_report_ok(const struct ll_report *r);

/* The human report: table, figures, verdict lines. */
void ll_report_text(FILE *f, const struct ll_report *r);

/* Text of a result code: the HTTP status, or "timeout", "io", "connect", "parse". buf holds at
 * least 12 bytes; returns buf or a static name. */
const char *ll_report_code(int code, char *buf);

/* "404 x 53, 503 x 2": the results of s by status, into buf (len bytes). Returns buf. */
const char *ll_report_statuses(const struct ll_rstats *s, char *buf, size_t len);

/* A flooded heavy route (offered at least its capacity) whose 2xx rate in the run is more than
 * 20 % off its calibrated capacity: the machine's load changed between the two, and an Nx
 * offer was not N times. Returns the run's rate over the capacity (e.g. 0.7), or 0 when the
 * route is not so (not heavy, not calibrated, not flooded, or within 20 %). */
#define LL_REPORT_CALIB_OFF 0.2
double ll_report_calibration_off(const struct ll_report *r, const struct ll_route *rt);

/* Name of a promise ("cheap stays cheap", ...) and its JSON key ("cheap_stays_cheap", ...). */
const char *ll_report_promise(enum ll_promise p);
const char *ll_report_promise_key(enum ll_promise p);

#endif
