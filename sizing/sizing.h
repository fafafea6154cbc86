/* CPU budget and process counts from the machine and its cgroups.
 *
 * budget = min(online CPUs, sched_getaffinity(2) count, cpuset CPUs, tightest CPU quota on the
 * cgroup path from the process's own cgroup up to the root), each input skipped when absent.
 * Sources: cgroup v2 "cpu.max" and "cpuset.cpus.effective" (Documentation/admin-guide/cgroup-v2.rst),
 * cgroup v1 "cpu.cfs_quota_us"/"cpu.cfs_period_us" (Documentation/scheduler/sched-bwc.rst) and
 * "cpuset.effective_cpus" (Documentation/admin-guide/cgroup-v1/cpusets.rst), located through
 * /proc/self/cgroup and /proc/self/mountinfo (proc(5)). cpu.weight and cpu.shares are priorities,
 * never limits, and are ignored.
 *
 * Every /proc and /sys path is prefixed with the sysroot (env LAGLESS_SYSROOT, "" by default) so
 * tests can point the reader at fixture trees.
 *
 * Two files: sizing/sizing_read.c reads the inputs (lg_sizing_read, lg_sizing_reread,
 * lg_sizing_parse_cpulist), sizing/sizing.c decides from them (the rest). */
#ifndef LG_SIZING_SIZING_H
#define LG_SIZING_SIZING_H

#include "common/config.h"
#include "sizing/memsize.h"

/* Highest CPU id a cpulist may name (CONFIG_NR_CPUS tops out at 8192 on x86-64 with MAXSMP;
 * twice that leaves room). Also caps --cpus so int arithmetic cannot overflow. */
#define LG_SIZING_MAX_CPUS 16384

struct lg_sizing {
	/* inputs; -1 (or quota < 0) when not known */
	int online;               /* /sys/devices/system/cpu/online, else sysconf(_SC_NPROCESSORS_ONLN) */
	int affinity;             /* CPUs in sched_getaffinity(0); not read when a sysroot is set */
	int cpuset;               /* CPUs in the effective cpuset of the process's cgroup */
	double quota;             /* CPUs = quota / period of the tightest limit; < 0 when none */
	char quota_source[512];   /* file the tightest quota came from, without the sysroot; "" if none */
	char cgroup_version[8];   /* "v1", "v2", "hybrid" or "none" */
	int warnings;             /* count of files that were unreadable or corrupt */
	int quiet;                /* set while reading: warnings counted but not logged */
	/* decision */
	enum lg_cpu_rounding rounding;
	double cpus_override;     /* > 0 when --cpus replaced the measured budget */
	int budget;               /* whole CPUs, >= 1 */
	int loop_workers;         /* L = budget unless overridden */
	int compute_workers;      /* C = max(1, budget - 1) unless overridden */
	int queue_capacity;       /* 2 x C unless overridden */
	int app_processes;        /* the [app]s' processes: given counts + the auto share */
	int live_resize;          /* 1: the budget (and the counts derived from it) followed */
	int compute_max;          /* C and queue at the largest budget a live resize can reach */
	int queue_max;            /* (every online CPU); equal to C and queue without live resize */
	int npools;               /* pools of the configuration (1: the default pool only) */
	int pool_compute[LG_MAX_POOLS], pool_queue[LG_MAX_POOLS]; /* [0] = the two above */
	char pool_name[LG_MAX_POOLS][LG_POOL_NAME];
	int pool_over[LG_MAX_POOLS]; /* the pool oversubscribes (not counted against the budget) */
	int pool_compute_max[LG_MAX_POOLS], pool_queue_max[LG_MAX_POOLS]; /* room for a resize */
	struct lg_memsize mem;    /* memory limit (read here) and budget (lg_gen_decide_memory) */
};

/* Reads every input under sysroot (NULL or "" means the real root) into *s, the memory limit
 * too (s->mem: MemTotal and the memory cgroup path, sizing/memsize.h), and clears the
 * decision fields. Never fails: a missing, unreadable or corrupt file (a zero or negative period,
 * garbage text) is logged once as a warning, counted in s->warnings, and that input skipped. */
void lg_sizing_read(const char *sysroot, struct lg_sizing *s);

