/* Processes reparented to the master: it is the app processes' subreaper
 * (PR_SET_CHILD_SUBREAPER, prctl(2)) and, in a container, PID 1, so what an app daemonizes (a
 * double fork, setsid) becomes the master's child when its parent exits. Their end at the
 * master's stop, once every generation and app process is gone (master/ only). */
#ifndef LG_MASTER_ADOPTED_H
#define LG_MASTER_ADOPTED_H

#include <stdint.h>
#include <sys/types.h>

#define LG_ADOPTED_MAX 256 /* children handled per step; the rest at the next */

struct lg_adopted {
	uint64_t kill_at;  /* SIGKILL from then (CLOCK_MONOTONIC ns); 0 before the first SIGTERM */
	uint64_t grace_ms; /* the grace given at the first SIGTERM */
	int killing;       /* SIGKILL sent: every child found from now on gets it at once */
	int ntermed;       /* sent SIGTERM once (a second one is a forced exit to some apps) */
	pid_t termed[LG_ADOPTED_MAX];
};

/* The children of every thread of this process (/proc/self/task/TID/children, proc(5), Linux
 * 3.5 with CONFIG_PROC_CHILDREN) into out, at most max of them. Returns how many were found
 * (possibly more than max: only max are stored), 0 also when the files cannot be read. */
int lg_adopted_list(pid_t *out, int max);

/* One step of ending what is left at the master's stop, called once no generation is left
 * (the app processes are then stopped in the same tick): every child of the master that is
 * not one of its own (ours(arg, pid) != 0, e.g. an app process) gets SIGTERM once, logged with
 * the pids, and SIGKILL from grace_ms (as given at the first step) after it, or at once when immediate
 * (SIGQUIT, a failed start-up), as systemd's KillMode=control-group ends what a service left
 * in its cgroup. An orphan adopted meanwhile (the child of a process that just ended) gets
 * what the others got. The caller reaps them (waitpid(-1), master/respawn.c). Returns how many
 * such children are still there (0: none); *next is lowered to the next step's time (every
 * 100 ms while any is left: reparenting sends no signal). */
int lg_adopted_step(struct lg_adopted *a, int (*ours)(const void *arg, pid_t pid),
    const void *arg, int immediate, uint64_t grace_ms, uint64_t now, uint64_t *next);

#endif
