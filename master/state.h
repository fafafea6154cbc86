/* The master's one record (master/ only): what master.c, respawn.c and reload.c share, and
 * the two answers each of them asks of it (master/state.c). */
#ifndef LG_MASTER_STATE_H
#define LG_MASTER_STATE_H

#include <stdint.h>
#include <sys/types.h>

#include "master/adopted.h"
#include "master/agent.h"
#include "master/master.h"
#include "master/precheck.h"

struct lg_gen;
struct lg_appsup;
struct lg_app_wait;

#define MAX_GENS           4                      /* running + retiring generations at once */

struct master {
	pid_t pid;
	int listen_fd;
	int sigfd;
	int argc;              /* the command line, parsed again on SIGHUP */
	char **argv;
	struct lg_gen *gens;   /* newest first; gens is the current one unless it is retiring */
	uint32_t next_id;
	int stopping;          /* 0 running, 1 graceful drain, 2 immediate */
	int exit_code;
	uint64_t watchdog_ns;  /* systemd watchdog interval; 0 when off */
	uint64_t next_watchdog;
	uint64_t next_status;
	int reload_pending;    /* a SIGHUP that found MAX_GENS alive; applied once one has gone */
	uint64_t drain_at;     /* --drain-delay-ms: when the delayed graceful stop begins; 0 none */
	char pid_file[256];    /* --pid-file at start-up ("" none); a reload does not move it */
	struct lg_listeners more; /* the listeners after listen_fd, and the admin one */
	uint64_t reload_seq;   /* reload outcomes written so far */
	pid_t reload_from;     /* the sender of the SIGHUP being answered (the latest, coalesced) */
	uint64_t reload_asked_ns; /* when that SIGHUP was read (lg_now_ns) */
	uint32_t reload_gen;   /* the generation that reload started; its readiness is the answer */
	pid_t gen_from;        /* reload_from and reload_asked_ns of the reload that started it */
	uint64_t gen_asked_ns;
	char gen_kept[360];    /* what that reload kept of the running configuration ("" none) */
	char reload_error[400]; /* why the last reload was refused; "" after one that succeeded */
	struct lg_agent agent;  /* --agent-listen (master/agent.h) */
	struct lg_appsup *apps;   /* the [app] processes (master/app.h), never NULL once running */
	struct lg_app_wait *app_wait; /* a reload waiting for its new app processes (reload.c) */
	struct lg_adopted adopted; /* what the apps left behind, ended at the stop */
	struct lg_precheck check; /* a reload's check process (pid 0: none); its exit is noted
	                           * by the reaper (respawn.c), the rest is reload.c's */
	/* begin_stop of master.c (how: 1 graceful, 2 immediate), called by respawn.c when a role
	 * keeps crashing: respawn.c never calls back into the file that calls it. */
	void (*stop)(struct master *m, int how);
};

/* The generation that answers for the server: the newest ready one not retiring, else the
 * newest (m->gens). Never NULL while m->gens is not. */
struct lg_gen *lg_master_serving(struct master *m);

/* Sends systemd the status line of the serving generation (lg_gen_status_line), with the
 * reason the last reload was refused appended: READY=1 with it when ready, else STATUS= only
 * (master/notify.h; nothing when not run by systemd). */
void lg_master_send_status(struct master *m, int ready);

#endif
