/* Unit tests for shm/codel.c: queue-wait admission. Times are given explicitly (ns), so every
 * interval boundary is exact; the race test runs real processes on a MAP_SHARED state, as
 * the server does, and SIGKILLs them at arbitrary instructions. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/codel.h"

#define MS 1000000ull

static const struct lg_codel_params on = { .target_ns = 5 * MS, .interval_ns = 100 * MS };
static const struct lg_codel_params off = { .target_ns = 0, .interval_ns = 100 * MS };

static uint64_t
floor_value(void *arg, uint64_t now)
{
	(void)now;
	return *(uint64_t *)arg;
}

static void
test_off_never_refuses(void **state)
{
	struct lg_codel c;

	lg_codel_init(&c, &on);
	for (uint64_t t = 1; t < 1000; t++) {
		lg_codel_sample(&c, &off, 50 * MS, t * MS, NULL, NULL);
		assert_int_equal(lg_codel_refuse(&c, &off, t * MS, NULL, NULL), 0);
		assert_int_equal(lg_codel_shed(&c, &off, 1000 * MS, t * MS, NULL, NULL), 0);
	}
	assert_int_equal(atomic_load(&c.samples), 0);
	assert_int_equal(atomic_load(&c.intervals), 0);
}

/* The minimum decides: waits above the target all through an interval overload the pool; one
 * wait under it in the next interval ends the overload. */
static void
test_minimum_over_an_interval(void **state)
{
	struct lg_codel c;
	uint64_t t = 1000 * MS;

	lg_codel_init(&c, &on);
	assert_int_equal(lg_codel_refuse(&c, &on, t, NULL, NULL), 0); /* starts interval 1 */
	lg_codel_sample(&c, &on, 40 * MS, t + 10 * MS, NULL, NULL);
	lg_codel_sample(&c, &on, 9 * MS, t + 50 * MS, NULL, NULL);
	lg_codel_sample(&c, &on, 30 * MS, t + 90 * MS, NULL, NULL);
	assert_int_equal(lg_codel_refuse(&c, &on, t + 99 * MS, NULL, NULL), 0); /* not judged yet */
	assert_int_equal(lg_codel_refuse(&c, &on, t + 101 * MS, NULL, NULL), 1); /* min 9 > 5 */
	assert_int_equal(lg_codel_overloaded(&c), 1);
	assert_int_equal(atomic_load(&c.refused), 1);
	/* interval 2 (t+101 .. t+201): a burst is fine as long as the queue drained once */
	lg_codel_sample(&c, &on, 80 * MS, t + 120 * MS, NULL, NULL);
	lg_codel_sample(&c, &on, 2 * MS, t + 150 * MS, NULL, NULL);
	assert_int_equal(lg_codel_refuse(&c, &on, t + 200 * MS, NULL, NULL), 1); /* still 1's verdict */
	assert_int_equal(lg_codel_refuse(&c, &on, t + 202 * MS, NULL, NULL), 0);
	assert_int_equal(lg_codel_overloaded(&c), 0);
	assert_int_equal(atomic_load(&c.intervals), 2);
	assert_int_equal(atomic_load(&c.overloaded_intervals), 1);
	assert_int_equal(atomic_load(&c.samples), 5);
	assert_int_equal(atomic_load(&c.refused), 2);
	/* exactly the target is not above it */
	lg_codel_sample(&c, &on, 5 * MS, t + 250 * MS, NULL, NULL);
	assert_int_equal(lg_codel_refuse(&c, &on, t + 303 * MS, NULL, NULL), 0);
}

/* An interval without a finished job is judged by the queue's floor: the age of the youngest
 * job still waiting (a lower bound of its wait), or no wait when nothing is queued. */
static void
test_empty_interval_uses_the_queue_floor(void **state)
{
	struct lg_codel c;
	uint64_t t = 5000 * MS, floor_ns = 300 * MS;

	lg_codel_init(&c, &on);
	lg_codel_refuse(&c, &on, t, floor_value, &floor_ns);
	assert_int_equal(lg_codel_refuse(&c, &on, t + 150 * MS, floor_value, &floor_ns), 1);
	floor_ns = 0; /* the queue emptied: everything was refused meanwhile */
	assert_int_equal(lg_codel_refuse(&c, &on, t + 251 * MS, floor_value, &floor_ns), 0);
	/* without a floor function an empty interval reads as no wait */
	lg_codel_sample(&c, &on, 50 * MS, t + 300 * MS, NULL, NULL);
	assert_int_equal(lg_codel_refuse(&c, &on, t + 352 * MS, NULL, NULL), 1);
	assert_int_equal(lg_codel_refuse(&c, &on, t + 453 * MS, NULL, NULL), 0);
}

