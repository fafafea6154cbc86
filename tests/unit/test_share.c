/* Unit tests for shm/share.c: address tags, the per-address count of held transit buffers,
 * the choice of the upload to cut and the refusal after a cut, on a real arena. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "shm/arena.h"
#include "shm/share.h"
#include "shm/slot.h"

#define NSLOTS 6
#define SEC 1000000000ull

static struct lg_arena arena;

static int
setup(void **state)
{
	if (lg_arena_create(&arena, NSLOTS, 1, 4096, 4096) == -1)
		return -1;
	*state = &arena;
	return 0;
}

static int
teardown(void **state)
{
	lg_arena_destroy(&arena);
	return 0;
}

static uint32_t
tag4(const char *addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(1234) };

	assert_int_equal(inet_pton(AF_INET, addr, &sin.sin_addr), 1);
	return lg_share_tag((struct sockaddr *)&sin, sizeof(sin));
}

static uint32_t
tag6(const char *addr, uint16_t port)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };

	assert_int_equal(inet_pton(AF_INET6, addr, &sin6.sin6_addr), 1);
	return lg_share_tag((struct sockaddr *)&sin6, sizeof(sin6));
}

static void
test_tags(void **state)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	assert_int_not_equal(tag4("127.0.0.1"), 0);
	assert_int_not_equal(tag4("127.0.0.1"), tag4("127.0.0.2"));
	/* the port is no part of the address */
	assert_int_equal(tag6("2001:db8::1", 1), tag6("2001:db8::1", 2));
	/* an IPv4-mapped IPv6 address is that IPv4 address */
	assert_int_equal(tag6("::ffff:127.0.0.1", 80), tag4("127.0.0.1"));
	/* IPv6 by its /64 */
	assert_int_equal(tag6("2001:db8:0:1::1", 1), tag6("2001:db8:0:1:ffff::9", 1));
	assert_int_not_equal(tag6("2001:db8:0:1::1", 1), tag6("2001:db8:0:2::1", 1));
	/* no address, no share; a short length is no address either */
	assert_int_equal(lg_share_tag((struct sockaddr *)&sun, sizeof(sun)), 0);
	struct sockaddr_in sin = { .sin_family = AF_INET };
	assert_int_equal(lg_share_tag((struct sockaddr *)&sin, 4), 0);
}

/* Claims a slot for tag at now_ns, having received bytes of its body by then. */
static int
claim(struct lg_arena *a, uint32_t tag, uint64_t at_ns, uint64_t bytes, uint32_t *gen)
{
	int i = lg_slot_claim(a, 0, gen);

	assert_true(i >= 0);
	lg_share_claimed(&a->slots[i], tag, at_ns);
	atomic_store(&a->slots[i].up_bytes, bytes);
	return i;
}

