#include "shm/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "shm/zone.h"

#define CACHE_MAGIC 0x4c474348u /* "LGCH" */
#define HDR_BYTES   4096u

static uint64_t
mkword(uint64_t seq, enum lg_cache_state st)
{
	return (seq << 8) | (uint64_t)st;
}

static enum lg_cache_state
state_of(uint64_t w)
{
	return (enum lg_cache_state)(w & 0xffu);
}

static uint64_t
page_up(uint64_t n)
{
	return (n + 4095u) & ~(uint64_t)4095u;
}

static uint64_t
key_room(size_t key_len)
{
	return (key_len + 7u) & ~(size_t)7u;
}

/* Plans the size classes for `bytes` and `max_value` into h; returns the mapping size. The
 * headers of every entry sit together in one array before the data, so a lookup or the
 * master's sweep reads (and, shmem faults allocating on read, backs) only that array, never the
 * data pages of entries nobody stored. */
static uint64_t
plan(struct lg_cache_hdr *h, uint64_t bytes, uint64_t max_value, uint32_t nloops)
{
	uint64_t need = LG_CACHE_KEY_MAX + max_value;
	uint32_t k = 0, total = 0, want = 1;
	uint64_t size = LG_CACHE_MIN_ENTRY, off;

	/* How many classes until one holds the largest value. */
	for (uint64_t s = LG_CACHE_MIN_ENTRY; s < need && want < LG_CACHE_CLASSES; s *= 4)
		want++;
	h->counters_off = HDR_BYTES;
	h->max_value = 0;
	for (uint32_t i = 0; i < want && bytes > 0; i++, size *= 4) {
		/* Each entry costs its data room and its header. */
		uint64_t n = bytes / want / (size + sizeof(struct lg_cache_entry));
		struct lg_cache_class *cl = &h->cls[k];

		if (n == 0)
			continue; /* this class's share holds no entry of its size */
		cl->ways = n < LG_CACHE_WAYS ? (uint32_t)n : LG_CACHE_WAYS;
		cl->nsets = (uint32_t)(n / cl->ways);
		cl->count = cl->nsets * cl->ways;
		cl->size = size;
		cl->first = total;
		total += cl->count;
		h->max_value = size - LG_CACHE_KEY_MAX;
		k++;
	}
	if (h->max_value > max_value)
		h->max_value = max_value;
	h->nclasses = k;
	h->nentries = total;
	h->tags_off = page_up(HDR_BYTES + (uint64_t)nloops * sizeof(struct lg_cache_counters));
	h->entries_off = page_up(h->tags_off + (uint64_t)LG_CACHE_TAGS * sizeof(_Atomic uint32_t));
	off = page_up(h->entries_off + (uint64_t)total * sizeof(struct lg_cache_entry));
	for (uint32_t i = 0; i < k; i++) {
		h->cls[i].off = off;
		off += (uint64_t)h->cls[i].count * h->cls[i].size;
	}
	return off;
}

int
lg_cache_create(struct lg_cache *c, uint64_t bytes, uint64_t max_value, uint32_t nloops)
{
	struct lg_cache_hdr h = { .magic = CACHE_MAGIC, .nloops = nloops, .bytes = bytes };

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (nloops == 0 || bytes > ((uint64_t)1 << 40)) {
		errno = EINVAL;
		return -1;
	}
	c->size = plan(&h, bytes, max_value, nloops);
	/* The header, the counters and every entry header are backed now (lookups and the sweep
	 * read them; a fault past a memory cgroup's limit would kill or block the reader); data is
	 * backed entry by entry when stored (lg_cache_store). */
	if (lg_zone_map("lagless-cache", c->size, h.nclasses ? h.cls[0].off : c->size, &c->fd,
	    &c->base) == -1)
		return -1;
	c->hdr = (struct lg_cache_hdr *)c->base;
	if (getrandom(&h.key_seed, sizeof(h.key_seed), GRND_NONBLOCK) != sizeof(h.key_seed))
		h.key_seed = lg_now_ns() ^ ((uint64_t)getpid() << 32); /* no entropy yet (early boot) */
	*c->hdr = h;
	c->ctr = (struct lg_cache_counters *)(c->base + h.counters_off);
	c->tags = (_Atomic uint32_t *)(c->base + h.tags_off);
	return 0;
}

