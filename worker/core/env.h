/* The loop worker's environment, made by the master before it forks (master/gen.c) and read by
 * every room of the loop through c->w->env: the configuration and the shared resources. A
 * types-only header of the connection core, so the rooms and the core need nothing of the
 * loop's own header (worker/loop.h) for it. */
#ifndef LG_WORKER_ENV_H
#define LG_WORKER_ENV_H

#include <stdint.h>

#include "common/config.h"
#include "shm/arena.h"
#include "shm/cache.h"
#include "shm/channel.h"
#include "shm/flight.h"
#include "shm/upstream.h"

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

#endif
