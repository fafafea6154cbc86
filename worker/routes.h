/* Routing and the offload path of the loop worker: which routes answer inline, which go to the
 * compute pool, and the job life cycle seen from the loop (claim, body, queue, complete,
 * deadline, cancel). */
#ifndef LG_WORKER_ROUTES_H
#define LG_WORKER_ROUTES_H

#include "shm/wire.h"
#include "worker/conn.h"

/* Route table rows for the statistics: lg_route_rows() rows (every route, then "none" for
 * requests that matched none, at most LG_STATS_ROUTES); lg_route_index(rt) is rt's row (NULL
 * gives the "none" row); lg_route_label(i) its path ("/ping"), static storage. */
unsigned lg_route_rows(void);
unsigned lg_route_index(const struct lg_route *rt);
const char *lg_route_label(unsigned i);

/* http-parser head hook (struct lg_http on_head): picks the route, checks the body limit and,
 * for an offloaded route, claims a job slot. Returns an enum lg_http_head_action; on
 * LG_HTTP_REJECT, c->reject_status holds 413 (body over --max-body), 400 (bad arguments), 503
 * (no free slot: the bounded queue is full; Retry-After in c->reject_extra), or 404/405 for a
 * request with Expect: 100-continue that will not be served. Sets c->want_continue when the
 * request's body will be read and the client waits for a 100 Continue. */
int lg_route_head(struct lg_http *h, void *conn);

/* http-parser body hook: copies a chunked body into the claimed slot, enforcing the limit. */
int lg_route_body(struct lg_http *h, void *conn, const char *at, size_t len);

/* Counts a request that reached c->route's handler (inline answer, or job queued) in this
 * loop worker's proc page (shm/layout.h route_hits; /health sums them). */
void lg_route_count(struct lg_conn *c);

/* Handles a complete request: answers inline, or starts reading the body into the slot, or
 * queues the job. Returns 0, or -1 when the connection was closed. */
int lg_route_dispatch(struct lg_conn *c);

/* Before reading more of a Content-Length body into c's slot: when everything backed so far
 * is filled, backs the next window. Returns 0 (c->reserved > c->body_got), or -1 after
 * answering 503 with Connection: close (shared memory could not be backed; the slot is
 * released); the caller must not read into the slot then. */
int lg_route_body_window(struct lg_conn *c);

/* The Content-Length body in c's slot is complete: queue the job. Returns 0 or -1 (closed). */
int lg_route_queue(struct lg_conn *c);

/* Reads every completion header waiting on the loop's completion channel and answers the
 * connections they belong to; stale and malformed headers are counted and dropped. */
void lg_route_completions(struct lg_worker *w);

/* The job deadline of c passed: answer 504 at once, cancel a queued job, and ask the master to
 * kill the compute process running it. Returns 0 or -1 (closed). */
int lg_route_deadline(struct lg_conn *c);

/* Gives up c's slot (response written, deadline, connection closing): a queued job is
 * cancelled, a running one is left to finish and its result discarded. Returns the slot's
 * resulting state (LG_SLOT_FREE or LG_SLOT_ABANDONED), or -1 if it was no longer c's. */
int lg_route_release(struct lg_conn *c);

/* The connection is closing while it holds a slot (the client left, or a write failed): releases
 * it like lg_route_release, and when the job was running and --on-client-gone is kill, asks the
 * master to kill its compute process so the CPU is not spent on an answer nobody reads. */
void lg_route_client_gone(struct lg_conn *c);

#endif
