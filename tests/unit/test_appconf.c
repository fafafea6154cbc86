/* Unit tests for master/appconf.c: the [app] command split without a shell, the {socket} and
 * {port} substitution, the keys of a section and the process count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "master/appconf.h"

/* The words of s, joined with '|' into out; the count returned as split's. */
static int
split(const char *s, char *out, size_t cap)
{
	char words[256];
	const char *why = NULL, *w = words;
	int n = lg_appconf_split(s, words, sizeof(words), 8, &why);

	out[0] = '\0';
	for (int i = 0; i < n; i++, w += strlen(w) + 1)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "|" : "", w);
	if (n == -1)
		snprintf(out, cap, "ERR %s", why);
	return n;
}

static void
test_split(void **state)
{
	char out[300];

	(void)state;
	assert_int_equal(split("  python3  -m   app\t--x  ", out, sizeof(out)), 4);
	assert_string_equal(out, "python3|-m|app|--x");
	assert_int_equal(split("", out, sizeof(out)), 0);
	assert_int_equal(split("   ", out, sizeof(out)), 0);
	/* quotes keep blanks; single quotes keep backslashes; adjacent parts join */
	assert_int_equal(split("a 'b c' \"d e\" f'g h'i", out, sizeof(out)), 4);
	assert_string_equal(out, "a|b c|d e|fg hi");
	assert_int_equal(split("'a\\b' \"c\\\"d\\\\e\\n\" f\\ g", out, sizeof(out)), 3);
	assert_string_equal(out, "a\\b|c\"d\\e\\n|f g");
	/* no shell: variables, globs and redirections are plain bytes */
	assert_int_equal(split("echo $HOME *.py >out", out, sizeof(out)), 4);
	assert_string_equal(out, "echo|$HOME|*.py|>out");
	assert_int_equal(split("''", out, sizeof(out)), 1);
	assert_string_equal(out, "");
	assert_int_equal(split("a 'b", out, sizeof(out)), -1);
	assert_string_equal(out, "ERR an unclosed quote");
	assert_int_equal(split("a \"b", out, sizeof(out)), -1);
	assert_int_equal(split("a b\\", out, sizeof(out)), -1);
	assert_string_equal(out, "ERR a backslash at the end");
	assert_int_equal(split("1 2 3 4 5 6 7 8 9", out, sizeof(out)), -1);
	assert_string_equal(out, "ERR too many words");
}

static void
test_split_bounded(void **state)
{
	char small[6];
	const char *why = NULL;

	(void)state;
	assert_int_equal(lg_appconf_split("ab cd", small, sizeof(small), 8, &why), 2);
	assert_int_equal(lg_appconf_split("abc def", small, sizeof(small), 8, &why), -1);
	assert_string_equal(why, "too long");
}

static void
test_subst(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(lg_appconf_subst("--uds={socket}", "/run/x/web.1.0.sock", 0, out,
	    sizeof(out)), 0);
	assert_string_equal(out, "--uds=/run/x/web.1.0.sock");
	assert_int_equal(lg_appconf_subst("127.0.0.1:{port}", "", 40123, out, sizeof(out)), 0);
	assert_string_equal(out, "127.0.0.1:40123");
	assert_int_equal(lg_appconf_subst("{port}{port}", "", 7, out, sizeof(out)), 0);
	assert_string_equal(out, "77");
	assert_int_equal(lg_appconf_subst("{sock} {x}", "s", 1, out, sizeof(out)), 0);
	assert_string_equal(out, "{sock} {x}");
	assert_int_equal(lg_appconf_subst("{socket}", "0123456789", 0, out, 10), -1);
}

static void
test_collect(void **state)
{
	struct lg_apps *apps = NULL;
	char why[400];

	(void)state;
	assert_int_equal(lg_appconf_collect(&apps, "route /x", "command", "a", "f", 1, why,
	    sizeof(why)), 0);
	assert_null(apps);
	assert_int_equal(lg_appconf_collect(&apps, "app web", "command",
	    "uvicorn main:app --uds {socket}", "f", 2, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_collect(&apps, "app web", "env", "A=1", "f", 3, why,
	    sizeof(why)), 1);
	assert_int_equal(lg_appconf_collect(&apps, "app web", "env", "B=x=y", "f", 4, why,
	    sizeof(why)), 1);
	assert_int_equal(lg_appconf_collect(&apps, "app web", "ready-path", "/health", "f", 5,
	    why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_collect(&apps, "app web", "processes", "auto", "f", 6, why,
	    sizeof(why)), 1);
	assert_int_equal(apps->n, 1);
	assert_int_equal(apps->app[0].argc, 4);
	assert_int_equal(apps->app[0].addr, LG_APP_ADDR_SOCKET);
	assert_int_equal(apps->app[0].nenv, 2);
	assert_string_equal(apps->app[0].env[1], "B=x=y");
	assert_string_equal(apps->app[0].ready_path, "/health");
	assert_int_equal(lg_appconf_collect(&apps, "app web", "command", "b", "f", 7, why,
	    sizeof(why)), -1);
	assert_non_null(strstr(why, "given twice"));
	assert_int_equal(lg_appconf_collect(&apps, "app web", "stop_grace_ms", "5s", "f", 8, why,
	    sizeof(why)), -1);
	assert_non_null(strstr(why, "key 'stop_grace_ms' = '5s'"));
	assert_int_equal(lg_appconf_collect(&apps, "app two", "command", "x {socket} {port}", "f",
	    9, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not both"));
	assert_int_equal(lg_appconf_check(apps, why, sizeof(why)), -1); /* [app two]: no command */
	assert_non_null(strstr(why, "f:9: [app two]: command = ... is required"));
	/* auto: half the budget shared by the auto apps, at least 1 */
	assert_int_equal(lg_appconf_count(&apps->app[0], 8, 1), 4);
	assert_int_equal(lg_appconf_count(&apps->app[0], 8, 2), 2);
	assert_int_equal(lg_appconf_count(&apps->app[0], 1, 1), 1);
	assert_true(lg_appconf_same(&apps->app[0], &apps->app[0]));
	assert_false(lg_appconf_same(&apps->app[0], &apps->app[1]));
	lg_appconf_free(apps);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_split_bounded),
		cmocka_unit_test(test_subst),
		cmocka_unit_test(test_collect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
