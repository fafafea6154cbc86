/* master/pidfile.c: the pid file and the reload outcome file next to it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/pidfile.h"

static char dir[] = "/tmp/lagless-pidfile-XXXXXX";
static char path[256];

static int
setup(void **state)
{
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/lagless.pid", dir);
	return 0;
}

static int
teardown(void **state)
{
	char p[300];

	snprintf(p, sizeof(p), "%s.reload", path);
	unlink(p);
	unlink(path);
	return rmdir(dir);
}

static void
test_pid_round_trip_and_remove_only_ours(void **state)
{
	pid_t pid = 0;
	struct lg_reload_outcome o = { .seq = 3, .from = 77, .ok = 0 };

	assert_int_equal(lg_pidfile_write(path, 4242), 0);
	assert_int_equal(lg_pidfile_read(path, &pid), 0);
	assert_int_equal(pid, 4242);
	snprintf(o.text, sizeof(o.text), "x");
	assert_int_equal(lg_pidfile_put_outcome(path, &o), 0);
	lg_pidfile_remove(path, 4243); /* a successor's file stays */
	assert_int_equal(lg_pidfile_read(path, &pid), 0);
	lg_pidfile_remove(path, 4242);
	assert_int_equal(lg_pidfile_read(path, &pid), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(lg_pidfile_get_outcome(path, &o), -1); /* gone with it */
}

static void
test_outcome_round_trip(void **state)
{
	struct lg_reload_outcome o = { .seq = 12, .from = 99, .asked_ns = 123456789012ull, .ok = 1 },
	    in;
	char rel[300];
	FILE *f;

	assert_int_equal(lg_pidfile_write(path, 1), 0);
	assert_int_equal(lg_pidfile_get_outcome(path, &in), -1); /* a new master: none yet */
	snprintf(o.text, sizeof(o.text), "generation 4");
	assert_int_equal(lg_pidfile_put_outcome(path, &o), 0);
	assert_int_equal(lg_pidfile_get_outcome(path, &in), 0);
	assert_true(in.seq == 12 && in.from == 99 && in.ok == 1 && in.asked_ns == 123456789012ull);
	assert_string_equal(in.text, "generation 4");
	/* an older master's line, without the asked time, is still read (asked 0: unknown) */
	snprintf(rel, sizeof(rel), "%s.reload", path);
	assert_non_null(f = fopen(rel, "w"));
	fputs("7 55 refused bad key\n", f);
	fclose(f);
	assert_int_equal(lg_pidfile_get_outcome(path, &in), 0);
	assert_true(in.seq == 7 && in.from == 55 && in.asked_ns == 0 && !in.ok);
	assert_string_equal(in.text, "bad key");
	o = (struct lg_reload_outcome){ .seq = 13, .from = 100, .ok = 0 };
	snprintf(o.text, sizeof(o.text), "lagless.conf:3: key 'x'\nunknown"); /* one line kept */
	assert_int_equal(lg_pidfile_put_outcome(path, &o), 0);
	assert_int_equal(lg_pidfile_get_outcome(path, &in), 0);
	assert_true(in.seq == 13 && !in.ok);
	assert_string_equal(in.text, "lagless.conf:3: key 'x' unknown");
}

static void
test_malformed(void **state)
{
	pid_t pid;
	FILE *f = fopen(path, "w");

	fputs("12abc\n", f);
	fclose(f);
	assert_int_equal(lg_pidfile_read(path, &pid), -1);
	assert_int_equal(errno, EINVAL);
	f = fopen(path, "w");
	fputs("-5\n", f);
	fclose(f);
	assert_int_equal(lg_pidfile_read(path, &pid), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pid_round_trip_and_remove_only_ours),
		cmocka_unit_test(test_outcome_round_trip),
		cmocka_unit_test(test_malformed),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