/* lg_sizing_read without the log lines (warnings are still counted): for the master's
 * re-reading once a second, which would otherwise repeat a warning each time. */
void lg_sizing_reread(const char *sysroot, struct lg_sizing *s);

/* Compute processes and queue capacity for a budget of `budget` whole CPUs (>= 1) under the
 * job settings jc (NULL: defaults): C is jc->compute_workers when given, else
 * floor(jc->compute_share x budget) when a share is given, else budget - 1; never below 1.
 * The queue is jc->queue_capacity when given (>= 0), else 2 x C. DESIGN.md "Sizing". */
void lg_sizing_counts(const struct lg_job_cfg *jc, int budget, int *compute, int *queue);

/* lg_sizing_counts for pool p (common/cfg_job.h struct lg_pool_cfg, resolved). */
void lg_sizing_pool_counts(const struct lg_pool_cfg *p, int budget, int *compute, int *queue);

/* With named pools, the compute processes of the pools not marked oversubscribe must fit the
 * budget (issue 11: a bulkhead that oversubscribes the CPU only moves the contention into the
 * kernel's scheduler). Returns 0, or -1 with the split in err ("the pools need 3 compute
 * processes for a CPU budget of 2 (default 1, slow 1, fast 1); ..."). One pool always fits:
 * it is sized as before pools existed. jc: the job settings with the pools (NULL: one pool). */
int lg_sizing_check_pools(const struct lg_sizing *s, const struct lg_job_cfg *jc, char *err,
    size_t cap);

/* 1 when the master follows a CPU budget that changes at run time under the sizing settings
 * sc (NULL: defaults, 0): live_resize is
 * on and no --cpus replaces the measured budget. Only the counts lg_sizing_counts derives from
 * the budget then change; counts given explicitly never do (a given compute count fixes the
 * default queue, 2 x C, too). */
int lg_sizing_resizable(const struct lg_sizing_cfg *sc);

/* Processes of one [app] with processes = auto under a budget of `budget` whole CPUs shared by
 * nauto such apps: max(1, budget / 2 / nauto), at most 32 (the other half of the budget is the
 * loops' and the compute pool's). */
int lg_sizing_app_share(int budget, int nauto);

/* Fills the decision in *s from its inputs and the overrides in *cfg (cpus, rounding,
 * loop_workers, compute_workers or compute_share, queue_capacity; 0 or -1 mean "not set", see
 * common/config.h), with lg_sizing_counts. The [app]s' processes (cfg->master.app_fixed, app_auto)
 * count against the budget: a compute count not given is max(1, budget - 1 - app processes).
 * Quota rounding: floor by default, ceil with
 * LG_ROUND_CEIL, never below 1. compute_max/queue_max: the counts at a budget of every online
 * CPU when lg_sizing_resizable(&cfg->sizing), else the counts decided now. */
void lg_sizing_decide(struct lg_sizing *s, const struct lg_config *cfg);

/* Writes *s as one JSON object (keys: online, affinity, cpuset, quota (number or null),
 * quota_source (string or null), cgroup, rounding ("floor"/"ceil"), cpus_override (number or
 * null), budget, loop_workers, compute_workers, queue_capacity, live_resize (boolean),
 * compute_max, queue_max, warnings, app_processes when there are apps, the memory keys of lg_memsize_json, and with named pools
 * "pools": [{name, compute, queue, oversubscribe}]) into buf of cap bytes,
 * NUL-terminated. Returns the length, or -1 with errno ENOSPC if it does not fit. */
int lg_sizing_json(const struct lg_sizing *s, char *buf, size_t cap);

/* A warning about the decision s, or nothing: upstreams whose memory_proxy leaves a
 * shared-memory budget of 0 (every body refused), else a CPU quota (or --cpus) under one CPU,
 * which the budget rounds up to 1 (the processes then share less than a CPU). Writes it into buf (cap
 * bytes, no quote or backslash in it: the JSON carries it as "note") and returns 1, else 0. */
int lg_sizing_note(const struct lg_sizing *s, char *buf, size_t cap);

/* Parses a Linux CPU list ("0-3,8-11", "5", "") as in cpuset(7) "List format".
 * Returns the CPU count (0 for an empty list), or -1 with errno EINVAL on malformed input. */
int lg_sizing_parse_cpulist(const char *text);

#endif
