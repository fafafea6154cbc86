/* Memory budget: the memory limit the server really has and how much shared memory it may back
 * at once within it (issue 18: memfd pages the master keeps open are not freed by the OOM
 * killer, which then went on killing until it reached the master).
 *
 * limit = --memory-limit when given, else min(MemTotal of /proc/meminfo, the tightest memory
 * limit on the cgroup path from the process's own cgroup up to the mount point): cgroup v2
 * "memory.max" and "memory.high" (Documentation/admin-guide/cgroup-v2.rst, "Memory Interface
 * Files": above memory.high the cgroup is throttled and reclaimed hard, so it is a limit to
 * stay under), cgroup v1 "memory.limit_in_bytes" (Documentation/admin-guide/cgroup-v1/memory.rst
 * section 2.5; the unlimited value is PAGE_COUNTER_MAX pages, about 2^63). The hierarchy is found
 * like the CPU one (sizing/sizing.c, same sysroot, same fixture trees).
 *
 * budget (bytes the arena's regions may hold backed at once, "transit") = limit - reserve -
 * fixed - cache - proxy, where reserve is room for the processes' own memory
 * (--memory-reserve, else 32 MiB + 8 MiB per loop worker + per compute process
 * max(--compute-memory, 24 MiB)), fixed the shared memory backed whatever the load (arena
 * header, proc pages, stats, the request views kept backed, the single-flight table), cache
 * --cache-bytes when a route caches, and proxy the most the loop workers' upstream exchanges
 * and app connections may hold (issue 35: bounded by each upstream's max_conns, queue and
 * keepalive; master/shape.c lg_up_memory). --shm-budget replaces the result. */
#ifndef LG_SIZING_MEMSIZE_H
#define LG_SIZING_MEMSIZE_H

#include <stdint.h>

#include "common/config.h"

#define LG_MEM_NONE UINT64_MAX /* no limit known */

struct lg_memsize {
	/* inputs */
	uint64_t total;            /* MemTotal of /proc/meminfo, bytes; LG_MEM_NONE if unread */
	uint64_t cgroup_limit;     /* tightest cgroup memory limit, bytes; LG_MEM_NONE if none */
	char source[512];          /* file it came from, without the sysroot; "" if none */
	char events[512];          /* the OOM-kill counter of the process's memory cgroup, with the
	                            * sysroot (v2 memory.events, v1 memory.oom_control); "" if none */
	/* decision (lg_memsize_decide) */
	uint64_t limit;            /* the limit in force; LG_MEM_NONE when nothing bounds it */
	int limit_override;        /* 1: --memory-limit replaced the measured one */
	uint64_t reserve;          /* room left for the processes' private memory */
	uint64_t fixed;            /* shared memory backed whatever the load */
	uint64_t cache;            /* the result cache's part (0 when no route caches) */
	uint64_t proxy;            /* what proxying to upstreams may hold (0 when no route does) */
	uint64_t budget;           /* transit bytes that may be backed at once; LG_MEM_NONE = any */
	int budget_override;       /* 1: --shm-budget gave it */
};

/* Clears *m (nothing known). */
void lg_memsize_init(struct lg_memsize *m);

/* Reads MemTotal from sysroot + "/proc/meminfo" into m->total. Returns 0, or -1 (errno) when
 * the file is missing or has no MemTotal line (not an error for the caller: the input is
 * skipped). */
int lg_memsize_read_meminfo(const char *sysroot, struct lg_memsize *m);

/* Walks from the memory cgroup directory leaf up to top (both with the sysroot; top is a
 * prefix of leaf), keeping the tightest limit in m (v2: memory.max, memory.high; v1:
 * memory.limit_in_bytes), and records leaf's OOM-kill counter file. rootlen is the sysroot's
 * length, cut from the recorded source. A missing file is normal (a cgroup without the memory
 * controller) and skipped; a file with anything but an integer (or "max" in v2) is skipped
 * after a call of warn(ctx, path, why). */
void lg_memsize_walk(struct lg_memsize *m, const char *leaf, const char *top, size_t rootlen,
    int v2, void (*warn)(void *ctx, const char *path, const char *why), void *ctx);

/* Decides m->limit, m->reserve, m->cache and m->budget for cfg (memory_limit, memory_reserve,
 * shm_budget, compute_memory, cache_bytes), L loop workers and cmax compute processes (the
 * most a live resize can reach), `fixed` bytes of shared memory backed whatever the load,
 * `caching` set when a route uses the result cache and `proxy` bytes proxying may hold. A limit too small for the reserve gives a
 * budget of 0: every body beyond the kept request view is refused (503). */
void lg_memsize_decide(struct lg_memsize *m, const struct lg_config *cfg, int loops, int cmax,
    uint64_t fixed, int caching, uint64_t proxy);

/* Appends the memory keys to a JSON object being written (",\"memory_limit\":...", no braces):
 * memory_total, memory_cgroup_limit, memory_limit_source, memory_limit, memory_reserve,
 * shm_fixed, shm_cache, memory_proxy, shm_budget (numbers in bytes, null when none). Returns the length
 * written, or -1 with errno ENOSPC. */
int lg_memsize_json(const struct lg_memsize *m, char *buf, size_t cap);

/* The OOM-kill counter in file (m->events): the "oom_kill N" line of v2 memory.events or v1
 * memory.oom_control (kernel 4.13+). Returns N, or -1 with errno when unreadable or absent. */
long long lg_memsize_oom_kills(const char *file);

#endif
