/* Unit tests for shm/cache.c: the shared-memory result cache, on a real memfd, with a real
 * process rewriting entries while another reads them. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/cache.h"
#include "shm/flight.h"

#define S 1000000000ull

static struct lg_cache cache;

static int
setup(void **state)
{
	return lg_cache_create(&cache, 4u << 20, 256u << 10, 2);
}

static int
teardown(void **state)
{
	lg_cache_destroy(&cache);
	return 0;
}

static struct lg_cache_item
item(const char *key, uint64_t hash, const void *val, size_t len, uint64_t ttl_ns)
{
	struct lg_cache_item it = {
		.hash = hash, .key = key, .key_len = strlen(key), .status = 200,
		.ctype = "application/json", .val = val, .val_len = len, .ttl_ns = ttl_ns,
	};
	return it;
}

static uint64_t
h(const char *k)
{
	return lg_flight_hash(LG_FLIGHT_HASH_INIT, k, strlen(k));
}

static int
put(const char *key, const char *val, uint64_t ttl, uint64_t stale, uint64_t now)
{
	struct lg_cache_item it = item(key, h(key), val, strlen(val), ttl);
	struct lg_cache_meta m;

	it.stale_ns = stale;
	return lg_cache_store(&cache, &it, now, getpid(), 0, &m);
}

static void
test_classes_fit_the_budget(void **state)
{
	const struct lg_cache_hdr *hd = cache.hdr;
	uint64_t bytes = 0;

	assert_true(hd->nclasses >= 4);
	for (uint32_t k = 0; k < hd->nclasses; k++) {
		bytes += (uint64_t)hd->cls[k].count * (hd->cls[k].size + sizeof(struct lg_cache_entry));
		assert_true(hd->cls[k].ways >= 1 && hd->cls[k].ways <= LG_CACHE_WAYS);
		if (k > 0)
			assert_true(hd->cls[k].size == hd->cls[k - 1].size * 4);
	}
	assert_true(bytes <= hd->bytes);
	assert_int_equal(hd->max_value, 256u << 10);
	/* A budget too small for the big classes lowers the largest storable value. */
	struct lg_cache small;
	assert_int_equal(lg_cache_create(&small, 64u << 10, 1u << 20, 1), 0);
	assert_true(small.hdr->max_value < (64u << 10));
	assert_true(small.hdr->nentries > 0);
	lg_cache_destroy(&small);
	/* No bytes: a cache that only counts. */
	assert_int_equal(lg_cache_create(&small, 0, 1u << 20, 1), 0);
	assert_int_equal(small.hdr->nentries, 0);
	struct lg_cache_item it = item("k", 1, "v", 1, S);
	struct lg_cache_meta m;
	assert_int_equal(lg_cache_store(&small, &it, 1, 1, 0, &m), -1);
	assert_int_equal(errno, E2BIG);
	assert_int_equal(lg_cache_lookup(&small, 1, "k", 1, 1, &m), LG_CACHE_MISS);
	lg_cache_destroy(&small);
	assert_int_equal(lg_cache_create(&small, 1, 1, 0), -1);
	assert_int_equal(errno, EINVAL);
}

/* The body-hash seed of keys (worker/flight/coalesce_key.c) is drawn per cache: shared by every process
 * that maps it (one key for one body across loop workers), different from another server's. */
static void
test_key_seed_is_random_per_cache(void **state)
{
	struct lg_cache a, b;

	assert_int_equal(lg_cache_create(&a, 64u << 10, 2048, 1), 0);
	assert_int_equal(lg_cache_create(&b, 64u << 10, 2048, 1), 0);
	assert_true(a.hdr->key_seed != 0 && b.hdr->key_seed != 0);
	assert_true(a.hdr->key_seed != b.hdr->key_seed);
	lg_cache_destroy(&a);
	lg_cache_destroy(&b);
}

