/* Unit tests for master/app.c: what an upstream reads of an app (lg_app_servers), on real
 * processes (/bin/sleep) the supervisor starts and kills. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "master/app.h"
#include "master/appproc.h"
#include "shm/layout.h"

static struct lg_apps *
one_app(const char *command, const char *upstream)
{
	struct lg_apps *apps = NULL;
	char why[400];

	assert_int_equal(lg_appconf_collect(&apps, "app web", "command", command, "f", 1, why,
	    sizeof(why)), 1);
	assert_int_equal(lg_appconf_collect(&apps, "app web", "processes", "2", "f", 2, why,
	    sizeof(why)), 1);
	if (upstream != NULL)
		assert_int_equal(lg_appconf_collect(&apps, "app web", "upstream", upstream, "f", 3,
		    why, sizeof(why)), 1);
	return apps;
}

static void
reap_all(void)
{
	while (waitpid(-1, NULL, 0) > 0)
		;
}

static void
test_servers_by_port(void **state)
{
	struct lg_appsup *s = lg_app_new(getpid());
	struct lg_app_server out[4];
	char err[300];

	(void)state;
	assert_non_null(s);
	assert_int_equal(lg_app_start(s, one_app("/bin/sleep 30{port}", "api"), 4, err,
	    sizeof(err)), 0);
	assert_int_equal(lg_app_servers(s, "web", out, 4), 2);
	assert_int_equal(lg_app_servers(s, "api", out, 4), 2); /* by its upstream name too */
	assert_int_equal(lg_app_servers(s, "other", out, 4), -1);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(strncmp(out[k].addr, "127.0.0.1:", 10), 0);
		assert_true(out[k].pid > 0);
		assert_int_equal(out[k].ready, 0); /* nothing probed it yet */
	}
	assert_string_not_equal(out[0].addr, out[1].addr);
	assert_int_equal(lg_app_ready(s), 0);
	assert_int_equal(lg_app_alive(s), 2);
	lg_app_free(s); /* SIGKILLs them */
	reap_all();
}

static void
test_servers_by_socket(void **state)
{
	struct lg_appsup *s = lg_app_new(getpid());
	struct lg_app_server out[1];
	char err[300], want[128];

	(void)state;
	assert_int_equal(lg_app_start(s, one_app("/bin/sleep 30 {socket}", NULL), 4, err,
	    sizeof(err)), 0);
	/* room for one: the count is still the app's */
	assert_int_equal(lg_app_servers(s, "web", out, 1), 2);
	snprintf(want, sizeof(want), "/lagless-%d/web.1/0.sock", (int)getpid());
	assert_int_equal(strncmp(out[0].addr, "unix:", 5), 0);
	assert_non_null(strstr(out[0].addr, want));
	lg_app_free(s);
	reap_all();
}

/* A reload's staged run: what the next generation's upstream takes (lg_app_servers) and what
 * each generation's page shows (lg_app_publish), before and after the commit. */
static void
test_reload_hands_over_by_generation(void **state)
{
	struct lg_appsup *s = lg_app_new(getpid());
	struct lg_master_page *mp = calloc(1, sizeof(*mp));
	struct lg_app_server out[4];
	struct lg_apps *next;
	char err[300], why[400];

	(void)state;
	assert_int_equal(lg_app_start(s, one_app("/bin/sleep 30 {socket}", NULL), 4, err,
	    sizeof(err)), 0);
	lg_app_publish(s, mp, 1);
	assert_int_equal(atomic_load(&mp->napps), 1);
	assert_string_equal(mp->apps[0].name, "web");
	assert_int_equal(atomic_load(&mp->apps[0].processes), 2);
	assert_int_equal(atomic_load(&mp->apps[0].running), 2);
	assert_int_equal(atomic_load(&mp->apps[0].ready_mask), 0);
	/* unchanged: nothing staged, the same servers */
	assert_int_equal(lg_app_stage(s, one_app("/bin/sleep 30 {socket}", NULL), 4, err,
	    sizeof(err)), 0);
	/* changed: one process now, on new paths (run 2) */
	next = NULL;
	assert_int_equal(lg_appconf_collect(&next, "app web", "command", "/bin/sleep 31 {socket}",
	    "f", 1, why, sizeof(why)), 1);
	assert_int_equal(lg_appconf_collect(&next, "app web", "processes", "1", "f", 2, why,
	    sizeof(why)), 1);
	assert_int_equal(lg_app_stage(s, next, 4, err, sizeof(err)), 1);
	assert_int_equal(lg_app_servers(s, "web", out, 4), 1);
	assert_non_null(strstr(out[0].addr, "/web.2/0.sock"));
	assert_int_equal(lg_app_staged(s, err, sizeof(err)), 0); /* not probed ready */
	lg_app_commit(s, 2);
	lg_app_publish(s, mp, 1); /* the old generation still routes to run 1 */
	assert_int_equal(atomic_load(&mp->apps[0].processes), 2);
	lg_app_publish(s, mp, 2);
	assert_int_equal(atomic_load(&mp->napps), 1);
	assert_int_equal(atomic_load(&mp->apps[0].processes), 1);
	assert_int_equal(lg_app_alive(s), 3);
	free(mp);
	lg_app_free(s);
	reap_all();
}

/* An app's output reaches the log line by line with its control bytes escaped: no CR, ESC or
 * BEL to forge a log line, and a NUL does not drop the rest of the line. */
static void
test_output_control_bytes_escaped(void **state)
{
	static const char out[] = "a\rfake\x1b[31m\a\0rest\t.\r\nsecond\n";
	struct lg_app_proc *p = calloc(1, sizeof(*p));
	struct lg_app_tail tail = { .next = 0 };
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], out, sizeof(out) - 1), (ssize_t)sizeof(out) - 1);
	close(fds[1]);
	p->out = fds[0];
	p->probe = -1;
	lg_appproc_read("web", p, &tail, 1);
	assert_int_equal(p->out, -1);
	assert_int_equal(tail.next, 2);
	assert_string_equal(tail.line[0], "a\\x0dfake\\x1b[31m\\x07\\x00rest\t.");
	assert_string_equal(tail.line[1], "second");
	free(p);
}

/* The socket directory lagless made itself is removed by lg_app_free, also when
 * RUNTIME_DIRECTORY is set but unusable (relative) and ${TMPDIR:-/tmp}/lagless-PID was made. */
static void
test_own_socket_directory_removed(void **state)
{
	struct lg_appsup *s;
	struct stat st;
	char err[300], dir[128];
	const char *tmp = getenv("TMPDIR");

	(void)state;
	snprintf(dir, sizeof(dir), "%s/lagless-%d", tmp && tmp[0] == '/' ? tmp : "/tmp",
	    (int)getpid());
	setenv("RUNTIME_DIRECTORY", "relative/dir", 1);
	s = lg_app_new(getpid());
	assert_int_equal(lg_app_start(s, one_app("/bin/sleep 30 {socket}", NULL), 4, err,
	    sizeof(err)), 0);
	assert_int_equal(stat(dir, &st), 0);
	lg_app_free(s);
	reap_all();
	unsetenv("RUNTIME_DIRECTORY");
	assert_int_equal(stat(dir, &st), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_servers_by_port),
		cmocka_unit_test(test_servers_by_socket),
		cmocka_unit_test(test_reload_hands_over_by_generation),
		cmocka_unit_test(test_output_control_bytes_escaped),
		cmocka_unit_test(test_own_socket_directory_removed),
	};

	unsetenv("RUNTIME_DIRECTORY");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
