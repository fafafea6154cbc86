/* Unit tests for shm/upstream.c: the server-wide admission record of an upstream (in flight,
 * queued), shared by loops of separate processes, and its release when a loop dies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/upstream.h"

static struct lg_upshm u;

static int
setup(void **state)
{
	uint32_t max[1] = { 2 }, q[1] = { 1 };

	return lg_upshm_create(&u, 1, 0, max, q);
}

static int
teardown(void **state)
{
	lg_upshm_destroy(&u);
	return 0;
}

static void
counts(uint32_t want_i, uint32_t want_q)
{
	uint32_t i, q;

	lg_upadm_counts(&u.adm[0], &i, &q);
	assert_int_equal(i, want_i);
	assert_int_equal(q, want_q);
}

/* max_conns go, then queue places wait, then full; nothing taken by a refusal. */
static void
test_claim_order(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	assert_int_equal(lg_upadm_claim(a, 0), LG_UPADM_GO);
	assert_int_equal(lg_upadm_claim(a, 1), LG_UPADM_GO);
	assert_int_equal(lg_upadm_claim(a, 1), LG_UPADM_WAIT);
	assert_int_equal(lg_upadm_claim(a, 0), LG_UPADM_FULL);
	counts(2, 1);
	assert_int_equal(lg_upadm_take(a, 1), 0); /* every place is taken */
	assert_int_equal(lg_upadm_release(a, 0), 1); /* one waits: the caller wakes it */
	counts(1, 1);
	/* a newcomer does not overtake the waiter: it queues (the queue is full: refused) */
	assert_int_equal(lg_upadm_claim(a, 0), LG_UPADM_FULL);
	assert_int_equal(lg_upadm_take(a, 1), 1);
	counts(2, 0);
	assert_int_equal(a->held[1], 2);
	assert_int_equal(a->waiting[1], 0);
	lg_upadm_release(a, 1);
	lg_upadm_release(a, 1);
	counts(0, 0);
}

/* A waiter that leaves gives its queue place back; a dead loop's places are reclaimed. */
static void
test_unqueue_and_reclaim(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	assert_int_equal(lg_upadm_claim(a, 3), LG_UPADM_GO);
	assert_int_equal(lg_upadm_claim(a, 3), LG_UPADM_GO);
	assert_int_equal(lg_upadm_claim(a, 3), LG_UPADM_WAIT);
	lg_upadm_unqueue(a, 3);
	counts(2, 0);
	assert_int_equal(lg_upadm_claim(a, 3), LG_UPADM_WAIT);
	assert_int_equal(lg_upadm_reclaim(a, 3), 3);
	counts(0, 0);
	assert_int_equal(lg_upadm_reclaim(a, 3), 0);
	assert_int_equal(lg_upadm_claim(a, 4), LG_UPADM_GO);
	lg_upadm_release(a, 4);
	counts(0, 0);
}

/* Processes racing for places never hold more than max_conns at once (the mapping is shared
 * across fork, as between loop workers). */
static void
test_processes_bound(void **state)
{
	struct lg_upadm *a = &u.adm[0];
	pid_t pids[4];
	_Atomic uint32_t *peak = (_Atomic uint32_t *)&a->conns_opened; /* spare word as a gauge */

	for (int p = 0; p < 4; p++) {
		if ((pids[p] = fork()) == 0) {
			for (int k = 0; k < 20000; k++) {
				if (lg_upadm_claim(a, (uint32_t)p) != LG_UPADM_GO) {
					lg_upadm_unqueue(a, (uint32_t)p); /* no-op after FULL */
					continue;
				}
				uint32_t i, q;

				lg_upadm_counts(a, &i, &q);
				if (i > atomic_load(peak))
					atomic_store(peak, i);
				lg_upadm_release(a, (uint32_t)p);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < 4; p++) {
		int st;

		waitpid(pids[p], &st, 0);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_true(atomic_load(peak) <= 2);
}

/* Requests tracked by client: counted per tag, freed by reference, a dead loop's cleared by
 * the master; a full table tracks no more (0) without failing the request. */
static void
test_clients(void **state)
{
	struct lg_upadm *a = &u.adm[0];
	uint32_t r1 = lg_upadm_client_add(a, 0, 7), r2 = lg_upadm_client_add(a, 1, 7);
	uint32_t r3 = lg_upadm_client_add(a, 1, 9);

	assert_true(r1 >= 1 && r2 >= 1 && r3 >= 1 && r1 != r2 && r2 != r3);
	assert_int_equal(lg_upadm_client_count(a, 7), 2);
	assert_int_equal(lg_upadm_client_count(a, 9), 1);
	assert_int_equal(lg_upadm_client_count(a, 8), 0);
	lg_upadm_client_del(a, r1);
	lg_upadm_client_del(a, 0); /* none: ignored */
	assert_int_equal(lg_upadm_client_count(a, 7), 1);
	assert_int_equal(lg_upadm_client_add(a, 0, 7), r1); /* the freed entry again */
	lg_upadm_reclaim(a, 1); /* loop 1 died: its two go */
	assert_int_equal(lg_upadm_client_count(a, 7), 1);
	assert_int_equal(lg_upadm_client_count(a, 9), 0);
	for (uint32_t i = 1; i < LG_UP_CLIENTS; i++)
		assert_true(lg_upadm_client_add(a, 2, 5) >= 1);
	assert_int_equal(lg_upadm_client_add(a, 2, 5), 0);
	assert_int_equal(lg_upadm_client_count(a, 5), LG_UP_CLIENTS - 1);
}

/* The agent's load: (in flight + queued) / max_conns, at least LG_UP_SHED_LOAD while CoDel
 * judges the upstream overloaded; a route bulkhead's record is not an upstream's. */
static void
test_load_counts_shedding(void **state)
{
	struct lg_upshm two;
	uint32_t max[2] = { 2, 1 }, q[2] = { 1, 1 };

	assert_int_equal(lg_upshm_create(&two, 1, 1, max, q), 0);
	assert_true(lg_upadm_claim(&two.adm[0], 0) == LG_UPADM_GO);
	assert_true(lg_upadm_claim(&two.adm[1], 0) == LG_UPADM_GO);
	assert_true(lg_upadm_claim(&two.adm[1], 0) == LG_UPADM_WAIT);
	assert_true(lg_upshm_load(&two) > 0.49 && lg_upshm_load(&two) < 0.51);
	atomic_store(&two.adm[0].codel.overloaded, 1);
	assert_true(lg_upshm_load(&two) >= LG_UP_SHED_LOAD);
	lg_upshm_destroy(&two);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unqueue_and_reclaim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_processes_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clients, setup, teardown),
		cmocka_unit_test(test_load_counts_shedding),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
