/* The upstream room's parts of a connection and of the loop worker: bytes the core holds
 * (c->part_up, w->part_up: LG_PART in worker/core/conn.h) without knowing what is in them,
 * reached as LG_UP(c) and LG_WUP(w) only inside worker/upstream/ (make lint). The exchange
 * itself (struct lg_conn_up) and this loop's pools (struct lg_up_one) are the room's own
 * (worker/upstream/up_int.h); the parts hold where they are. */
#ifndef LG_WORKER_UP_STATE_H
#define LG_WORKER_UP_STATE_H

#include <stdint.h>

#include "worker/core/conn.h"

struct lg_conn_up;
struct lg_up_one;
struct lg_up_gate;

/* A connection's part: its proxied request's exchange, from the request's head until its
 * answer is written or c closes (then c->held has LG_CONN_HELD_UP), else NULL. */
struct lg_up_conn_part {
	struct lg_conn_up *x;
};

#define LG_UP(c) ((struct lg_up_conn_part *)(void *)(c)->part_up.b)
_Static_assert(sizeof(struct lg_up_conn_part) <= sizeof(((struct lg_conn *)0)->part_up) &&
    _Alignof(struct lg_up_conn_part) <= LG_PART_ALIGN, "the upstream part of a connection");

/* The loop worker's part: one struct lg_up_one per upstream of the registry (n of them, ups
 * allocated by lg_up_loop_init; NULL before it), and one gate per route bulkhead (nbh). */
struct lg_worker_up {
	struct lg_up_one *ups;
	uint32_t n, nbh;
	struct lg_up_gate *bh;
};

#define LG_WUP(w) ((struct lg_worker_up *)(void *)(w)->part_up.b)
_Static_assert(sizeof(struct lg_worker_up) <= sizeof(((struct lg_worker *)0)->part_up) &&
    _Alignof(struct lg_worker_up) <= LG_PART_ALIGN, "the upstream part of the loop worker");

#endif
