/* The coalescing module's side of the cluster scope (worker/flight/cluster.h): a cluster key's owner
 * flight parks its requests while Redis is asked, then runs the job here (leader, or local
 * fallback) or answers from the shared value (a hit). One protocol for both kinds of flight:
 * a kind's runs its job in a slot; an upstream route's proxies one of its requests to the
 * app (worker/flight/coalesce_up.c). */
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/policy.h"
#include "shm/stats.h"
#include "worker/flight/coalesce.h"
#include "worker/flight/cluster.h"
#include "worker/flight/coalesce_int.h"
#include "worker/observe.h"
#include "worker/job/offload.h"

/* Runs f's job on this replica: in the slot one of its waiters holds (the first request's,
 * or one with a body), else in a slot claimed now; 503 to every waiter when there is none.
 * With no waiter left on this loop (others wait elsewhere) the other loops are told to
 * dispatch again (one of them becomes the key's owner). */
static void
run(struct lg_lflight *f)
{
	struct lg_conn *c = f->waiters;

	if (f->pol->whole_query) { /* an upstream route's key: its app is asked */
		lg_coal_up_cluster_run(f);
		return;
	}

	if (c == NULL) {
		lg_coal_end_flight(f, 0, NULL, NULL, NULL, 0, 0); /* WAKE_RETRY */
		return;
	}

	while (c != NULL && !lg_job_held(c))
		c = LG_FLIGHT(c)->fl_next;
	if (c == NULL && (c = f->waiters) != NULL && lg_coal_job_slot(c) == -1)
		c = NULL;
	if (c == NULL || lg_coal_own(c, f, 0, 1) == -1) {
		log_warn("cluster key: no job slot for its job: 503 to its waiters");
		lg_coal_end_flight(f, 503, NULL, NULL, NULL, 0, 0);
	}
}

/* Answers f from a shared value: stored in the local cache first (so other loops' waiters and
 * later requests find it), then every waiter of this loop is answered X-Cache: hit with its
 * age, and the other loops are woken to read the local entry (or to ask again). */
static int
hit(struct lg_lflight *f, int status, const char *ctype, const void *body, size_t len,
    uint64_t age_ms, uint64_t ttl_ms)
{
	if (f->pol->whole_query) /* an upstream route's value: the app's fields and body */
		return lg_coal_up_cluster_hit(f, status, body, len, age_ms, ttl_ms);

	struct lg_worker *w = f->w;
	struct lg_cache_meta m;
	size_t klen;
	uint64_t hash;
	const char *key = lg_coal_flight_key(f, &klen, &hash);
	int shared = ttl_ms > 0 && lg_coal_store(f, key, klen, hash, status, ctype, body, len,
	    ttl_ms, &m) == 0;
	struct lg_body *b = lg_body_new(len);

	if (b != NULL)
		memcpy(b->data, body, len);
	lg_coal_broadcast(w, &f->ref, lg_flight_complete(w->env->flights, &f->ref),
	    shared ? status : 0, shared ? &m : NULL, 0, 0);
	while (f->waiters != NULL) {
		struct lg_conn *c = f->waiters;
		int rc;

		lg_coal_unpark(c);
		if (lg_job_held(c))
			lg_offload_release(c);
		lg_obs_job_times(&c->obs, 0, 0);
		lg_obs_unit_begin(w, c);
		if (b == NULL)
			rc = lg_coal_answer(c, status, ctype, "hit", age_ms / 1000u, 1, NULL);
		else if (OK(status))
			rc = lg_coal_answer(c, status, ctype, "hit", age_ms / 1000u, 1, b);
		else
			rc = lg_coal_answer_failed(c, status, "hit", b);
		lg_obs_unit_end(w);
		if (rc == 0)
			lg_conn_resume(c);
	}
	lg_body_unref(b);
	lg_coal_drop_flight(f);
	return 0;
}

/* What worker/flight/cluster.c calls back. */
static const struct lg_cluster_ops cluster_ops = {
	.run = run, .hit = hit, .key = lg_coal_flight_key,
};

int
lg_coal_cluster_setup(struct lg_worker *w)
{
	return lg_cluster_setup(w, &cluster_ops);
}