void
lg_cache_destroy(struct lg_cache *c)
{
	if (c->base == NULL)
		return;
	lg_zone_unmap(c->base, c->size, c->fd);
	c->base = NULL;
	c->fd = -1;
}

int
lg_cache_cluster_settled(const struct lg_cache *c)
{
	if (c == NULL || c->hdr == NULL)
		return 1;
	for (uint32_t i = 0; i < c->hdr->nloops; i++)
		if (atomic_load_explicit(&c->ctr[i].cl.settled, memory_order_acquire) == 0)
			return 0;
	return 1;
}

/* Tag tag's count (NULL for tag 0: untagged entries are not counted). */
static _Atomic uint32_t *
tag_slot(const struct lg_cache *c, uint32_t tag)
{
	return tag == 0 ? NULL : &c->tags[tag % LG_CACHE_TAGS];
}

/* Gives back one entry of tag's count (an entry that held it stopped being VALID, or an insert
 * that reserved it failed). */
static void
tag_put(struct lg_cache *c, uint32_t tag)
{
	_Atomic uint32_t *t = tag_slot(c, tag);

	if (t != NULL)
		atomic_fetch_sub_explicit(t, 1, memory_order_relaxed);
}

uint32_t
lg_cache_tag_count(const struct lg_cache *c, uint32_t tag)
{
	const _Atomic uint32_t *t = tag_slot(c, tag);

	return t == NULL || c->hdr->nentries == 0 ? 0 :
	    atomic_load_explicit(t, memory_order_relaxed);
}

struct lg_cache_counters *
lg_cache_row(struct lg_cache *c, uint32_t i)
{
	return &c->ctr[i];
}

static struct lg_cache_entry *
entry_at(struct lg_cache *c, uint32_t idx)
{
	return (struct lg_cache_entry *)(c->base + c->hdr->entries_off) + idx;
}

static const struct lg_cache_class *
class_of(const struct lg_cache *c, uint32_t idx)
{
	const struct lg_cache_hdr *h = c->hdr;

	for (uint32_t k = 0; k < h->nclasses; k++)
		if (idx >= h->cls[k].first && idx < h->cls[k].first + h->cls[k].count)
			return &h->cls[k];
	return NULL;
}

/* Entry idx's data: its key, then (key_room later) its value. */
static unsigned char *
key_of(struct lg_cache *c, uint32_t idx)
{
	const struct lg_cache_class *cl = class_of(c, idx);

	return c->base + cl->off + (uint64_t)(idx - cl->first) * cl->size;
}

static uint32_t
set_of(const struct lg_cache_class *cl, uint64_t hash)
{
	return (uint32_t)((hash ^ (hash >> 31)) % cl->nsets);
}

/* Reads e's metadata under the seqlock into *m and, when key != NULL, checks the key. Returns
 * 1 (VALID, matching, consistent), 0 otherwise. */
static int
snapshot(struct lg_cache *c, uint32_t idx, uint64_t hash, const void *key, size_t len,
    struct lg_cache_meta *m)
{
	struct lg_cache_entry *e = entry_at(c, idx);
	uint64_t w = atomic_load_explicit(&e->word, memory_order_acquire);
	int ok;

	if (state_of(w) != LG_CACHE_VALID)
		return 0;
	ok = key == NULL || (e->hash == hash && e->key_len == len &&
	    memcmp(key_of(c, idx), key, len) == 0);
	m->idx = idx;
	m->seq = w;
	m->status = e->status;
	m->val_len = e->val_len;
	m->stored_ns = e->stored_ns;
	m->fresh_until_ns = e->fresh_until_ns;
	m->stale_until_ns = e->stale_until_ns;
	memcpy(m->ctype, e->ctype, sizeof(m->ctype));
	m->ctype[sizeof(m->ctype) - 1] = '\0';
	atomic_thread_fence(memory_order_acquire);
	return ok && atomic_load_explicit(&e->word, memory_order_relaxed) == w;
}

