#include "shm/flight.h"

#include <errno.h>
#include <string.h>

#include "shm/zone.h"

/* An entry in CLAIMING, or a set's creator word, is re-read this many times before giving up:
 * the creator writes at most LG_FLIGHT_KEY_MAX bytes, well under a microsecond unless it was
 * preempted. */
#define CLAIM_SPINS 4096

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static uint64_t
mkword(uint32_t gen, uint32_t st, uint32_t mask)
{
	return ((uint64_t)(gen & 0xffffffu) << 40) | ((uint64_t)st << 32) | mask;
}

int
lg_flight_create_table(struct lg_flight_table *t, uint32_t entries)
{
	unsigned char *base;
	uint32_t n = 64;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	if (entries > (1u << 24)) {
		errno = EINVAL;
		return -1;
	}
	while (n < entries)
		n <<= 1;
	t->size = (size_t)n * sizeof(struct lg_flight);
	/* Backed now, not at the first fault: a page fault past a memory cgroup's limit is an
	 * OOM kill or, with the cgroup's OOM killer off, a loop worker blocked until memory frees
	 * (the arena backs its regions with fallocate(2) for the same reason). */
	if (lg_zone_map("lagless-flights", t->size, t->size, &t->fd, &base) == -1)
		return -1;
	t->e = (struct lg_flight *)(void *)base;
	t->n = n;
	return 0;
}

void
lg_flight_destroy_table(struct lg_flight_table *t)
{
	if (t->e == NULL)
		return;
	lg_zone_unmap(t->e, t->size, t->fd);
	t->e = NULL;
	t->fd = -1;
}

uint64_t
lg_flight_hash(uint64_t h, const void *p, size_t len)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < len; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The first entry of key hash's set. */
static struct lg_flight *
set_of(struct lg_flight_table *t, uint64_t hash)
{
	/* The high bits mix better than the low ones after FNV's last multiply. */
	return &t->e[(hash ^ (hash >> 29)) & (t->n - 1) & ~(uint64_t)(LG_FLIGHT_WAYS - 1)];
}

/* Whether PENDING entry e (word w, read with acquire) is for the key. The key bytes are
 * constant while the generation stays, so the caller's CAS on w confirms the read. */
static int
same_key(const struct lg_flight *e, uint64_t hash, const void *key, size_t len)
{
	return e->hash == hash && e->key_len == len && memcmp(e->key, key, len) == 0;
}

static void
fill_ref(const struct lg_flight_table *t, const struct lg_flight *e, uint64_t w,
    struct lg_flight_ref *ref)
{
	ref->idx = (uint32_t)(e - t->e);
	ref->gen = lg_flight_gen(w);
	ref->owner = e->owner;
	ref->slot = e->slot;
	ref->slot_gen = e->slot_gen;
}

/* Reads e's word, waiting a bounded moment while it is CLAIMING. */
static uint64_t
settled(struct lg_flight *e)
{
	uint64_t w = atomic_load(&e->word);

	for (int i = 0; i < CLAIM_SPINS && lg_flight_st(w) == LG_FLIGHT_CLAIMING; i++) {
		cpu_relax();
		w = atomic_load(&e->word);
	}
	return w;
}

/* Joins PENDING entry e when it holds the key. Returns LG_FLIGHT_JOINED, LG_FLIGHT_ABSENT (not
 * the key's), or LG_FLIGHT_BUSY (CLAIMING past the bounded wait: maybe the key's). */
static int
join_entry(struct lg_flight_table *t, struct lg_flight *e, uint64_t hash, const void *key,
    size_t len, uint32_t loop, struct lg_flight_ref *ref)
{
	uint64_t w = settled(e);

	for (;;) {
		uint32_t st = lg_flight_st(w);

		if (st == LG_FLIGHT_CLAIMING)
			return LG_FLIGHT_BUSY;
		if (st != LG_FLIGHT_PENDING || !same_key(e, hash, key, len))
			return LG_FLIGHT_ABSENT;
		/* The mask cannot be empty while PENDING (the CAS that empties it frees the entry),
		 * so joining here never revives an entry being cancelled. */
		uint64_t nw = w | (1u << loop);
		if (atomic_compare_exchange_weak(&e->word, &w, nw)) {
			fill_ref(t, e, nw, ref);
			return LG_FLIGHT_JOINED;
		}
	}
}

/* Scans key's set and joins the key's PENDING entry. Returns as lg_flight_join. */
static int
join_set(struct lg_flight_table *t, struct lg_flight *set, uint64_t hash, const void *key,
    size_t len, uint32_t loop, struct lg_flight_ref *ref)
{
	int busy = 0;

	for (uint32_t i = 0; i < LG_FLIGHT_WAYS; i++) {
		int r = join_entry(t, &set[i], hash, key, len, loop, ref);

		if (r == LG_FLIGHT_JOINED)
			return r;
		busy |= r == LG_FLIGHT_BUSY;
	}
	return busy ? LG_FLIGHT_BUSY : LG_FLIGHT_ABSENT;
}

