/* Single-flight's part of a connection (worker/coalesce*.c, docs/CACHE.md): embedded in struct
 * lg_conn as c->flight. The loop worker's single-flight state is w->coal, a pointer opaque to
 * everyone but worker/coalesce.c. A small header of its own because worker/coalesce.h includes
 * worker/conn.h. */
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

#endif