static void
test_fresh_stale_miss(void **state)
{
	struct lg_cache_meta m;
	char out[64];
	uint64_t t0 = 100 * S;

	assert_int_equal(lg_cache_lookup(&cache, h("GET /a"), "GET /a", 6, t0, &m), LG_CACHE_MISS);
	assert_int_equal(put("GET /a", "hello", 10 * S, 5 * S, t0), 0);
	assert_int_equal(lg_cache_lookup(&cache, h("GET /a"), "GET /a", 6, t0 + S, &m),
	    LG_CACHE_FRESH);
	assert_int_equal(m.val_len, 5);
	assert_int_equal(m.status, 200);
	assert_string_equal(m.ctype, "application/json");
	assert_true(m.stored_ns == t0);
	assert_int_equal(lg_cache_copy(&cache, &m, out, sizeof(out)), 0);
	assert_memory_equal(out, "hello", 5);
	assert_int_equal(lg_cache_copy(&cache, &m, out, 2), -1);
	assert_int_equal(errno, ENOSPC);
	/* Past the TTL, within the stale window; past that, a miss. */
	assert_int_equal(lg_cache_lookup(&cache, h("GET /a"), "GET /a", 6, t0 + 11 * S, &m),
	    LG_CACHE_STALE);
	assert_int_equal(lg_cache_lookup(&cache, h("GET /a"), "GET /a", 6, t0 + 15 * S, &m),
	    LG_CACHE_MISS);
	/* Same hash, other key bytes: a miss (keys are compared, not just hashed). */
	assert_int_equal(lg_cache_lookup(&cache, h("GET /a"), "GET /b", 6, t0 + S, &m),
	    LG_CACHE_MISS);
}

static void
test_replace_and_stale_reference(void **state)
{
	struct lg_cache_meta m1, m2, m;
	struct lg_cache_item it = item("K", h("K"), "first", 5, 10 * S);
	static char big[100000];
	char out[8];

	assert_int_equal(lg_cache_store(&cache, &it, S, getpid(), 0, &m1), 0);
	it.val = "second";
	it.val_len = 6;
	assert_int_equal(lg_cache_store(&cache, &it, 2 * S, getpid(), 0, &m2), 0);
	/* The same way was reused: the waiter's reference to the first answer is now stale. */
	assert_int_equal(m1.idx, m2.idx);
	assert_int_equal(lg_cache_meta_of(&cache, m1.idx, m1.seq, &m), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_cache_copy(&cache, &m1, out, sizeof(out)), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_cache_meta_of(&cache, m2.idx, m2.seq, &m), 0);
	assert_int_equal(lg_cache_meta_of(&cache, 1u << 30, m2.seq, &m), -1);
	assert_int_equal(errno, EINVAL);
	/* A larger answer for the key lands in a bigger class and retires the small one. */
	memset(big, 'x', sizeof(big));
	it.val = big;
	it.val_len = sizeof(big);
	assert_int_equal(lg_cache_store(&cache, &it, 3 * S, getpid(), 0, &m1), 0);
	assert_true(m1.idx != m2.idx);
	assert_int_equal(lg_cache_meta_of(&cache, m2.idx, m2.seq, &m), -1);
	assert_int_equal(lg_cache_lookup(&cache, h("K"), "K", 1, 4 * S, &m), LG_CACHE_FRESH);
	assert_int_equal(m.val_len, sizeof(big));
}

static void
test_limits(void **state)
{
	static char huge[(256u << 10) + 1];
	char key[LG_CACHE_KEY_MAX + 2];
	struct lg_cache_item it = item("k", 1, huge, sizeof(huge), S);
	struct lg_cache_meta m;

	assert_int_equal(lg_cache_store(&cache, &it, 1, 1, 0, &m), -1);
	assert_int_equal(errno, E2BIG);
	it.val_len = 256u << 10; /* exactly the maximum fits */
	assert_int_equal(lg_cache_store(&cache, &it, 1, 1, 0, &m), 0);
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	it = item(key, 1, "v", 1, S);
	assert_int_equal(lg_cache_store(&cache, &it, 1, 1, 0, &m), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lg_cache_lookup(&cache, 1, key, strlen(key), 1, &m), LG_CACHE_MISS);
}

static void
test_jitter_spreads_expiry(void **state)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	char key[16];

	for (int i = 0; i < 200; i++) {
		struct lg_cache_meta m;
		struct lg_cache_item it;

		snprintf(key, sizeof(key), "j%d", i);
		it = item(key, h(key), "v", 1, 100 * S);
		it.jitter_pct = 10;
		assert_int_equal(lg_cache_store(&cache, &it, S, 1, 0, &m), 0);
		uint64_t ttl = m.fresh_until_ns - m.stored_ns;
		assert_true(ttl <= 100 * S && ttl >= 90 * S);
		lo = ttl < lo ? ttl : lo;
		hi = ttl > hi ? ttl : hi;
	}
	assert_true(hi - lo > 5 * S); /* spread over most of the 10 % */
	struct lg_cache_meta m;
	struct lg_cache_item it = item("nj", h("nj"), "v", 1, 100 * S);
	assert_int_equal(lg_cache_store(&cache, &it, S, 1, 0, &m), 0);
	assert_true(m.fresh_until_ns - m.stored_ns == 100 * S);
}

