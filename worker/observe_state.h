/* Observability's part of a connection and of the loop worker (worker/observe.c, and
 * worker/access.c for the access line): embedded in struct lg_conn as c->obs and in struct
 * lg_worker as w->obs. A small header of its own because worker/observe.h includes
 * worker/conn.h. */
#ifndef LG_WORKER_OBSERVE_STATE_H
#define LG_WORKER_OBSERVE_STATE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

struct lg_conn;

/* The current request, for metrics and the access log. */
struct lg_conn_obs {
	uint64_t req_start_ns;        /* first byte of the request; 0 while none is in progress */
	int resp_status;
	size_t resp_bytes;            /* body bytes of the response */
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

/* The loop-lag probe and the slow-callback accounting. */
struct lg_worker_obs {
	ev_timer lag;                 /* loop-lag probe, re-armed every --lag-interval-ms */
	uint64_t lag_due_ns;          /* CLOCK_MONOTONIC when the probe should fire */
	uint32_t inflight;            /* requests received and not yet answered */
	uint64_t cb_start_ns;         /* start of the callback being timed */
	struct lg_conn *cb_conn;      /* the connection that callback is for, or NULL */
	uint64_t worst_unit_ns;       /* longest request step inside the callback so far */
	uint64_t unit_start_ns;
	const char *unit_route, *worst_route;
	char unit_what[128], worst_what[128]; /* "METHOD target" of those steps */
};

#endif