int
lg_cache_lookup(struct lg_cache *c, uint64_t hash, const void *key, size_t len,
    uint64_t now_ns, struct lg_cache_meta *m)
{
	const struct lg_cache_hdr *h = c->hdr;
	struct lg_cache_meta cand;
	int found = 0;

	if (len > LG_CACHE_KEY_MAX)
		return LG_CACHE_MISS;
	for (uint32_t k = 0; k < h->nclasses; k++) {
		const struct lg_cache_class *cl = &h->cls[k];
		uint32_t base = set_of(cl, hash) * cl->ways;

		for (uint32_t way = 0; way < cl->ways; way++) {
			uint32_t idx = cl->first + base + way;

			if (entry_at(c, idx)->hash != hash ||
			    !snapshot(c, idx, hash, key, len, &cand))
				continue;
			if (now_ns >= cand.stale_until_ns)
				continue;
			if (!found || cand.stored_ns > m->stored_ns) {
				*m = cand;
				found = 1;
			}
		}
	}
	if (!found)
		return LG_CACHE_MISS;
	atomic_store_explicit(&entry_at(c, m->idx)->used_ns, now_ns, memory_order_relaxed);
	return now_ns < m->fresh_until_ns ? LG_CACHE_FRESH : LG_CACHE_STALE;
}

int
lg_cache_meta_of(struct lg_cache *c, uint32_t idx, uint64_t seq, struct lg_cache_meta *m)
{
	if (idx >= c->hdr->nentries) {
		errno = EINVAL;
		return -1;
	}
	if (!snapshot(c, idx, 0, NULL, 0, m) || m->seq != seq) {
		errno = ESTALE;
		return -1;
	}
	return 0;
}

int
lg_cache_copy(struct lg_cache *c, const struct lg_cache_meta *m, void *dst, size_t cap)
{
	struct lg_cache_entry *e;
	const struct lg_cache_class *cl;

	if (m->idx >= c->hdr->nentries) {
		errno = EINVAL;
		return -1;
	}
	e = entry_at(c, m->idx);
	cl = class_of(c, m->idx);
	if (cap < m->val_len) {
		errno = ENOSPC;
		return -1;
	}
	if (atomic_load_explicit(&e->word, memory_order_acquire) != m->seq) {
		errno = ESTALE;
		return -1;
	}
	/* val_len and key_len were verified with seq; a concurrent rewrite is caught below. */
	uint64_t room = key_room(e->key_len);
	if (room + m->val_len > cl->size) {
		errno = ESTALE; /* key_len changed under us: a rewrite */
		return -1;
	}
	memcpy(dst, key_of(c, m->idx) + room, m->val_len);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->word, memory_order_relaxed) != m->seq) {
		errno = ESTALE;
		return -1;
	}
	return 0;
}

static const struct lg_cache_class *
class_for(const struct lg_cache_hdr *h, uint64_t need)
{
	for (uint32_t k = 0; k < h->nclasses; k++)
		if (h->cls[k].size >= need)
			return &h->cls[k];
	return NULL;
}

/* Drops VALID entries for the key outside `keep` (an older answer left in another class). */
static void
invalidate_others(struct lg_cache *c, const struct lg_cache_item *it, uint32_t keep)
{
	const struct lg_cache_hdr *h = c->hdr;
	struct lg_cache_meta m;

	for (uint32_t k = 0; k < h->nclasses; k++) {
		const struct lg_cache_class *cl = &h->cls[k];
		uint32_t base = set_of(cl, it->hash) * cl->ways;

		for (uint32_t way = 0; way < cl->ways; way++) {
			uint32_t idx = cl->first + base + way;
			struct lg_cache_entry *e = entry_at(c, idx);
			uint64_t w;

			if (idx == keep || e->hash != it->hash ||
			    !snapshot(c, idx, it->hash, it->key, it->key_len, &m))
				continue;
			w = m.seq;
			uint32_t tag = e->tag; /* as of w: a writer changes the word first */
			if (atomic_compare_exchange_strong(&e->word, &w,
			    mkword((w >> 8) + 1, LG_CACHE_FREE)))
				tag_put(c, tag);
		}
	}
}

/* Rank of way e as a victim for key `it` at now: lower is better. 0 same key, 1 free,
 * 2 past its stale window, 3 live (then the least recently used); FILLING is never taken. */
