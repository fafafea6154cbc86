/* The job-slot state machine. Every transition is one compare-and-swap on the slot word
 * (generation << 32 | state), so no lock exists that a killed process could leave held, and an
 * actor holding an old generation can never move a slot that was since reused.
 *
 *   FREE --claim(gen+1)--> CLAIMED --queue--> QUEUED --start--> RUNNING --finish--> DONE|FAILED
 *     ^                       |                  |                 |                    |
 *     +------ release --------+---- release -----+                 | release            |
 *     +------------------------------------------------------------|---- release -------+
 *     +-- finish (ABANDONED -> FREE) <---- ABANDONED <-------------+
 *   FREE <--> RECLAIMING (master releasing pages; claim skips it)
 *
 * Who may do what: the owner loop worker claims, queues, releases; a compute process starts and
 * finishes; the master releases for a dead owner and finishes for a dead compute process. */
#ifndef LG_SHM_SLOT_H
#define LG_SHM_SLOT_H

#include <stdint.h>

#include "shm/arena.h"

/* State, owner loop index and generation of a slot word. */
enum lg_slot_state lg_slot_state(uint64_t word);
uint32_t lg_slot_owner(uint64_t word);
uint32_t lg_slot_gen(uint64_t word);

/* Claims a FREE slot (a transit buffer) for loop worker `owner` (< LG_MAX_LOOPS), bumping its
 * generation; the owner is part of the slot word, so claim and ownership are one atomic step.
 * Scans every slot starting at a per-process rotating hint so loop workers do not collide on
 * slot 0 (a live resize moves the job-slot limit, not the transit buffers).
 * Returns the slot index and stores the new generation in *gen, or -1 with errno EAGAIN when
 * every slot is taken: that is the bounded queue, and the caller answers 503. */
int lg_slot_claim(struct lg_arena *a, uint32_t owner, uint32_t *gen);

/* The same in the slots of pool `pool` (master->pools[pool]: its range, its open part): a full
 * pool answers 503 for its own routes only, and pools never borrow each other's slots. Without
 * pool pages, or for pool 0 through lg_slot_claim, as described above. */
int lg_slot_claim_pool(struct lg_arena *a, uint32_t pool, uint32_t owner, uint32_t *gen);

/* One transition (from, gen) -> (to, gen). Returns 0, or -1 with errno ESTALE when the slot's
 * generation is no longer gen, or EBUSY when it is in another state. */
int lg_slot_move(struct lg_slot *s, uint32_t gen, enum lg_slot_state from,
    enum lg_slot_state to);

/* The owner stops waiting for slot generation gen: after sending the response, when the client
 * is gone, past the deadline, or for an owner that died. CLAIMED, QUEUED, DONE and FAILED become
 * FREE (a QUEUED job is thereby cancelled: its header is skipped when a compute process reads it);
 * RUNNING becomes ABANDONED (the compute process frees it when it finishes or dies).
 * Returns the resulting state (LG_SLOT_FREE or LG_SLOT_ABANDONED), or -1 with errno ESTALE when
 * gen is not current or the slot is already FREE/ABANDONED. */
int lg_slot_release(struct lg_slot *s, uint32_t gen);

/* Compute side: QUEUED -> RUNNING for generation gen, recording pid and the start time (ns).
 * Returns 0, or -1 with errno ESTALE/EBUSY when the job was cancelled or the header is stale:
 * the caller skips the job. */
int lg_slot_start(struct lg_slot *s, uint32_t gen, int32_t pid, uint64_t now_ns);

/* Compute side, after lg_slot_start: copies the job record of slot `slot` at generation gen
 * (struct lg_job, written by the owner loop before QUEUED) into *j and the owner loop's index
 * into *owner. The record is stable then (the owner writes it again only after a new claim,
 * which needs FREE). Checks it as untrusted input: slot < nslots, the slot RUNNING or ABANDONED
 * at gen (else -1, errno ESTALE), owner < nloops, the body (in_len bytes at body_off) and the
 * parsed query arguments (args_len bytes at args_off, before body_off) inside the input
 * region (else -1, errno ERANGE: *j and *owner are filled all the same). Returns 0. */
int lg_slot_job_read(const struct lg_arena *a, uint32_t slot, uint32_t gen, uint32_t nloops,
    struct lg_job *j, uint32_t *owner);

/* How long the job of slot s waited in the queue, in ns (its start minus its enqueue time, as
 * its record and the compute process wrote them); 0 when it did not start after it was queued
 * (a where=loop job, which is never queued). */
static inline uint64_t
lg_slot_queue_ns(const struct lg_slot *s)
{
	return s->start_ns > s->job.enqueue_ns ? s->start_ns - s->job.enqueue_ns : 0;
}

