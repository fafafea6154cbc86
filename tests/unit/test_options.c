/* Unit tests for master/options.c: one table drives flags, environment, file and defaults. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kinds/registry.h"
#include "master/appconf.h"
#include "master/options.h"

static char err[512];

static int reg_built; /* the last load built a registry (freed at once: tests read settings) */

static int
load(struct lg_config *cfg, struct lg_command *cmd, int argc, char **argv)
{
	int rc = lg_options_load(argc, argv, cfg, cmd, err, sizeof(err));

	reg_built = cfg->reg != NULL;
	lg_registry_free(cfg->reg);
	lg_appconf_free(cfg->master.apps);
	cfg->reg = NULL;
	return rc;
}

static char *
write_file(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/lagless-opt-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void
test_defaults(void **state)
{
	struct lg_config cfg;

	lg_options_defaults(&cfg);
	assert_string_equal(cfg.master.listen_addr, "0.0.0.0");
	assert_int_equal(cfg.master.port, 8080);
	assert_int_equal(cfg.jobs.queue_capacity, -1);
	assert_true(cfg.http.max_body == 64ull << 20);
	assert_true(cfg.jobs.deadline_ms == 30000);
	assert_int_equal(cfg.conn.max_conns, 10000);
	assert_int_equal(cfg.jobs.compute_policy, SCHED_OTHER);
	assert_int_equal(cfg.jobs.pools[0].policy, SCHED_OTHER);
}

/* --compute-policy and a pool's policy key: idle, batch or normal (sched(7)); a pool without
 * the key takes the server-wide one, [pool default] stands for it. */
static void
test_compute_policy(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *path = write_file("[pool a]\ncompute = 1\npolicy = idle\n\n"
	    "[pool b]\ncompute = 1\n");
	char *flag[] = { "lagless", "-c", path, "--compute-policy", "batch", NULL };
	char *file[] = { "lagless", "-c", path, NULL };

	assert_int_equal(load(&cfg, &cmd, 5, flag), 0);
	assert_int_equal(cfg.jobs.npools, 3);
	assert_int_equal(cfg.jobs.pools[0].policy, SCHED_BATCH);
	assert_int_equal(cfg.jobs.pools[1].policy, SCHED_IDLE);
	assert_int_equal(cfg.jobs.pools[2].policy, SCHED_BATCH);
	assert_int_equal(load(&cfg, &cmd, 3, file), 0);
	assert_int_equal(cfg.jobs.pools[0].policy, SCHED_OTHER);
	assert_int_equal(cfg.jobs.pools[1].policy, SCHED_IDLE);
	assert_int_equal(cfg.jobs.pools[2].policy, SCHED_OTHER);
	unlink(path);
	path = write_file("[pool a]\ncompute = 1\npolicy = fifo\n");
	assert_int_equal(load(&cfg, &cmd, 3, file), -1);
	assert_non_null(strstr(err, "expected idle, batch or normal"));
	unlink(path);
}

/* --compute-slice-ms and a pool's slice_ms: milliseconds, 0 (the kernel's) to 100 (the most
 * sched_setattr(2) honours); a pool without the key takes the server-wide one. */
static void
test_compute_slice(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *path = write_file("[pool a]\ncompute = 1\nslice_ms = 8\n\n[pool b]\ncompute = 1\n");
	char *flag[] = { "lagless", "-c", path, "--compute-slice-ms", "20", NULL };
	char *file[] = { "lagless", "-c", path, NULL };

	assert_int_equal(load(&cfg, &cmd, 3, file), 0);
	assert_true(cfg.jobs.compute_slice_ms == 0);
	assert_true(cfg.jobs.pools[0].slice_ms == 0);
	assert_true(cfg.jobs.pools[1].slice_ms == 8);
	assert_true(cfg.jobs.pools[2].slice_ms == 0);
	assert_int_equal(load(&cfg, &cmd, 5, flag), 0);
	assert_true(cfg.jobs.pools[0].slice_ms == 20);
	assert_true(cfg.jobs.pools[1].slice_ms == 8);
	assert_true(cfg.jobs.pools[2].slice_ms == 20);
	unlink(path);
	path = write_file("[pool a]\ncompute = 1\nslice_ms = 101\n");
	assert_int_equal(load(&cfg, &cmd, 3, file), -1);
	assert_non_null(strstr(err, "slice"));
	unlink(path);
}

static void
test_flags_and_sizes(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *argv[] = { "lagless", "--listen", "[::1]:0", "--max-body", "2K", "--queue", "0",
	    "--cpus", "1.5", "--cpu-rounding", "ceil", "-p", "9000", NULL };

	assert_int_equal(load(&cfg, &cmd, 13, argv), 0);
	assert_string_equal(cfg.master.listen_addr, "::1");
	assert_int_equal(cfg.master.port, 9000); /* -p after --listen wins */
	assert_true(cfg.http.max_body == 2048);
	assert_int_equal(cfg.jobs.queue_capacity, 0);
	assert_true(cfg.sizing.cpus == 1.5);
	assert_int_equal(cfg.sizing.rounding, LG_ROUND_CEIL);
}

static void
test_bad_values(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	const char *bad[][2] = {
		{ "--queue", "-5" }, { "--queue", "100001" }, { "--cpus", "abc" },
		{ "--cpus", "-1" }, { "--listen", "nonsense" }, { "--listen", "1.2.3.4:70000" },
		{ "--max-body", "12X" }, { "--deadline-ms", "0" }, { "--log-level", "loud" },
		{ "--loop-workers", "" }, { "--cpu-rounding", "up" },
		/* what bind(2) would refuse must fail here, so -t catches it */
		{ "--listen", "bad!host:80" }, { "--listen", "::1" }, { "--listen", "[::1" },
		{ "--listen", "999.1.1.1:80" }, { "--listen", "[::1]x:0" },
		{ "--cpus", "0x10" }, { "--cpus", "inf" }, { "--cpus", "1025" },
		{ "--compute-workers", "%" }, { "--compute-workers", "0%" },
		{ "--compute-workers", "-5%" }, { "--compute-workers", "50%%" },
		{ "--compute-workers", "1e2%" }, { "--compute-workers", "10001%" },
		{ "--compute-policy", "fifo" }, { "--compute-policy", "" },
		{ "--compute-slice-ms", "101" }, { "--compute-slice-ms", "-1" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { "lagless", (char *)bad[i][0], (char *)bad[i][1], NULL };

		assert_int_equal(load(&cfg, &cmd, 3, argv), -1);
		assert_non_null(strstr(err, bad[i][0]));
	}
	char *unknown[] = { "lagless", "--bogus", NULL };
	assert_int_equal(load(&cfg, &cmd, 2, unknown), -1);
	assert_non_null(strstr(err, "unknown option"));
	char *stray[] = { "lagless", "stray", NULL };
	assert_int_equal(load(&cfg, &cmd, 2, stray), -1);
}

/* --compute-workers takes a count or a share of the budget; the later one replaces the other. */
static void
test_compute_share(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *share[] = { "lagless", "--compute-workers", "150%", NULL };
	char *both[] = { "lagless", "--compute-workers", "50%", "--compute-workers", "3", NULL };
	char *off[] = { "lagless", "--live-resize=no", NULL };

	assert_int_equal(load(&cfg, &cmd, 1, share), 0);
	assert_int_equal(cfg.sizing.live_resize, 1);	/* on by default */
	assert_int_equal(load(&cfg, &cmd, 3, share), 0);
	assert_true(cfg.jobs.compute_share == 1.5);
	assert_int_equal(cfg.jobs.compute_workers, 0);
	assert_int_equal(load(&cfg, &cmd, 5, both), 0);
	assert_true(cfg.jobs.compute_share == 0);
	assert_int_equal(cfg.jobs.compute_workers, 3);
	assert_int_equal(load(&cfg, &cmd, 2, off), 0);
	assert_int_equal(cfg.sizing.live_resize, 0);
}

static void
test_precedence(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *path = write_file("; comment\n[lagless]\nqueue = 3\ndeadline_ms = 1234\n"
	    "max_body = 1M\nmax_conns = 77\n");
	char *argv[] = { "lagless", "-c", path, "--queue", "9", NULL };

	setenv("LAGLESS_QUEUE", "5", 1);
	setenv("LAGLESS_DEADLINE_MS", "4321", 1);
	assert_int_equal(load(&cfg, &cmd, 5, argv), 0);
	assert_int_equal(cfg.jobs.queue_capacity, 9);        /* flag > env > file */
	assert_true(cfg.jobs.deadline_ms == 4321);           /* env > file */
	assert_true(cfg.http.max_body == 1u << 20);          /* file > default */
	assert_int_equal(cfg.conn.max_conns, 77);
	assert_string_equal(cmd.config_path, path);
	/* A reload parses the same argv again and must see the same result. */
	assert_int_equal(load(&cfg, &cmd, 5, argv), 0);
	assert_int_equal(cfg.jobs.queue_capacity, 9);
	unsetenv("LAGLESS_QUEUE");
	unsetenv("LAGLESS_DEADLINE_MS");
	unlink(path);
}

static void
test_bad_env(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *argv[] = { "lagless", NULL };

	setenv("LAGLESS_MAX_BODY", "lots", 1);
	setenv("LAGLESS_SOMETHING_ELSE", "x", 1); /* unknown variables are not ours to judge */
	assert_int_equal(load(&cfg, &cmd, 1, argv), -1);
	assert_non_null(strstr(err, "LAGLESS_MAX_BODY"));
	unsetenv("LAGLESS_MAX_BODY");
	assert_int_equal(load(&cfg, &cmd, 1, argv), 0);
	unsetenv("LAGLESS_SOMETHING_ELSE");
}

static void
test_file_errors_name_line_and_key(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	struct { const char *text, *want; } cases[] = {
		{ "queue = 3\n\nbogus_key = 1\n", ":3: key 'bogus_key'" },
		{ "[lagless]\nqueue = lots\n", ":2: key 'queue'" },
		{ "[other]\nqueue = 1\n", ":1: section [other]: unknown section" },
		{ "queue = 1\n[poolx]\n", ":2: section [poolx]: unknown section" }, /* no keys */
		{ "queue 3\n", ":1:" },
		{ "queue = 3\n[pool Default]\ncompute = 1\n", ":2: section [pool Default]: a pool" },
		{ "[pool slow]\nnice = 1\n[pool Slow]\n", ":3: section [pool Slow]" },
		/* a section without keys does nothing: refused at its header with what it lacks
		 * (a hostile trial found these passing in silence) */
		{ "[pool p]\n", ":1: [pool p]: compute = N or P% is required" },
		{ "[route /zz]\n; a comment\n\n[lagless]\nqueue = 1\n", ":1: route /zz: needs kind" },
		{ "queue = 1\n[module m]\n", ":2: module m: no 'path' key" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *path = write_file(cases[i].text);
		char *argv[] = { "lagless", "-c", path, "-t", NULL };

		assert_int_equal(load(&cfg, &cmd, 4, argv), -1);
		assert_true(cmd.test_config);
		assert_non_null(strstr(err, path));
		assert_non_null(strstr(err, cases[i].want));
		unlink(path);
	}
	char *path = write_file("[pool default]\n[lagless]\n"); /* the defaults: may be empty */
	char *ok[] = { "lagless", "-c", path, "-t", NULL };
	assert_int_equal(load(&cfg, &cmd, 4, ok), 0);
	unlink(path);
	char *dir[] = { "lagless", "-c", "/tmp", NULL };
	assert_int_equal(load(&cfg, &cmd, 3, dir), -1);
	assert_non_null(strstr(err, "not a regular file"));
	char *missing[] = { "lagless", "-c", "/nonexistent/lagless.conf", NULL };
	assert_int_equal(load(&cfg, &cmd, 3, missing), -1);
	assert_non_null(strstr(err, "/nonexistent/lagless.conf"));
}

/* A file of `lines` (each written as given, a '\n' after it); returns lg_options_load's -1
 * or 0 with the [app] sections kept in *apps (the caller frees them). */
static int
load_lines(const char *const *lines, size_t n, struct lg_config *cfg, struct lg_apps **apps)
{
	struct lg_command cmd;
	char tmpl[] = "/tmp/lagless-opt-XXXXXX";
	int fd = mkstemp(tmpl), rc;
	FILE *f = fdopen(fd, "w");
	char *argv[] = { "lagless", "-c", tmpl, "-t", NULL };

	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", lines[i]);
	fclose(f);
	rc = lg_options_load(4, argv, cfg, &cmd, err, sizeof(err));
	lg_registry_free(cfg->reg);
	cfg->reg = NULL;
	*apps = cfg->master.apps;
	unlink(tmpl);
	return rc;
}

/* inih's line buffer is 200 bytes (Debian's libinih, compiled in): a longer key = value line
 * gives its whole value to the key, as inih would cut it (an inline comment, blanks), and the
 * key's own checks see it; only a value may be long, and a line up to 64 KiB. */
static void
test_long_lines(void **state)
{
	struct lg_config cfg;
	struct lg_apps *apps;
	size_t big = 70 * 1024;
	char *cmd = malloc(1100), *line = malloc(big + 64), *exact = malloc(65536 + 1);

	strcpy(cmd, "/bin/echo {socket}");
	while (strlen(cmd) < 1000)
		strcat(cmd, " --some-option=value");
	snprintf(line, big + 64, "command =\t%s   ; a comment\r", cmd);
	const char *ok[] = { "demo_routes = no", "[app web]", line, "env = A=1",
	    "    B = 2 (an indented line continues env, as inih's INI_ALLOW_MULTILINE)" };
	assert_int_equal(load_lines(ok, 5, &cfg, &apps), 0);
	assert_non_null(apps);
	assert_string_equal(apps->app[0].command, cmd);
	assert_int_equal(apps->app[0].argc, 2 + (int)(strlen(cmd) - 18) / 20);
	assert_int_equal(apps->app[0].nenv, 2);
	lg_appconf_free(apps);
	/* an indented long line after a key is inih's continuation of it, whole */
	snprintf(line, big + 64, "  LONG = %0500d", 7);
	const char *cont[] = { "demo_routes = no", "[app web]", "command = /bin/echo {socket}",
	    "env = A=1", line };
	assert_int_equal(load_lines(cont, 5, &cfg, &apps), 0);
	assert_int_equal(apps->app[0].nenv, 2);
	assert_int_equal(strlen(apps->app[0].env[1]), 7 + 500);
	assert_int_equal(strncmp(apps->app[0].env[1], "LONG = 000", 10), 0);
	lg_appconf_free(apps);
	/* a line of exactly 64 KiB is read (here a comment), one more byte is not */
	memset(exact, 'x', 65536);
	exact[0] = '#';
	exact[65536] = '\0';
	const char *edge[] = { "demo_routes = no", exact };
	assert_int_equal(load_lines(edge, 2, &cfg, &apps), 0);
	lg_appconf_free(apps);
	memset(line, 'y', big);
	memcpy(line, "; ", 2);
	line[65537] = '\0';
	const char *over[] = { "demo_routes = no", line };
	assert_int_equal(load_lines(over, 2, &cfg, &apps), -1);
	lg_appconf_free(apps);
	assert_non_null(strstr(err, ":2: a line over 65536 bytes"));
	/* the key's own check, on the real value: a command over its 8 KiB */
	memcpy(line, "command = /bin/", 15);
	line[9000] = '\0';
	const char *cmdlong[] = { "[app web]", line };
	assert_int_equal(load_lines(cmdlong, 2, &cfg, &apps), -1);
	lg_appconf_free(apps);
	assert_non_null(strstr(err, ":2: key 'command' = '/bin/yyy"));
	assert_non_null(strstr(err, "...': too long (a command is at most 8191 bytes)"));
	/* a long header, a long line without '=', a long key: refused at their line */
	memset(line, 'k', 300);
	line[300] = '\0';
	const char *nokv[] = { "demo_routes = no", line };
	assert_int_equal(load_lines(nokv, 2, &cfg, &apps), -1);
	assert_non_null(strstr(err, ":2: a line over the parser's limit of 198 bytes that is not"));
	strcpy(line + 300, " = 1");
	assert_int_equal(load_lines(nokv, 2, &cfg, &apps), -1);
	assert_non_null(strstr(err, ":2: a key over the parser's limit"));
	memcpy(line, "[route /", 8);
	strcpy(line + 300, "]");
	const char *hdr[] = { "demo_routes = no", line, "kind = ping" };
	assert_int_equal(load_lines(hdr, 3, &cfg, &apps), -1);
	assert_non_null(strstr(err, ":2: a section header over"));
	free(cmd);
	free(line);
	free(exact);
}

/* The example file gives every default but demo_routes, which it turns off (a deployed server
 * leaves the demonstrations out): the configuration it loads is the defaults with that one. */
static void
test_example_round_trips_to_defaults(void **state)
{
	struct lg_config cfg, def;
	struct lg_command cmd;
	char path[] = "/tmp/lagless-example-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	lg_options_example(f);
	fclose(f);
	char *argv[] = { "lagless", "-c", path, NULL };
	assert_int_equal(load(&cfg, &cmd, 3, argv), 0);
	lg_options_defaults(&def);
	assert_true(reg_built); /* the registry was built from it */
	assert_int_equal(def.demo_routes, 1);
	assert_int_equal(cfg.demo_routes, 0);
	def.demo_routes = 0;
	assert_memory_equal(&cfg, &def, sizeof(cfg));
	unlink(path);
}

/* --redis (issue 22): a unix socket path, or an address resolved at load time (the loop workers
 * connect without a resolver); its file key and environment form as every option's. */
static void
test_redis_address(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *unix_sock[] = { "lagless", "--redis", "unix:/run/redis.sock", "--redis-budget-ms",
	    "20", NULL };
	char *inet[] = { "lagless", "--redis", "127.0.0.1:6379", NULL };
	const char *bad[] = { "unix:run/redis.sock", "unix:", "nonsense", "1.2.3.4:70000" };

	assert_int_equal(load(&cfg, &cmd, 5, unix_sock), 0);
	assert_string_equal(cfg.cluster.redis, "unix:/run/redis.sock");
	assert_int_equal(cfg.cluster.redis_budget_ms, 20);
	assert_int_equal(load(&cfg, &cmd, 3, inet), 0);
	assert_string_equal(cfg.cluster.redis, "127.0.0.1:6379");
	assert_int_equal(cfg.cluster.redis_budget_ms, 5); /* the default: a few ms */
	assert_string_equal(cfg.cluster.redis_prefix, "lagless:");
	assert_true(cfg.cluster.cluster_max_value == 1u << 20);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { "lagless", "--redis", (char *)bad[i], NULL };

		assert_int_equal(load(&cfg, &cmd, 3, argv), -1);
		assert_non_null(strstr(err, "--redis"));
	}
	setenv("LAGLESS_REDIS", "unix:/tmp/r.sock", 1);
	char *none[] = { "lagless", NULL };
	assert_int_equal(load(&cfg, &cmd, 1, none), 0);
	unsetenv("LAGLESS_REDIS");
	assert_string_equal(cfg.cluster.redis, "unix:/tmp/r.sock");
}

/* Switches: a bare flag means yes, =no turns it off, file and environment take yes/no words. */
static void
test_switches(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	char *bare[] = { "lagless", "--access-log", "--inline-heavy", "--lag-interval-ms", "5",
	    "--slow-callback-ms", "0", NULL };
	char *off[] = { "lagless", "--access-log=no", "--inline-heavy=false", NULL };
	char *bad[] = { "lagless", "--access-log=maybe", NULL };
	char *zero[] = { "lagless", "--lag-interval-ms", "0", NULL };
	char *path = write_file("[lagless]\ninline_heavy = on\naccess_log = YES\n");
	char *file[] = { "lagless", "-c", path, NULL };

	lg_options_defaults(&cfg);
	assert_int_equal(cfg.conn.access_log, 0);
	assert_int_equal(cfg.inline_heavy, 0);
	assert_true(cfg.loop.lag_interval_ms == 10 && cfg.loop.slow_callback_ms == 50);
	assert_int_equal(load(&cfg, &cmd, 7, bare), 0);
	assert_int_equal(cfg.conn.access_log, 1);
	assert_int_equal(cfg.inline_heavy, 1);
	assert_true(cfg.loop.lag_interval_ms == 5 && cfg.loop.slow_callback_ms == 0);
	assert_int_equal(load(&cfg, &cmd, 3, off), 0);
	assert_int_equal(cfg.conn.access_log, 0);
	assert_int_equal(cfg.inline_heavy, 0);
	assert_int_equal(load(&cfg, &cmd, 2, bad), -1);
	assert_non_null(strstr(err, "--access-log"));
	assert_int_equal(load(&cfg, &cmd, 3, zero), -1);  /* a probe needs a period */
	assert_int_equal(load(&cfg, &cmd, 3, file), 0);
	assert_int_equal(cfg.conn.access_log, 1);
	assert_int_equal(cfg.inline_heavy, 1);
	unlink(path);
}

/* Issue 19: one grammar of values wherever they are written, and each refusal names the
 * file, the line and the key. */
static void
test_one_grammar(void **state)
{
	struct lg_config cfg;
	struct lg_command cmd;
	struct { const char *text, *want, *why; } bad[] = {
		/* was taken as compute-workers = 0, max(1, budget - 1), in silence */
		{ "[pool default]\ncompute = 0\n", ":2: key 'compute'", "at least 1 compute" },
		{ "[pool fast]\ncompute = 00\n", ":2: key 'compute'", "at least 1 compute" },
		/* a route's deadline took size suffixes: 1K was 1024 ms */
		{ "[route /heavy]\nkind = heavy\ndeadline_ms = 1K\n", ":3: key 'deadline_ms'",
		    "milliseconds" },
		{ "[route /heavy]\nkind = heavy\noff = maybe\n", ":3: key 'off'",
		    "yes, no, true, false, on, off, 1 or 0" },
		{ "max_body = 18446744073709551616\n", ":1: key 'max_body'", "K, M or G" },
		{ "drain_delay_ms = 5s\n", ":1: key 'drain_delay_ms'", "milliseconds" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *path = write_file(bad[i].text);
		char *argv[] = { "lagless", "-c", path, NULL };

		assert_int_equal(load(&cfg, &cmd, 3, argv), -1);
		assert_non_null(strstr(err, path));
		assert_non_null(strstr(err, bad[i].want));
		assert_non_null(strstr(err, bad[i].why));
		unlink(path);
	}
	/* coalesce = true was refused while inline_heavy = true was taken */
	char *path = write_file("cache_bytes = 8m\ninline_heavy = TRUE\n[route /heavy]\n"
	    "kind = heavy\ncoalesce = true\nttl_ms = 100\nkey_body_max = 1k\n");
	char *argv[] = { "lagless", "-c", path, "--max-head", "8k", NULL };

	setenv("LAGLESS_MAX_BODY", "2g", 1);
	assert_int_equal(load(&cfg, &cmd, 5, argv), 0);
	unsetenv("LAGLESS_MAX_BODY");
	assert_true(cfg.flights.cache_bytes == 8u << 20 && cfg.inline_heavy == 1);
	assert_true(cfg.http.max_head == 8192 && cfg.http.max_body == 2ull << 30);
	unlink(path);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_flags_and_sizes),
		cmocka_unit_test(test_compute_policy),
		cmocka_unit_test(test_compute_slice),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_compute_share),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_bad_env),
		cmocka_unit_test(test_file_errors_name_line_and_key),
		cmocka_unit_test(test_long_lines),
		cmocka_unit_test(test_example_round_trips_to_defaults),
		cmocka_unit_test(test_switches),
		cmocka_unit_test(test_redis_address),
		cmocka_unit_test(test_one_grammar),
	};

	alarm(10);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
