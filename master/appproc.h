/* One app process (master/ only, master/appproc.c): fork and exec, its output read line by
 * line into the error log, its readiness probe. master/app.c decides when. */
#ifndef LG_MASTER_APPPROC_H
#define LG_MASTER_APPPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "master/appconf.h"

#define LG_APP_LINE  1024  /* longest output line logged; the rest of it is cut */
#define LG_APP_TAIL  5     /* last output lines kept for a start-up failure */

struct lg_app_proc {
	int index;
	pid_t pid;              /* 0 while not running */
	int out;                /* read end of its stdout and stderr (one pipe), -1 none */
	char line[LG_APP_LINE]; /* the line being read */
	size_t nline;
	int cutting;            /* the line was cut: drop bytes up to its newline */
	char sock[108];         /* its socket file ({socket}), or "" */
	int port;               /* its port ({port}), or 0 */
	int ready;              /* passed its probe since this start */
	int probe;              /* the probe's socket, -1 none */
	int probe_sent;         /* its request is written */
	char reply[16];         /* the first bytes of its answer */
	size_t nreply;
	uint64_t probe_at;      /* next probe (CLOCK_MONOTONIC ns) */
	uint64_t probe_end;     /* this probe's deadline */
	uint64_t started_ns, respawn_at, backoff_ns, kill_at;
	uint64_t live_at;       /* next liveness probe once ready (0: from the next tick on) */
	uint32_t live_fails;    /* liveness probes failed in a row */
	uint32_t fails;         /* deaths or timeouts before ready, in a row */
	uint32_t quick;         /* deaths within 10 s of a start, ready or not, in a row */
	int stopping;           /* SIGTERM sent by us: no restart */
};

/* The lines an app printed last (a ring), for the reason of a start-up failure. */
struct lg_app_tail {
	char line[LG_APP_TAIL][200];
	unsigned next;
};

/* Forks and execs process p of app a (argv from a->words with {socket} and {port} of p):
 * own process group, stdin /dev/null, stdout and stderr into a new pipe whose read end
 * (non-blocking, CLOEXEC) goes to p->out, every other descriptor closed, signals reset, env
 * lines added, cwd, oom_score_adj 0 (not the master's -900), and when the master runs as root
 * a->user's ids (setgid, initgroups, setuid), PR_SET_PDEATHSIG SIGKILL. A stale socket file is
 * removed first. Returns 0 (p->pid set), or -1 with errno (pipe, fork). What fails in the
 * child (chdir, exec) is said on its stderr and it exits 127. */
int lg_appproc_spawn(const struct lg_app_conf *a, struct lg_app_proc *p, pid_t master);

/* Reads what p printed (all that is there when drain, else up to 64 KiB) and logs each whole
 * line as "app NAME[I]: line" (cut at LG_APP_LINE), keeping the last ones in tail. Closes
 * p->out at end of file. */
void lg_appproc_read(const char *name, struct lg_app_proc *p, struct lg_app_tail *tail,
    int drain);

/* Logs what is left of p's line and closes p->out. */
void lg_appproc_close_output(const char *name, struct lg_app_proc *p, struct lg_app_tail *tail);

/* Advances p's readiness probe at now: connects to its address, sends GET a->ready_path
 * (HTTP/1.1, Connection: close) and reads the status line; a 2xx (or, without ready_path, an
 * accepted connection) sets p->ready. A failed attempt is retried 50 ms later; one attempt
 * lasts at most a->probe_timeout_ms. Lowers *next. */
void lg_appproc_probe(const struct lg_app_conf *a, struct lg_app_proc *p, uint64_t now,
    uint64_t *next);

/* Advances p's liveness probe at now, once p is ready and a->live_interval_ms > 0 (which
 * lg_appconf_check allows only with a ready_path): every live_interval_ms the readiness probe's
 * GET of a->ready_path, passed by a 2xx within a->probe_timeout_ms (Kubernetes' livenessProbe:
 * periodSeconds, timeoutSeconds, failureThreshold). A failure is logged. Returns 1 when a->live_failures
 * probes in a row failed (the caller kills and restarts p: hung, deadlocked, stopped), else 0.
 * Lowers *next. */
int lg_appproc_live(const struct lg_app_conf *a, struct lg_app_proc *p, uint64_t now,
    uint64_t *next);

/* Closes p's probe, if any. */
void lg_appproc_probe_close(struct lg_app_proc *p);

/* The tail's lines, oldest first, joined with " | " into out (cap bytes). */
void lg_appproc_tail_text(const struct lg_app_tail *t, char *out, size_t cap);

/* Picks a free loopback TCP port (bind 127.0.0.1:0, getsockname(2)). Returns it, or -1. */
int lg_appproc_free_port(void);

#endif
