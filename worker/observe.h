/* What the loop worker tells about itself: the loop-lag probe, slow-callback warnings that name
 * the request which blocked the loop (in the manner of asyncio's debug mode), per-request
 * metrics in this process's proc page, and the access log. Everything here runs on the loop, so
 * it costs a few clock reads (vDSO clock_gettime, no system call) and no allocation. */
#ifndef LG_WORKER_OBSERVE_H
#define LG_WORKER_OBSERVE_H

#include "worker/core/conn.h"
#include "worker/route/routes_state.h"

/* Resets this incarnation's gauges, marks the page RUNNING and starts the lag probe: a timer
 * every cfg->loop.lag_interval_ms whose lateness (firing time minus due time, CLOCK_MONOTONIC, the
 * interval itself excluded) goes into the page's lag histogram and its 10 s windows. */
void lg_obs_start(struct lg_worker *w);

/* Marks the page DRAINING (/ready answers 503 from now on). */
void lg_obs_draining(struct lg_worker *w);

/* Brackets one libev callback. c is the connection it serves, or NULL (accept, completions).
 * A callback longer than cfg->loop.slow_callback_ms (0 = off) is counted and logged as a warning
 * naming cb and the request step that took longest inside it. The clock is read at both ends
 * and between two request steps only (worker/core/obs_state.h): two readings for a callback
 * that answers one request. */
void lg_obs_cb_begin(struct lg_worker *w, struct lg_conn *c);
void lg_obs_cb_end(struct lg_worker *w, const char *cb);

/* Brackets one step of request work inside a callback (running a handler, answering a
 * completion), so a slow callback can name the route and request that made it slow. A step
 * runs from the callback's last clock reading (its start, or the step before's end) to its
 * next (the next step's start, or the callback's end). c must have a parsed request head. */
void lg_obs_unit_begin(struct lg_worker *w, const struct lg_conn *c);
void lg_obs_unit_end(struct lg_worker *w);

/* The first bytes of a request arrived on c: start its clock (inside a timed callback the
 * callback's last clock reading, no later than the bytes came), count it in flight. */
void lg_obs_request_begin(struct lg_conn *c);

/* c's response (status c->obs.resp_status, c->obs.resp_bytes body bytes) is fully written: count it
 * by route and status, observe its duration, write the access-log line if enabled. Inside a
 * timed callback, with no access log, the duration ends at the callback's next clock reading
 * (the response's last byte went out before it). */
void lg_obs_request_end(struct lg_conn *c);

/* c is being closed: a request still in progress is dropped from the in-flight count (and its
 * job counted as cancelled when it was waiting on one), and c is forgotten by the callback
 * bracket. Such a request cut for a reason a room named (c->obs.why), or while an upstream
 * exchange held it (client_gone), gets its access line: the reason as upstream_error, the
 * status of the answer's head when it went out, else 499 (nginx's "client closed request").
 * Call before c is freed. */
void lg_obs_conn_closed(struct lg_conn *c);

/* Counts a request that reached its route's handler (inline answer, or job queued) in this
 * loop worker's block of the stats area (its route row's hits; /health sums them). */
void lg_obs_route_hit(struct lg_conn *c);

/* Publishes the open-connection gauge after w->nconns changed. */
void lg_obs_conns(struct lg_worker *w);

struct lg_pool;
/* Publishes the connection-buffer gauges from w's pool p (common/pool.h): blocks held by
 * connections (mapped - free) and blocks free until a trim, counted in blocks, not bytes. The
 * loop's tick calls it after its trim, so the figures are at most one tick (100 ms) old. They
 * are the server's own count, so they read the same in the ASan build, whose resident memory
 * also holds its shadow and quarantine. */
void lg_obs_conn_buffers(struct lg_worker *w, const struct lg_pool *p);

#endif
