/* The memory limit at run time (master only): re-read once a second like the CPU budget, so a
 * limit changed (or a server moved into another cgroup) after start-up moves the transit
 * budget, and the OOM-kill counter of the server's memory cgroup, which tells an OOM kill of a
 * compute process from a crash of the kind it ran (issue 18: a memory-free kind was
 * quarantined because other requests' uploads had filled the cgroup). */
#ifndef LG_MASTER_MEMWATCH_H
#define LG_MASTER_MEMWATCH_H

#include <stdint.h>

struct lg_gen;

struct lg_memwatch {
	uint64_t next_read;        /* CLOCK_MONOTONIC ns of the next reading */
	char events[512];          /* the counter file (lg_memsize.events); "" when none */
	long long seen;            /* its value already accounted for; -1 when unreadable */
};

/* Starts watching for g: the counter's current value is the baseline. */
void lg_memwatch_start(struct lg_gen *g);

/* Once a second (now, CLOCK_MONOTONIC ns): reads the limit again and publishes a changed
 * limit and budget in the master page (logged once per change); a changed counter file
 * (another cgroup) takes its current value as the new baseline. Lowers *next to the next
 * reading. */
void lg_memwatch_tick(struct lg_gen *g, uint64_t now, uint64_t *next);

/* A compute process of g died of SIGKILL the master did not send: 1 when the OOM-kill counter
 * rose past what earlier deaths accounted for (this death takes one), else 0. The counter
 * rises in the kernel before the victim can exit (mm/oom_kill.c __oom_kill_process). The
 * cgroup is looked up again first: a server moved into another one since the last tick takes
 * that one's counter, and its count so far, if any, as this death's. */
int lg_memwatch_oom_killed(struct lg_gen *g);

/* Writes adj to /proc/self/oom_score_adj (proc(5): -1000..1000; the kernel's OOM killer
 * takes the process with the highest badness, its memory plus adj thousandths of the machine's
 * or cgroup's). The master asks for -900 so it is the last to go: its children inherit the
 * value and set their own (loop workers -500, compute processes 1000). Lowering it needs
 * CAP_SYS_RESOURCE: without, it is logged at debug level and the value stays. Returns 0 or -1
 * with errno. */
int lg_memwatch_score(int adj);

#endif
