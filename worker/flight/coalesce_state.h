/* Single-flight's part of a connection (worker/flight/coalesce*.c, docs/CACHE.md): held by struct
 * lg_conn as part_flight (worker/core/conn.h LG_PART), reached as LG_FLIGHT(c) only inside
 * worker/flight/ (make lint). The loop worker's single-flight state is w->coal, a pointer opaque
 * to everyone but worker/flight/coalesce.c. */
#ifndef LG_WORKER_COALESCE_STATE_H
#define LG_WORKER_COALESCE_STATE_H

#include "worker/core/conn.h"

struct lg_policy;
struct lg_lflight;

struct lg_conn_flight {
	int coal;                     /* the route coalesces: decided at dispatch */
	int coal_alone;               /* run this request's own job (retry after a failed share) */
	const struct lg_policy *pol;  /* the route's rule */
	struct lg_lflight *fl;        /* the flight c is parked on, or NULL */
	struct lg_conn *fl_prev, *fl_next; /* the flight's parked connections */
	const char *fl_label;         /* X-Cache value it will be answered with */
};

#define LG_FLIGHT(c) ((struct lg_conn_flight *)(void *)(c)->part_flight.b)
_Static_assert(sizeof(struct lg_conn_flight) <= sizeof(((struct lg_conn *)0)->part_flight) &&
    _Alignof(struct lg_conn_flight) <= LG_PART_ALIGN, "the flight part of struct lg_conn");

/* Readies a connection's single-flight part: not coalescing, parked on no flight. */
static inline void
lg_flight_init(struct lg_conn *c)
{
	struct lg_conn_flight *f = LG_FLIGHT(c);

	f->coal = f->coal_alone = 0;
	f->fl = NULL;
	f->pol = NULL;
}

/* A new request head: whether it coalesces is decided again at dispatch. */
static inline void
lg_flight_begin(struct lg_conn *c)
{
	struct lg_conn_flight *f = LG_FLIGHT(c);

	f->coal = f->coal_alone = 0;
}

/* 1 when the request was found to coalesce and waits for dispatch to single-flight, else 0. */
static inline int
lg_flight_wanted(const struct lg_conn *c)
{
	return LG_FLIGHT(c)->coal;
}

/* 1 when the connection is parked on a flight (single-flight answers it), else 0. */
static inline int
lg_flight_parked(const struct lg_conn *c)
{
	return LG_FLIGHT(c)->fl != NULL;
}

/* 1 when the request of a coalescing route runs its own job (X-Cache: bypass, docs/CACHE.md),
 * else 0. */
static inline int
lg_flight_bypass(const struct lg_conn *c)
{
	return LG_FLIGHT(c)->coal_alone;
}

#endif