/* The longest wait a dequeued job may have had and still run: the interval normally, the
 * target while overloaded (Facebook's rule). A shed job is no sample. */
static void
test_shed_limit_follows_the_verdict(void **state)
{
	struct lg_codel c;
	uint64_t t = 100 * MS;

	lg_codel_init(&c, &on);
	lg_codel_refuse(&c, &on, t, NULL, NULL);
	assert_int_equal(lg_codel_shed(&c, &on, 60 * MS, t + 1 * MS, NULL, NULL), 0);
	assert_int_equal(lg_codel_shed(&c, &on, 100 * MS, t + 2 * MS, NULL, NULL), 0);
	assert_int_equal(lg_codel_shed(&c, &on, 101 * MS, t + 3 * MS, NULL, NULL), 1);
	lg_codel_sample(&c, &on, 60 * MS, t + 4 * MS, NULL, NULL);
	assert_int_equal(lg_codel_shed(&c, &on, 6 * MS, t + 110 * MS, NULL, NULL), 1);
	assert_int_equal(lg_codel_overloaded(&c), 1);
	assert_int_equal(lg_codel_shed(&c, &on, 5 * MS, t + 111 * MS, NULL, NULL), 0);
	assert_int_equal(atomic_load(&c.shed), 2);
	assert_int_equal(atomic_load(&c.samples), 1);
}

/* Clock edges: a wait of UINT64_MAX cannot erase the "no sample" marker, and a time far
 * past the interval end judges once and starts a fresh interval from now. */
static void
test_edges(void **state)
{
	struct lg_codel c;

	lg_codel_init(&c, &on);
	lg_codel_refuse(&c, &on, 1, NULL, NULL);
	lg_codel_sample(&c, &on, UINT64_MAX, 2, NULL, NULL);
	assert_true(atomic_load(&c.min_wait_ns) == UINT64_MAX - 1);
	assert_int_equal(lg_codel_refuse(&c, &on, 1000000 * MS, NULL, NULL), 1);
	assert_true(atomic_load(&c.interval_end_ns) == 1000000 * MS + on.interval_ns);
	assert_int_equal(atomic_load(&c.intervals), 1);
}

/* Processes hammer one shared state while some are SIGKILLed mid-call; afterwards the state
 * still works: it judges new intervals correctly and no counter went backwards. */
#define RACERS 4

static void
racer(struct lg_codel *c, int id)
{
	for (uint64_t i = 0;; i++) {
		struct timespec ts;
		uint64_t now;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		const struct lg_codel_params fast = { .target_ns = 5000, .interval_ns = 20000 };
		if (id & 1)
			lg_codel_sample(c, &fast, (i * 7919) % 20000, now, NULL, NULL);
		else
			lg_codel_refuse(c, &fast, now, NULL, NULL);
		lg_codel_shed(c, &fast, (i * 104729) % 30000, now, NULL, NULL);
	}
}

static void
test_processes_race_and_die(void **state)
{
	struct lg_codel *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pids[RACERS];
	uint64_t before, t;

	assert_true(c != MAP_FAILED);
	lg_codel_init(c, &on);
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < RACERS; k++) {
			if ((pids[k] = fork()) == 0)
				racer(c, k);
			assert_true(pids[k] > 0);
		}
		usleep(2000 + 500 * (unsigned)round); /* killed wherever they are */
		for (int k = 0; k < RACERS; k++) {
			int st;

			kill(pids[k], SIGKILL);
			assert_int_equal(waitpid(pids[k], &st, 0), pids[k]);
			assert_true(WIFSIGNALED(st));
		}
	}
	assert_true(atomic_load(&c->samples) > 0 && atomic_load(&c->intervals) > 0);
	/* the survivors' view: two clean intervals on a far clock give the expected verdicts */
	before = atomic_load(&c->intervals);
	t = UINT64_MAX / 2;
	lg_codel_refuse(c, &on, t, NULL, NULL);			/* judges whatever was left */
	lg_codel_sample(c, &on, 50 * MS, t + 1, NULL, NULL);
	assert_int_equal(lg_codel_refuse(c, &on, t + on.interval_ns + 1, NULL, NULL), 1);
	lg_codel_sample(c, &on, 1 * MS, t + on.interval_ns + 2, NULL, NULL);
	assert_int_equal(lg_codel_refuse(c, &on, t + 2 * on.interval_ns + 3, NULL, NULL), 0);
	assert_true(atomic_load(&c->intervals) >= before + 3);
	munmap(c, sizeof(*c));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_never_refuses),
		cmocka_unit_test(test_minimum_over_an_interval),
		cmocka_unit_test(test_empty_interval_uses_the_queue_floor),
		cmocka_unit_test(test_shed_limit_follows_the_verdict),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_processes_race_and_die),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
