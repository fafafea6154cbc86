/* The single-flight and cache families of /metrics, rendered from the shared cache's counters
 * (shm/cache.h; docs/CACHE.md, docs/OBSERVABILITY.md). */
#ifndef LG_STATS_COALESCE_METRICS_H
#define LG_STATS_COALESCE_METRICS_H

#include "common/buf.h"
#include "shm/cache.h"

/* Appends the single-flight and cache families of /metrics (Prometheus text 0.0.4) to b, the
 * counters summed over the loop rows of ca (NULL, or a cache without header: nothing).
 * Returns 0, or -1 when b overflowed. */
int lg_coal_render_metrics(struct lg_buf *b, const struct lg_cache *ca);

#endif