int
lg_flight_join(struct lg_flight_table *t, uint64_t hash, const void *key, size_t len,
    uint32_t loop, struct lg_flight_ref *ref)
{
	if (loop >= LG_FLIGHT_LOOPS || len > LG_FLIGHT_KEY_MAX)
		return LG_FLIGHT_BUSY;
	return join_set(t, set_of(t, hash), hash, key, len, loop, ref);
}

/* Takes set's creator word for loop, spinning a bounded moment. Returns 1, or 0 (held). */
static int
lock_set(struct lg_flight *set, uint32_t loop)
{
	for (int i = 0; i < CLAIM_SPINS; i++) {
		uint32_t free_word = 0;

		if (atomic_compare_exchange_weak(&set->creator, &free_word, loop + 1))
			return 1;
		cpu_relax();
	}
	return 0;
}

/* Makes FREE entry e (its word w) the key's PENDING flight; the set's creator word is held, so
 * only the master (reclaiming a dead loop) could move it too. Returns LG_FLIGHT_CREATED, or -1
 * when e changed under us (the caller looks at the next entry). */
static int
create_entry(struct lg_flight_table *t, struct lg_flight *e, uint64_t w, uint64_t hash,
    const void *key, size_t len, uint32_t loop, uint32_t slot, uint32_t slot_gen, uint64_t now_ns,
    struct lg_flight_ref *ref)
{
	uint32_t gen = lg_flight_gen(w) + 1;
	uint64_t cw = mkword(gen, LG_FLIGHT_CLAIMING, 1u << loop);
	uint64_t pw = mkword(gen, LG_FLIGHT_PENDING, 1u << loop);

	if (!atomic_compare_exchange_strong(&e->word, &w, cw))
		return -1;
	/* Ours alone while CLAIMING: nobody reads these fields until PENDING. */
	e->hash = hash;
	e->owner = loop;
	e->slot = slot;
	e->slot_gen = slot_gen;
	e->key_len = (uint32_t)len;
	e->created_ns = now_ns;
	memcpy(e->key, key, len);
	/* Release: a joiner that sees PENDING sees the key. */
	if (!atomic_compare_exchange_strong(&e->word, &cw, pw)) {
		errno = ESTALE;
		return -1;
	}
	fill_ref(t, e, pw, ref);
	return LG_FLIGHT_CREATED;
}

int
lg_flight_create(struct lg_flight_table *t, uint64_t hash, const void *key, size_t len,
    uint32_t loop, uint32_t slot, uint32_t slot_gen, uint64_t now_ns, struct lg_flight_ref *ref)
{
	struct lg_flight *set = set_of(t, hash);
	int r;

	if (loop >= LG_FLIGHT_LOOPS || len > LG_FLIGHT_KEY_MAX)
		return LG_FLIGHT_BUSY;
	if (!lock_set(set, loop))
		return LG_FLIGHT_BUSY;
	/* Holding the word, no other creator can publish the key in the set: one scan decides. */
	r = join_set(t, set, hash, key, len, loop, ref);
	for (uint32_t i = 0; r == LG_FLIGHT_ABSENT && i < LG_FLIGHT_WAYS; i++) {
		uint64_t w = atomic_load(&set[i].word);

		if (lg_flight_st(w) == LG_FLIGHT_FREE &&
		    create_entry(t, &set[i], w, hash, key, len, loop, slot, slot_gen, now_ns,
		    ref) == LG_FLIGHT_CREATED)
			r = LG_FLIGHT_CREATED;
	}
	atomic_store(&set->creator, 0);
	return r == LG_FLIGHT_ABSENT ? LG_FLIGHT_BUSY : r;
}

int
lg_flight_leave(struct lg_flight_table *t, const struct lg_flight_ref *ref, uint32_t loop)
{
	struct lg_flight *e = &t->e[ref->idx];
	uint64_t w = atomic_load(&e->word);

	for (;;) {
		uint32_t mask = lg_flight_mask(w), bit = 1u << loop;

		if (lg_flight_gen(w) != (ref->gen & 0xffffffu) ||
		    lg_flight_st(w) != LG_FLIGHT_PENDING || (mask & bit) == 0) {
			errno = ESTALE;
			return -1;
		}
		mask &= ~bit;
		/* The last waiter leaving and the key being freed are one step. */
		uint64_t nw = mask ? (w & ~(uint64_t)bit) :
		    mkword(lg_flight_gen(w), LG_FLIGHT_FREE, 0);
		if (atomic_compare_exchange_weak(&e->word, &w, nw))
			return mask == 0;
	}
}

