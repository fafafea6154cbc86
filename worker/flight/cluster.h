/* The cluster scope of a coalescing rule (scope=cluster, docs/CACHE.md "Across replicas"): one
 * job per key across every replica sharing one Redis (--redis), with the local single-flight
 * (shm/flight.h) in front and as the fallback.
 *
 * For a key no loop of this server has in flight, the owner flight asks Redis with one script
 * (GET the value, else SET the lease NX PX lease_ms with a token unique per replica, process
 * and flight): a value is a hit; the lease makes this replica the leader, which runs the job
 * as today and then stores through a second script that compares the token first (SET the
 * value PX ttl, DEL the lease, PUBLISH), so a leader paused past its lease never overwrites
 * the one that took over; a lease held elsewhere makes it a follower, parked in the local
 * flight table (one per key per replica), woken by the PUBLISH on its loop's standing
 * subscription or at the end of the lease, when it asks again (and takes the lease over if the
 * leader died: at most twice, then it computes locally). Every Redis failure opens the
 * breaker of redis/redis.h and the key runs locally. */
#ifndef LG_WORKER_CLUSTER_H
#define LG_WORKER_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

struct lg_worker;
struct lg_lflight;

/* What the cluster protocol asks of the coalescing module (worker/flight/coalesce_cluster.c). */
struct lg_cluster_ops {
	/* Run f's job on this replica (leader, or local fallback). */
	void (*run)(struct lg_lflight *f);
	/* Answer f from a shared value: status, content type, body (len bytes, copied), its age
	 * and the time left to live, ms. Returns 0 (f answered and dropped), or -1 when the body
	 * is not one this replica would have stored for f (f untouched: run here). */
	int (*hit)(struct lg_lflight *f, int status, const char *ctype, const void *body,
	    size_t len, uint64_t age_ms, uint64_t ttl_ms);
	/* The key of owner flight f (binary, *len bytes, constant while f is live) and its
	 * hash. */
	const char *(*key)(struct lg_lflight *f, size_t *len, uint64_t *hash);
};

/* Loop start: connects to cfg->cluster.redis when set (else nothing: every key is local). Returns 0,
 * or -1 (ENOMEM, EINVAL for a bad address). */
int lg_cluster_setup(struct lg_worker *w, const struct lg_cluster_ops *ops);

/* Whether a cluster key may ask Redis now (connected, breaker closed). */
int lg_cluster_ready(struct lg_worker *w);

/* No kind: the key of an upstream route (its app's run time is not measured here). */
#define LG_CLUSTER_NO_KIND UINT32_MAX

/* Owner flight f (its key in its shared entry, waiters parked) of a job of kind (or
 * LG_CLUSTER_NO_KIND) on route (its index in the registry: its answers' maker, part of the
 * Redis key) asks Redis; its lease is --redis-lease-ms, or (0) twice the kind's p99 run time
 * here (no kind: the cold lease), at most deadline_ms. Returns 0 (ops->run or ops->hit, or
 * the flight's drop, follows), or -1 (nothing sent: run it locally). */
int lg_cluster_begin(struct lg_lflight *f, uint32_t kind, uint32_t route,
    uint64_t deadline_ms);

/* f's job answered: stores status, ctype, body (len bytes, copied) for ttl_ms through the
 * token-checked script when f holds the lease and the answer may be shared (2xx, or a kind
 * error kept under negative-ttl; an upstream route's: what its rule stores, the caller having
 * asked RFC 9111; at most --cluster-max-value); otherwise the lease is given back at the
 * drop. Asynchronous: f may go at once. */
void lg_cluster_store(struct lg_lflight *f, int status, const char *ctype, const void *body,
    size_t len, uint64_t ttl_ms);

/* f goes: its Redis state is freed (a command in flight is dropped), a lease it still holds is
 * given back (compare token, DEL, PUBLISH: the followers ask again at once). */
void lg_cluster_drop(struct lg_lflight *f);

#endif
