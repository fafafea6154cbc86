/* The loop worker: one libev event loop per process. It accepts connections, parses HTTP/1.1,
 * answers cheap routes inline and offloads heavy ones to the compute pool through the arena.
 * Nothing that can take more than ~100 us of CPU runs here. */
#ifndef LG_WORKER_LOOP_H
#define LG_WORKER_LOOP_H

#include <ev.h>
#include <stdint.h>

#include "shm/cache.h"
#include "shm/flight.h"
#include "shm/upstream.h"

#include "common/config.h"
#include "shm/arena.h"
#include "shm/channel.h"

struct lg_loop_env {
	const struct lg_config *cfg;
	struct lg_arena *arena;      /* shared, mapped by the master */
	struct lg_channels *ch;      /* already reduced with lg_channels_keep(ch, 'l', index) */
	int listen_fd;               /* non-blocking listening socket shared by every loop worker */
	const int *more_fds;         /* further listeners (--listen a b, unix:/path), nmore of them */
	int nmore;
	int admin_fd;                /* --admin-listen's socket, or -1 */
	uint32_t index;              /* loop index, 0..L-1: the owner id in slot words */
	uint32_t nloops;
	struct lg_proc_page *page;   /* this process's page; pid already set by the master */
	struct lg_flight_table *flights; /* single-flight table (shm/flight.h), shared */
	struct lg_cache *cache;      /* result cache (shm/cache.h), shared */
	struct lg_upshm *ups;        /* upstreams' admission records (shm/upstream.h), shared */
};

/* The accept side of a loop worker (worker/loop.c), embedded in struct lg_worker as w->acc. */
struct lg_worker_accept {
	ev_io io;                     /* the listening socket shared by every loop worker */
	int accepting;                /* io is started */
	int paused_until_tick;        /* EMFILE/ENFILE back-off: no refusals on this tick */
	ev_tstamp emfile_warned_at;   /* rate limit of the "pausing accept" warning */
	uint64_t emfile_warn_repeats;
	ev_tstamp refuse_warned_at;   /* and of the over --max-conns refusal warning */
	uint64_t refuse_warn_repeats;
};

/* Runs the loop until a graceful drain (SIGTERM/SIGINT) finishes: stop accepting, finish the
 * requests in flight, close idle keep-alive connections. Returns the process exit status
 * (0 after a drain, 1 when the loop could not be set up). */
int lg_loop_main(const struct lg_loop_env *env);

/* 1 when connection descriptor fd of this loop worker was accepted on the admin listener: the
 * mark is set or cleared at every accept, so it always names the listener of the connection
 * that now holds the number. */
int lg_loop_admin_conn(int fd);

#endif
