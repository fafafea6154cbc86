/* Unit tests for shm/flight.c: the single-flight table, on a real memfd table, with real
 * processes racing on it and being SIGKILLed (the table is MAP_SHARED, so fork shares it). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/flight.h"

static struct lg_flight_table tab;

static int
setup(void **state)
{
	return lg_flight_create_table(&tab, 64);
}

static int
teardown(void **state)
{
	lg_flight_destroy_table(&tab);
	return 0;
}

static uint64_t
h(const char *k)
{
	return lg_flight_hash(LG_FLIGHT_HASH_INIT, k, strlen(k));
}

static uint64_t
word_of(const struct lg_flight_ref *r)
{
	return atomic_load(&tab.e[r->idx].word);
}

static int
create(const char *k, uint32_t loop, uint32_t slot, struct lg_flight_ref *r)
{
	return lg_flight_create(&tab, h(k), k, strlen(k), loop, slot, 7, 1, r);
}

static int
join(const char *k, uint32_t loop, struct lg_flight_ref *r)
{
	return lg_flight_join(&tab, h(k), k, strlen(k), loop, r);
}

static void
test_table_rounds_up(void **state)
{
	struct lg_flight_table t;

	assert_int_equal(lg_flight_create_table(&t, 1000), 0);
	assert_int_equal(t.n, 1024);
	lg_flight_destroy_table(&t);
	assert_int_equal(lg_flight_create_table(&t, 1), 0);
	assert_int_equal(t.n, 64);
	lg_flight_destroy_table(&t);
	lg_flight_destroy_table(&t); /* twice is safe */
	assert_int_equal(lg_flight_create_table(&t, (1u << 24) + 1), -1);
	assert_int_equal(errno, EINVAL);
}

