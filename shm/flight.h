/* The flight table: single-flight (request coalescing) across every loop worker, in shared
 * memory. A flight entry says "a job computing the answer for this key is under way"; a request
 * for the same key joins it instead of starting a second job, and is answered when that job ends.
 *
 * Each entry has one 64-bit word that holds everything that must change together:
 *
 *     generation (24 bits) << 40 | state (8 bits) << 32 | interest mask (32 bits)
 *
 * The interest mask has bit i set while loop worker i has at least one parked connection waiting
 * on the entry (the loop counts its own connections in its own memory: one bit per loop, not one
 * per connection, so a loop's many waiters cost one atomic operation on join and one on leave).
 * Every transition is one compare-and-swap on the word, so there is no state that is half
 * written: the scheme of shm/slot.c, and the reason this is not a robust mutex
 * (PTHREAD_MUTEX_ROBUST would recover the lock after EOWNERDEAD, but not the half-updated data it
 * protected; here every reachable word is a consistent state).
 *
 *     FREE --create (gen+1, mask = creator)--> CLAIMING --publish--> PENDING
 *       ^                                          |                     | join: mask |= bit
 *       +---- master: creator died ----------------+                     | leave: mask &= ~bit
 *       +---- complete (owner; returns the mask to wake) ----------------+
 *       +---- leave that empties the mask (cancel, key freed at once) ---+
 *
 * Because "last waiter leaves" and "cancel" are the same CAS, a request that arrives in that
 * instant either joined before (the mask was not empty, so no cancel) or sees the entry FREE or
 * with a new generation and starts a fresh job: it can never join an entry being cancelled.
 * A late completion or leave carrying an old generation fails its CAS (ESTALE) and changes
 * nothing, so it cannot touch a newer entry in the same place.
 *
 * The table is set-associative: the key hash picks a set of LG_FLIGHT_WAYS entries, and a key may
 * take any free entry of its set, so two keys whose hashes meet share the set instead of one of
 * them going uncoalesced (with one entry a bucket, a 5-key burst met that way once in about 270
 * bursts and every request of the second key ran alone). Joining is lock-free: scan the set for
 * a PENDING entry of the key and CAS its word. Creating takes the set's creator word first (one
 * 32-bit CAS: the creating loop's index + 1), so two creators of one key cannot take two entries
 * of the set; the word guards only that choice, held for the scan and the key's copy (under a
 * microsecond), and every entry still changes by CAS alone. A creator that finds the word held
 * past a bounded spin (its holder preempted, or SIGKILLed: the master's lg_flight_reclaim_loop
 * frees it with the dead loop's CLAIMING entries) answers BUSY, as does a full set; both are
 * counted and run the request alone.
 * Loop workers with index >= LG_FLIGHT_LOOPS do not coalesce (the mask has 32 bits).
 *
 * Models read (not copied): groupcache's singleflight (one call per key, duplicates wait on it,
 * the key is deleted when the call returns) and Varnish's waiting list (requests for a busy
 * object are parked and woken by the fetch instead of polling). */
#ifndef LG_SHM_FLIGHT_H
#define LG_SHM_FLIGHT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LG_FLIGHT_LOOPS   32u   /* loop workers an entry can wake (bits of the mask) */
#define LG_FLIGHT_KEY_MAX 464u  /* key bytes; a longer key is never coalesced */
#define LG_FLIGHT_WAYS    4u    /* entries a key may use (a set); the table has n / WAYS sets */

enum lg_flight_state {
	LG_FLIGHT_FREE = 0,
	LG_FLIGHT_CLAIMING = 1, /* its creator writes the key; nobody may join yet */
	LG_FLIGHT_PENDING = 2,  /* the job runs; requests for the key join */
};

struct lg_flight {
	_Atomic uint64_t word;  /* gen << 40 | state << 32 | mask */
	uint64_t hash;          /* written in CLAIMING, read after PENDING */
	uint32_t owner;         /* loop worker that holds the job slot */
	uint32_t slot;          /* job slot and its generation (shm/slot.h) */
	uint32_t slot_gen;
	uint32_t key_len;
	uint64_t created_ns;    /* CLOCK_MONOTONIC */
	char key[LG_FLIGHT_KEY_MAX];
	_Atomic uint32_t creator; /* first entry of a set only: creating loop + 1, 0 when none */
	uint8_t pad[512 - 44 - LG_FLIGHT_KEY_MAX];
};
_Static_assert(sizeof(struct lg_flight) == 512, "flight entry is eight cache lines");

struct lg_flight_table {
	int fd;                     /* memfd, -1 when not created */
	struct lg_flight *e;        /* n entries, MAP_SHARED */
	uint32_t n;                 /* power of two */
	size_t size;                /* bytes mapped */
};

/* What a loop holds for an entry it created or joined: the entry index and its generation. */
struct lg_flight_ref {
	uint32_t idx;
	uint32_t gen;
	uint32_t owner;             /* valid once joined or created */
	uint32_t slot, slot_gen;    /* the job's slot (owner side, and informational) */
};

enum lg_flight_result {
	LG_FLIGHT_ABSENT = 0,   /* no job for the key: the caller may start one (lg_flight_create) */
	LG_FLIGHT_JOINED = 1,   /* joined a running job; park the request and wait for the wake */
	LG_FLIGHT_CREATED = 2,  /* the caller's job is now the key's flight */
	LG_FLIGHT_BUSY = 3,     /* the set is full or its creator word stayed held, the key is too
	                         * long, or loop >= 32: run alone */
};

