/* What worker/core/conn.c (a busy connection's I/O, the pool of struct lg_conn blocks, the list
 * of busy connections and the connection count) gives the core's other files, chiefly
 * worker/core/conn_idle.c (idle connections); nothing outside worker/core/ includes this.
 * Calls go one way: conn_idle.c calls into conn.c, conn.c calls nothing of conn_idle.c (and
 * includes no header of it). */
#ifndef LG_WORKER_CONN_INT_H
#define LG_WORKER_CONN_INT_H

#include "worker/core/conn.h"

/* Points io at fd, the socket another (stopped) watcher of this loop just watched for the same
 * events: unlike ev_io_set, which makes libev tell epoll about fd again (a failing
 * EPOLL_CTL_ADD, since the socket is registered already), this keeps the kernel's state as it
 * is. Only for a descriptor that stayed open in between (a reused number needs ev_io_set). */
static inline void
lg_conn_io_move(ev_io *io, void (*cb)(struct ev_loop *, ev_io *, int), int fd, int events)
{
	ev_init(io, cb);
	io->fd = fd;
	io->events = events;
}

/* The loop worker's pool of struct lg_conn blocks, set up on first use (worker/core/conn.c). */
struct lg_pool *lg_conn_pool(struct lg_worker *w);

/* A connection of w (busy or idle) is gone: counts it, and ends a drain that is complete
 * (worker/core/conn.c). */
void lg_conn_gone(struct lg_worker *w);

/* Records how many response bytes the client has taken (written minus still unsent in the
 * socket, SIOCOUTQ) and, when that grew, the time of that progress (c->tmo). */
void lg_conn_note_delivered(struct lg_conn *c);

/* Takes c off w's list of busy connections and gives its block back to the pool; c's watchers
 * must be stopped. The caller must not touch c again. */
void lg_conn_free(struct lg_conn *c);

/* Bytes (or EOF) arrived on idle connection fd: c (a pool block) becomes its struct lg_conn, with
 * req_at as its head deadline's start (0: none yet), and handles revents. c may be closed (and
 * back in the pool) on return. */
void lg_conn_wake(struct lg_conn *c, struct lg_worker *w, int fd, ev_tstamp req_at, int revents);

#endif
