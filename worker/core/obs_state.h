/* Observability's part of a connection and of the loop worker (worker/observe.c, and
 * worker/core/access.c for the access line): embedded in struct lg_conn as c->obs and in struct
 * lg_worker as w->obs. A small header of its own because worker/observe.h includes
 * worker/core/conn.h. */
#ifndef LG_WORKER_OBSERVE_STATE_H
#define LG_WORKER_OBSERVE_STATE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

struct lg_conn;

/* The current request, for metrics and the access log. */
struct lg_conn_obs {
	uint64_t req_start_ns;        /* first byte of the request; 0 while none is in progress */
	uint64_t rid;                 /* the generated request id's number: req_start_ns, or one
	                               * past the loop's last when that is not later (requests
	                               * parsed at one clock reading) */
	int resp_status;
	size_t resp_bytes;            /* body bytes of the response */
	const char *why;              /* why lagless answered a proxied request itself (static
	                               * text: shm/upstream.h lg_up_reason_str), or NULL */
	const char *up_addr;          /* a proxied request's app server (the registry's text), or
	                               * NULL; then up_status (0: none came) and up_ms */
	int up_status;
	double up_ms;
	uint64_t queue_ns, run_ns;    /* the job's queue wait and run time, 0 and 0 when no job
	                               * ran for the request (set by lg_obs_job_times) */
};

/* Readies a connection's part: no request in progress. */
static inline void
lg_obs_init(struct lg_conn_obs *o)
{
	o->req_start_ns = 0;
}

/* 1 while a request is in progress (its first byte came, lg_obs_request_end not yet run). */
static inline int
lg_obs_in_request(const struct lg_conn_obs *o)
{
	return o->req_start_ns != 0;
}

/* The response being queued: its status and body bytes, for the metrics and the access line. */
static inline void
lg_obs_response(struct lg_conn_obs *o, int status, size_t body_bytes)
{
	o->resp_status = status;
	o->resp_bytes = body_bytes;
}

/* The request's job waited queue_ns and ran run_ns (nanoseconds; 0, 0 for none): for the
 * X-Queue-Ms / X-Run-Ms answer headers, the metrics and the access line. Set by the room that
 * ran the job (worker/job, worker/flight) or reset by the loop at a request's start. */
static inline void
lg_obs_job_times(struct lg_conn_obs *o, uint64_t queue_ns, uint64_t run_ns)
{
	o->queue_ns = queue_ns;
	o->run_ns = run_ns;
}

struct lg_hist;

/* The request of a request step, named in a slow-callback warning as "METHOD target". Kept
 * raw (the method's name is looked up only for a warning): it is noted for every step. */
struct lg_obs_what {
	int method;                   /* its method (http/method.h), -1 when no head was parsed */
	unsigned target_len;
	char target[96];              /* its target, cut at 96 bytes */
};

/* Requests answered inside a timed callback, their durations observed at its end. */
#define LG_OBS_PENDING 16

/* The loop-lag probe and the slow-callback accounting. Inside a timed callback the clock is
 * read at its start, at its end, and between two request steps (worker/observe.c): a request
 * begins at the last reading, a step starts at the last reading and ends at the next one, an
 * answered request's duration is observed at the next reading. */
struct lg_worker_obs {
	ev_timer lag;                 /* loop-lag probe, re-armed every --lag-interval-ms */
	uint64_t lag_due_ns;          /* CLOCK_MONOTONIC when the probe should fire */
	uint32_t inflight;            /* requests received and not yet answered */
	int timing;                   /* inside a callback timed by lg_obs_cb_begin */
	int unit_open;                /* a step ended whose duration the next reading gives */
	uint64_t mark_ns;             /* the callback's last clock reading */
	uint64_t last_rid;            /* the last request's rid (struct lg_conn_obs) */
	uint64_t cb_start_ns;         /* start of the callback being timed */
	struct lg_conn *cb_conn;      /* the connection that callback is for, or NULL */
	uint64_t worst_unit_ns;       /* longest request step inside the callback so far */
	uint64_t unit_start_ns;
	const char *unit_route, *worst_route;
	struct lg_obs_what what[2];   /* the requests of the current step (what[unit_what]) and
	                               * of the longest (the other) */
	unsigned unit_what;
	unsigned npending;
	struct {
		struct lg_hist *duration; /* the route's histogram */
		uint64_t start_ns;        /* the request's first byte */
	} pending[LG_OBS_PENDING];
};

#endif
