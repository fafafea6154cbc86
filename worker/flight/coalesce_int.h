/* Single-flight internals shared by worker/flight/coalesce.c, worker/flight/coalesce_answer.c (the answers
 * and the store) and worker/flight/coalesce_cluster.c (the cluster scope's hooks): the loop's record
 * of a flight and the steps that answer it. Private to the coalescing module;
 * worker/flight/coalesce.h is its interface. */
#ifndef LG_WORKER_COALESCE_INT_H
#define LG_WORKER_COALESCE_INT_H

#include "shm/cache.h"
#include "shm/flight.h"
#include "shm/wire.h"
#include "worker/core/conn.h"
#include "worker/flight/coalesce_state.h"

#define OK(code) ((code) >= 200 && (code) <= 299) /* a job's answer, to share and cache */
/* WAKE status values below 100 (an HTTP status otherwise). */
#define WAKE_RETRY 0   /* the flight ended without an answer to share: dispatch again */
#define WAKE_ALONE 1   /* the answer could not be shared (too large): run an own job */

struct lg_cflight;
struct lg_upflight;

/* A loop's single-flight state (w->coal). */
struct lg_coal {
	struct lg_lflight *list;
	int (*claim)(struct lg_conn *c); /* the router's slot claim (lg_coal_dispatch) */
	struct lg_lflight **by_slot;  /* owner flights by job slot */
	struct lg_cache_counters *ctr;
	int (*proxy)(struct lg_conn *c, void *fl, const char *extra); /* the router's (upstream
	                               * routes: lg_coal_up_dispatch) */
	int (*refresh)(struct lg_conn *c, void *fl); /* the same, a background refresh */
};

/* A flight this loop takes part in: as owner (it holds the job slot) or as a loop with
 * parked connections. */
struct lg_lflight {
	struct lg_lflight *next;
	struct lg_worker *w;
	struct lg_flight_ref ref;
	int owner, background;
	int gated;                    /* background: holds the refresh gate of stale entry
	                               * (stale_idx, stale_seq) (lg_cache_refresh_take) */
	uint32_t stale_idx;
	uint64_t stale_seq;
	int slot;
	uint32_t slot_gen;
	uint32_t pool;                /* owner: the job's pool (its on_client_gone) */
	struct lg_conn *waiters;
	unsigned nwait;
	const struct lg_policy *pol;
	uint64_t deadline_ms;         /* owner: the route's job deadline */
	const char *ctype;            /* owner: the route's content type (registry storage) */
	ev_timer deadline;            /* owner: the job's deadline */
	struct lg_cflight *cl;        /* owner of a cluster-scoped key: its Redis state
	                               * (worker/flight/cluster.c), NULL when local */
	struct lg_upflight *up;       /* owner of an upstream route's key: the copy of the app's
	                               * answer (coalesce_up.c), held by the proxied exchange until
	                               * its end; NULL otherwise */
	int asking;                   /* up is not its exchange's yet: a cluster key asking Redis
	                               * (freed with f, which an exchange never is) */
};

/* The answers and the store (worker/flight/coalesce_answer.c, see their comments there). */
int lg_coal_refuse(struct lg_conn *c, const char *label);
int lg_coal_answer_failed(struct lg_conn *c, int status, const char *label, struct lg_body *b);
int lg_coal_answer(struct lg_conn *c, int status, const char *ctype, const char *label,
    uint64_t age_s, int with_age, struct lg_body *b);
struct lg_body *lg_coal_cached_body(struct lg_worker *w, const struct lg_cache_meta *m);
int lg_coal_answer_cached(struct lg_conn *c, const struct lg_cache_meta *m, struct lg_body *b,
    const char *label, _Atomic uint64_t *counter);
int lg_coal_store(struct lg_lflight *f, const char *key, size_t klen, uint64_t hash, int status,
    const char *ctype, const void *body, size_t len, uint64_t ttl_ms, struct lg_cache_meta *m);
/* Stores it (for owner flight f: tagged by lg_coal_tag) in f's loop's cache with its counts
 * (stored; too_large for an entry over the cache's limit; refused when its path holds its
 * share, EDQUOT); 0 with *m, or -1 (shm/cache.h lg_cache_store's errno). The caller serves the
 * answer either way: only sharing it through the cache is lost. */
int lg_coal_store_item(struct lg_lflight *f, const struct lg_cache_item *it,
    struct lg_cache_meta *m);
/* Tags it, an answer of flight f to store, with its path (shm/cache.h "Tags"): a non-zero hash
 * of f's route and the path of it->key without its query, so every query variant of one path
 * shares a tag, and tag_max = the rule's path_share percent of the cache's entries (at least
 * 1). A rule with path_share 0 leaves it untagged (no bound). */
void lg_coal_tag(const struct lg_lflight *f, struct lg_cache_item *it);

/* The helpers of worker/flight/coalesce.c (see their comments there). */
int lg_coal_job_slot(struct lg_conn *c);
struct lg_lflight *lg_coal_add_flight(struct lg_worker *w, const struct lg_flight_ref *ref,
    const struct lg_policy *pol);
void lg_coal_drop_flight(struct lg_lflight *f);
void lg_coal_park(struct lg_conn *c, struct lg_lflight *f, const char *label);
void lg_coal_unpark(struct lg_conn *c);
void lg_coal_broadcast(struct lg_worker *w, const struct lg_flight_ref *ref, int64_t mask,
    int status, const struct lg_cache_meta *m, uint64_t queue_ns, uint64_t run_ns);
void lg_coal_end_flight(struct lg_lflight *f, int status, const struct lg_cache_meta *m,
    const char *ctype, struct lg_body *b, uint64_t queue_ns, uint64_t run_ns);
const char *lg_coal_flight_key(struct lg_lflight *f, size_t *len, uint64_t *hash);
int lg_coal_join_local(struct lg_conn *c, const struct lg_flight_ref *ref);
void lg_coal_retry_all(struct lg_lflight *f, int alone);
int lg_coal_others_wait(struct lg_lflight *f);

/* Upstream routes' flights (worker/flight/coalesce_up.c): a WAKE for non-owner flight f of an
 * upstream route; an answer to parked c (fields: the app's lines, b its body, NULL: lagless's
 * own error of that status); whether owner f's copy is still held by its exchange. */
void lg_coal_up_wake(struct lg_lflight *f, const struct lg_msg_wake *m);
int lg_coal_up_answer(struct lg_conn *c, int status, const char *label, const char *fields,
    struct lg_body *b);
void lg_coal_up_free(struct lg_upflight *u);

/* The cluster scope's hooks for an upstream route's owner flight f (worker/flight/cluster.h
 * struct lg_cluster_ops, called through worker/flight/coalesce_cluster.c): run proxies one of
 * f's parked requests as the key's flight (leader, or local fallback); hit answers f's
 * waiters from a shared value (body: struct upval, fields, body; len bytes, copied), stores
 * it here for ttl_ms with age_ms added to its Age, and drops f; -1 when body is not such a
 * value (f untouched). */
void lg_coal_up_cluster_run(struct lg_lflight *f);
int lg_coal_up_cluster_hit(struct lg_lflight *f, int status, const void *body, size_t len,
    uint64_t age_ms, uint64_t ttl_ms);

/* c (holding a job slot, lg_job_held) sends its job and hands the slot to owner flight f (which
 * starts the job's deadline); c is parked on f unless background or already parked. Returns 0,
 * or -1 when the job could not be sent (c's slot given back; nothing answered). */
int lg_coal_own(struct lg_conn *c, struct lg_lflight *f, int background, int parked);

#endif
