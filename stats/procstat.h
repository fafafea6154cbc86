/* The process metrics every Prometheus client library exports (process_resident_memory_bytes,
 * process_cpu_seconds_total, process_open_fds, ...: prometheus.io/docs/instrumenting/
 * writing_clientlibs/#process-metrics), here for every process of the server, labelled by
 * role and index, read from /proc at scrape time. */
#ifndef LG_STATS_PROCSTAT_H
#define LG_STATS_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "shm/arena.h"

/* Bytes the families take at most for nprocs processes and the master. */
size_t lg_procstat_bound(uint32_t nprocs);

/* Appends the families for the master and every process the arena's pages name (pid != 0),
 * nloops of them loop workers (the first 256). A process that is gone, or whose /proc entry cannot be read,
 * is left out. Returns 0, or -1 when b overflowed. Reads /proc/PID/{stat,statm,limits} and
 * the /proc/PID/fd directory (proc(5)): a few system calls per process. */
int lg_procstat_render(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops);

#endif
