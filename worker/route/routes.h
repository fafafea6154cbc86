/* The router of the loop worker: which route a request head matches, the inline handlers, and
 * the hand-off of offloaded routes to worker/job/offload.h. Handlers answer through the
 * connection's respond API (worker/core/conn.h). */
#ifndef LG_WORKER_ROUTES_H
#define LG_WORKER_ROUTES_H

#include "worker/core/conn.h"
#include "worker/route/routes_state.h"

/* A request head is in (struct lg_conn_ops head: the core calls it once the parser returned
 * LG_HTTP_HEAD_DONE, outside the parser; c->http.req is the request view): picks the route,
 * checks the body limit and, for an offloaded route, claims a job slot, or for an upstream
 * route runs its admission. Returns an enum lg_http_head_action (where the body goes), which
 * the core hands to lg_http_body_to; on LG_HTTP_REJECT, c->reject_status holds 413 (body over
 * --max-body), 400 (bad arguments), 503 (no free slot: the bounded queue is full; Retry-After
 * in c->reject_extra), or 404/405 for a request with Expect: 100-continue that will not be
 * served. Sets c->want_continue when the request's body will be read and the client waits for
 * a 100 Continue. */
int lg_route_head(struct lg_conn *c);

/* The parser's body hook (struct lg_http on_body): enforces --max-body; a chunked body of an offloaded route goes into the
 * claimed slot (lg_offload_body). */
int lg_route_body(struct lg_http *h, void *conn, const char *at, size_t len);

/* Handles a complete request: answers inline, or starts reading the body into the slot, or
 * queues the job. Returns 0, or -1 when the connection was closed. */
int lg_route_dispatch(struct lg_conn *c);

/* Builds w's router from the registry's routes (w->env->cfg->reg): a row per route with its
 * loop handler or kind, and the statistics rows and labels. Returns 0, or -1 (ENOMEM, EINVAL
 * for a handler name the router does not know, ERANGE when the arena has fewer route rows). */
int lg_router_build(struct lg_worker *w);

/* The callbacks a loop worker's connections are created with: these hooks plus the offload
 * path (worker/job/offload.h). */
extern const struct lg_conn_ops lg_route_conn_ops;

#endif