static void
test_create_then_join(void **state)
{
	struct lg_flight_ref a, b, c;

	assert_int_equal(join("GET /x", 0, &a), LG_FLIGHT_ABSENT);
	assert_int_equal(create("GET /x", 0, 3, &a), LG_FLIGHT_CREATED);
	assert_int_equal(a.owner, 0);
	assert_int_equal(a.slot, 3);
	assert_int_equal(a.slot_gen, 7);
	assert_int_equal(lg_flight_mask(word_of(&a)), 1u);
	assert_int_equal(join("GET /x", 1, &b), LG_FLIGHT_JOINED);
	assert_int_equal(b.idx, a.idx);
	assert_int_equal(b.gen, a.gen);
	assert_int_equal(b.owner, 0);
	assert_int_equal(b.slot, 3);
	assert_int_equal(lg_flight_mask(word_of(&a)), 3u);
	/* A second create for the key joins instead of making a second flight. */
	assert_int_equal(create("GET /x", 5, 9, &c), LG_FLIGHT_JOINED);
	assert_int_equal(c.slot, 3);
	assert_int_equal(lg_flight_mask(word_of(&a)), 0x23u);
	/* Joining twice from one loop is idempotent: the loop counts its own connections. */
	assert_int_equal(join("GET /x", 1, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_mask(word_of(&a)), 0x23u);
	assert_true(lg_flight_live(&tab, &a));
	assert_true(lg_flight_peek(&tab, h("GET /x"), "GET /x", 6));
	assert_false(lg_flight_peek(&tab, h("GET /y"), "GET /y", 6));
	assert_int_equal(lg_flight_mask(word_of(&a)), 0x23u); /* peeking joins nothing */
}

static void
test_last_leave_cancels_and_frees(void **state)
{
	struct lg_flight_ref a, b, n;

	assert_int_equal(create("k", 0, 1, &a), LG_FLIGHT_CREATED);
	assert_int_equal(join("k", 2, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_leave(&tab, &a, 0), 0);   /* loop 2 still waits */
	assert_true(lg_flight_live(&tab, &a));
	assert_int_equal(lg_flight_leave(&tab, &a, 0), -1);  /* bit no longer set */
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_flight_leave(&tab, &b, 2), 1);   /* last: cancelled, key free */
	assert_false(lg_flight_live(&tab, &a));
	assert_int_equal(lg_flight_st(word_of(&a)), LG_FLIGHT_FREE);
	/* A request now finds nothing to join and starts a fresh flight, a new generation. */
	assert_int_equal(join("k", 1, &n), LG_FLIGHT_ABSENT);
	assert_int_equal(create("k", 1, 4, &n), LG_FLIGHT_CREATED);
	assert_int_equal(n.idx, a.idx);
	assert_int_equal(n.gen, a.gen + 1);
	/* The old generation can neither leave nor complete the new entry. */
	assert_int_equal(lg_flight_leave(&tab, &b, 2), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_flight_complete(&tab, &a), -1);
	assert_int_equal(errno, ESTALE);
	assert_true(lg_flight_live(&tab, &n));
	assert_int_equal(lg_flight_mask(word_of(&n)), 2u);
}

static void
test_complete_returns_waiters(void **state)
{
	struct lg_flight_ref a, b;

	assert_int_equal(create("c", 3, 1, &a), LG_FLIGHT_CREATED);
	assert_int_equal(join("c", 4, &b), LG_FLIGHT_JOINED);
	assert_int_equal(join("c", 31, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_complete(&tab, &a), (1u << 3) | (1u << 4) | (1u << 31));
	assert_int_equal(lg_flight_st(word_of(&a)), LG_FLIGHT_FREE);
	assert_int_equal(lg_flight_complete(&tab, &a), -1); /* late second completion */
	assert_int_equal(lg_flight_leave(&tab, &b, 4), -1); /* leaving after the wake */
	assert_int_equal(join("c", 4, &b), LG_FLIGHT_ABSENT);
	/* The owner's own waiters may all have gone while others wait: it still completes. */
	assert_int_equal(create("c", 3, 1, &a), LG_FLIGHT_CREATED);
	assert_int_equal(join("c", 4, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_leave(&tab, &a, 3), 0);
	assert_int_equal(lg_flight_complete(&tab, &a), 1u << 4);
}

/* n distinct keys whose hashes pick the same set of a 64-entry table (keys[i] of cap bytes). */
static void
same_set_keys(char (*keys)[32], int n)
{
	uint64_t b0;
	int got = 1;

	snprintf(keys[0], 32, "key-0");
	b0 = h(keys[0]);
	for (int i = 1; got < n; i++) {
		snprintf(keys[got], 32, "key-%d", i);
		uint64_t b = h(keys[got]);
		if ((((b ^ (b >> 29)) ^ (b0 ^ (b0 >> 29))) & 63 & ~(uint64_t)(LG_FLIGHT_WAYS - 1)) == 0)
			got++;
	}
}

static void
test_busy_cases(void **state)
{
	char k[LG_FLIGHT_WAYS + 1][32], big[LG_FLIGHT_KEY_MAX + 2];
	struct lg_flight_ref a[LG_FLIGHT_WAYS], b;

	/* Keys whose hashes meet share the set: each has its own flight, and its own waiters. */
	same_set_keys(k, LG_FLIGHT_WAYS + 1);
	for (uint32_t i = 0; i < LG_FLIGHT_WAYS; i++) {
		assert_int_equal(join(k[i], 1, &b), LG_FLIGHT_ABSENT);
		assert_int_equal(create(k[i], 0, i + 1, &a[i]), LG_FLIGHT_CREATED);
		assert_int_equal(join(k[i], 1, &b), LG_FLIGHT_JOINED);
		assert_int_equal(b.idx, a[i].idx);
		assert_int_equal(b.slot, i + 1);
	}
	/* A fifth key finds the set full: it runs alone, and nothing else moved. */
	assert_int_equal(join(k[LG_FLIGHT_WAYS], 1, &b), LG_FLIGHT_ABSENT);
	assert_int_equal(create(k[LG_FLIGHT_WAYS], 1, 9, &b), LG_FLIGHT_BUSY);
	for (uint32_t i = 0; i < LG_FLIGHT_WAYS; i++)
		assert_int_equal(lg_flight_mask(word_of(&a[i])), 3u);
	assert_int_equal(lg_flight_held_sets(&tab), 0);
	/* One of them ends: its entry is the fifth key's now. */
	assert_int_equal(lg_flight_complete(&tab, &a[2]), 3u);
	assert_int_equal(create(k[LG_FLIGHT_WAYS], 1, 9, &b), LG_FLIGHT_CREATED);
	assert_int_equal(b.idx, a[2].idx);
	assert_int_equal(lg_flight_complete(&tab, &b), 2u);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(create(big, 0, 1, &b), LG_FLIGHT_BUSY);
	assert_int_equal(join(k[0], LG_FLIGHT_LOOPS, &b), LG_FLIGHT_BUSY);
	/* A CLAIMING entry (a creator mid-write) is not joinable: BUSY after a bounded wait. */
	assert_int_equal(lg_flight_complete(&tab, &a[0]), 3u);
	uint64_t w = word_of(&a[0]);
	atomic_store(&tab.e[a[0].idx].word, (w & ~(0xffull << 32)) | ((uint64_t)LG_FLIGHT_CLAIMING << 32) | 1);
	assert_int_equal(join(k[0], 1, &b), LG_FLIGHT_BUSY);
	atomic_store(&tab.e[a[0].idx].word, w);
}

struct seen {
	int n;
	enum lg_flight_orphan what[8];
	uint32_t mask[8], owner[8];
};

static void
record(void *arg, enum lg_flight_orphan what, const struct lg_flight_ref *ref, uint32_t mask)
{
	struct seen *s = arg;

	s->what[s->n] = what;
	s->mask[s->n] = mask;
	s->owner[s->n] = ref->owner;
	s->n++;
}

static void
test_reclaim_dead_loop(void **state)
{
	struct lg_flight_ref a, b, c, d;
	struct seen s = { 0 };
	uint32_t counts[3];

	/* Entry A: owned by loop 1, loops 2 and 3 wait: the owner dies. */
	assert_int_equal(create("A", 1, 1, &a), LG_FLIGHT_CREATED);
	assert_int_equal(join("A", 2, &b), LG_FLIGHT_JOINED);
	assert_int_equal(join("A", 3, &b), LG_FLIGHT_JOINED);
	/* Entry B: owned by loop 0 (whose waiters left), loop 1 is its last waiter. */
	assert_int_equal(create("B", 0, 2, &c), LG_FLIGHT_CREATED);
	assert_int_equal(join("B", 1, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_leave(&tab, &c, 0), 0);
	/* Entry C: owned by loop 0, loops 0 and 1 wait: loop 1 is just one waiter. */
	assert_int_equal(create("C", 0, 3, &d), LG_FLIGHT_CREATED);
	assert_int_equal(join("C", 1, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_reclaim_loop(&tab, 1, record, &s), 3);
	assert_int_equal(s.n, 2);
	for (int i = 0; i < 2; i++) {
		if (s.what[i] == LG_FLIGHT_OWNER_DIED) {
			assert_int_equal(s.mask[i], (1u << 2) | (1u << 3));
			assert_int_equal(s.owner[i], 1);
		} else {
			assert_int_equal(s.what[i], LG_FLIGHT_UNWANTED);
			assert_int_equal(s.owner[i], 0);
		}
	}
	assert_false(lg_flight_live(&tab, &a));
	assert_false(lg_flight_live(&tab, &c));
	assert_true(lg_flight_live(&tab, &d));
	assert_int_equal(lg_flight_mask(word_of(&d)), 1u);
	/* A creator killed while CLAIMING: only its bit is set, and the master frees it. */
	uint64_t w = word_of(&a);
	atomic_store(&tab.e[a.idx].word, ((uint64_t)(lg_flight_gen(w) + 1) << 40) |
	    ((uint64_t)LG_FLIGHT_CLAIMING << 32) | (1u << 5));
	s.n = 0;
	assert_int_equal(lg_flight_reclaim_loop(&tab, 4, record, &s), 0);
	assert_int_equal(lg_flight_reclaim_loop(&tab, 5, record, &s), 1);
	assert_int_equal(s.n, 0);
	lg_flight_census(&tab, counts);
	assert_int_equal(counts[LG_FLIGHT_CLAIMING], 0);
	assert_int_equal(counts[LG_FLIGHT_PENDING], 1);
	assert_int_equal(lg_flight_reclaim_loop(&tab, LG_FLIGHT_LOOPS, record, &s), 0);
}

/* Semantic 6 under real concurrency: process A creates and cancels a flight in a loop while
 * process B joins and leaves it. A join that succeeds must hold a live entry until B leaves it
 * (a cancelling leave can never empty the mask while B's bit is set), and B's leave of a joined
 * ref never fails. Any violation exits the child with a non-zero status. Both go on for at least
 * 300 ms and until B has joined RACE_JOINS times (counted in *joins, shared): on a loaded machine
 * (or under ASan) the two may barely overlap in a fixed window; 20 s bound the wait. */
#define RACE_JOINS 200

static void
racer(int creator, uint64_t min_ns, uint64_t max_ns, _Atomic long *joins)
{
	struct lg_flight_ref r;

	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		if (now > max_ns || (now > min_ns && atomic_load(joins) >= RACE_JOINS))
			break;
		if (creator) {
			int rc = create("race", 0, 1, &r);
			if (rc == LG_FLIGHT_CREATED || rc == LG_FLIGHT_JOINED) {
				int lv = lg_flight_leave(&tab, &r, 0);
				if (lv == -1)
					_exit(10);
			} else if (rc != LG_FLIGHT_BUSY) {
				_exit(11);
			}
			continue;
		}
		if (join("race", 1, &r) != LG_FLIGHT_JOINED)
			continue;
		if (!lg_flight_live(&tab, &r))
			_exit(12);
		if ((lg_flight_mask(atomic_load(&tab.e[r.idx].word)) & 2u) == 0)
			_exit(13);
		if (lg_flight_leave(&tab, &r, 1) == -1)
			_exit(14);
		atomic_fetch_add(joins, 1);
	}
	_exit(creator || atomic_load(joins) > 0 ? 0 : 15);
}

static void
test_race_join_against_cancel(void **state)
{
	struct timespec ts;
	pid_t p[2];
	uint32_t counts[3];
	_Atomic long *joins = mmap(NULL, sizeof(*joins), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(joins != MAP_FAILED);
	atomic_store(joins, 0);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (int i = 0; i < 2; i++)
		if ((p[i] = fork()) == 0)
			racer(i == 0, now + 300000000u, now + 20000000000u, joins);
	for (int i = 0; i < 2; i++) {
		int st;
		assert_int_equal(waitpid(p[i], &st, 0), p[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	print_message("joins %ld\n", atomic_load(joins));
	assert_true(atomic_load(joins) >= RACE_JOINS);
	munmap((void *)joins, sizeof(*joins));
	lg_flight_census(&tab, counts);
	assert_int_equal(counts[LG_FLIGHT_FREE], tab.n);
}

/* Processes SIGKILLed at arbitrary instants while creating, joining and leaving: after the
 * master-side reclaim of each dead loop, no entry is left CLAIMING or held by the dead. */
static void
churn(uint32_t loop)
{
	struct lg_flight_ref r;
	char key[16];

	for (unsigned i = 0;; i++) {
		snprintf(key, sizeof(key), "k%u", i % 5);
		if (create(key, loop, 1, &r) != LG_FLIGHT_BUSY)
			lg_flight_leave(&tab, &r, loop);
	}
}

static void
test_sigkill_anywhere_then_reclaim(void **state)
{
	struct seen s;
	uint32_t counts[3];

	for (int round = 0; round < 20; round++) {
		pid_t p[3];

		for (uint32_t i = 0; i < 3; i++)
			if ((p[i] = fork()) == 0)
				churn(i);
		usleep(2000 + (unsigned)round * 300);
		for (uint32_t i = 0; i < 3; i++) {
			kill(p[i], SIGKILL);
			waitpid(p[i], NULL, 0);
		}
		for (uint32_t i = 0; i < 3; i++) {
			s.n = 0;
			lg_flight_reclaim_loop(&tab, i, record, &s);
		}
		lg_flight_census(&tab, counts);
		assert_int_equal(counts[LG_FLIGHT_FREE], tab.n);
		assert_int_equal(lg_flight_held_sets(&tab), 0);
	}
}

/* The set's creator word held by a loop that died: creators of the set get BUSY after a bounded
 * spin (never a second entry for a key), joiners of a live key still join, and the master's
 * reclaim of that loop frees the word. */
static void
test_creator_word_of_a_dead_loop(void **state)
{
	struct lg_flight_ref a, b;
	struct seen s = { 0 };

	assert_int_equal(create("A", 0, 1, &a), LG_FLIGHT_CREATED);
	struct lg_flight *set = &tab.e[a.idx & ~(LG_FLIGHT_WAYS - 1)];
	atomic_store(&set->creator, 5 + 1);
	assert_int_equal(lg_flight_held_sets(&tab), 1);
	assert_int_equal(create("A", 1, 2, &b), LG_FLIGHT_BUSY);
	assert_int_equal(join("A", 1, &b), LG_FLIGHT_JOINED);
	assert_int_equal(lg_flight_reclaim_loop(&tab, 4, record, &s), 0);
	assert_int_equal(lg_flight_reclaim_loop(&tab, 5, record, &s), 1);
	assert_int_equal(s.n, 0);
	assert_int_equal(lg_flight_held_sets(&tab), 0);
	assert_int_equal(create("A", 2, 3, &b), LG_FLIGHT_JOINED);
	assert_int_equal(b.idx, a.idx);
}

/* Creators of one key racing in a set where other keys come and go: the creator word must keep
 * the key in one entry. Each of 3 processes creates (or joins) key "hot" and the set's other
 * keys, and after each create scans the set: another PENDING entry for "hot" while its own
 * lives is a duplicate flight (exit 20). At least 300 ms and RACE_JOINS creates of "hot"
 * (counted in *made, shared), 20 s at most. */
static void
dup_racer(uint32_t loop, char (*k)[32], uint64_t min_ns, uint64_t max_ns, _Atomic long *made)
{
	struct lg_flight_ref r;

	for (unsigned i = 0;; i++) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		if (now > max_ns || (now > min_ns && atomic_load(made) >= RACE_JOINS))
			break;
		const char *key = i % 2 ? k[0] : k[1 + i / 2 % LG_FLIGHT_WAYS];
		int rc = create(key, loop, 1, &r);
		if (rc == LG_FLIGHT_BUSY)
			continue;
		if (rc == LG_FLIGHT_CREATED && key == k[0]) {
			struct lg_flight *set = &tab.e[r.idx & ~(LG_FLIGHT_WAYS - 1)];
			for (uint32_t j = 0; j < LG_FLIGHT_WAYS; j++) {
				uint64_t w = atomic_load(&set[j].word);
				if (&set[j] != &tab.e[r.idx] && lg_flight_st(w) == LG_FLIGHT_PENDING &&
				    set[j].key_len == strlen(key) && memcmp(set[j].key, key, strlen(key)) == 0 &&
				    atomic_load(&set[j].word) == w && lg_flight_live(&tab, &r))
					_exit(20);
			}
			atomic_fetch_add(made, 1);
		}
		if (lg_flight_leave(&tab, &r, loop) == -1)
			_exit(21);
	}
	_exit(0);
}

static void
test_race_creators_of_one_key(void **state)
{
	char k[LG_FLIGHT_WAYS + 1][32];
	_Atomic long *made = mmap(NULL, sizeof(*made), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct timespec ts;
	pid_t p[3];
	uint32_t counts[3];

	assert_true(made != MAP_FAILED);
	atomic_store(made, 0);
	same_set_keys(k, LG_FLIGHT_WAYS + 1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (uint32_t i = 0; i < 3; i++)
		if ((p[i] = fork()) == 0)
			dup_racer(i, k, now + 300000000u, now + 20000000000u, made);
	for (uint32_t i = 0; i < 3; i++) {
		int st;

		assert_int_equal(waitpid(p[i], &st, 0), p[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_true(atomic_load(made) >= RACE_JOINS);
	lg_flight_census(&tab, counts);
	assert_int_equal(counts[LG_FLIGHT_FREE], tab.n);
	assert_int_equal(lg_flight_held_sets(&tab), 0);
	munmap(made, sizeof(*made));
}

static void
test_hash_is_fnv1a(void **state)
{
	/* FNV-1a 64 test vectors (Fowler/Noll/Vo reference). */
	assert_true(lg_flight_hash(LG_FLIGHT_HASH_INIT, "", 0) == 0xcbf29ce484222325ull);
	assert_true(lg_flight_hash(LG_FLIGHT_HASH_INIT, "a", 1) == 0xaf63dc4c8601ec8cull);
	assert_true(lg_flight_hash(LG_FLIGHT_HASH_INIT, "foobar", 6) == 0x85944171f73967e8ull);
	/* Incremental use equals one call. */
	assert_true(lg_flight_hash(lg_flight_hash(LG_FLIGHT_HASH_INIT, "foo", 3), "bar", 3) ==
	    0x85944171f73967e8ull);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_rounds_up),
		cmocka_unit_test(test_hash_is_fnv1a),
		cmocka_unit_test_setup_teardown(test_create_then_join, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_leave_cancels_and_frees, setup, teardown),
		cmocka_unit_test_setup_teardown(test_complete_returns_waiters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy_cases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reclaim_dead_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race_join_against_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sigkill_anywhere_then_reclaim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_creator_word_of_a_dead_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race_creators_of_one_key, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