/* Fields of an entry word. */
static inline uint32_t lg_flight_gen(uint64_t w) { return (uint32_t)(w >> 40); }
static inline uint32_t lg_flight_st(uint64_t w) { return (uint32_t)(w >> 32) & 0xffu; }
static inline uint32_t lg_flight_mask(uint64_t w) { return (uint32_t)w; }

/* Creates and maps a table with at least `entries` entries (rounded up to a power of two, at
 * least 64) in its own memfd, zero-filled (every entry FREE, generation 0) and backed by memory
 * at once (512 bytes an entry), so no later access can fault past a memory limit. Call in the
 * master before forking. Returns 0, or -1 with errno from memfd_create/ftruncate/fallocate/mmap
 * (ENOMEM), or EINVAL. */
int lg_flight_create_table(struct lg_flight_table *t, uint32_t entries);

/* Unmaps and closes; safe on a zeroed or destroyed table. */
void lg_flight_destroy_table(struct lg_flight_table *t);

/* 64-bit FNV-1a of len bytes, continuing from h (start with LG_FLIGHT_HASH_INIT). The hash only
 * picks a set and speeds comparison; keys are always compared byte for byte. */
#define LG_FLIGHT_HASH_INIT 0xcbf29ce484222325ull
uint64_t lg_flight_hash(uint64_t h, const void *p, size_t len);

/* Loop worker `loop` looks for a running job for key (len bytes, hash from lg_flight_hash) and
 * joins it: sets the loop's bit (a no-op if already set). Returns LG_FLIGHT_JOINED with *ref
 * filled, LG_FLIGHT_ABSENT, or LG_FLIGHT_BUSY (the key is too long, loop >= LG_FLIGHT_LOOPS, or
 * an entry of the set stayed CLAIMING). An entry in CLAIMING is waited on for at most a few
 * microseconds (its creator is writing a key, perhaps this one), then treated as BUSY: a creator
 * killed in that instant is never waited for. Never blocks. */
int lg_flight_join(struct lg_flight_table *t, uint64_t hash, const void *key, size_t len,
    uint32_t loop, struct lg_flight_ref *ref);

/* Loop worker `loop` has claimed job slot (slot, slot_gen) for key and makes it the key's flight,
 * with only its own bit in the mask. Returns LG_FLIGHT_CREATED (*ref filled; the caller owns the
 * job and must end the entry with lg_flight_complete or lg_flight_leave), LG_FLIGHT_JOINED (a
 * job for the key appeared meanwhile and was joined: release the slot), or LG_FLIGHT_BUSY (every
 * entry of the set holds another key, or the set's creator word stayed held for a few
 * microseconds; as lg_flight_join's BUSY otherwise). */
int lg_flight_create(struct lg_flight_table *t, uint64_t hash, const void *key, size_t len,
    uint32_t loop, uint32_t slot, uint32_t slot_gen, uint64_t now_ns, struct lg_flight_ref *ref);

/* Loop worker `loop` has no waiter left on ref (its last parked connection left or was
 * answered some other way). Clears its bit. Returns 1 when the mask became empty: the entry is
 * FREE now (the key is free for a fresh job at once) and the job must be cancelled by its owner
 * (the caller itself, or ref->owner told by message). Returns 0 when other loops still wait,
 * -1 with errno ESTALE when the entry is no longer ref's generation or the bit was not set. */
int lg_flight_leave(struct lg_flight_table *t, const struct lg_flight_ref *ref, uint32_t loop);

/* The owner's job for ref ended (result stored in the cache first, or failed): frees the entry
 * and returns the mask of loops that were waiting at that instant (each must be woken once; a
 * request arriving afterwards finds no flight and reads the cache or starts a fresh job).
 * Returns the mask (>= 0, may be 0), or -1 with errno ESTALE when the entry was already
 * cancelled or reused. */
int64_t lg_flight_complete(struct lg_flight_table *t, const struct lg_flight_ref *ref);

/* Whether a job for key is in flight (PENDING), without joining it: a stale answer's
 * background refresh starts only when none is. */
int lg_flight_peek(struct lg_flight_table *t, uint64_t hash, const void *key, size_t len);

/* Whether ref still names a live (PENDING, same generation) entry. */
int lg_flight_live(const struct lg_flight_table *t, const struct lg_flight_ref *ref);

/* What the master must do after lg_flight_reclaim_loop changed an entry. */
enum lg_flight_orphan {
	LG_FLIGHT_OWNER_DIED = 1, /* the owner died: its job is gone; wake `mask` to retry */
	LG_FLIGHT_UNWANTED = 2,   /* the dead loop was the last waiter: tell `owner` to cancel */
};

/* Master, for a loop worker it reaped: frees the set creator words the dead loop held and the
 * CLAIMING entries it was creating,
 * clears its bit everywhere, frees entries it owned (reporting the loops still waiting) and
 * entries whose last waiter it was (reporting the owner). For each such entry calls
 * cb(arg, what, ref, mask). Returns the number of entries changed. */
int lg_flight_reclaim_loop(struct lg_flight_table *t, uint32_t loop,
    void (*cb)(void *arg, enum lg_flight_orphan what, const struct lg_flight_ref *ref,
    uint32_t mask), void *arg);

/* Counts entries per state (counts[3]); a racy snapshot for metrics and tests. */
void lg_flight_census(const struct lg_flight_table *t, uint32_t counts[3]);

/* Sets whose creator word is held at this instant; a racy snapshot for tests. */
uint32_t lg_flight_held_sets(const struct lg_flight_table *t);

#endif
