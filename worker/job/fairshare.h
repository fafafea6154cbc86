/* What one client may hold of the loop's offload path (docs/OPERATIONS.md, slow clients): the
 * per-address share of a pool's transit buffers checked before a claim, and the cut of the
 * slowest upload when a claim finds none free. The facts live in the slot table
 * (shm/share.h); this is the loop's side of them. */
#ifndef LG_WORKER_FAIRSHARE_H
#define LG_WORKER_FAIRSHARE_H

#include <stdint.h>

#include "worker/core/conn.h"
#include "worker/job/offload_state.h"

/* The share tag (shm/share.h lg_share_tag) of c's client: the peer, or behind a trusted proxy
 * the client it names (worker/core/client.h lg_client_addr: PROXY header, X-Forwarded-For); 0 when
 * it has none (a Unix socket, or getpeername(2) failed). One getpeername(2) per offloaded
 * request. Warns once per loop when the rules seem to count a proxy as one client. */
uint32_t lg_fair_tag(const struct lg_conn *c);

/* Whether c's client address (tag) may not take another transit buffer of c's pool now: it
 * holds its share (--transit-share-pct of the pool's buffers, never fewer than its job slots),
 * or its slow upload was cut less than LG_SHARE_PENALTY_NS ago. Returns 1 (refused, counted
 * as reason client_share; the caller answers 503) or 0. */
int lg_fair_over_share(const struct lg_conn *c, uint32_t tag);

/* A claim for c found every transit buffer of its pool held: asks for the slowest upload of
 * the pool below --evict-upload-rate to be cut (lg_share_ask_cut), so a buffer is free when c's
 * client comes back after its Retry-After. Counted as transit_full; returns -1 (the caller
 * answers 503). */
int lg_fair_refuse_transit(const struct lg_conn *c);

/* The loop's tick (100 ms): an upload of this loop that another loop asked to cut is ended
 * with 408 and a close when this loop's own counts confirm it is slower than
 * --evict-upload-rate and held over a second; its client address then gets no buffer of the
 * pool for LG_SHARE_PENALTY_NS. */
void lg_fair_tick(struct lg_worker *w);

#endif
