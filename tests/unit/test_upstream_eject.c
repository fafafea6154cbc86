/* Unit tests for shm/upeject.c: passive outlier ejection across an upstream's servers (failures
 * in a row, a back-off growing with the ejections in a row, the share of servers out, the
 * return on probation) and the retry budget, in the shared record every loop sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/upeject.h"

static struct lg_upshm u;
static const char *const addrs[4] = { "a:1", "b:2", "c:3", "d:4" };

/* Four servers, ejected after 3 failures for 1000 ms x times, at most half out. */
static int
setup(void **state)
{
	uint32_t max[1] = { 10 }, q[1] = { 0 };

	if (lg_upshm_create(&u, 1, 0, max, q) == -1)
		return -1;
	lg_upadm_setup(&u.adm[0], 4, addrs, 3, 1000, 50, 20, 2);
	return 0;
}

static int
teardown(void **state)
{
	lg_upshm_destroy(&u);
	return 0;
}

/* eject_after failures in a row eject; a success between resets the count. */
static void
test_failures_in_a_row(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	assert_int_equal(lg_upadm_srv_fail(a, 1, 100), 0);
	assert_int_equal(lg_upadm_srv_fail(a, 1, 100), 0);
	lg_upadm_srv_ok(a, 1);
	assert_int_equal(lg_upadm_srv_fail(a, 1, 100), 0);
	assert_int_equal(lg_upadm_srv_fail(a, 1, 100), 0);
	assert_int_equal(lg_upadm_ejected(a), 0);
	assert_int_equal(lg_upadm_srv_fail(a, 1, 100), 1000);
	assert_int_equal(lg_upadm_ejected(a), 1u << 1);
	assert_int_equal(a->srv[1].ejections, 1);
	assert_string_equal(a->srv[1].addr, "b:2");
	/* a late failure of a request sent before: no second ejection */
	assert_int_equal(lg_upadm_srv_fail(a, 1, 200), 0);
	assert_int_equal(a->srv[1].ejections, 1);
}

/* The back-off ends: back on probation, where one failure ejects again for longer (capped),
 * and a success clears the record. */
static void
test_backoff_grows_and_probation(void **state)
{
	struct lg_upadm *a = &u.adm[0];
	uint64_t t = 0;

	for (int i = 0; i < 3; i++)
		(void)lg_upadm_srv_fail(a, 0, t);
	assert_int_equal(lg_upadm_ejected(a), 1);
	assert_int_equal(lg_upadm_eject_sweep(a, t + 999), 0);
	assert_int_equal(lg_upadm_eject_sweep(a, t + 1000), 1);
	assert_int_equal(lg_upadm_eject_sweep(a, t + 1000), 0); /* announced once */
	assert_int_equal(lg_upadm_ejected(a), 0);
	t += 1000;
	assert_int_equal(lg_upadm_srv_fail(a, 0, t), 2000); /* one failure on probation */
	for (uint32_t k = 3; k <= LG_UPEJ_CAP + 2; k++) {
		assert_int_equal(lg_upadm_eject_sweep(a, t + 100000), 1);
		t += 100000;
		assert_int_equal(lg_upadm_srv_fail(a, 0, t), 1000 * (k < LG_UPEJ_CAP ? k :
		    LG_UPEJ_CAP));
	}
	assert_int_equal(lg_upadm_eject_sweep(a, t + 100000), 1);
	lg_upadm_srv_ok(a, 0); /* back for good */
	assert_int_equal(a->srv[0].times, 0);
	assert_int_equal(lg_upadm_srv_fail(a, 0, t), 0); /* eject_after in a row again */
	assert_int_equal(lg_upadm_srv_fail(a, 0, t), 0);
	assert_int_equal(lg_upadm_srv_fail(a, 0, t), 1000);
}

/* At most eject_max_percent of the servers out at once, never all; a server back frees its
 * share. */
static void
test_share_bounded(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	for (uint32_t s = 0; s < 4; s++)
		for (int i = 0; i < 3; i++)
			(void)lg_upadm_srv_fail(a, s, 0);
	assert_int_equal(__builtin_popcount(lg_upadm_ejected(a)), 2);
	assert_int_equal(lg_upadm_ejected(a), 3u);
	/* server 2 keeps failing: each failure tries again, refused while the share is out */
	assert_int_equal(lg_upadm_srv_fail(a, 2, 10), 0);
	assert_int_equal(lg_upadm_eject_sweep(a, 1000), 3u);
	assert_int_equal(lg_upadm_srv_fail(a, 2, 1000), 1000);
	assert_int_equal(lg_upadm_ejected(a), 1u << 2);
	/* 100% of two servers: one always stays in (a fresh record) */
	assert_int_equal(teardown(state), 0);
	assert_int_equal(setup(state), 0);
	a = &u.adm[0];
	lg_upadm_setup(a, 2, addrs, 1, 1000, 100, 20, 2);
	assert_int_equal(lg_upadm_srv_fail(a, 0, 5000), 1000);
	assert_int_equal(lg_upadm_srv_fail(a, 1, 5000), 0);
	assert_int_equal(lg_upadm_ejected(a) & 3u, 1u);
}

