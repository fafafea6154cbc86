/* The cluster scope's families of /metrics (worker/flight/cluster.c; docs/CACHE.md "Across
 * replicas"), rendered from the cluster counters of the shared cache's loop rows (shm/cache.h). */
#ifndef LG_STATS_CLUSTER_METRICS_H
#define LG_STATS_CLUSTER_METRICS_H

#include "common/buf.h"
#include "shm/cache.h"

/* Appends the lagless_cluster_* families (Prometheus text 0.0.4) to b, summed over the loop
 * rows of ca (NULL, or a cache without header: nothing); the round-trip histogram in seconds.
 * Returns 0, or -1 when b overflowed. */
int lg_cluster_render_metrics(struct lg_buf *b, const struct lg_cache *ca);

#endif
