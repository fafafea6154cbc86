/* Live resize of the compute pool to a CPU budget that changes at run time (master/ only).
 *
 * Kubernetes can change a running pod's CPU limit in place, and systemd's CPUQuota= can be set
 * on a running unit; both rewrite the cgroup quota under a live process. About once a second the
 * master reads the budget again with the start-up code (sizing/sizing.c: every ancestor's limit,
 * cpusets, online CPUs); a reading that differs from the budget in force and is seen twice in a
 * row becomes the new budget. The compute processes and the queue then follow it (only the
 * counts not given explicitly, lg_sizing_resizable): the slot table's open part moves at once;
 * new compute processes are forked at most one per RESIZE_SPAWN_GAP; surplus ones are asked to
 * leave with a RETIRE header on the job channel, which an idle compute process takes between
 * two jobs, so no running job is ever killed for this. Loop workers stay as they are until a
 * reload. The arena and child table were made for the largest budget (every online CPU), so no
 * shared resource is re-created. */
#ifndef LG_MASTER_RESIZE_H
#define LG_MASTER_RESIZE_H

#include <stdint.h>

#include "common/limits.h"

struct lg_gen;
struct lg_child;

/* Per pool: each has its own job channel, so its own RETIRE headers. */
struct lg_resize_pool {
	uint64_t next_spawn;     /* growth is rate-bound: no resize fork before this */
	uint32_t retire_seq;     /* RETIRE headers sent so far (their sequence numbers) */
	uint32_t retires_out;    /* sent and not yet seen as a compute process leaving */
	uint64_t retire_sent_ns; /* when the last one was sent */
};

struct lg_resize {
	uint64_t next_read;      /* CLOCK_MONOTONIC ns of the next budget reading */
	int candidate;           /* budget read once and differing from the one in force; 0 none */
	struct lg_resize_pool pool[LG_MAX_POOLS];
};

/* One pass for generation g (not retiring) at now (CLOCK_MONOTONIC ns): reads the budget when
 * due, applies a change seen twice in a row (logged; the master page's budget, quota, targets
 * and slot limit updated; counted), then moves the compute processes towards the target, forking
 * with lg_gen_spawn(all, g, row, listen_fd, sigfd) or sending RETIRE headers. Lowers *next to
 * the time it wants to run again. Returns 1 when the budget changed in this pass (the caller
 * announces it through systemd STATUS=), else 0. Does nothing without live resize. */
int lg_resize_tick(struct lg_gen *all, struct lg_gen *g, int listen_fd, int sigfd, uint64_t now,
    uint64_t *next);

/* The reaper saw row c of g exit; state is what its proc page said before the master reset it.
 * Returns 1 when the process left because it took a RETIRE header: the row is parked (no
 * respawn, no restart counted) and its page keeps LG_PROC_RETIRED; else 0. */
int lg_resize_exited(struct lg_gen *g, struct lg_child *c, uint32_t state);

#endif