/* Keys forced into one set (the caller's hash decides the set): the least recently used live
 * entry is the one replaced, and the eviction is counted. */
static void
test_lru_within_a_set(void **state)
{
	const struct lg_cache_class *cl = &cache.hdr->cls[0];
	struct lg_cache_meta m;
	char key[16];
	uint64_t now = 10 * S;

	assert_int_equal(cl->ways, LG_CACHE_WAYS);
	for (uint32_t i = 0; i < LG_CACHE_WAYS; i++) {
		snprintf(key, sizeof(key), "w%u", i);
		/* hash multiple of nsets (and of 2^31 so the fold keeps set 0) */
		struct lg_cache_item it = item(key, ((uint64_t)i + 1) * cl->nsets, "v", 1,
		    100 * S);
		assert_int_equal(lg_cache_store(&cache, &it, now + i, 1, 0, &m), 0);
	}
	/* Touch all but w3. */
	for (uint32_t i = 0; i < LG_CACHE_WAYS; i++) {
		snprintf(key, sizeof(key), "w%u", i);
		if (i != 3)
			assert_int_equal(lg_cache_lookup(&cache, ((uint64_t)i + 1) * cl->nsets, key,
			    strlen(key), now + 100 + i, &m), LG_CACHE_FRESH);
	}
	uint64_t before = cache.ctr[0].evictions;
	struct lg_cache_item it = item("new", 99 * (uint64_t)cl->nsets, "v", 1, 100 * S);
	assert_int_equal(lg_cache_store(&cache, &it, now + 1000, 1, 0, &m), 0);
	assert_int_equal(cache.ctr[0].evictions, before + 1);
	assert_int_equal(lg_cache_lookup(&cache, 4 * (uint64_t)cl->nsets, "w3", 2, now + 2000,
	    &m), LG_CACHE_MISS);
	assert_int_equal(lg_cache_lookup(&cache, 5 * (uint64_t)cl->nsets, "w4", 2, now + 2000,
	    &m), LG_CACHE_FRESH);
	/* An expired entry goes before a live least-recently-used one, with no eviction. */
	it = item("short", 98 * (uint64_t)cl->nsets, "v", 1, 1);
	assert_int_equal(lg_cache_store(&cache, &it, now + 3000, 1, 0, &m), 0);
	before = cache.ctr[0].evictions;
	it = item("next", 97 * (uint64_t)cl->nsets, "v", 1, 100 * S);
	assert_int_equal(lg_cache_store(&cache, &it, now + 4000, 1, 0, &m), 0);
	assert_int_equal(cache.ctr[0].evictions, before);
	assert_int_equal(lg_cache_lookup(&cache, 97 * (uint64_t)cl->nsets, "next", 4, now + 5000,
	    &m), LG_CACHE_FRESH);
}

static void
test_sweep_and_reclaim(void **state)
{
	struct lg_cache_meta m;

	assert_int_equal(put("a", "1", 1 * S, 0, S), 0);
	assert_int_equal(put("b", "22", 10 * S, 0, S), 0);
	assert_int_equal(put("c", "333", 1 * S, 5 * S, S), 0);
	assert_int_equal(lg_cache_sweep(&cache, S), 0);
	assert_int_equal(cache.hdr->entries, 3);
	assert_int_equal(cache.hdr->bytes_used, 3 + 6);
	assert_int_equal(lg_cache_sweep(&cache, 3 * S), 1); /* a only: c is within stale */
	assert_int_equal(cache.hdr->entries, 2);
	assert_int_equal(lg_cache_sweep(&cache, 8 * S), 1);
	assert_int_equal(lg_cache_lookup(&cache, h("b"), "b", 1, 8 * S, &m), LG_CACHE_FRESH);
	assert_int_equal(cache.hdr->expired, 2);
	/* A writer killed while FILLING: its entry is freed by pid, others' are not. */
	struct lg_cache_entry *e = (struct lg_cache_entry *)(cache.base + cache.hdr->entries_off) +
	    cache.hdr->cls[1].first;
	uint64_t w = atomic_load(&e->word);
	atomic_store(&e->word, (((w >> 8) + 1) << 8) | LG_CACHE_FILLING);
	atomic_store(&e->filler, 4242);
	assert_int_equal(lg_cache_reclaim_pid(&cache, 4243), 0);
	assert_int_equal(lg_cache_reclaim_pid(&cache, 4242), 1);
	assert_int_equal(atomic_load(&e->word) & 0xff, LG_CACHE_FREE);
	assert_int_equal(lg_cache_reclaim_pid(&cache, 0), 0);
}

