/* Unit tests for cpupool/testjobs.c: the fault-injection job kinds. The ones that never return
 * run in a forked child, so the test sees the real death (SIGABRT) or the real hang (alive after
 * SIGTERM when told to ignore it, gone after SIGKILL). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpupool/testjobs.h"

static void
sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static pid_t
run_in_child(uint32_t kind, uint64_t arg)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		unsigned char out[8];
		struct lg_job j = { .out = out, .out_cap = sizeof(out), .arg = arg };

		lg_testjobs_run(kind, &j);
		_exit(0); /* the kinds tested here never return: reaching this is a failure */
	}
	return pid;
}

static void
test_is_test(void **state)
{
	assert_true(lg_testjobs_is_test(LG_KIND_TEST_CRASH));
	assert_true(lg_testjobs_is_test(LG_KIND_TEST_SPIN));
	assert_true(lg_testjobs_is_test(LG_KIND_TEST_ALLOC));
	assert_false(lg_testjobs_is_test(LG_KIND_HEAVY));
	assert_false(lg_testjobs_is_test(LG_KIND_COMPRESS));
	assert_false(lg_testjobs_is_test(0));
	assert_string_equal(lg_jobs_name(LG_KIND_TEST_SPIN), "test-spin");
	assert_string_equal(lg_testjobs_name(1000), "unknown");
}

static void
test_crash_aborts(void **state)
{
	int st;
	pid_t pid = run_in_child(LG_KIND_TEST_CRASH, 0);

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
}

/* arg 0: SIGTERM ends it; arg 1: it survives SIGTERM and only SIGKILL ends it. */
static void
check_spin(uint64_t ignore_term)
{
	int st;
	pid_t pid = run_in_child(LG_KIND_TEST_SPIN, ignore_term);

	sleep_ms(100);
	assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still spinning */
	kill(pid, SIGTERM);
	sleep_ms(100);
	if (ignore_term) {
		assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
		kill(pid, SIGKILL);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), ignore_term ? SIGKILL : SIGTERM);
}

static void
test_spin_term(void **state)
{
	check_spin(0);
}

static void
test_spin_ignores_term(void **state)
{
	check_spin(1);
}

static void
test_alloc_bounded(void **state)
{
	unsigned char out[8];
	uint64_t mib = 0;
	struct lg_job j = { .out = out, .out_cap = sizeof(out), .arg = 8 };

	assert_int_equal(lg_testjobs_run(LG_KIND_TEST_ALLOC, &j), LG_JOB_OK);
	assert_int_equal(j.out_len, sizeof(mib));
	memcpy(&mib, out, sizeof(mib));
	assert_int_equal(mib, 8);
	j.out_cap = 4; /* no room for the answer */
	assert_int_equal(lg_testjobs_run(LG_KIND_TEST_ALLOC, &j), LG_JOB_BAD_INPUT);
	j.out_cap = sizeof(out);
	assert_int_equal(lg_testjobs_run(LG_KIND_HEAVY, &j), LG_JOB_BAD_INPUT);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_is_test),
		cmocka_unit_test(test_crash_aborts),
		cmocka_unit_test(test_spin_term),
		cmocka_unit_test(test_spin_ignores_term),
		cmocka_unit_test(test_alloc_bounded),
	};

	alarm(20); /* watchdog: a child left spinning fails the run instead of hanging it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
