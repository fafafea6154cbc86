/* Server-wide admission of requests to upstream apps ([upstream NAME], kinds/registry.h): one
 * record per upstream in a shared mapping the master creates per generation before forking,
 * as the job slots of a pool. max_conns and queue bound the whole server, whatever the number
 * of loop workers: the app never sees more than max_conns requests at once.
 *
 * The decision is one 64-bit word (in flight in the low half, queued in the high half) changed
 * by compare-and-swap, so two loops never both take the last place and a process killed at
 * any instruction leaves a word the others go on from. Per loop the record also counts what
 * each loop holds (held, waiting), which the master subtracts when a loop dies (its places go
 * back, as its job slots do: master/respawn.c).
 *
 * Order: a new request takes an in-flight place only when nobody waits (queued == 0), so it
 * never overtakes a queued one; a released place is taken by a waiter, woken by a doorbell on
 * its loop's completion channel (shm/wire.h UPWAKE) or, should that be lost, at the loop's next
 * tick. */
#ifndef LG_SHM_UPSTREAM_H
#define LG_SHM_UPSTREAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/layout.h"

#define LG_UPADM_LOOPS 1024 /* loop workers a record counts for (--loop-workers' maximum) */
#define LG_UP_CLIENTS  1024 /* requests at an upstream a record tracks by client address */

/* Why lagless answered a proxied request itself, or why its exchange ended without an answer
 * (metrics label, access log). */
enum lg_up_reason {
	LG_UPR_FULL = 0,       /* 503: max_conns in flight and the queue full */
	LG_UPR_QUEUE_TIMEOUT,  /* 504: the deadline passed in the queue */
	LG_UPR_CONNECT,        /* 502: refused, unreachable */
	LG_UPR_CONNECT_TIMEOUT,/* 504: connect_timeout_ms */
	LG_UPR_RESET,          /* 502: the app closed or reset before a whole answer */
	LG_UPR_INVALID,        /* 502: the answer broke a framing rule (http/resp.h) */
	LG_UPR_FIRST_BYTE,     /* 504: first_byte_timeout_ms */
	LG_UPR_DEADLINE,       /* 504: the route's deadline during the exchange */
	LG_UPR_TRUNCATED,      /* the answer was cut after its head went out: client closed */
	LG_UPR_CLIENT_GONE,    /* the client left before its answer was whole (no answer) */
	LG_UPR_SHED,           /* 503: CoDel (a standing queue: refused at arrival, or shed
	                        * when its place came after waiting past the limit) */
	LG_UPR_CLIENT_LIMIT,   /* 503 or 429: the client address holds its share (client_share) */
	LG_UPR_COUNT
};

/* Why a request was sent again (metrics label). */
enum lg_up_retry {
	LG_UPRT_KEPT = 0,      /* a kept connection failed before any answer (same upstream) */
	LG_UPRT_CONNECT,       /* a connect failed: another server (retry_on connect-failure) */
	LG_UPRT_502,           /* the app answered 502: another server (retry_on 502) */
	LG_UPRT_503,           /* the app answered 503: another server (retry_on 503) */
	LG_UPRT_COUNT
};

#define LG_UPADM_SERVERS 8  /* servers a record counts for (kinds/registry.h LG_UP_SERVERS) */
#define LG_UPADM_ADDR 64    /* bytes of a server's address kept for /metrics' labels */

/* One server of an upstream, for outlier ejection (shm/upeject.h). */
struct lg_upsrv {
	_Atomic uint64_t until_ms;         /* its back-off's end while ejected (CLOCK_MONOTONIC) */
	_Atomic uint64_t fs;               /* failures in a row << 32 | requests in flight to it
	                                    * (shm/upeject.h lg_upadm_srv_take), one word so that a
	                                    * take judges both at once */
	_Atomic uint32_t times;            /* ejections in a row: the back-off's multiplier */
	_Atomic uint64_t ejections;        /* times ejected, ever */
	char addr[LG_UPADM_ADDR];          /* set by the master, read-only after */
};