/* Lookups and the sweep read only the header array: a cache nobody stored into stays almost
 * unbacked however often it is looked up and swept (a read fault on shmem allocates). */
static void
test_lookups_and_sweeps_back_only_headers(void **state)
{
	struct lg_cache big;
	struct lg_cache_meta m;
	struct stat st;
	char key[32];

	assert_int_equal(lg_cache_create(&big, 64u << 20, 1u << 20, 2), 0);
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		lg_cache_lookup(&big, h(key), key, strlen(key), S, &m);
	}
	lg_cache_sweep(&big, S);
	assert_int_equal(fstat(big.fd, &st), 0);
	uint64_t headers = (uint64_t)big.hdr->nentries * sizeof(struct lg_cache_entry);
	assert_true((uint64_t)st.st_blocks * 512 <= headers + (64u << 10));
	lg_cache_destroy(&big);
}

/* One process rewrites one key over and over with values of varying length whose bytes all
 * equal a counter; the reader copies out concurrently. Every copy that verifies must be
 * internally consistent (no torn answer), and some copies must verify: the writer pauses a
 * little between stores (a seqlock reader can starve under a writer that never stops), and the
 * reader goes on until it has seen 500 good copies or 5 s passed, whichever is first. */
static void
test_readers_never_see_torn_values(void **state)
{
	static unsigned char buf[200000];
	struct timespec ts;
	pid_t w;
	long ok = 0, stale = 0;

	if ((w = fork()) == 0) {
		static unsigned char v[200000];
		for (unsigned i = 1;; i++) {
			size_t len = 1000 + (i * 7919u) % (sizeof(v) - 1000);
			memset(v, (int)(i & 0xff), len);
			struct lg_cache_item it = item("torn", h("torn"), v, len, 100 * S);
			struct lg_cache_meta m;
			lg_cache_store(&cache, &it, S, getpid(), 1, &m);
			usleep(50);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	time_t end = ts.tv_sec + 5;
	while (ok < 500 && clock_gettime(CLOCK_MONOTONIC, &ts) == 0 && ts.tv_sec < end) {
		struct lg_cache_meta m;

		if (lg_cache_lookup(&cache, h("torn"), "torn", 4, 2 * S, &m) != LG_CACHE_FRESH)
			continue;
		if (lg_cache_copy(&cache, &m, buf, sizeof(buf)) == -1) {
			stale++;
			continue;
		}
		ok++;
		for (size_t i = 1; i < m.val_len; i++)
			if (buf[i] != buf[0])
				fail_msg("torn value at byte %zu of %llu", i,
				    (unsigned long long)m.val_len);
	}
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	lg_cache_reclaim_pid(&cache, w);
	print_message("verified copies %ld, stale %ld\n", ok, stale);
	assert_true(ok > 0);
}

/* Stale-while-revalidate's gate (issue 18): one refresh per key at a time, held for its lease,
 * shut after a failure for a back-off that doubles, open again at once when a refresh never
 * started, and reset by a new answer for the key. */
static void
test_refresh_gate(void **state)
{
	const uint64_t ms = 1000000ull, t0 = 10 * S;
	struct lg_cache_meta m, m2;

	assert_int_equal(put("gate", "old", S, 60 * S, t0), 0);
	assert_int_equal(lg_cache_lookup(&cache, h("gate"), "gate", 4, t0 + 2 * S, &m),
	    LG_CACHE_STALE);
	uint64_t now = t0 + 2 * S;
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now, 500 * ms), 1);
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now + 1, 500 * ms), 0); /* leased */
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now + 499 * ms, 500 * ms), 0);
	/* a holder that vanished: the lease ends */
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now + 501 * ms, 500 * ms), 1);
	now += 501 * ms;
	/* not started: open again at once */
	lg_cache_refresh_end(&cache, m.idx, m.seq, now, 0);
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now, 500 * ms), 1);
	/* failed: shut for 1 s, then 2 s, 4 s ... */
	uint64_t backoff = LG_CACHE_REFRESH_BACKOFF_MS * ms;
	for (int i = 0; i < 3; i++, backoff *= 2) {
		lg_cache_refresh_end(&cache, m.idx, m.seq, now, 1);
		assert_int_equal(lg_cache_refresh_take(&cache, &m, now + backoff - ms, 500 * ms), 0);
		assert_int_equal(lg_cache_refresh_take(&cache, &m, now + backoff + ms, 500 * ms), 1);
		now += backoff + ms;
	}
	/* never longer than the maximum */
	for (int i = 0; i < 10; i++)
		lg_cache_refresh_end(&cache, m.idx, m.seq, now, 1);
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now +
	    (LG_CACHE_REFRESH_BACKOFF_MAX_MS + 1) * ms, 500 * ms), 1);
	/* a new answer replaces the entry: its gate is open, the old reference does nothing */
	now += (LG_CACHE_REFRESH_BACKOFF_MAX_MS + 1) * ms;
	assert_int_equal(put("gate", "new", S, 60 * S, now), 0);
	lg_cache_refresh_end(&cache, m.idx, m.seq, now, 1);
	assert_int_equal(lg_cache_lookup(&cache, h("gate"), "gate", 4, now + 2 * S, &m2),
	    LG_CACHE_STALE);
	assert_int_equal(lg_cache_refresh_take(&cache, &m, now + 2 * S, 500 * ms), 0);
	assert_int_equal(lg_cache_refresh_take(&cache, &m2, now + 2 * S, 500 * ms), 1);
}

