/* The application's processes (master/ only): each [app NAME] section (master/appconf.h) is a
 * set of processes the master forks and execs, probes until ready, logs line by line, restarts
 * with the respawn back-off, and stops after the loops have drained. One "run" is the
 * processes started from one version of an app's section: a reload that changes the section
 * starts a new run beside the old one and stops the old one once the new one is ready and the
 * generations that could route to it have gone.
 *
 * For the upstream side (issue 35): lg_app_servers gives an app's addresses and their
 * readiness; an [upstream NAME] with `app = NAME` (or an app's `upstream = NAME`) takes them
 * as its servers. */
#ifndef LG_MASTER_APP_H
#define LG_MASTER_APP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "master/appconf.h"

struct lg_master_page;
struct pollfd;
struct lg_appsup;

/* One server of an app, as the upstream side takes it. */
struct lg_app_server {
	char addr[120];  /* "unix:/path" or "127.0.0.1:PORT"; "" when the command names neither */
	int ready;       /* 1 while its process runs and passed its readiness probe */
	pid_t pid;       /* 0 while not running (between a death and its restart) */
};

/* A supervisor for apps (heap; lg_app_free). master_pid: the master's pid, which names the
 * socket directory ($RUNTIME_DIRECTORY when set, else ${TMPDIR:-/tmp}/lagless-PID, created
 * at the first start, 0711: each run has its own subdirectory NAME.SERIAL in it, 0700, owned by
 * the app's user when running as root). NULL when out of memory. */
struct lg_appsup *lg_app_new(pid_t master_pid);

/* For -t: every app's socket paths (their first run's) fit a unix socket address under the
 * socket directory a master of pid would use. Returns 0, or -1 with the reason in err. */
int lg_app_check_paths(const struct lg_apps *conf, pid_t pid, int budget, char *err,
    size_t cap);

/* Starts the apps of conf (taken over: freed by the supervisor; NULL none) as the running set:
 * at start-up. Returns 0, or -1 with the reason in err (cap bytes): the socket directory. */
int lg_app_start(struct lg_appsup *s, struct lg_apps *conf, int budget, char *err, size_t cap);

/* A reload's apps (conf taken over, NULL none) against the running set: an app whose section is
 * unchanged keeps its processes; a changed or new one gets a new run, started now. Returns how
 * many runs were started (0: nothing to wait for), or -1 with the reason in err. */
int lg_app_stage(struct lg_appsup *s, struct lg_apps *conf, int budget, char *err, size_t cap);

/* Where the staged runs are: 1 every one is ready (lg_app_commit may follow), 0 still
 * starting, -1 one failed (why in err: its last output) and every staged run is being
 * stopped, the running set unchanged. */
int lg_app_staged(struct lg_appsup *s, char *err, size_t cap);

/* The staged runs become the running set; the runs they replace (and those of apps the new
 * configuration removed) are stopped once no generation older than gen_id is left
 * (lg_app_tick's oldest). */
void lg_app_commit(struct lg_appsup *s, uint32_t gen_id);

/* Abandons the staged runs (a reload refused for another reason): they are stopped. */
void lg_app_unstage(struct lg_appsup *s);

/* 1 once every process of the running set has passed its readiness probe at least once
 * since start-up (it gates the "ready:" line and READY=1), else 0. */
int lg_app_ready(const struct lg_appsup *s);

/* A start-up failure: 1 with the reason in err (an app that died start_failures times in a
 * row before it was ready, with its last output lines, or that did not get ready within
 * ready_timeout_ms) while the running set has not been ready yet; else 0. */
int lg_app_failed(const struct lg_appsup *s, char *err, size_t cap);

/* In a process the master just forked (a loop worker, a compute process, a reload's check):
 * closes the supervisor's descriptors of s (a struct lg_appsup *: output pipes, readiness
 * probes), which only the master reads. Touches nothing else of s (the child's copy). For
 * lg_gen_set_child_close (master/gen.h). */
void lg_app_close_in_child(void *s);

/* The descriptors to wait on (app output pipes, readiness probes) into pfd (room for max);
 * returns how many. Every one is serviced by lg_app_tick, whatever its revents. */
int lg_app_pollfds(const struct lg_appsup *s, struct pollfd *pfd, int max);

/* Everything timed: output read and logged, probes advanced, restarts due, SIGKILL after the
 * grace, readiness timeouts, old runs stopped once the oldest generation alive is `oldest`
 * (UINT32_MAX none). Lowers *next (CLOCK_MONOTONIC ns). */
void lg_app_tick(struct lg_appsup *s, uint64_t now, uint64_t *next, uint32_t oldest);

/* A child the reaper collected (waitpid(2) status): 1 when it was an app process (its death
 * handled: output drained, restart planned or the run failed), else 0. */
int lg_app_reaped(struct lg_appsup *s, pid_t pid, int status);

/* Stop: every app process gets SIGTERM, then SIGKILL (to its process group) after its
 * stop_grace_ms, or at once when immediate (SIGQUIT, a failed start-up); none is restarted. */
void lg_app_stop_all(struct lg_appsup *s, int immediate);

/* App processes still running (any run). */
int lg_app_alive(const struct lg_appsup *s);

/* 1 when pid is one of the app processes of s (a const struct lg_appsup *, NULL: none), else
 * 0: lg_adopted_step's test of what it leaves to this supervisor (master/adopted.h). */
int lg_app_owns(const void *s, pid_t pid);

/* The longest stop_grace_ms of the apps' runs, or dflt when there is none (ms). */
uint64_t lg_app_grace_ms(const struct lg_appsup *s, uint64_t dflt);

/* Writes into mp, the master page of generation gen, the rows (shm/layout.h lg_app_row: name,
 * processes, running, ready_mask, restarts) of the runs that generation routes to: those
 * active when it was created and not replaced before it. /status, /metrics and an upstream's
 * choice of ready servers read them. */
void lg_app_publish(const struct lg_appsup *s, struct lg_master_page *mp, uint32_t gen);

/* The servers of the app named `name` (or whose `upstream` is `name`) that the next generation
 * routes to: a reload's staged run when there is one (call it after lg_app_stage, before the
 * generation is created), else the running one. Fills out (room for max; the count returned is
 * the app's process count even when larger). Returns -1 when no app has that name. The
 * addresses are stable while the run lives (a restart keeps its socket path or port); a reload
 * that replaces the app gives its new run new ones (new serial, new ports). ready is the state
 * now; the loops read it live from their generation's page (lg_app_publish, ready_mask). */
int lg_app_servers(const struct lg_appsup *s, const char *name, struct lg_app_server *out,
    int max);

/* SIGKILLs every app process group left (the master exits) and frees s (NULL ignored). */
void lg_app_free(struct lg_appsup *s);

#endif