/* One upstream's record (shared; every field atomic). */
struct lg_upadm {
	_Atomic uint64_t word;             /* queued << 32 | in flight */
	uint32_t max_conns, queue;         /* set by the master, read-only after */
	_Atomic uint64_t requests[6];      /* answers by class: [0] other, [1..5] 1xx..5xx */
	_Atomic uint64_t errors[LG_UPR_COUNT]; /* answers lagless wrote (exchanges cut), by reason */
	_Atomic uint64_t retries;          /* requests sent again on a new connection */
	_Atomic uint64_t conns_opened;     /* app connections opened */
	struct lg_codel codel;             /* admission by queue wait (shm/codel.h), upstreams only */
	_Atomic uint64_t last_enqueue_ns;  /* CLOCK_MONOTONIC of the latest request queued: the
	                                    * youngest still queued is at least as old (CoDel's
	                                    * floor) */
	/* times in ns, buckets of shm/stats.h lg_stats_time_bounds (many writers: fetch-add) */
	struct lg_hist queue_wait;         /* arrival to an in-flight place (0 when at once) */
	struct lg_hist connect;            /* connect(2) to connected, new connections */
	struct lg_hist first_byte;         /* the place taken to the answer's first byte */
	struct lg_hist total;              /* arrival to the answer's end (or lagless's own) */
	/* outlier ejection and retry budget (shm/upeject.h); settings set by the master */
	uint32_t nservers, eject_after, eject_max, retry_pct, retry_min;
	uint64_t eject_ms;
	_Atomic uint64_t ejword;           /* seq << 16 | returned << 8 | out (bit per server) */
	struct lg_upsrv srv[LG_UPADM_SERVERS];
	_Atomic uint32_t retrying;         /* retries on another server in flight */
	_Atomic uint64_t retried[LG_UPRT_COUNT]; /* requests sent again, by reason */
	_Atomic uint64_t retry_refused;    /* retries the budget refused */
	_Atomic uint32_t retry_held[LG_UPADM_LOOPS]; /* retries in flight, by loop */
	_Atomic uint32_t held[LG_UPADM_LOOPS];    /* in-flight places held, by loop */
	_Atomic uint32_t waiting[LG_UPADM_LOOPS]; /* requests queued, by loop */
	_Atomic uint32_t idle[LG_UPADM_LOOPS];    /* kept idle connections, by loop */
	_Atomic uint32_t busy[LG_UPADM_LOOPS];    /* connections carrying a request, by loop */
	_Atomic uint32_t sent[LG_UPADM_LOOPS][LG_UPADM_SERVERS]; /* requests in flight, by loop and
	                                    * server (srv[].fs's low half, for a dead loop's reclaim) */
	/* Tunnels (an upgrade the app accepted with 101: worker/upstream/up_tunnel.c), each
	 * holding its in-flight place and its app connection (counted in busy) until closed. */
	_Atomic uint32_t tunnels[LG_UPADM_LOOPS]; /* open, by loop */
	_Atomic uint64_t tunnels_opened;
	_Atomic uint64_t tunnel_bytes[2];  /* relayed: [0] client to app, [1] app to client */
	_Atomic uint32_t clients_used;     /* entries of client[] ever taken (scans stop there) */
	_Atomic uint64_t client[LG_UP_CLIENTS]; /* a request in flight or queued here, by client:
	                                    * (loop + 1) << 32 | its address's tag (shm/share.h
	                                    * lg_share_tag); 0 = free */
};

/* What proxying may hold in the loop workers' private memory, for the memory budget
 * (sizing/memsize.h, master/shape.c lg_up_memory): each exchange (a request queued or in
 * flight, worker/upstream/up_int.h struct lg_conn_up: the 16 KiB buffer toward the app, the
 * 32 KiB one from it, the app's head's index; and the client's head built from the app's, up
 * to 32 KiB while it is written) at most LG_UP_XCHG_BYTES, checked there at compile time; each
 * app connection LG_UP_CONN_BYTES (its record, and the kernel's socket of an idle one, about 2
 * KiB, rounded up to a page). */
#define LG_UP_XCHG_BYTES (96u << 10)
#define LG_UP_CONN_BYTES 4096u

struct lg_upshm {
	struct lg_upadm *adm;  /* n records, a MAP_SHARED mapping; NULL when n is 0 */
	uint32_t n;
	uint32_t nups;         /* of which the upstreams' (the first ones); the rest are route
	                        * bulkheads' */
	size_t size;           /* bytes mapped */
};