/* Tags (lg_cache_item.tag): a cache of two classes, the big one a single set of 8 ways. */
static struct lg_cache tc;
static char big[3000];

static int
tagged(const char *key, uint32_t tag, uint32_t max, int large, uint64_t now)
{
	struct lg_cache_item it = item(key, h(key), large ? big : "v", large ? sizeof(big) : 1, S);
	struct lg_cache_meta m;

	it.tag = tag;
	it.tag_max = max;
	return lg_cache_store(&tc, &it, now, getpid(), 0, &m);
}

static int
found(const char *key, uint64_t now)
{
	struct lg_cache_meta m;

	return lg_cache_lookup(&tc, h(key), key, strlen(key), now, &m) != LG_CACHE_MISS;
}

static void
tag_cache(void)
{
	assert_int_equal(lg_cache_create(&tc, 2 * 8 * (8192 + 128), 4096, 1), 0);
	assert_int_equal(tc.hdr->nclasses, 2);
	assert_int_equal(tc.hdr->cls[1].nsets, 1);
	assert_int_equal(tc.hdr->cls[1].ways, 8);
}

/* The count follows inserts, replacements, the copy left in another class, and the sweep. */
static void
test_tag_counts(void **state)
{
	tag_cache();
	assert_int_equal(tagged("a", 5, 0, 0, 1), 0);
	assert_int_equal(lg_cache_tag_count(&tc, 5), 1);
	assert_int_equal(tagged("a", 5, 0, 0, 2), 0);          /* replaced: still one */
	assert_int_equal(lg_cache_tag_count(&tc, 5), 1);
	assert_int_equal(tagged("b", 5 + LG_CACHE_TAGS, 0, 0, 3), 0); /* same bucket */
	assert_int_equal(lg_cache_tag_count(&tc, 5), 2);
	assert_int_equal(tagged("c", 0, 0, 0, 3), 0);          /* untagged: not counted */
	assert_int_equal(lg_cache_tag_count(&tc, 0), 0);
	assert_int_equal(lg_cache_tag_count(&tc, 6), 0);
	/* "a" again, too big for class 0: stored in class 1, its class-0 copy dropped */
	assert_int_equal(tagged("a", 5, 0, 1, 4), 0);
	assert_int_equal(lg_cache_tag_count(&tc, 5), 2);
	/* replaced by another tag's answer for the same key: counted there */
	assert_int_equal(tagged("a", 6, 0, 1, 5), 0);
	assert_int_equal(lg_cache_tag_count(&tc, 5), 1);
	assert_int_equal(lg_cache_tag_count(&tc, 6), 1);
	/* an LRU eviction gives the victim's place back: fill the big set with untagged answers */
	for (int i = 0; i < 8; i++) {
		char k[16];

		snprintf(k, sizeof(k), "u%d", i);
		assert_int_equal(tagged(k, 0, 0, 1, 10 + (uint64_t)i), 0);
	}
	assert_false(found("a", 20));
	assert_int_equal(lg_cache_tag_count(&tc, 6), 0);
	/* the sweep frees "b" past its window */
	assert_int_equal(lg_cache_tag_count(&tc, 5), 1);
	assert_true(lg_cache_sweep(&tc, 3 * S) >= 1);
	assert_int_equal(lg_cache_tag_count(&tc, 5), 0);
	/* a writer killed while FILLING its entry: the master's reclaim gives its place back */
	struct lg_cache_meta m;
	assert_int_equal(tagged("d", 8, 0, 0, 4 * S), 0);
	assert_int_equal(lg_cache_lookup(&tc, h("d"), "d", 1, 4 * S, &m), LG_CACHE_FRESH);
	struct lg_cache_entry *e = (struct lg_cache_entry *)(tc.base + tc.hdr->entries_off) + m.idx;
	atomic_store(&e->filler, 4242);
	atomic_store(&e->word, (((m.seq >> 8) + 1) << 8) | LG_CACHE_FILLING);
	assert_int_equal(lg_cache_tag_count(&tc, 8), 1);
	assert_int_equal(lg_cache_reclaim_pid(&tc, 4242), 1);
	assert_int_equal(lg_cache_tag_count(&tc, 8), 0);
	lg_cache_destroy(&tc);
}

