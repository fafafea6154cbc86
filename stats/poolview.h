/* Per-pool views of shared memory for /metrics and /status: what PHP-FPM's status page shows per
 * pool (processes idle / active / total, queue depth and capacity, the largest depth seen, how
 * often the pool was full, slow jobs, restarts), plus the pool's queue-wait admission. Depends
 * on shm/ and common/ only. */
#ifndef LG_STATS_POOLVIEW_H
#define LG_STATS_POOLVIEW_H

#include <stdint.h>

#include "common/buf.h"
#include "shm/arena.h"

/* Pools in the arena: master->npools, or 1 for an arena without pool pages. */
uint32_t lg_poolview_count(const struct lg_arena *a);

/* Appends the lagless_pool_* families (label pool) to b, Prometheus text format 0.0.4. */
void lg_poolview_metrics(struct lg_buf *b, const struct lg_arena *a);

/* Appends "pools":[{...}, ...] (no trailing comma) to b: one JSON object per pool. */
void lg_poolview_status(struct lg_buf *b, const struct lg_arena *a);

/* Sums over the pools: refused at admission (which 0) or shed in the queue (which 1) by the
 * queue-wait rule. */
uint64_t lg_poolview_queue_wait(const struct lg_arena *a, int which);

#endif
