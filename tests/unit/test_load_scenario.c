/* Unit tests for load/scenario.c: scenario files (words, quotes, comments, relative body and
 * keys paths, expectations), the argv they make, and the check against verdicts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "load/scenario.h"

static char dir[] = "/tmp/test_load_scenario.XXXXXX";

static const char *
write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void
test_load_and_argv(void **state)
{
	struct ll_scenario sc;
	char err[256], abody[300];
	const char *path;
	char *argv[] = { "lagless-load", "--scenario", "x.scn", "-q", "http://h", NULL };
	char **out;
	int argc = 5;

	assert_non_null(mkdtemp(dir));
	path = write_file("a.scn",
	    "# a comment line\n"
	    "server --compute-workers 2\n"
	    "--rate /ping=100   # trailing comment\n"
	    "--rate /v=40,method=POST,body=@login.txt,heavy -d 10s\n"
	    "-H 'X-Token: a b'\n"
	    "\n"
	    "expect cheap_stays_cheap pass\n"
	    "expect refusal_is_fast n/a|pass\n");
	assert_int_equal(ll_scenario_load(&sc, path, err, sizeof(err)), 0);
	assert_int_equal(sc.nwords, 8);
	assert_string_equal(sc.words[0], "--rate");
	assert_string_equal(sc.words[1], "/ping=100");
	snprintf(abody, sizeof(abody), "/v=40,method=POST,body=@%s/login.txt,heavy", dir);
	assert_string_equal(sc.words[3], abody);   /* relative to the scenario's directory */
	assert_string_equal(sc.words[5], "10s");
	assert_string_equal(sc.words[7], "X-Token: a b");
	assert_int_equal(sc.nexpect, 2);
	assert_int_equal(sc.expect[0].p, LL_P_CHEAP);
	assert_string_equal(ll_scenario_find(argc, argv), "x.scn");
	out = ll_scenario_argv(&sc, &argc, argv);
	assert_int_equal(argc, 1 + 8 + 2);
	assert_string_equal(out[0], "lagless-load");
	assert_string_equal(out[1], "--rate");
	assert_string_equal(out[9], "-q");          /* the command line's after the file's */
	assert_string_equal(out[10], "http://h");
	assert_null(out[11]);
	free(out);
	ll_scenario_free(&sc);
}

static void
test_check(void **state)
{
	struct ll_scenario sc;
	struct ll_report r;
	char err[256];
	const char *path = write_file("b.scn", "expect cheap_stays_cheap pass\n"
	                                        "expect refusal_is_fast n/a|pass\n");

	memset(&r, 0, sizeof(r));
	assert_int_equal(ll_scenario_load(&sc, path, err, sizeof(err)), 0);
	r.v[LL_P_CHEAP].state = LL_V_PASS;
	r.v[LL_P_REFUSAL].state = LL_V_NA;
	assert_int_equal(ll_scenario_check(&sc, &r), 1);
	r.v[LL_P_REFUSAL].state = LL_V_FAIL;
	assert_int_equal(ll_scenario_check(&sc, &r), 0);
	assert_true(sc.expect[0].met && !sc.expect[1].met);
	ll_scenario_free(&sc);
}

static void
test_errors(void **state)
{
	static const char *const bad[][2] = {
		{ "--rate '/x=1\n", "quote" },
		{ "expect cheap pass\n", "not a verdict" },
		{ "expect cheap_stays_cheap maybe\n", "not pass, fail or n/a" },
		{ "expect cheap_stays_cheap\n", "expect VERDICT" },
	};
	struct ll_scenario sc;
	char err[256];
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *path = write_file("c.scn", bad[i][0]);

		assert_int_equal(ll_scenario_load(&sc, path, err, sizeof(err)), -1);
		assert_non_null(strstr(err, bad[i][1]));
		assert_non_null(strstr(err, "c.scn:1"));
		ll_scenario_free(&sc);
	}
	assert_int_equal(ll_scenario_load(&sc, "/nonexistent/x.scn", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--scenario /nonexistent/x.scn"));
	unlink(write_file("a.scn", ""));
	unlink(write_file("b.scn", ""));
	unlink(write_file("c.scn", ""));
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_and_argv),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
