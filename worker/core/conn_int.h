/* What worker/core/conn.c (a busy connection's I/O, the pool of struct lg_conn blocks, the list
 * of busy connections and the connection count) gives the core's other files, chiefly
 * worker/core/conn_idle.c (idle connections); nothing outside worker/core/ includes this.
 * Calls go one way: conn_idle.c calls into conn.c, conn.c calls nothing of conn_idle.c (and
 * includes no header of it); conn_stream.c (the stream verbs) calls into conn.c the same way. */
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

/* The loop worker's pool of read buffers (LG_CONN_RBUF bytes each), set up on first use. */
struct lg_pool *lg_conn_rbuf_pool(struct lg_worker *w);

/* Before a read into c->rbuf: borrows a buffer from w->rbufs when c holds none. Returns 0, or -1
 * with errno ENOMEM (none could be mapped). */
int lg_conn_rbuf_need(struct lg_conn *c);

/* c's read buffer goes back to w->rbufs when it holds no byte (rlen 0: nothing points into it;
 * every reader copies what it takes). Always safe to call. */
void lg_conn_rbuf_drop(struct lg_conn *c);

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

/* conn.c's I/O steps the stream verbs (worker/core/conn_stream.c) share. lg_conn_watch: watches
 * c's socket for events (EV_READ | EV_WRITE, or 0). lg_conn_flush: writes what is queued; 1 when
 * all of it is written, 0 when the rest waits for EV_WRITE, -1 on a write error (the caller
 * closes). lg_conn_response_done: everything queued is on the wire: finish the request, then
 * close or wait for the next; 0, or -1 when c is finished. lg_conn_watch_next: writes batched
 * answers and watches for what c waits for now; 0, or -1 when c was closed. lg_conn_process:
 * parses and answers buffered requests; 0, or -1 when c was closed. */
/* The current request of c is answered: its held buffer released, its metrics and access
 * line written, the parser readied for the next unless c closes (conn.c request_done). */
void lg_conn_request_done(struct lg_conn *c);

void lg_conn_watch(struct lg_conn *c, int events);
int lg_conn_flush(struct lg_conn *c);
int lg_conn_response_done(struct lg_conn *c);
int lg_conn_watch_next(struct lg_conn *c);
int lg_conn_process(struct lg_conn *c);

#endif
