/* The loop worker: one libev event loop per process. It accepts connections, parses HTTP/1.1,
 * answers cheap routes inline and offloads heavy ones to the compute pool through the arena.
 * Nothing that can take more than ~100 us of CPU runs here. */
#ifndef LG_WORKER_LOOP_H
#define LG_WORKER_LOOP_H

#include <ev.h>
#include <stdint.h>

#include "worker/core/conn.h"
#include "worker/core/env.h"


/* The accept side of a loop worker (worker/loop.c): the loop's part of struct lg_worker
 * (w->part_acc), reached as LG_ACC(w). */
struct lg_worker_accept {
	ev_io io;                     /* the listening socket shared by every loop worker */
	int accepting;                /* io is started */
	int paused_until_tick;        /* EMFILE/ENFILE back-off: no refusals on this tick */
	ev_tstamp emfile_warned_at;   /* rate limit of the "pausing accept" warning */
	uint64_t emfile_warn_repeats;
	ev_tstamp refuse_warned_at;   /* and of the over --max-conns refusal warning */
	uint64_t refuse_warn_repeats;
};

#define LG_ACC(w) ((struct lg_worker_accept *)(void *)(w)->part_acc.b)
_Static_assert(sizeof(struct lg_worker_accept) <= sizeof(((struct lg_worker *)0)->part_acc) &&
    _Alignof(struct lg_worker_accept) <= LG_PART_ALIGN, "the loop's part of struct lg_worker");

/* Runs the loop until a graceful drain (SIGTERM/SIGINT) finishes: stop accepting, finish the
 * requests in flight, close idle keep-alive connections. Returns the process exit status
 * (0 after a drain, 1 when the loop could not be set up). */
int lg_loop_main(const struct lg_loop_env *env);

/* 1 when connection descriptor fd of this loop worker was accepted on the admin listener: the
 * mark is set or cleared at every accept, so it always names the listener of the connection
 * that now holds the number. */
int lg_loop_admin_conn(int fd);

#endif