static int
victim_rank(struct lg_cache *c, uint32_t idx, const struct lg_cache_item *it, uint64_t now,
    uint64_t *w)
{
	struct lg_cache_entry *e = entry_at(c, idx);
	struct lg_cache_meta m;

	*w = atomic_load(&e->word);
	if (state_of(*w) == LG_CACHE_FREE)
		return 1;
	if (state_of(*w) != LG_CACHE_VALID)
		return 9;
	if (e->hash == it->hash && snapshot(c, idx, it->hash, it->key, it->key_len, &m) &&
	    m.seq == *w)
		return 0;
	return now >= e->stale_until_ns ? 2 : 3;
}

/* Reserves a place in it's tag count for an insert whose victim (rank, and vtag: its tag when
 * VALID, else 0) is known: none is needed to take an entry of the same bucket (its place is
 * carried over: the count does not grow); the same key may always be replaced; a new key past
 * tag_max is refused. Returns 1 (reserved, or untagged: the victim's place is to be given
 * back once taken), 0 (carried over) or -1 (refused). */
static int
tag_reserve(struct lg_cache *c, const struct lg_cache_item *it, int rank, uint32_t vtag)
{
	_Atomic uint32_t *t = tag_slot(c, it->tag);

	if (t == NULL)
		return 1;
	if (tag_slot(c, vtag) == t)
		return 0;
	if (atomic_fetch_add_explicit(t, 1, memory_order_relaxed) >= it->tag_max &&
	    it->tag_max != 0 && rank != 0) {
		atomic_fetch_sub_explicit(t, 1, memory_order_relaxed);
		return -1;
	}
	return 1;
}

/* The best victim for it in cl's set (see victim_rank; among live ones the least recently
 * used): its index, rank, word and tag (as of that word). Returns its rank (9: none). */
static int
pick_way(struct lg_cache *c, const struct lg_cache_class *cl, const struct lg_cache_item *it,
    uint64_t now, uint32_t *out_idx, uint64_t *out_w, uint32_t *out_tag)
{
	uint32_t base = set_of(cl, it->hash) * cl->ways;
	uint64_t best_used = UINT64_MAX;
	int best_rank = 9;

	for (uint32_t way = 0; way < cl->ways; way++) {
		uint32_t idx = cl->first + base + way;
		struct lg_cache_entry *e = entry_at(c, idx);
		uint64_t w, used = atomic_load_explicit(&e->used_ns, memory_order_relaxed);
		int r = victim_rank(c, idx, it, now, &w);

		if (r < best_rank || (r == best_rank && r == 3 && used < best_used)) {
			*out_idx = idx;
			*out_w = w;
			*out_tag = e->tag; /* read after w: right if the word is still w later */
			best_rank = r;
			best_used = used;
		}
	}
	return best_rank;
}

/* Picks the way to overwrite in cl's set for it and takes it (-> FILLING), with its place in
 * it's tag count (gone when the victim's was the same bucket's). Returns it, or NULL with errno
 * EBUSY (every way is being written) or EDQUOT (the tag's bound). *evicted says whether a live
 * entry was taken. */
static struct lg_cache_entry *
take_way(struct lg_cache *c, const struct lg_cache_class *cl, const struct lg_cache_item *it,
    uint64_t now, int32_t pid, uint64_t *seq, int *evicted, uint32_t *out_idx)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		uint64_t w = 0;
		uint32_t vtag = 0;
		int rank = pick_way(c, cl, it, now, out_idx, &w, &vtag), held;
		struct lg_cache_entry *e;

		if (rank == 9)
			break;
		e = entry_at(c, *out_idx);
		if ((held = tag_reserve(c, it, rank, state_of(w) == LG_CACHE_VALID ? vtag : 0)) ==
		    -1) {
			errno = EDQUOT;
			return NULL;
		}
		*seq = (w >> 8) + 1;
		if (atomic_compare_exchange_strong(&e->word, &w, mkword(*seq, LG_CACHE_FILLING))) {
			atomic_store(&e->filler, pid);
			*evicted = rank == 3;
			if (held && state_of(w) == LG_CACHE_VALID)
				tag_put(c, vtag); /* the victim's place is given back... */
			e->tag = it->tag;         /* ...or, same bucket, carried over: whoever frees
			                           * this FILLING entry gives its place back */
			return e;
		}
		if (held)
			tag_put(c, it->tag);
	}
	errno = EBUSY;
	return NULL;
}

