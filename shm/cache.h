/* The result cache: a bounded set of answers in shared memory, read and written by every loop
 * worker, swept by the master.
 *
 * Layout (its own memfd, sparse: an entry costs memory once written):
 *
 *   [ struct lg_cache_hdr (4 KiB) | struct lg_cache_counters x nloops, page-rounded |
 *     _Atomic uint32_t x LG_CACHE_TAGS (entries held per tag bucket), page-rounded |
 *     struct lg_cache_entry x nentries (every header), page-rounded |
 *     class 0 data | class 1 data | ... ]
 *
 * The headers sit apart from the data so that lookups and the sweep read only the header
 * array: a read fault on an untouched shmem page allocates it, so headers inline with the data
 * would back a page of every entry the first time the sweep looked at it.
 *
 * Entries come in size classes (2 KiB, 8 KiB, 32 KiB ... each four times the last, up to the
 * one that holds the largest allowed answer); the configured bytes are split evenly between the
 * classes. Each class is set-associative: the key hash picks a set of up to LG_CACHE_WAYS
 * entries, and a lookup reads the set of every class (a few dozen words). An insert takes, in
 * its set: the entry already holding the key, else a free one, else one past its stale window,
 * else the least recently used (its `used_ns`), so eviction is LRU within a set, costs a bounded
 * few comparisons and needs no global list or lock. The master's once-a-second sweep frees
 * entries past their stale window, so inserts mostly find free ways, and refreshes the gauges.
 *
 * Concurrency is a seqlock per entry: the word is seq << 8 | state, and every change bumps seq.
 * A writer takes an entry with one CAS (-> FILLING, seq + 1), writes, and publishes it (-> VALID,
 * seq + 1). A reader reads the word, copies what it needs out, and reads the word again: the copy
 * counts only if the word did not change, so an eviction racing with a reader makes the read fail
 * (a miss), never a torn answer. A writer killed in FILLING leaves an entry no reader uses; the
 * master frees it when it reaps that process (the filler pid is in the entry). */
#ifndef LG_SHM_CACHE_H
#define LG_SHM_CACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LG_CACHE_WAYS     8u
#define LG_CACHE_CLASSES  8u    /* at most; 2 KiB * 4^7 = 32 MiB */
#define LG_CACHE_CTYPE    52u   /* content type bytes, NUL included */
#define LG_CACHE_KEY_MAX  464u  /* as LG_FLIGHT_KEY_MAX */
#define LG_CACHE_MIN_ENTRY 2048u
/* Buckets of the per-tag counts (lg_cache_item.tag): tag % LG_CACHE_TAGS. Tags that share a
 * bucket share its count, so two paths that collide bound each other (rarely: 4096 buckets). */
#define LG_CACHE_TAGS     4096u

enum lg_cache_state { LG_CACHE_FREE = 0, LG_CACHE_FILLING = 1, LG_CACHE_VALID = 2 };

/* An entry's header, in the header array; its key, then its value, are in its class's data. */
struct lg_cache_entry {
	_Atomic uint64_t word;      /* seq << 8 | state */
	_Atomic int32_t filler;     /* pid of the writer while FILLING */
	uint32_t key_len;
	uint64_t hash;
	uint64_t val_len;           /* bytes */
	uint64_t stored_ns;         /* CLOCK_MONOTONIC when stored */
	uint64_t fresh_until_ns;    /* stored + TTL (jitter applied) */
	uint64_t stale_until_ns;    /* fresh_until + stale window */
	_Atomic uint64_t used_ns;   /* last store or hit: the LRU hint (racy by design) */
	uint32_t status;            /* HTTP status of the stored answer */
	_Atomic uint32_t refresh;   /* failed refreshes in a row << 28 | ms after stored_ns before
	                             * which no refresh may start (lg_cache_refresh_take) */
	uint32_t tag;               /* the item's tag (0: none), counted in its bucket while held */
	char ctype[LG_CACHE_CTYPE];
};
_Static_assert(sizeof(struct lg_cache_entry) == 128, "cache entry header is two cache lines");

