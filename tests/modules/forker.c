/* A test module whose kinds leave processes behind, against the module rules
 * (tests/regress/test_kind_children_end.py): `spawn` forks a child that waits forever and
 * answers its pid; `orphan` forks a child that forks a grandchild and exits (a daemon's double
 * fork), answering the grandchild's pid (`spawn` may run where=loop too); `spawn_spin` forks a waiting child, then spins until
 * its process is killed at the deadline. Built by `make` for the tests, against include/ only. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lagless/module.h>

static void
wait_forever(void)
{
	for (;;)
		pause();
}

static int
answer_pid(struct lagless_output *out, long pid)
{
	int n = snprintf((char *)out->data, out->cap, "%ld\n", pid);

	if (n < 0 || (size_t)n >= out->cap)
		return LAGLESS_TOO_LARGE;
	out->len = (size_t)n;
	return LAGLESS_OK;
}

static int
spawn(const struct lagless_request *rq, struct lagless_output *out)
{
	pid_t pid = fork();

	(void)rq;
	if (pid == 0)
		wait_forever();
	return pid < 0 ? LAGLESS_ERROR : answer_pid(out, (long)pid);
}

static int
orphan(const struct lagless_request *rq, struct lagless_output *out)
{
	int fds[2];
	long gpid = -1;
	pid_t pid;

	(void)rq;
	if (pipe(fds) == -1)
		return LAGLESS_ERROR;
	if ((pid = fork()) == 0) {
		pid_t g = fork();

		if (g == 0)
			wait_forever();
		gpid = (long)g;
		(void)!write(fds[1], &gpid, sizeof(gpid));
		_exit(0);
	}
	close(fds[1]);
	if (pid > 0) {
		(void)!read(fds[0], &gpid, sizeof(gpid));
		waitpid(pid, NULL, 0);
	}
	close(fds[0]);
	return gpid > 0 ? answer_pid(out, gpid) : LAGLESS_ERROR;
}

static int
spawn_spin(const struct lagless_request *rq, struct lagless_output *out)
{
	volatile unsigned long x = 0;
	pid_t pid = fork();

	(void)rq;
	(void)out;
	if (pid == 0)
		wait_forever();
	for (;;)
		x++;
	return LAGLESS_OK;
}

LAGLESS_MODULE("forker", "1.0",
    LAGLESS_KIND("spawn", spawn, .ctype = "text/plain",
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP),
    LAGLESS_KIND("orphan", orphan, .ctype = "text/plain"),
    LAGLESS_KIND("spawn_spin", spawn_spin, .ctype = "text/plain"));