/* Finishes generation gen with status st (LG_JOB_OK -> DONE, anything else -> FAILED), recording
 * the end time. A slot the owner ABANDONED becomes FREE instead. Called by the compute process
 * that ran the job, or by the master for one that died (st = LG_JOB_CRASHED).
 * Returns 1 when the owner must be sent a completion header, 0 when the slot was freed, or -1
 * with errno ESTALE when gen is not current or the slot is not RUNNING/ABANDONED. */
int lg_slot_finish(struct lg_slot *s, uint32_t gen, enum lg_job_status st, uint64_t now_ns);

/* Master: loop worker `owner` died. Releases every slot it owned (see lg_slot_release).
 * Returns how many slots were touched. */
int lg_slot_reclaim_owner(struct lg_arena *a, uint32_t owner);

/* Master, once per trim period: if slot i dirtied at least min_bytes (or holds a memory charge,
 * shm/arena.h lg_arena_charge_in, given back with its pages) and has stayed FREE and
 * unclaimed since the previous call (same generation), moves it FREE -> RECLAIMING, punches its
 * pages out and moves it back to FREE. A slot freed since the previous call is only noted: it
 * may be claimed again any moment, and a claim skips a RECLAIMING slot, so punching it would
 * answer 503 below capacity (and re-fault the pages at once). So the pages of an idle slot come
 * back one to two periods after its last job; a slot holding a memory charge while more than
 * half the budget is charged is punched at the first pass that sees it FREE. Returns 1 if
 * pages were released, 0 if there was
 * nothing to do, the slot was busy or freed too recently, -1 with errno from fallocate(2)
 * (the slot is FREE again). Only one process (the master) may call it. */
int lg_slot_trim(struct lg_arena *a, uint32_t i, uint64_t min_bytes);

/* A pool of an arena, as the argument of lg_slot_queued_floor. */
struct lg_slot_pool {
	const struct lg_arena *arena;
	uint32_t pool;
};

/* lg_codel_floor_fn for a pool (arg: struct lg_slot_pool): the age at now_ns of its youngest
 * QUEUED job, which waits at least that long, or 0 when none is queued. A racy scan. */
uint64_t lg_slot_queued_floor(void *pool, uint64_t now_ns);

/* The part of the slot table pool `pool` owns: slots [*first, *first + *n) (its transit
 * buffers); the whole table without pool pages. */
void lg_slot_pool_range(const struct lg_arena *a, uint32_t pool, uint32_t *first, uint32_t *n);

/* lg_slot_census for the slots of one pool. */
void lg_slot_census_pool(const struct lg_arena *a, uint32_t pool, uint32_t counts[LG_SLOT_STATES]);

/* Job slots (admission, shm/arena.h struct lg_jobslots). A token is valid while the slot it
 * names is QUEUED, RUNNING or ABANDONED at the generation it names; anything else (a job that
 * ended, a reused slot) makes it free, so nobody has to give a token back and a killed process
 * leaks none.
 *
 * lg_jobslot_take: the owner loop, with slot i at generation gen already moved to QUEUED and
 * its header not yet sent, takes a free token for it. Returns 0, or -1 with errno EAGAIN when
 * every token is valid: C + Q jobs wait for or run on compute, and the caller answers 503. */
int lg_jobslot_take(struct lg_jobslots *js, const struct lg_arena *a, uint32_t i, uint32_t gen);

/* Valid tokens of js now: jobs waiting for or running on compute (a racy snapshot). */
uint32_t lg_jobslot_in_use(const struct lg_jobslots *js, const struct lg_arena *a);

/* Job slots that admit jobs now: js->cap, narrowed to *js->limit when set (the pool page's
 * slot_limit: C + Q of the current CPU budget, moved by a live resize; 0 = no narrowing). A
 * token above the limit that is still valid keeps counting in lg_jobslot_in_use until its job
 * ends. */
uint32_t lg_jobslot_open(const struct lg_jobslots *js, const struct lg_arena *a);

/* The job slots of pool `pool`: the token words of its part of the table (shm/layout.h struct
 * lg_pool_page), narrowed by its slot_limit; the whole table when a has no pool pages. */
struct lg_jobslots lg_jobslots_of(const struct lg_arena *a, uint32_t pool);

/* Counts slots per state into counts[LG_SLOT_STATES] (indexed by enum lg_slot_state), over every pool; a
 * racy snapshot. A slot beyond a pool's open ones (see lg_slot_claim) counts only while it is
 * not FREE, so the sum is the slots in play. */
void lg_slot_census(const struct lg_arena *a, uint32_t counts[LG_SLOT_STATES]);

#endif
