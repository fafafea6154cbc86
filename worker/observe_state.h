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
