/* Between worker/conn.c (a busy connection's I/O) and worker/conn_idle.c (idle connections and
 * the pool of struct lg_conn blocks); nothing else includes this. */
#ifndef LG_WORKER_CONN_IDLE_H
#define LG_WORKER_CONN_IDLE_H

#include "worker/conn.h"

/* The loop worker's pool of struct lg_conn blocks, set up on first use. */
struct lg_pool *lg_conn_pool(struct lg_worker *w);

/* A connection of w (busy or idle) is gone: counts it, and ends a drain that is complete. */
void lg_conn_gone(struct lg_worker *w);

/* Bytes (or EOF) arrived on idle connection fd: c (a pool block) becomes its struct lg_conn, with
 * req_at as its head deadline's start (0: none yet), and handles revents. c may be closed (and
 * back in the pool) on return. */
void lg_conn_wake(struct lg_conn *c, struct lg_worker *w, int fd, ev_tstamp req_at, int revents);

#endif