/* splitmix64: a cheap, well-mixed value for the TTL jitter. */
static uint64_t
mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t
jittered(uint64_t ttl, unsigned pct, uint64_t seed)
{
	if (pct == 0 || ttl == 0)
		return ttl;
	if (pct > 100)
		pct = 100;
	/* ttl * pct / 100 * u, u in [0, 1) from 16 random bits; no overflow below ~2^40 ns * 100. */
	uint64_t span = ttl / 100 * pct;
	return ttl - (span >> 16) * (mix(seed) & 0xffffu);
}

int
lg_cache_store(struct lg_cache *c, const struct lg_cache_item *it, uint64_t now_ns,
    int32_t pid, uint32_t loop, struct lg_cache_meta *m)
{
	const struct lg_cache_class *cl;
	struct lg_cache_entry *e;
	uint64_t seq;
	uint32_t idx = 0;
	int evicted = 0;

	if (it->key_len > LG_CACHE_KEY_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (it->val_len > c->hdr->max_value || (cl = class_for(c->hdr,
	    key_room(it->key_len) + it->val_len)) == NULL) {
		errno = E2BIG;
		return -1;
	}
	if ((e = take_way(c, cl, it, now_ns, pid, &seq, &evicted, &idx)) == NULL)
		return -1;
	/* Back the entry's data before writing it, so memory pressure is an error here (the
	 * answer is not cached), never SIGBUS or a blocked loop (shm/arena.h does the same). */
	if (fallocate(c->fd, 0, (off_t)(key_of(c, idx) - c->base),
	    (off_t)(key_room(it->key_len) + it->val_len)) == -1) {
		int saved = errno;
		uint64_t fw = mkword(seq, LG_CACHE_FILLING);

		if (atomic_compare_exchange_strong(&e->word, &fw, mkword(seq + 1, LG_CACHE_FREE)))
			tag_put(c, it->tag); /* its place in the count: the entry holds nothing */
		errno = saved == ENOSPC ? ENOMEM : saved;
		return -1;
	}
	/* FILLING: readers ignore the entry, and the seq they saw before no longer matches. */
	atomic_thread_fence(memory_order_release);
	e->hash = it->hash;
	e->key_len = (uint32_t)it->key_len;
	e->val_len = it->val_len;
	e->stored_ns = now_ns;
	e->fresh_until_ns = now_ns + jittered(it->ttl_ns, it->jitter_pct, it->hash ^ now_ns);
	e->stale_until_ns = e->fresh_until_ns + it->stale_ns;
	e->status = it->status;
	atomic_store(&e->refresh, 0);
	memset(e->ctype, 0, sizeof(e->ctype));
	if (it->ctype != NULL)
		strncpy(e->ctype, it->ctype, sizeof(e->ctype) - 1);
	memcpy(key_of(c, idx), it->key, it->key_len);
	memcpy(key_of(c, idx) + key_room(it->key_len), it->val, it->val_len);
	atomic_store_explicit(&e->used_ns, now_ns, memory_order_relaxed);
	atomic_store(&e->filler, 0);
	uint64_t fw = mkword(seq, LG_CACHE_FILLING), vw = mkword(seq + 1, LG_CACHE_VALID);
	if (!atomic_compare_exchange_strong_explicit(&e->word, &fw, vw, memory_order_release,
	    memory_order_relaxed)) {
		errno = EBUSY; /* the master took it from a writer it believed dead (and gave its
		                * tag's place back) */
		return -1;
	}
	if (evicted && loop < c->hdr->nloops)
		atomic_fetch_add_explicit(&c->ctr[loop].evictions, 1, memory_order_relaxed);
	invalidate_others(c, it, idx);
	return lg_cache_meta_of(c, idx, vw, m) == 0 ? 0 : -1;
}

#define REFRESH_MS_MASK ((1u << 28) - 1) /* 74 hours: a later time saturates */

/* When entry e's refresh gate word w opens (CLOCK_MONOTONIC ns). */
static uint64_t
refresh_at(const struct lg_cache_entry *e, uint32_t w)
{
	return e->stored_ns + (uint64_t)(w & REFRESH_MS_MASK) * LG_NS_PER_MS;
}

static uint32_t
refresh_word(const struct lg_cache_entry *e, uint32_t fails, uint64_t at_ns)
{
	uint64_t ms = at_ns > e->stored_ns ? (at_ns - e->stored_ns + LG_NS_PER_MS - 1) /
	    LG_NS_PER_MS : 0;

	return fails << 28 | (uint32_t)(ms < REFRESH_MS_MASK ? ms : REFRESH_MS_MASK);
}

int
lg_cache_refresh_take(struct lg_cache *c, const struct lg_cache_meta *m, uint64_t now_ns,
    uint64_t lease_ns)
{
	struct lg_cache_entry *e;
	uint32_t w, lease;

	if (m->idx >= c->hdr->nentries)
		return 0;
	e = entry_at(c, m->idx);
	w = atomic_load(&e->refresh);
	if (atomic_load(&e->word) != m->seq || now_ns < refresh_at(e, w))
		return 0;
	lease = refresh_word(e, w >> 28, now_ns + lease_ns);
	if (!atomic_compare_exchange_strong(&e->refresh, &w, lease))
		return 0; /* another loop took it first */
	if (atomic_load(&e->word) != m->seq) {
		/* Rewritten meanwhile: the lease may have landed on the new answer; give it back. */
		atomic_compare_exchange_strong(&e->refresh, &lease, 0);
		return 0;
	}
	return 1;
}

void
lg_cache_refresh_end(struct lg_cache *c, uint32_t idx, uint64_t seq, uint64_t now_ns,
    int failed)
{
	struct lg_cache_entry *e;
	uint32_t w, fails;
	uint64_t backoff = 0;

	if (idx >= c->hdr->nentries)
		return;
	e = entry_at(c, idx);
	w = atomic_load(&e->refresh);
	fails = w >> 28;
	if (failed) {
		fails += fails < 15;
		backoff = (uint64_t)LG_CACHE_REFRESH_BACKOFF_MS << (fails - 1);
		if (backoff > LG_CACHE_REFRESH_BACKOFF_MAX_MS)
			backoff = LG_CACHE_REFRESH_BACKOFF_MAX_MS;
	}
	if (atomic_load(&e->word) == seq) /* a racing rewrite resets the word after this */
		atomic_compare_exchange_strong(&e->refresh, &w,
		    refresh_word(e, fails, now_ns + backoff * LG_NS_PER_MS));
}

int
lg_cache_sweep(struct lg_cache *c, uint64_t now_ns)
{
	const struct lg_cache_hdr *h = c->hdr;
	uint64_t live = 0, bytes = 0;
	int freed = 0;

	for (uint32_t i = 0; i < h->nentries; i++) {
		struct lg_cache_entry *e = entry_at(c, i);
		uint64_t w = atomic_load(&e->word);

		if (state_of(w) != LG_CACHE_VALID)
			continue;
		uint32_t tag = e->tag; /* as of w: a writer changes the word first */
		if (now_ns >= e->stale_until_ns && atomic_compare_exchange_strong(&e->word, &w,
		    mkword((w >> 8) + 1, LG_CACHE_FREE))) {
			tag_put(c, tag);
			freed++;
			continue;
		}
		live++;
		bytes += e->key_len + e->val_len;
	}
	atomic_store(&c->hdr->entries, live);
	atomic_store(&c->hdr->bytes_used, bytes);
	atomic_fetch_add(&c->hdr->expired, (uint64_t)freed);
	return freed;
}

int
lg_cache_reclaim_pid(struct lg_cache *c, int32_t pid)
{
	const struct lg_cache_hdr *h = c->hdr;
	int n = 0;

	if (pid <= 0)
		return 0;
	for (uint32_t i = 0; i < h->nentries; i++) {
		struct lg_cache_entry *e = entry_at(c, i);
		uint64_t w = atomic_load(&e->word);

		uint32_t tag = e->tag; /* the dead writer's, set when it took the entry */

		if (state_of(w) == LG_CACHE_FILLING && atomic_load(&e->filler) == pid &&
		    atomic_compare_exchange_strong(&e->word, &w, mkword((w >> 8) + 1, LG_CACHE_FREE))) {
			tag_put(c, tag);
			n++;
		}
	}
	return n;
}
