/* Module init health (master/ only): a module whose init fails or crashes (abort, _exit) costs
 * its own routes (503 with the reason, shm/layout.h struct lg_module_health), never the server.
 * The master notices a process that died inside an init (its proc page's in_init), marks the
 * module, and retries the init in a probe, a child forked for nothing else, with a back-off
 * doubling from 1 s to 60 s; once a probe succeeds the routes are served again and each
 * process runs the init before its next job of the module. `lagless -t` runs every init once
 * in such a child. */
#ifndef LG_MASTER_MODPROBE_H
#define LG_MASTER_MODPROBE_H

#include <stdint.h>
#include <sys/types.h>

#include "kinds/registry.h"
#include "shm/layout.h"

/* The probes of one generation (its registry and its master page's module rows). */
struct lg_modprobe {
	pid_t pid[LG_MODULE_HEALTH];        /* 0 while none runs */
	uint64_t deadline_ns[LG_MODULE_HEALTH]; /* CLOCK_MONOTONIC past which it is SIGKILLed */
};

/* lagless -t: runs every module's init once, each in a child of its own, waiting at most
 * timeout_ms for each. Returns 0, or -1 with "module NAME: init was killed by signal 6
 * (Aborted)" (or "failed", "exited with status N", "did not return within N ms") in err. */
int lg_modprobe_check(struct lg_registry *r, uint64_t timeout_ms, char *err, size_t cap);

/* The reaper, for a child of a generation with registry r and master page mp that died with
 * wait status `status` (waitpid(2)) while page named a module init: marks that module failed
 * (the one who marks it logs it) and clears page->in_init. who is "compute[2]". Returns 1 when
 * the death was an init's (it is the module's fault: never count it toward giving up), else 0. */
int lg_modprobe_child_died(const struct lg_registry *r, struct lg_master_page *mp,
    struct lg_proc_page *page, int status, const char *who);

/* Once per master pass: schedules the retry of a newly failed module, forks a probe when a
 * retry is due (closing fds[0..nfds-1], the master's own descriptors, in it), SIGKILLs one past
 * its deadline; lowers *next to the next retry. */
void lg_modprobe_tick(struct lg_modprobe *p, struct lg_registry *r, struct lg_master_page *mp,
    uint64_t now, uint64_t *next, const int *fds, int nfds);

/* The reaper: 1 when pid was one of p's probes (its verdict applied: the module served again,
 * or the back-off doubled), else 0. */
int lg_modprobe_reaped(struct lg_modprobe *p, struct lg_registry *r, struct lg_master_page *mp,
    pid_t pid, int status);

#endif