/* Per loop worker (one writer each, lg_stats_add-style updates); /metrics sums the rows. */
/* Round-trip buckets of the Redis histogram, upper bounds in microseconds (the last: +Inf). */
#define LG_CLUSTER_RTT_BUCKETS 10
#define LG_CLUSTER_RTT_BOUNDS_US { 250, 500, 1000, 2000, 5000, 10000, 25000, 100000, 1000000 }

/* One loop worker's counters of the cluster scope (worker/flight/cluster.c, stats/cluster_metrics.c):
 * 32 words. */
struct lg_cluster_counters {
	_Atomic uint64_t hits;        /* answered from the value in Redis */
	_Atomic uint64_t misses;      /* Redis had no value: a lease was tried */
	_Atomic uint64_t won;         /* leases taken on a cold key (this replica ran the job) */
	_Atomic uint64_t lost;        /* leases held by another replica: this one followed */
	_Atomic uint64_t taken_over;  /* leases taken after waiting on another replica's */
	_Atomic uint64_t waits;       /* follower waits (one per key per loop) */
	_Atomic uint64_t stored;      /* values stored by the token-checked script */
	_Atomic uint64_t refused;     /* late stores refused: the lease was no longer ours */
	_Atomic uint64_t local;       /* cluster keys computed locally (breaker, errors, give-up) */
	_Atomic uint64_t trips;       /* breaker trips */
	_Atomic uint64_t open;        /* gauge: 1 while this loop's breaker keeps keys local */
	_Atomic uint64_t up;          /* gauge: 1 while both connections are ready */
	_Atomic uint64_t too_large;   /* answers over cluster-max-value, not stored in Redis */
	_Atomic uint64_t rtt_sum_us;  /* round trips: sum, count, buckets */
	_Atomic uint64_t rtt_count;
	_Atomic uint64_t rtt[LG_CLUSTER_RTT_BUCKETS];
	_Atomic uint64_t bad_values;  /* values or leases in Redis refused by the checks: a miss */
	_Atomic uint64_t key_errors;  /* error replies for one key (WRONGTYPE...): a miss, no trip */
	_Atomic uint64_t settled;     /* 1 once this loop's first connect ended (up, or given up
	                               * after its bound): /ready and the agent wait for it */
	uint64_t pad[4];
};
_Static_assert(sizeof(struct lg_cluster_counters) == 256, "cluster counters: 32 words");

struct lg_cache_counters {
	_Atomic uint64_t hits;        /* answered fresh from the cache */
	_Atomic uint64_t misses;      /* looked up, not found fresh: a job ran or was joined */
	_Atomic uint64_t stale;       /* answered stale (stale-while-revalidate) */
	_Atomic uint64_t coalesced;   /* requests parked on another request's job */
	_Atomic uint64_t jobs;        /* jobs started for cacheable or coalescing routes */
	_Atomic uint64_t stored;      /* answers written to the cache */
	_Atomic uint64_t evictions;   /* live entries replaced by an insert (LRU) */
	_Atomic uint64_t too_large;   /* answers over the maximum entry size, not stored */
	_Atomic uint64_t busy;        /* requests run alone: flight bucket held by another key */
	_Atomic uint64_t refreshes;   /* background refreshes started from a stale answer */
	_Atomic uint64_t cancelled;   /* coalesced jobs cancelled: every waiter left */
	_Atomic uint64_t body_alone;  /* requests run alone: body over the rule's body-max */
	_Atomic uint64_t refused;     /* answers not stored: their path held its share (EDQUOT) */
	uint64_t pad[3];
	struct lg_cluster_counters cl; /* the cluster scope's (worker/flight/cluster.c) */
};
_Static_assert(sizeof(struct lg_cache_counters) == 384, "counter row is six cache lines");

struct lg_cache_class {
	uint64_t size;              /* bytes of key + value room per entry (its header is apart) */
	uint64_t off;               /* of its data, from the base */
	uint32_t nsets, ways;
	uint32_t first;             /* global index of its first entry */
	uint32_t count;             /* nsets * ways */
};