/* Maps nups + nbulk records (none: nothing mapped), record i bounded by max_conns[i] (>= 1)
 * and queue[i]: the nups upstreams' first (the registry's order), then the nbulk route
 * bulkheads' (struct lg_route_def bulkhead). Master only, before forking: children inherit the
 * mapping. Returns 0, or -1 with errno from mmap(2). */
int lg_upshm_create(struct lg_upshm *u, uint32_t nups, uint32_t nbulk,
    const uint32_t *max_conns, const uint32_t *queue);

/* Unmaps u (this process's mapping; the children keep theirs). Safe on a zeroed u. */
void lg_upshm_destroy(struct lg_upshm *u);

enum { LG_UPADM_FULL = -1, LG_UPADM_WAIT = 0, LG_UPADM_GO = 1 };

/* A new request of loop `loop` (< LG_UPADM_LOOPS): LG_UPADM_GO with an in-flight place taken
 * (nobody waits and fewer than max_conns are in flight), LG_UPADM_WAIT with a queue place
 * taken (fewer than queue wait), else LG_UPADM_FULL with nothing taken (answer 503). */
int lg_upadm_claim(struct lg_upadm *a, uint32_t loop);

/* A queued request of loop tries for an in-flight place: 1 when it moved from the queue to in
 * flight, 0 when every place is still taken (it stays queued). */
int lg_upadm_take(struct lg_upadm *a, uint32_t loop);

/* A queued request of loop leaves the queue without a place (deadline, client gone). */
void lg_upadm_unqueue(struct lg_upadm *a, uint32_t loop);

/* Loop gives an in-flight place back. Returns the number of requests queued then (the caller
 * wakes loops with waiters when it is not 0). */
uint32_t lg_upadm_release(struct lg_upadm *a, uint32_t loop);

/* CoDel's floor (lg_codel_floor_fn) for record arg: the age of the latest request queued
 * when any is queued, else 0 (ns). */
uint64_t lg_upadm_queued_floor(void *arg, uint64_t now_ns);

/* In flight and queued now. */
void lg_upadm_counts(const struct lg_upadm *a, uint32_t *inflight, uint32_t *queued);

#define LG_UP_SHED_LOAD 2.0 /* an upstream's load while CoDel sheds (the agent's weight 25%) */

/* How loaded the most loaded upstream of u is (its bulkheads are not counted: a route held
 * to its share leaves the rest of the app to serve; one that CoDel judges overloaded is at
 * least LG_UP_SHED_LOAD): (in flight + queued) / max_conns, 1 = every
 * place taken and nobody waiting, up to 4 (the scale of the pools' offered load, stats/offered.h,
 * so the HAProxy agent weight counts an upstream's saturation as a pool's), scaled up by
 * n / (n - ejected) while some of its n servers are ejected (shm/upeject.h: the capacity left
 * is theirs). 0 for none. */
double lg_upshm_load(const struct lg_upshm *u);

/* Requests of client tag (!= 0) tracked in a now (a racy sum: two loops admitting the same
 * client at once may both see one below a limit). */
uint32_t lg_upadm_client_count(const struct lg_upadm *a, uint32_t tag);

/* Tracks a request of client tag (!= 0) of loop. Returns a reference for lg_upadm_client_del
 * (>= 1), or 0 when LG_UP_CLIENTS requests are tracked already (this one goes uncounted). */
uint32_t lg_upadm_client_add(struct lg_upadm *a, uint32_t loop, uint32_t tag);

/* Stops tracking reference ref (from lg_upadm_client_add; 0 is ignored). */
void lg_upadm_client_del(struct lg_upadm *a, uint32_t ref);

/* Master: gives back every place dead loop `loop` held or waited in, its tracked clients and
 * its requests in flight to each server (shm/upeject.h lg_upadm_srv_reclaim). Returns how many
 * places. */
uint32_t lg_upadm_reclaim(struct lg_upadm *a, uint32_t loop);

/* Adds one observation of ns to h (lg_stats_time_bounds buckets); any process may call it. */
void lg_upadm_observe(struct lg_hist *h, uint64_t ns);

/* A short lower_snake name of r ("queue_timeout"), static. */
const char *lg_up_reason_str(enum lg_up_reason r);

#endif
