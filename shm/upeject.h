/* Passive outlier ejection across an upstream's servers, and the retry budget (issue 36, items
 * 3 and 4), kept in the upstream's shared record (shm/upstream.h struct lg_upadm) so every loop
 * worker sees the same state.
 *
 * Ejection (Envoy's outlier detection, consecutive_5xx; HAProxy's observe layer7): a server
 * whose requests fail eject_after times in a row (a refused or failed connect, a connect or
 * first-byte timeout, a 5xx answer) is taken out of the rotation for eject_ms times the number
 * of its ejections in a row, at most LG_UPEJ_CAP times eject_ms. Never more than
 * eject_max_percent of the servers are out at once, and never all of them. When its back-off
 * ends it is back in the rotation on probation: its next failure ejects it again at once, with
 * a longer back-off; its next success clears its record.
 *
 * Which servers are out is one 64-bit word (bit i: server i ejected or on probation; bit 8 + i:
 * its back-off ended, on probation; above: a sequence bumped by every ejection) changed by
 * compare-and-swap, so two processes never eject past the share between them, and a process
 * killed at any instruction leaves a word the others go on from. A server's back-off end is
 * written before the swap that ejects it and read only while the word says it is out. */
#ifndef LG_SHM_UPEJECT_H
#define LG_SHM_UPEJECT_H

#include <stdint.h>

#include "shm/upstream.h"

#define LG_UPEJ_CAP 10u /* the longest back-off, in eject_ms (Envoy: 300 s of 30 s) */

/* Sets a's ejection and retry-budget settings (master, before forking; a zeroed record has
 * ejection off and a retry budget of 0): nservers (<= LG_UPADM_SERVERS) and their addresses
 * (for /metrics' labels, cut to LG_UPADM_ADDR - 1 bytes), eject_after (0: off), eject_ms,
 * eject_max_percent (0 to 100), retry_budget_percent and retry_budget_min. */
void lg_upadm_setup(struct lg_upadm *a, uint32_t nservers, const char *const *addrs,
    uint32_t eject_after, uint64_t eject_ms, uint32_t eject_max_percent,
    uint32_t retry_budget_percent, uint32_t retry_budget_min);

/* Servers ejected now (out of the rotation), bit i for server i. */
uint32_t lg_upadm_ejected(const struct lg_upadm *a);

/* Server si answered (a status under 500): its count of failures in a row is cleared, and a
 * server on probation is back for good (its ejections in a row cleared). */
void lg_upadm_srv_ok(struct lg_upadm *a, uint32_t si);

/* Server si failed at now_ms (CLOCK_MONOTONIC ms, common/clock.h). Returns the back-off in ms
 * when this call ejected it (the caller logs it: one line per ejection), else 0 (below
 * eject_after, already out, the share of ejected servers reached, or ejection off). */
uint64_t lg_upadm_srv_fail(struct lg_upadm *a, uint32_t si, uint64_t now_ms);

/* Loop `loop` is about to send a request to server si (its pick): takes its place in the
 * server's count of requests in flight and returns 1; or, unless force, returns 0 with nothing
 * taken when the server is held back: on a run of failures short of eject_after that the
 * requests already in flight to it could complete, or on probation with a request in flight.
 * So once a run has begun (its first failure judged), no more requests fail before the
 * ejection than the run has left, however many loops send at once: eject_after in all, plus
 * any already in flight beside the run's first (Envoy's consecutive_5xx lets every request in
 * flight at the ejection fail too).
 * The caller picks another server, or forces this one when none is left. Every 1 is given
 * back by lg_upadm_srv_put once the request's outcome is judged or it ends unjudged. With
 * ejection off nothing is counted. */
int lg_upadm_srv_take(struct lg_upadm *a, uint32_t si, uint32_t loop, int force);

/* Gives back a place lg_upadm_srv_take returned 1 for (the same si and loop). */
void lg_upadm_srv_put(struct lg_upadm *a, uint32_t si, uint32_t loop);

/* The master, after loop `loop` died: gives back every place it held (shm/upstream.h
 * lg_upadm_reclaim calls it). */
void lg_upadm_srv_reclaim(struct lg_upadm *a, uint32_t loop);

/* Servers whose back-off ended by now_ms, put back in the rotation (on probation) by this
 * call: bit i for server i (the caller logs each: one line per return). */
uint32_t lg_upadm_eject_sweep(struct lg_upadm *a, uint64_t now_ms);

/* Retry budget (Envoy's retry_budget): a retry on another server of loop `loop` may start
 * while the retries in flight stay under max(retry_budget_min, in flight * percent / 100).
 * Returns 1 with a retry place taken (given back by lg_upadm_retry_done), or 0 with the
 * budget's refusal counted. */
int lg_upadm_retry_claim(struct lg_upadm *a, uint32_t loop);

/* Loop gives a retry place back. */
void lg_upadm_retry_done(struct lg_upadm *a, uint32_t loop);

#endif