/* At the bound a new key is refused with nothing changed, unless it takes an entry of its own
 * bucket; replacing a key and untagged answers are never refused. */
static void
test_tag_bound(void **state)
{
	tag_cache();
	assert_int_equal(tagged("x1", 9, 2, 0, 1), 0);
	assert_int_equal(tagged("x2", 9, 2, 0, 2), 0);
	errno = 0;
	assert_int_equal(tagged("x3", 9, 2, 0, 3), -1);
	assert_int_equal(errno, EDQUOT);
	assert_false(found("x3", 4));
	assert_true(found("x1", 4) && found("x2", 4));
	assert_int_equal(lg_cache_tag_count(&tc, 9), 2);
	assert_int_equal(tagged("x1", 9, 2, 0, 5), 0);          /* the same key: replaced */
	assert_int_equal(tagged("x2", 9, 1, 0, 5), 0);          /* even over a lower bound */
	assert_int_equal(lg_cache_tag_count(&tc, 9), 2);
	assert_int_equal(tagged("x3", 9, 0, 0, 6), 0);          /* 0: no bound */
	assert_int_equal(lg_cache_tag_count(&tc, 9), 3);
	/* same-tag victim: the big set holds y0 (tag 7, the least recently used) and 7 untagged */
	assert_int_equal(tagged("y0", 7, 1, 1, 10), 0);
	for (int i = 0; i < 7; i++) {
		char k[16];

		snprintf(k, sizeof(k), "u%d", i);
		assert_int_equal(tagged(k, 0, 1, 1, 11 + (uint64_t)i), 0); /* tag 0: never refused */
	}
	assert_int_equal(tagged("y1", 7, 1, 1, 20), 0);          /* takes y0's entry */
	assert_false(found("y0", 21));
	assert_true(found("y1", 21));
	assert_int_equal(lg_cache_tag_count(&tc, 7), 1);
	errno = 0;
	assert_int_equal(tagged("y2", 7, 1, 1, 22), -1);         /* would take u0's */
	assert_int_equal(errno, EDQUOT);
	assert_true(found("u0", 23) && found("y1", 23));
	assert_int_equal(lg_cache_tag_count(&tc, 7), 1);
	lg_cache_destroy(&tc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_classes_fit_the_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fresh_stale_miss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refresh_gate, setup, teardown),
		cmocka_unit_test(test_key_seed_is_random_per_cache),
		cmocka_unit_test_setup_teardown(test_replace_and_stale_reference, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jitter_spreads_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lru_within_a_set, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_and_reclaim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readers_never_see_torn_values, setup, teardown),
		cmocka_unit_test(test_lookups_and_sweeps_back_only_headers),
		cmocka_unit_test(test_tag_counts),
		cmocka_unit_test(test_tag_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