/* eject_after 0: never ejected. */
static void
test_off(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	lg_upadm_setup(a, 4, addrs, 0, 1000, 50, 20, 2);
	for (int i = 0; i < 100; i++)
		assert_int_equal(lg_upadm_srv_fail(a, 0, 0), 0);
	assert_int_equal(lg_upadm_ejected(a), 0);
}

/* Processes failing every server at once never eject past the share between them. */
static void
test_processes_share(void **state)
{
	struct lg_upadm *a = &u.adm[0];
	_Atomic uint32_t *peak = (_Atomic uint32_t *)&a->conns_opened; /* spare word */
	pid_t pids[4];

	lg_upadm_setup(a, 4, addrs, 1, 1, 50, 20, 2);
	for (int p = 0; p < 4; p++) {
		if ((pids[p] = fork()) == 0) {
			for (uint64_t k = 0; k < 20000; k++) {
				uint32_t n;

				(void)lg_upadm_srv_fail(a, (uint32_t)(k + (uint64_t)p) % 4, k / 8);
				n = (uint32_t)__builtin_popcount(lg_upadm_ejected(a));
				if (n > atomic_load(peak))
					atomic_store(peak, n);
				(void)lg_upadm_eject_sweep(a, k / 8);
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
	assert_true(a->srv[0].ejections + a->srv[1].ejections > 0);
}

/* A process killed (SIGKILL) at any instruction of its ejections leaves a record the others
 * go on from: never past the share, every server back after its back-off. */
static void
test_killed_midway(void **state)
{
	struct lg_upadm *a = &u.adm[0];
	_Atomic uint32_t *spins = (_Atomic uint32_t *)&a->conns_opened; /* spare word */
	pid_t pid;
	int st;

	lg_upadm_setup(a, 4, addrs, 1, 1, 50, 20, 2);
	if ((pid = fork()) == 0) {
		for (uint64_t k = 0;; k++) {
			(void)lg_upadm_srv_fail(a, (uint32_t)k % 4, k / 8);
			(void)lg_upadm_eject_sweep(a, k / 8);
			lg_upadm_srv_ok(a, (uint32_t)(k + 1) % 4);
			atomic_fetch_add(spins, 1);
		}
	}
	while (atomic_load(spins) < 100000)
		;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	assert_true(WIFSIGNALED(st));
	assert_true(__builtin_popcount(lg_upadm_ejected(a)) <= 2);
	(void)lg_upadm_eject_sweep(a, UINT64_MAX / 2);
	assert_int_equal(lg_upadm_ejected(a), 0);
	for (uint32_t s = 0; s < 4; s++)
		lg_upadm_srv_ok(a, s);
	assert_int_equal(lg_upadm_srv_fail(a, 0, UINT64_MAX / 2), 1); /* ejects again */
	assert_int_equal(lg_upadm_ejected(a), 1);
}

/* Retries in flight at most max(min, in flight x percent); a dead loop's are reclaimed. */
static void
test_retry_budget(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	assert_int_equal(lg_upadm_retry_claim(a, 0), 1);
	assert_int_equal(lg_upadm_retry_claim(a, 1), 1);
	assert_int_equal(lg_upadm_retry_claim(a, 1), 0); /* min 2, nothing in flight */
	assert_int_equal(a->retry_refused, 1);
	for (int i = 0; i < 10; i++)
		assert_int_equal(lg_upadm_claim(a, 2), LG_UPADM_GO);
	assert_int_equal(lg_upadm_retry_claim(a, 1), 0); /* 20% of 10 is 2 */
	lg_upadm_retry_done(a, 0);
	assert_int_equal(lg_upadm_retry_claim(a, 1), 1);
	assert_int_equal(lg_upadm_reclaim(a, 1), 0);  /* no place held, but its retries back */
	assert_int_equal(a->retrying, 0);
	assert_int_equal(lg_upadm_retry_claim(a, 3), 1);
	lg_upadm_retry_done(a, 3);
	assert_int_equal(a->retrying, 0);
}

/* The load signal rises with ejected servers (their share of the capacity is gone). */
static void
test_load_counts_ejected(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	for (int i = 0; i < 5; i++)
		assert_int_equal(lg_upadm_claim(a, 0), LG_UPADM_GO);
	assert_true(lg_upshm_load(&u) > 0.49 && lg_upshm_load(&u) < 0.51);
	for (int i = 0; i < 3; i++)
		(void)lg_upadm_srv_fail(a, 3, 0);
	assert_true(lg_upshm_load(&u) > 0.66 && lg_upshm_load(&u) < 0.67);
}

/* No more than eject_after requests in a row fail before an ejection: a server on a run of
 * failures takes no request that the ones in flight could follow past it; a healthy server,
 * or one whose run met the share, is never held back; forced takes count; puts give back. */
static void
test_take_holds_back_a_failing_run(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	for (int i = 0; i < 8; i++) /* healthy: any number in flight */
		assert_int_equal(lg_upadm_srv_take(a, 0, 0, 0), 1);
	for (int i = 0; i < 8; i++)
		lg_upadm_srv_put(a, 0, 0);
	assert_int_equal(a->srv[0].fs, 0);
	/* one failure (of 3): two more may be in flight, from any loop */
	assert_int_equal(lg_upadm_srv_fail(a, 0, 100), 0);
	assert_int_equal(lg_upadm_srv_take(a, 0, 0, 0), 1);
	assert_int_equal(lg_upadm_srv_take(a, 0, 1, 0), 1);
	assert_int_equal(lg_upadm_srv_take(a, 0, 1, 0), 0);
	assert_int_equal(lg_upadm_srv_take(a, 0, 0, 1), 1); /* forced: counted */
	assert_int_equal(a->sent[1][0], 1);
	assert_int_equal(a->sent[0][0], 2);
	/* the first two fail: the run's end ejects it; the forced one's late failure is not a
	 * second ejection */
	lg_upadm_srv_put(a, 0, 0);
	assert_int_equal(lg_upadm_srv_fail(a, 0, 100), 0);
	lg_upadm_srv_put(a, 0, 1);
	assert_int_equal(lg_upadm_srv_fail(a, 0, 100), 1000);
	lg_upadm_srv_put(a, 0, 0);
	assert_int_equal(lg_upadm_srv_fail(a, 0, 100), 0);
	assert_int_equal(a->srv[0].fs, 0);
	/* back on probation: one request in flight at a time until a success */
	assert_int_equal(lg_upadm_eject_sweep(a, 1100), 1u);
	assert_int_equal(lg_upadm_srv_take(a, 0, 2, 0), 1);
	assert_int_equal(lg_upadm_srv_take(a, 0, 3, 0), 0);
	lg_upadm_srv_put(a, 0, 2);
	lg_upadm_srv_ok(a, 0);
	assert_int_equal(lg_upadm_srv_take(a, 0, 3, 0), 1);
	assert_int_equal(lg_upadm_srv_take(a, 0, 3, 0), 1);
	/* a dead loop's places come back with the master's reclaim */
	lg_upadm_srv_reclaim(a, 3);
	assert_int_equal(a->srv[0].fs, 0);
	assert_int_equal(a->sent[3][0], 0);
	/* a success ends a run: nothing held back */
	assert_int_equal(lg_upadm_srv_fail(a, 2, 100), 0);
	assert_int_equal(lg_upadm_srv_fail(a, 2, 100), 0);
	assert_int_equal(lg_upadm_srv_take(a, 2, 0, 0), 1);
	assert_int_equal(lg_upadm_srv_take(a, 2, 0, 0), 0);
	lg_upadm_srv_ok(a, 2);
	assert_int_equal(lg_upadm_srv_take(a, 2, 0, 0), 1);
	lg_upadm_srv_put(a, 2, 0);
	lg_upadm_srv_put(a, 2, 0);
	assert_int_equal(a->srv[2].fs, 0);
}

/* A run that reached eject_after while the share of ejected servers is out leaves the server
 * in the rotation, unrestricted (the share keeps capacity); with ejection off nothing counts. */
static void
test_take_share_out_and_off(void **state)
{
	struct lg_upadm *a = &u.adm[0];

	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 3; i++)
			lg_upadm_srv_fail(a, (uint32_t)s, 100);
	assert_int_equal(lg_upadm_ejected(a), 3u); /* half of four */
	for (int i = 0; i < 3; i++)
		assert_int_equal(lg_upadm_srv_fail(a, 2, 100), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(lg_upadm_srv_take(a, 2, 0, 0), 1);
	lg_upadm_setup(a, 4, addrs, 0, 1000, 50, 20, 2);
	assert_int_equal(lg_upadm_srv_take(a, 3, 0, 0), 1);
	lg_upadm_srv_put(a, 3, 0);
	assert_int_equal(a->srv[3].fs, 0);
	assert_int_equal(a->sent[0][3], 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_failures_in_a_row, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backoff_grows_and_probation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_share_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_processes_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_killed_midway, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_counts_ejected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_holds_back_a_failing_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_share_out_and_off, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
