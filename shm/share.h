/* What one client address may hold of a pool's transit buffers, and which upload is cut when
 * they run out (docs/OPERATIONS.md, slow clients). Twelve uploads trickled just above
 * --min-upload-rate from one address held every transit buffer for the whole body deadline,
 * and every heavy route answered 503 to everyone else.
 *
 * The facts live in the slot table itself (shm/layout.h struct lg_slot: client, up_bytes,
 * up_start_ns, cut_gen, cut_client, cut_until_ns), so nothing has to be given back: a slot
 * counts for an address only while it is held, and the master's release of a dead loop's
 * slots (lg_slot_reclaim_owner) releases its share too. Every function here is a racy scan
 * of [first, first + n) of the table (lg_slot_pool_range), one pass; the callers check again
 * where a wrong guess would matter. */
#ifndef LG_SHM_SHARE_H
#define LG_SHM_SHARE_H

#include <stdint.h>
#include <sys/socket.h>

#include "shm/arena.h"

/* How long an address whose slow upload was cut gets no transit buffer of that pool (503): a
 * trickler that reconnects at once would otherwise take back the buffer its cut freed before
 * the client that was refused comes back after its Retry-After of 1 s. */
#define LG_SHARE_PENALTY_NS (5ull * 1000000000u)

/* Tag of a client address (len bytes at sa, as accept(2)/getpeername(2) give it): an IPv4
 * address (also IPv4-mapped IPv6) whole, an IPv6 address by its /64 prefix (one subscriber
 * gets a /64, so its addresses are one client); FNV-1a, 32 bits, never 0. Two addresses may
 * share a tag (then they share a share). Returns 0 for any other family (a Unix socket): no
 * share applies. */
uint32_t lg_share_tag(const struct sockaddr *sa, socklen_t len);

/* Slots of [first, first + n) held for tag: in any state but FREE and RECLAIMING with their
 * client field equal to tag (a tag of 0 holds nothing). */
uint32_t lg_share_held(const struct lg_arena *a, uint32_t first, uint32_t n, uint32_t tag);

/* 1 when a slow upload of tag was cut in [first, first + n) and its refusal lasts at now_ns
 * (cut_until_ns, LG_SHARE_PENALTY_NS after the cut), else 0. */
int lg_share_penalized(const struct lg_arena *a, uint32_t first, uint32_t n, uint32_t tag,
    uint64_t now_ns);

/* A claim found no free transit buffer: asks the owner of the slowest upload in [first,
 * first + n) to cut it, by storing its generation in cut_gen. Candidates are CLAIMED slots
 * held at least grace_ns whose average rate since the claim (up_bytes over the time held) is
 * below min_rate bytes/s and that are not asked already; the lowest rate wins, the longest
 * held among equal rates. The owner checks the rate again with its own counts before it
 * cuts (lg_share_cut_asked). Returns the slot index, or -1 when none qualifies (min_rate 0:
 * never). */
int lg_share_ask_cut(struct lg_arena *a, uint32_t first, uint32_t n, uint64_t now_ns,
    uint64_t min_rate, uint64_t grace_ns);

/* Owner side: 1 when slot s, whose word the caller read as word, is asked to be cut at that
 * generation (state CLAIMED), else 0. Clears the request either way once seen. */
int lg_share_cut_asked(struct lg_slot *s, uint64_t word);

/* Owner side, once it cut the upload of slot s for client tag: refuses tag a buffer until
 * until_ns (lg_share_penalized). The record stays in s until the next cut of s. */
void lg_share_note_cut(struct lg_slot *s, uint32_t tag, uint64_t until_ns);

/* Owner side, right after a claim of slot s for tag: publishes the tag and starts the upload's
 * clock at now_ns with no byte received. */
void lg_share_claimed(struct lg_slot *s, uint32_t tag, uint64_t now_ns);

#endif
