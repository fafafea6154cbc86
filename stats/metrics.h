/* GET /metrics: the whole server's statistics in the Prometheus text exposition format 0.0.4
 * (prometheus.io/docs/instrumenting/exposition_formats), summed over every proc page plus the
 * master page, so any loop worker answers for all processes. Rendering reads shared memory
 * only, plus the cgroup's cpu.stat file; it allocates nothing (the caller owns the buffer). */
#ifndef LG_STATS_METRICS_H
#define LG_STATS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "shm/arena.h"
#include "shm/stats.h"

/* Content-Type of the text format, version 0.0.4. */
#define LG_METRICS_CTYPE "text/plain; version=0.0.4; charset=utf-8"

/* Bytes that always hold the rendering for a server with nloops loop workers and the routes
 * and kinds of names (the per-loop lag histograms and the per-route and per-kind series, with
 * their labels, are the parts that grow). */
size_t lg_metrics_bound(uint32_t nloops, const struct lg_stats_names *names);

/* Renders every metric of arena a (loop pages first, a->master->loop_workers of them) into b,
 * as of now_ns (CLOCK_MONOTONIC), labelling routes and kinds with names. Returns 0, or -1 when
 * b overflowed (its content is then cut short and must not be served). */
int lg_metrics_render(struct lg_buf *b, const struct lg_arena *a,
    const struct lg_stats_names *names, uint64_t now_ns);

struct lg_cpu_stat {
	int have;                 /* 1 when nr_throttled and a throttled time were found */
	uint64_t nr_throttled;    /* periods in which the cgroup was throttled */
	uint64_t throttled_ns;    /* time throttled */
};

/* Parses a cgroup cpu.stat text of len bytes: v2 "nr_throttled N" and "throttled_usec N"
 * (Documentation/admin-guide/cgroup-v2.rst), v1 "nr_throttled N" and "throttled_time N" in ns
 * (Documentation/scheduler/sched-bwc.rst). Unknown lines are ignored. */
void lg_metrics_parse_cpu_stat(const char *text, size_t len, struct lg_cpu_stat *out);

#endif
