/* Single-flight and the result cache, seen from a loop worker (shm/flight.h, shm/cache.h,
 * common/policy.h; docs/CACHE.md).
 *
 * A request of a route with a rule is decided at dispatch: a fresh cached answer is sent at
 * once (X-Cache: hit); a stale one is sent at once while one background job refreshes it
 * (stale); a job already in flight for the key is joined and the connection parked until it
 * ends (coalesced); otherwise this request's job becomes the key's flight (miss). The loop that
 * claimed the job slot owns the flight; when the job ends it stores the answer in the cache
 * first, frees the flight entry, answers its own parked connections and sends one WAKE to each
 * other loop that has parked connections, which answers its own from the cache entry. Parked
 * connections are woken by that message on the completion channel, never by polling. */
#ifndef LG_WORKER_COALESCE_H
#define LG_WORKER_COALESCE_H

#include "common/buf.h"
#include "http/resp.h"
#include "shm/cache.h"
#include "shm/wire.h"
#include "worker/core/conn.h"
#include "worker/flight/coalesce_state.h"

/* Sets up w's coalescing state. Returns 0, or -1 (ENOMEM). */
int lg_coal_setup(struct lg_worker *w);

/* After lg_coal_setup: connects w's coalescing to the cluster scope (worker/flight/cluster.h
 * lg_cluster_setup with coalescing's hooks; nothing when no --redis). Returns what
 * lg_cluster_setup returns. */
int lg_coal_cluster_setup(struct lg_worker *w);

/* Head hook: whether c's route coalesces. pol is the route's rule (its registry row, built
 * from the configuration: master/site.c), NULL for none. When it does, LG_FLIGHT(c)->coal and
 * LG_FLIGHT(c)->pol are set, and a bodiless request claims no slot before dispatch.
 * lg_job_deadline_ms(c) must be the route's job deadline. */
int lg_coal_wants(struct lg_conn *c, const struct lg_policy *pol);

/* Dispatch of a complete request with LG_FLIGHT(c)->coal set: answers from the cache, parks c on a
 * flight, or starts the job. A bodiless request claims its slot with the router's claim (0, or
 * -1: no slot; it claims c's job slot and sets the job's kind, route, deadline and content type); a
 * request with a body holds its transit buffer since head time, the body complete in it
 * (called from lg_coal_body_done with claim NULL): a cache hit gives it back, a parked request
 * keeps it until answered (so it can still run its own job if the shared answer cannot reach
 * it), and a miss's job runs in it. Returns 0, or -1 when c was closed. */
int lg_coal_dispatch(struct lg_conn *c, int (*claim)(struct lg_conn *c));

/* A DONE header for slot m->slot found no connection waiting: if the slot runs a flight of this
 * loop, finishes it. Returns 1 when it was a flight's, 0 otherwise. */
int lg_coal_completion(struct lg_worker *w, const struct lg_msg *m);

/* A WAKE or UNWANTED header on the completion channel. */
void lg_coal_message(struct lg_worker *w, const struct lg_msg *m);

/* c is closing while parked on a flight: it leaves; the last waiter leaving cancels the job. */
void lg_coal_gone(struct lg_conn *c);

/* c's own deadline passed while parked: it leaves and is answered 504. Returns 0 or -1. */
int lg_coal_deadline(struct lg_conn *c);

/* The router's ops (struct lg_conn_ops, worker/route/routes.c) for a route that may coalesce, over
 * the offload path's (worker/job/offload.h), which knows nothing of flights:
 * body_done: the body is complete in c's slot; a coalescing request (LG_FLIGHT(c)->coal, not
 * run on the loop) is dispatched now, its key holding the body's hash; any other is queued
 * (lg_offload_queue). Returns 0 or -1 (closed). */
int lg_coal_body_done(struct lg_conn *c);

/* job_timeout: c parked on a flight leaves it (lg_coal_deadline); else lg_offload_deadline. */
int lg_coal_job_timeout(struct lg_conn *c);

/* gone: c parked on a flight leaves it (lg_coal_gone: a body's transit buffer is given back
 * there); else lg_offload_client_gone. */
void lg_coal_conn_gone(struct lg_conn *c);

/* Upstream routes (docs/CACHE.md "Proxied routes"): a complete GET or HEAD without a body of a
 * route whose rule has whole_query, LG_FLIGHT(c)->coal set. Answers it from the cache (hit),
 * parks it on the key's flight (coalesced), or has the router proxy it through proxy(c, fl,
 * extra): as the key's flight owner (fl, to hand the exchange as its tee's argument with
 * lg_coal_up_head/_data/_end) or alone (fl NULL: a HEAD, credentials, a key not shared for a
 * while after an answer that could not be: hit-for-miss). extra is the X-Cache line for the
 * answer's head (static). proxy NULL: the one given before. Returns 0, or -1 when c was closed.
 * proxy returns as this, and when it cannot send the request (refused: 503) calls
 * lg_coal_up_end(fl, 0, status) before answering c. A stale answer (the rule's stale_ms) is
 * sent at once while refresh(c, fl) sends c's request once more for flight fl alone, its
 * answer copied to fl as the owner's is and c not answered by it (worker/upstream/upstream.h
 * lg_up_refresh); it returns 0, or -1 when it could not go (nothing else done). */
int lg_coal_up_dispatch(struct lg_conn *c, int (*proxy)(struct lg_conn *c, void *fl,
    const char *extra), int (*refresh)(struct lg_conn *c, void *fl));

/* The owner's exchange's copy of the app's answer, in the shape of worker/upstream's struct
 * lg_up_tee: the head (RFC 9111 decided here: http/cachectl.h), payload bytes (kept up to
 * --cache-max-entry), the end (status: the app's, whole; else 0 with mine, lagless's answer to
 * the owner, or 0: the flight's waiters ask again). After end, fl is gone. */
void lg_coal_up_head(void *fl, int status, const char *head, const struct lg_resp_field *f,
    unsigned n);
void lg_coal_up_data(void *fl, const char *p, size_t n);
void lg_coal_up_end(void *fl, int status, int mine);

/* The key of c's request (common/policy.h): method (HEAD as GET), path, the listed query
 * parameters and headers, and for a request with a body or of another method than GET/HEAD
 * its Content-Type, Content-Encoding, length and body hash (the body complete in c's transit
 * buffer), into key (LG_FLIGHT_KEY_MAX bytes, binary), *len bytes. Returns 0, or -1 when the
 * request must not share: credentials the rule keeps out of sharing, kept headers that did
 * not fit, a body over the rule's body-max, or a longer key. */
int lg_coal_key(const struct lg_conn *c, char *key, size_t *len);

/* Whether c's request carries a body (chunked, or a Content-Length over 0). */
int lg_coal_has_body(const struct lg_conn *c);

#endif