struct lg_cache_hdr {
	uint32_t magic;
	uint32_t nclasses;
	uint32_t nloops;
	uint32_t nentries;
	uint64_t bytes;             /* configured budget */
	uint64_t max_value;         /* largest value that can be stored (bytes) */
	uint64_t counters_off;
	uint64_t entries_off;       /* the header array: nentries struct lg_cache_entry */
	uint64_t tags_off;          /* LG_CACHE_TAGS _Atomic uint32_t: entries held per bucket */
	struct lg_cache_class cls[LG_CACHE_CLASSES];
	/* gauges and counters written by the master's sweep only */
	_Atomic uint64_t entries;   /* VALID entries at the last sweep */
	_Atomic uint64_t bytes_used;/* key + value bytes of those */
	_Atomic uint64_t expired;   /* entries the sweep freed past their stale window */
	uint64_t key_seed;          /* random at creation: seeds the body hash of keys, so a
	                             * client cannot build two bodies with one key offline */
};

struct lg_cache {
	int fd;
	unsigned char *base;
	size_t size;
	struct lg_cache_hdr *hdr;
	struct lg_cache_counters *ctr; /* nloops rows */
	_Atomic uint32_t *tags;        /* LG_CACHE_TAGS counts (lg_cache_tag_count) */
};

/* A verified snapshot of one entry's metadata; idx + seq name the entry's current content. */
struct lg_cache_meta {
	uint32_t idx;
	uint64_t seq;               /* the whole word seen VALID */
	uint32_t status;
	uint64_t val_len;
	uint64_t stored_ns, fresh_until_ns, stale_until_ns;
	char ctype[LG_CACHE_CTYPE];
};

enum lg_cache_found { LG_CACHE_MISS = 0, LG_CACHE_FRESH = 1, LG_CACHE_STALE = 2 };

/* Creates the cache in its own memfd: `bytes` of entries (0 = no entries: every lookup misses,
 * every store fails; the counters still work), values up to max_value bytes (rounded into the
 * size classes; a class whose share of bytes holds no entry is left out, which lowers the
 * effective maximum, see hdr->max_value), counter rows for nloops loop workers. Call in the
 * master before forking. The header part (about 128 bytes per entry) is backed at once, data
 * when stored. Returns 0, or -1 with errno from memfd_create/ftruncate/fallocate/mmap, or
 * EINVAL (nloops 0). */
int lg_cache_create(struct lg_cache *c, uint64_t bytes, uint64_t max_value, uint32_t nloops);

/* Unmaps and closes; safe on a zeroed or destroyed cache. */
void lg_cache_destroy(struct lg_cache *c);

/* Looks key (len bytes, hash from lg_flight_hash) up as of now_ns. Returns LG_CACHE_FRESH
 * (before fresh_until), LG_CACHE_STALE (before stale_until) or LG_CACHE_MISS, with *m filled for
 * the first two (the newest match when a key is in two classes). Touches the LRU hint on a hit.
 * The value is not copied: lg_cache_copy does that and re-verifies. */
int lg_cache_lookup(struct lg_cache *c, uint64_t hash, const void *key, size_t len,
    uint64_t now_ns, struct lg_cache_meta *m);

/* Fills *m for entry idx if its word is still seq (a reference carried in a wake message).
 * Returns 0, or -1 with errno ESTALE (evicted or rewritten since) or EINVAL (bad idx). */
int lg_cache_meta_of(struct lg_cache *c, uint32_t idx, uint64_t seq, struct lg_cache_meta *m);

/* Copies m's value (m->val_len bytes) to dst (cap bytes at least that) and checks that the
 * entry was not changed meanwhile. Returns 0, or -1 with errno ESTALE (the copy is garbage:
 * treat it as a miss) or ENOSPC. */
int lg_cache_copy(struct lg_cache *c, const struct lg_cache_meta *m, void *dst, size_t cap);

/* What an insert stores. ttl_ns is reduced by up to jitter_pct percent (uniformly, seeded from
 * the hash and now) so entries filled together do not expire together; stale_ns extends it. */
struct lg_cache_item {
	uint64_t hash;
	const void *key;
	size_t key_len;
	uint32_t status;
	const char *ctype;          /* NUL-terminated, truncated to LG_CACHE_CTYPE - 1 */
	const void *val;
	size_t val_len;
	uint64_t ttl_ns, stale_ns;
	unsigned jitter_pct;        /* 0..100 */
	uint32_t tag;               /* who fills the cache (0: untagged, never bounded) */
	uint32_t tag_max;           /* entries the tag's bucket may hold (0: no bound) */
};

