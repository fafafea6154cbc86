/* Single-flight's part of a connection (worker/coalesce*.c, docs/CACHE.md): embedded in struct
 * lg_conn as c->flight. The loop worker's single-flight state is w->coal, a pointer opaque to
 * everyone but worker/flight/coalesce.c. A small header of its own because worker/flight/coalesce.h includes
 * worker/core/conn.h. */
#ifndef LG_WORKER_COALESCE_STATE_H
#define LG_WORKER_COALESCE_STATE_H

struct lg_conn;
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

/* Readies a connection's single-flight part: not coalescing, parked on no flight. */
static inline void
lg_flight_init(struct lg_conn_flight *f)
{
	f->coal = f->coal_alone = 0;
	f->fl = NULL;
	f->pol = NULL;
}

/* A new request head: whether it coalesces is decided again at dispatch. */
static inline void
lg_flight_begin(struct lg_conn_flight *f)
{
	f->coal = f->coal_alone = 0;
}

/* 1 when the request was found to coalesce and waits for dispatch to single-flight, else 0. */
static inline int
lg_flight_wanted(const struct lg_conn_flight *f)
{
	return f->coal;
}

/* 1 when the connection is parked on a flight (single-flight answers it), else 0. */
static inline int
lg_flight_parked(const struct lg_conn_flight *f)
{
	return f->fl != NULL;
}

/* 1 when the request of a coalescing route runs its own job (X-Cache: bypass, docs/CACHE.md),
 * else 0. */
static inline int
lg_flight_bypass(const struct lg_conn_flight *f)
{
	return f->coal_alone;
}

#endif
