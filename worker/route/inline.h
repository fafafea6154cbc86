/* The inline handlers of the loop worker (docs/ARCHITECTURE.md "Loop worker"): the routes it
 * answers itself on the loop, without a job (/ping, /health, /ready, /metrics, /status, the
 * test-only test-block), and OPTIONS * (RFC 9112 section 3.2.4). Each answers through the
 * connection's respond API (worker/core/conn.h) and returns 0, or -1 when the connection was closed. */
#ifndef LG_WORKER_INLINE_H
#define LG_WORKER_INLINE_H

#include <stdint.h>

#include "worker/core/conn.h"
#include "worker/route/routes_state.h"

/* The handler a route's `handler = name` names ("ping", "health", "ready", "metrics",
 * "status", "test-block"), or NULL for a name there is none for. Static functions, no
 * ownership. */
int (*lg_inline_handler(const char *name))(struct lg_conn *c);

/* Allocates the one buffer /metrics and /status are rendered into (w->render.buf), sized for the
 * largest rendering of w's routes, kinds and processes; its pages are touched lazily. Called
 * once at start, after the router (LG_WRT(w)) is built. Returns 0, or -1 (errno ENOMEM). */
int lg_inline_start(struct lg_worker *w);

/* OPTIONS *: 200 with Allow listing methods (a set of http/method.h bits: those of the routes c's listener
 * serves, the router's choice), and OPTIONS itself (RFC 9110 section 9.3.7), no body. */
int lg_inline_options_any(struct lg_conn *c, uint64_t methods);

#endif
