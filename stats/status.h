/* GET /status (JSON for people and scripts, in the spirit of PHP-FPM's status page) and the
 * /ready decision. Both read only shared memory, so any loop worker answers for the server. */
#ifndef LG_STATS_STATUS_H
#define LG_STATS_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "shm/arena.h"
#include "shm/stats.h"

/* Bytes that always hold the /status document for an arena with nprocs proc pages. */
size_t lg_status_bound(uint32_t nprocs);

/* Renders the /status JSON object of arena a as of now_ns (CLOCK_MONOTONIC) into b; draining
 * is the answering loop's own drain flag. Keys: version, pid, start_time (Unix s), uptime_s,
 * ready, stopping, sizing{...}, queue{depth, capacity, busy}, slots{total and one per state},
 * restarts{loop{reason: n}, compute{...}}, processes[{role, index, pid, state, requests, ...}]
 * where loop rows add inflight, connections and lag{p50_ms, p99_ms, max_ms, samples} over the
 * last minute and compute rows add job{slot, kind, age_ms} or null (kind named by names). Returns 0, or -1 when b
 * overflowed. */
int lg_status_render(struct lg_buf *b, const struct lg_arena *a,
    const struct lg_stats_names *names, uint64_t now_ns, int draining);

/* /ready: 1 (200) once the master saw every loop worker start, unless the server is stopping
 * or this loop worker is draining; 0 (503) otherwise. */
int lg_status_ready(const struct lg_master_page *mp, int draining);

#endif
