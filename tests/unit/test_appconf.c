/* Unit tests for master/appconf.c: the [app] command split without a shell, the {socket} and
 * {port} substitution, the keys of a section and the process count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* Collects key = value into [app name] at line; returns collect's result, why in why. */
static int
put(struct lg_apps **apps, const char *name, const char *key, const char *value, int line,
    char *why, size_t cap)
{
	char section[64];

	snprintf(section, sizeof(section), "app %s", name);
	return lg_appconf_collect(apps, section, key, value, "f", line, why, cap);
}

static void
test_key_refusals(void **state)
{
	struct lg_apps *apps = NULL;
	char why[400];

	(void)state;
	/* an empty program: execvp("") would fail at every start */
	assert_int_equal(put(&apps, "web", "command", "\"\" {socket}", 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "an empty program"));
	/* ready_path is a request target: visible ASCII only */
	assert_int_equal(put(&apps, "web", "ready_path", "/h\x01x", 2, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "visible ASCII"));
	assert_int_equal(put(&apps, "web", "ready_path", "/h\x7f", 2, why, sizeof(why)), -1);
	assert_int_equal(put(&apps, "web", "ready_path", "/caf\xc3\xa9", 2, why, sizeof(why)), -1);
	assert_int_equal(put(&apps, "web", "ready_path", "/health?x=%20", 2, why, sizeof(why)), 1);
	/* user: a name, as start-up looks it up */
	assert_int_equal(put(&apps, "web", "user", "1000", 3, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not a uid"));
	assert_int_equal(put(&apps, "web", "user", "app:www", 3, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not user:group"));
	assert_int_equal(put(&apps, "web", "user", "app1", 3, why, sizeof(why)), 1);
	assert_int_equal(apps->app[0].key_line[LG_APP_KEY_USER], 3);
	lg_appconf_free(apps);
}

static void
test_one_app_per_upstream(void **state)
{
	struct lg_apps *apps = NULL;
	char why[400];

	(void)state;
	assert_int_equal(put(&apps, "a", "command", "x {port}", 1, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "a", "upstream", "u", 2, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "b", "command", "x {socket}", 3, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check(apps, why, sizeof(why)), 0);
	assert_int_equal(put(&apps, "b", "upstream", "u", 4, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check(apps, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "f:4: [app b]: serves upstream u, as [app a] (f:2)"));
	lg_appconf_free(apps);
	/* an upstream = that is another app's name: lg_app_servers would find either */
	apps = NULL;
	assert_int_equal(put(&apps, "a", "command", "x {port}", 1, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "a", "upstream", "b", 2, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "b", "command", "x {port}", 3, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "b", "upstream", "c", 4, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check(apps, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "f:2: [app a]: upstream = b is the name of [app b]"));
	lg_appconf_free(apps);
}

/* Against this machine: paths every Debian system has (/bin/sh, /etc/passwd, root). */
static void
test_host(void **state)
{
	struct lg_apps *apps = NULL;
	char why[600];

	(void)state;
	assert_int_equal(put(&apps, "web", "command", "/bin/sh -c true", 1, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "path", "command", "sh {port}", 2, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "rel", "command", "./sh", 3, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "rel", "cwd", "/bin", 4, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check_host(apps, why, sizeof(why)), 0);
	assert_int_equal(put(&apps, "gone", "command", "/nonexistent/bin {port}", 5, why,
	    sizeof(why)), 1);
	assert_int_equal(lg_appconf_check_host(apps, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "f:5: [app gone]: command: program /nonexistent/bin: No such"));
	lg_appconf_free(apps);

	apps = NULL;
	assert_int_equal(put(&apps, "web", "command", "/etc/passwd", 1, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check_host(apps, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "not executable"));
	lg_appconf_free(apps);

	apps = NULL; /* the app's own PATH, as execvp searches it after its env lines */
	assert_int_equal(put(&apps, "web", "command", "sh", 1, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "web", "env", "PATH=/nonexistent", 2, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check_host(apps, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "f:1: [app web]: command: program sh is not an executable "
	    "file in its PATH /nonexistent"));
	lg_appconf_free(apps);

	apps = NULL;
	assert_int_equal(put(&apps, "web", "command", "/bin/sh", 1, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "web", "cwd", "/etc/passwd", 2, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check_host(apps, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "f:2: [app web]: cwd = /etc/passwd: not a directory"));
	lg_appconf_free(apps);

	apps = NULL;
	assert_int_equal(put(&apps, "web", "command", "/bin/sh", 1, why, sizeof(why)), 1);
	assert_int_equal(put(&apps, "web", "user", "nosuchuser-lagless", 2, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_check_host(apps, why, sizeof(why)), geteuid() == 0 ? -1 : 0);
	if (geteuid() == 0)
		assert_non_null(strstr(why, "f:2: [app web]: user = nosuchuser-lagless: no such"));
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
		cmocka_unit_test(test_key_refusals),
		cmocka_unit_test(test_one_app_per_upstream),
		cmocka_unit_test(test_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
