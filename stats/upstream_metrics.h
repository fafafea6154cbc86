/* The upstream families of /metrics (issue 35), rendered from the upstreams' shared admission
 * records (shm/upstream.h): requests by status class, in flight, queue depth, errors by reason
 * (the answers lagless wrote itself), retries, app connections idle and busy. */
#ifndef LG_STATS_UPSTREAM_METRICS_H
#define LG_STATS_UPSTREAM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "shm/upstream.h"

/* Bytes that always hold the families for n upstreams with names of at most 63 bytes. */
size_t lg_up_metrics_bound(uint32_t n);

/* Upstreams a rendering labels (the rest are left out). */
#define LG_UP_METRICS_MAX 64

/* Appends the families to b for u's records, upstream record i labelled upstream="names[i]"
 * (label-safe: a-z 0-9 _ -) and route bulkhead record i (i >= u->nups) route="names[i]" (a
 * route's path; names holds u->n entries), the per-loop gauges summed over nloops loops.
 * Returns 0, or -1 when b overflowed. Nothing when u has no record. */
int lg_up_render_metrics(struct lg_buf *b, const struct lg_upshm *u, const char *const *names,
    uint32_t nloops);

/* Appends "upstreams":[{"name":..,"in_flight":..,"queued":..,"max_conns":..,"queue":..,
 * "connections_idle":..,"connections_busy":..,"overloaded":..}, ...],"bulkheads":[{"route":..,
 * "in_flight":..,"queued":..,"max_conns":..,"queue":..}, ...] (members of /status's object)
 * to b, names as lg_up_render_metrics.
 * Returns 0, or -1 when b overflowed. */
int lg_up_render_status(struct lg_buf *b, const struct lg_upshm *u, const char *const *names,
    uint32_t nloops);

#endif
