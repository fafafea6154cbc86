/* The router's part of a connection and of the loop worker (worker/route/routes.c): held by
 * struct lg_conn and struct lg_worker as part_rt (worker/core/conn.h LG_PART), reached as
 * LG_RT(c) and LG_WRT(w). The loop's worker/observe.c reads the request's row and label. */
#ifndef LG_WORKER_ROUTES_STATE_H
#define LG_WORKER_ROUTES_STATE_H

#include <stdint.h>

#include "worker/core/conn.h"

struct lg_route;

/* The route of the current request. */
struct lg_conn_rt {
	const struct lg_route *route; /* NULL when none matched (opaque outside the router) */
	unsigned route_row;           /* its row in the statistics (LG_WRT(w)->none_row when none) */
	const char *route_label;      /* its path for logs and metrics ("none" when none) */
	uint64_t max_body;            /* of the route */
	int refuse_status;            /* a refusal answered at dispatch, keeping the connection
	                               * (its body, if any, read and dropped first), or 0 */
};

/* The route table, built from the registry's routes at start. */
struct lg_worker_rt {
	struct lg_route *routes;
	unsigned nroutes;
	unsigned nrows;               /* statistics rows: routes (capped), then "none" */
	const char **row_names;
	const char **kind_names;      /* by kind id */
	unsigned none_row;            /* stats row of a request that matched no route */
};

#define LG_RT(c) ((struct lg_conn_rt *)(void *)(c)->part_rt.b)
#define LG_WRT(w) ((struct lg_worker_rt *)(void *)(w)->part_rt.b)
_Static_assert(sizeof(struct lg_conn_rt) <= sizeof(((struct lg_conn *)0)->part_rt) &&
    _Alignof(struct lg_conn_rt) <= LG_PART_ALIGN, "the router's part of struct lg_conn");
_Static_assert(sizeof(struct lg_worker_rt) <= sizeof(((struct lg_worker *)0)->part_rt) &&
    _Alignof(struct lg_worker_rt) <= LG_PART_ALIGN, "the router's part of struct lg_worker");

/* A request begins: no route yet, counted on the "none" row of wrt until the router matches
 * one. */
static inline void
lg_rt_none(struct lg_conn_rt *rt, const struct lg_worker_rt *wrt)
{
	rt->route = NULL;
	rt->route_row = wrt->none_row;
	rt->route_label = "none";
}

#endif