/* Tags bound what one source of keys may fill (docs/CACHE.md "Proxied routes"): an upstream
 * route's key holds any query string a client sends, so one client's random queries would
 * otherwise push every other answer that is not being hit out of the shared cache (LRU within
 * a set knows nothing of who filled it). The flight room tags an item with a hash of its route
 * and path without the query; the cache counts the entries each tag bucket holds (VALID, or
 * being filled by an insert that took its place) and refuses an insert of a new key past the
 * bucket's tag_max, unless the entry it would take holds the same bucket already (the count
 * does not grow: the tag then recycles its own entries). Replacing the same key is always
 * allowed. The count is exact under concurrent inserts: a place is reserved before the entry
 * is taken and given back when the insert fails. */

/* Stores it as of now_ns, writer pid `pid` (recorded while FILLING), replacing any entry for the
 * same key in the chosen set and invalidating it in other classes. Loop `loop` gets an eviction
 * counted when a live entry had to go. The entry's data pages are backed with fallocate(2)
 * first. Returns 0 with *m describing the new entry (its idx + seq are the reference waiters
 * read), or -1 with errno E2BIG (larger than every class), EINVAL (key too long), EBUSY (every
 * way of the set was being written by someone else), EDQUOT (a new key of it->tag, whose bucket
 * holds it->tag_max entries already, and the entry it would take is another bucket's or free:
 * nothing changed) or ENOMEM (memory could not be backed: the memory cgroup's limit; the entry
 * is left free). */
int lg_cache_store(struct lg_cache *c, const struct lg_cache_item *it, uint64_t now_ns,
    int32_t pid, uint32_t loop, struct lg_cache_meta *m);

/* Stale-while-revalidate's gate for entry m (a stale answer just looked up): whether this loop
 * may start the key's one background refresh at now_ns. Taking it holds it for lease_ns (the
 * refresh's deadline and a margin), so no other loop starts another meanwhile, and a loop
 * killed with it held holds it no longer; after a failed refresh it stays shut for a back-off
 * (lg_cache_refresh_end). Returns 1 (taken: start the refresh, then call lg_cache_refresh_end
 * unless it replaced the entry), 0 (a refresh holds it, its back-off has not passed, or the
 * entry is no longer m's). */
int lg_cache_refresh_take(struct lg_cache *c, const struct lg_cache_meta *m, uint64_t now_ns,
    uint64_t lease_ns);

/* The refresh taken on entry idx (still at word seq; otherwise nothing is done: a new answer
 * replaced it) ended at now_ns without replacing it: failed (the gate opens after a back-off
 * doubling with each failure in a row from LG_CACHE_REFRESH_BACKOFF_MS to
 * LG_CACHE_REFRESH_BACKOFF_MAX_MS), or never started (failed 0: it opens at once). The stale
 * answer is served meanwhile, until its stale window ends (RFC 5861 section 4). */
void lg_cache_refresh_end(struct lg_cache *c, uint32_t idx, uint64_t seq, uint64_t now_ns,
    int failed);
#define LG_CACHE_REFRESH_BACKOFF_MS     1000u
#define LG_CACHE_REFRESH_BACKOFF_MAX_MS 30000u

/* Master, about once a second: frees VALID entries past stale_until and refreshes the entries /
 * bytes_used gauges. Returns the number of entries freed. Only the master may call it. */
int lg_cache_sweep(struct lg_cache *c, uint64_t now_ns);

/* Master, for a process it reaped: frees every entry that pid left FILLING (giving back the
 * place in its tag's count the insert held). Returns how many. */
int lg_cache_reclaim_pid(struct lg_cache *c, int32_t pid);

/* 1 when every loop worker's first Redis connect has settled (its counters' settled word:
 * connected, or given up after its bound; redis/redis.h), else 0. A cache without rows: 1.
 * Read by /ready and the HAProxy agent of a server with --redis. */
int lg_cache_cluster_settled(const struct lg_cache *c);

/* Entries tag's bucket holds now (VALID, plus any being filled in its place); 0 for tag 0. */
uint32_t lg_cache_tag_count(const struct lg_cache *c, uint32_t tag);

/* Counter row of loop worker i (i < nloops). */
struct lg_cache_counters *lg_cache_row(struct lg_cache *c, uint32_t i);

#endif