int64_t
lg_flight_complete(struct lg_flight_table *t, const struct lg_flight_ref *ref)
{
	struct lg_flight *e = &t->e[ref->idx];
	uint64_t w = atomic_load(&e->word);

	for (;;) {
		if (lg_flight_gen(w) != (ref->gen & 0xffffffu) ||
		    lg_flight_st(w) != LG_FLIGHT_PENDING) {
			errno = ESTALE;
			return -1;
		}
		if (atomic_compare_exchange_weak(&e->word, &w,
		    mkword(lg_flight_gen(w), LG_FLIGHT_FREE, 0)))
			return (int64_t)lg_flight_mask(w);
	}
}

int
lg_flight_peek(struct lg_flight_table *t, uint64_t hash, const void *key, size_t len)
{
	struct lg_flight *set = set_of(t, hash);

	for (uint32_t i = 0; len <= LG_FLIGHT_KEY_MAX && i < LG_FLIGHT_WAYS; i++) {
		uint64_t w = atomic_load(&set[i].word);

		if (lg_flight_st(w) == LG_FLIGHT_PENDING && same_key(&set[i], hash, key, len) &&
		    atomic_load(&set[i].word) == w)
			return 1;
	}
	return 0;
}

int
lg_flight_live(const struct lg_flight_table *t, const struct lg_flight_ref *ref)
{
	uint64_t w = atomic_load(&t->e[ref->idx].word);

	return lg_flight_gen(w) == (ref->gen & 0xffffffu) && lg_flight_st(w) == LG_FLIGHT_PENDING;
}

/* One entry of lg_flight_reclaim_loop; returns 1 if it changed the entry. */
static int
reclaim_one(struct lg_flight_table *t, struct lg_flight *e, uint32_t loop,
    void (*cb)(void *, enum lg_flight_orphan, const struct lg_flight_ref *, uint32_t), void *arg)
{
	uint32_t bit = 1u << loop;
	uint64_t w = atomic_load(&e->word);

	for (;;) {
		uint32_t st = lg_flight_st(w), mask = lg_flight_mask(w);
		struct lg_flight_ref ref;
		uint64_t nw;

		if (st == LG_FLIGHT_FREE)
			return 0;
		if (st == LG_FLIGHT_CLAIMING) {
			/* Only the creator's bit is set in CLAIMING. */
			if (mask != bit)
				return 0;
			nw = mkword(lg_flight_gen(w), LG_FLIGHT_FREE, 0);
			if (atomic_compare_exchange_weak(&e->word, &w, nw))
				return 1;
			continue;
		}
		int owned = e->owner == loop;
		if (!owned && (mask & bit) == 0)
			return 0;
		mask &= ~bit;
		nw = owned || mask == 0 ? mkword(lg_flight_gen(w), LG_FLIGHT_FREE, 0) :
		    (w & ~(uint64_t)bit);
		fill_ref(t, e, w, &ref);
		if (!atomic_compare_exchange_weak(&e->word, &w, nw))
			continue;
		if (owned && mask != 0)
			cb(arg, LG_FLIGHT_OWNER_DIED, &ref, mask);
		else if (!owned && mask == 0)
			cb(arg, LG_FLIGHT_UNWANTED, &ref, 0);
		return 1;
	}
}

int
lg_flight_reclaim_loop(struct lg_flight_table *t, uint32_t loop,
    void (*cb)(void *arg, enum lg_flight_orphan what, const struct lg_flight_ref *ref,
    uint32_t mask), void *arg)
{
	int n = 0;

	if (loop >= LG_FLIGHT_LOOPS)
		return 0;
	for (uint32_t i = 0; i < t->n; i++)
		n += reclaim_one(t, &t->e[i], loop, cb, arg);
	/* After its CLAIMING entries: a live creator that then takes the word sees them FREE. */
	for (uint32_t i = 0; i < t->n; i += LG_FLIGHT_WAYS) {
		uint32_t held = loop + 1;

		n += atomic_compare_exchange_strong(&t->e[i].creator, &held, 0);
	}
	return n;
}

void
lg_flight_census(const struct lg_flight_table *t, uint32_t counts[3])
{
	counts[0] = counts[1] = counts[2] = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t st = lg_flight_st(atomic_load(&t->e[i].word));

		if (st < 3)
			counts[st]++;
	}
}

uint32_t
lg_flight_held_sets(const struct lg_flight_table *t)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < t->n; i += LG_FLIGHT_WAYS)
		n += atomic_load(&t->e[i].creator) != 0;
	return n;
}
