/* A generation of workers (master/ only): the loop workers and compute processes started from
 * one configuration, with the arena and channels they share. A reload starts a new generation
 * beside the running one and retires the old one once the new one accepts; several may
 * therefore exist for a while, each supervised on its own. */
#ifndef LG_MASTER_GEN_H
#define LG_MASTER_GEN_H

#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"
#include "master/modprobe.h"
#include "master/memwatch.h"
#include "master/resize.h"
#include "master/shape.h"
#include "sizing/sizing.h"
#include "shm/arena.h"
#include "shm/cache.h"
#include "shm/upstream.h"
#include "shm/channel.h"
#include "shm/flight.h"
#include "stats/offered.h"

/* One row of a generation's child table (OpenBSD httpd procs[]): loop workers first, then
 * compute processes; row k uses proc page k of the generation's arena. */
struct lg_child {
	enum lg_role role;
	uint32_t index;        /* within its role */
	pid_t pid;             /* 0 while not running */
	uint32_t incarnation;  /* processes started in this row so far */
	uint32_t restarts;
	uint32_t quick_deaths;
	int killed_by_us;      /* 0, or the enum lg_restart_reason of our kill (deadline, client
	                        * gone): an expected death, not a crash */
	int stuck;             /* SIGKILLed for a stale heartbeat (restart reason "stuck") */
	uint64_t started_ns;
	uint64_t begun_at_start; /* loop: its proc page's `begun` when this incarnation started */
	uint64_t respawn_at;   /* CLOCK_MONOTONIC ns; valid while pid == 0 */
	uint64_t backoff_ns;
	uint64_t kill_at;      /* escalate SIGTERM to SIGKILL at this time; 0 = none */
	int parked;            /* compute row beyond the live-resize target: no process, no respawn */
	uint32_t pool;         /* compute: the pool it serves (index in cfg.jobs.pools) */
};

struct lg_gen {
	uint32_t id;               /* 1 for the first, +1 per reload */
	struct lg_config cfg;      /* owned copies: a reload must not change a running gen */
	struct lg_sizing sz;       /* the decision in force (a live resize updates budget and counts) */
	struct lg_arena arena;
	struct lg_channels ch;
	struct lg_flight_table flights; /* single-flight entries (shm/flight.h) */
	struct lg_cache cache;     /* result cache (shm/cache.h) */
	struct lg_upshm ups;       /* admission records of the upstreams (shm/upstream.h) */
	struct lg_child *children;
	uint32_t nloops, ncompute, nchildren; /* ncompute rows: room for every pool's maximum */
	uint32_t npools;
	int retiring;              /* its loops were told to drain; no respawns */
	int computes_stopped;      /* its compute processes were told to stop */
	int ready;                 /* every loop worker accepted once */
	uint64_t retire_deadline;  /* after it, what is left is SIGKILLed */
	uint64_t next_trim;
	struct lg_resize rs;       /* live resize state (master/resize.c) */
	struct lg_modprobe probes; /* retries of failed module inits (master/modprobe.c) */
	struct lg_memwatch mw;     /* memory limit and OOM kills (master/memwatch.c) */
	struct lg_offered offered[LG_MAX_POOLS]; /* offered-load smoothing (stats/offered.h) */
	uint64_t offered_due;      /* next offered-load sample */
	struct lg_gen *next;       /* the master's list: newest first */
};

/* Creates a generation from cfg and sz (copied): the arena sized to compute_max + queue_max
 * slots (the open ones: C + queue) and max_body regions, the channels, the child table (no
 * process yet; compute rows beyond C parked for a live resize), and the master page filled
 * with the sizing. master_pid is stored there. prev (NULL for the first) is the
 * generation it replaces: the server's start time and restart counters carry over from it, so
 * they describe the server, not the generation. Returns the generation (heap, owned by the
 * caller, freed with lg_gen_destroy), or NULL with the reason logged. */
struct lg_gen *lg_gen_create(uint32_t id, const struct lg_config *cfg, const struct lg_sizing *sz,
    pid_t master_pid, const struct lg_gen *prev);

/* Writes g->sz's per-pool targets (compute, queue, open slots) into the pool pages and their
 * sums into the master page: at creation and after a live resize. */
void lg_gen_publish_targets(struct lg_gen *g);

/* systemd's STATUS= line for g into buf (cap bytes, NUL-terminated, truncated if need be):
 * "L/L loop workers, C/C compute, queue D/Q, running R, budget B CPU, generation G", then with
 * named pools "; pool NAME: A/T active/processes, queue D/Q, full F" for every pool. */
void lg_gen_status_line(const struct lg_gen *g, char *buf, size_t cap);

/* Releases the master's copies of the generation's resources (its registry too: the
 * generation owns the configuration it was created from) and frees it. The processes must
 * be gone (or be left to die with their own copies). */
void lg_gen_destroy(struct lg_gen *g);

/* The master's listeners after listen_fd (n of fds, copied; n = 0 clears them): every loop
 * worker forked from now on accepts on them too, and compute processes close them. They belong
 * to the master and outlive generations, like listen_fd. */
void lg_gen_set_listeners(const int *fds, int n);

/* The admin listener (--admin-listen; -1 none), handed to loop workers the same way. */
void lg_gen_set_admin(int fd);

/* In a process the master forked for something other than a generation (a reload's check,
 * master/precheck.c), right after fork: closes sigfd, the listeners handed to loop workers, the
 * admin and master-only descriptors and every generation's channels, arena, flights and cache
 * (all, newest first), and resets the signals as a child's. */
void lg_gen_forget_all(struct lg_gen *all, int sigfd);

/* A descriptor only the master serves (the --agent-listen socket; -1 none): every child closes
 * it right after fork, so no loop or compute process holds the agent's port open. */
void lg_gen_set_master_only(int fd);

/* Descriptors the master opens for itself while it runs (the app supervisor's output pipes and
 * readiness probes, master/app.h): every child the master forks calls fn(arg) right after the
 * fork, before anything else of its role, so no loop or compute process holds them (a pipe's
 * read end held elsewhere keeps an app's writes from failing once the master stops reading).
 * fn must only close descriptors. NULL for none. */
void lg_gen_set_child_close(void (*fn)(void *arg), void *arg);

/* Forks the process of row c of g. The child keeps only what its role needs: the listen socket
 * (loop workers), its own channel ends, g's arena; every other generation in the list `all` is
 * closed in the child, and sigfd too. On fork failure, schedules a retry. */
void lg_gen_spawn(struct lg_gen *all, struct lg_gen *g, struct lg_child *c, int listen_fd,
    int sigfd);

/* Name of a role for logs: "loop" or "compute". */
const char *lg_gen_role_name(enum lg_role r);

#endif