static void
test_held_counts_only_held_slots(void **state)
{
	struct lg_arena *a = *state;
	uint32_t t = tag4("10.0.0.1"), u = tag4("10.0.0.2"), g1, g2, g3;
	int i = claim(a, t, SEC, 0, &g1);

	claim(a, t, SEC, 0, &g2);
	claim(a, u, SEC, 0, &g3);
	assert_int_equal(lg_share_held(a, 0, NSLOTS, t), 2);
	assert_int_equal(lg_share_held(a, 0, NSLOTS, u), 1);
	assert_int_equal(lg_share_held(a, 0, NSLOTS, 0), 0);
	/* a range that leaves the slot out does not count it */
	assert_int_equal(lg_share_held(a, (uint32_t)i + 1, NSLOTS, t),
	    lg_share_held(a, 0, NSLOTS, t) - 1);
	/* released: its tag stays in the slot, but it counts no more; a job in any state does */
	assert_int_equal(lg_slot_release(&a->slots[i], g1), LG_SLOT_FREE);
	assert_int_equal(lg_share_held(a, 0, NSLOTS, t), 1);
	int j = claim(a, t, SEC, 0, &g1);
	assert_int_equal(lg_slot_move(&a->slots[j], g1, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	assert_int_equal(lg_share_held(a, 0, NSLOTS, t), 2);
}

/* A loop worker that dies leaks no share: the master's release of its slots is all it takes. */
static void
test_dead_owner_holds_nothing(void **state)
{
	struct lg_arena *a = *state;
	uint32_t t = tag4("198.51.100.1"), gen;

	for (int k = 0; k < 3; k++) {
		int i = lg_slot_claim(a, 1, &gen);

		assert_true(i >= 0);
		lg_share_claimed(&a->slots[i], t, SEC);
	}
	assert_int_equal(lg_share_held(a, 0, NSLOTS, t), 3);
	assert_int_equal(lg_slot_reclaim_owner(a, 1), 3);
	assert_int_equal(lg_share_held(a, 0, NSLOTS, t), 0);
}

static void
test_ask_cut_picks_the_slowest(void **state)
{
	struct lg_arena *a = *state;
	uint64_t now = 100 * SEC;
	uint32_t g[5];
	/* 10 s held: 1200 B/s, 100 B/s, 1 MB/s (fast); 0.5 s held, nothing yet (too fresh) */
	int slow = claim(a, 1, now - 10 * SEC, 12000, &g[0]);
	int slowest = claim(a, 2, now - 10 * SEC, 1000, &g[1]);
	int fast = claim(a, 3, now - 10 * SEC, 10000000, &g[2]);
	int fresh = claim(a, 4, now - SEC / 2, 0, &g[3]);
	int queued = claim(a, 5, now - 20 * SEC, 0, &g[4]);

	(void)fast;
	(void)fresh;
	/* a slot that holds a job, not an upload, is never cut */
	assert_int_equal(lg_slot_move(&a->slots[queued], g[4], LG_SLOT_CLAIMED, LG_SLOT_QUEUED),
	    0);
	assert_int_equal(lg_share_ask_cut(a, 0, NSLOTS, now, 0, SEC), -1); /* off */
	assert_int_equal(lg_share_ask_cut(a, 0, NSLOTS, now, 32768, SEC), slowest);
	/* the same one is not asked twice: the next refusal asks for the next slowest */
	assert_int_equal(lg_share_ask_cut(a, 0, NSLOTS, now, 32768, SEC), slow);
	assert_int_equal(lg_share_ask_cut(a, 0, NSLOTS, now, 32768, SEC), -1);
	/* below a rate of 500 B/s only the 100 B/s one would have qualified */
	atomic_store(&a->slots[slow].cut_gen, 0);
	atomic_store(&a->slots[slowest].cut_gen, 0);
	assert_int_equal(lg_share_ask_cut(a, 0, NSLOTS, now, 500, SEC), slowest);

	/* the owner sees the request once, for the generation asked */
	struct lg_slot *s = &a->slots[slowest];
	assert_int_equal(lg_share_cut_asked(s, atomic_load(&s->word)), 1);
	assert_int_equal(lg_share_cut_asked(s, atomic_load(&s->word)), 0);
	/* a request for an older generation of a reused slot is dropped */
	assert_int_equal(lg_share_ask_cut(a, 0, NSLOTS, now, 32768, SEC), slowest);
	assert_int_equal(lg_slot_release(s, g[1]), LG_SLOT_FREE);
	uint32_t g2;
	while (lg_slot_claim(a, 0, &g2) != slowest) /* the claim hint rotates */
		;
	assert_int_equal(lg_share_cut_asked(s, atomic_load(&s->word)), 0);
}

static void
test_penalty_after_a_cut(void **state)
{
	struct lg_arena *a = *state;
	uint32_t t = tag4("192.0.2.7"), gen;
	int i = claim(a, t, SEC, 0, &gen);

	assert_int_equal(lg_share_penalized(a, 0, NSLOTS, t, 2 * SEC), 0);
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	lg_share_note_cut(&a->slots[i], t, 2 * SEC + LG_SHARE_PENALTY_NS);
	/* refused until the penalty ends, also once another client took the freed slot */
	claim(a, tag4("192.0.2.8"), 3 * SEC, 0, &gen);
	assert_int_equal(lg_share_penalized(a, 0, NSLOTS, t, 3 * SEC), 1);
	assert_int_equal(lg_share_penalized(a, 0, NSLOTS, tag4("192.0.2.8"), 3 * SEC), 0);
	assert_int_equal(lg_share_penalized(a, 0, NSLOTS, t, 2 * SEC + LG_SHARE_PENALTY_NS), 0);
	assert_int_equal(lg_share_penalized(a, 0, NSLOTS, 0, 3 * SEC), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tags),
		T(test_held_counts_only_held_slots),
		T(test_dead_owner_holds_nothing),
		T(test_ask_cut_picks_the_slowest),
		T(test_penalty_after_a_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
