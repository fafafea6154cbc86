/* A reload's checks in a process of their own, so the master's poll loop never waits behind
 * them (master/precheck.h). */
#include "master/precheck.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "kinds/host.h"
#include "kinds/registry.h"
#include "master/gen.h"
#include "master/options.h"

static void
put(XXH3_state_t *st, const void *p, size_t n)
{
	XXH3_64bits_update(st, p, n);
}

/* A string with its NUL, so "ab" "c" and "a" "bc" differ. */
static void
put_str(XXH3_state_t *st, const char *s)
{
	put(st, s != NULL ? s : "", s != NULL ? strlen(s) + 1 : 1);
}

static void
put_conf(XXH3_state_t *st, const struct lagless_conf *c)
{
	put(st, &c->n, sizeof(c->n));
	for (unsigned i = 0; i < c->n; i++) {
		put_str(st, c->kv[i].key);
		put_str(st, c->kv[i].value);
		put(st, &c->kv[i].line, sizeof(c->kv[i].line));
	}
}

uint64_t
lg_precheck_digest(const struct lg_registry *r)
{
	XXH3_state_t *st = XXH3_createState();
	uint64_t h;

	if (st == NULL)
		return 0;
	XXH3_64bits_reset(st);
	put(st, &r->nmodules, sizeof(r->nmodules));
	for (uint32_t i = 0; i < r->nmodules; i++) {
		const struct lg_module *m = &r->modules[i];

		put_str(st, m->name);
		put_str(st, m->path);
		put(st, &m->content, sizeof(m->content)); /* the file's bytes (lg_modules_open) */
		put_conf(st, &m->conf);
	}
	put(st, &r->nroutes, sizeof(r->nroutes));
	for (uint32_t i = 0; i < r->nroutes; i++) {
		const struct lg_route_def *rt = &r->routes[i];
		const struct lg_kind *k = lg_registry_kind(r, rt->kind);

		put_str(st, rt->path);
		put(st, &rt->prefix, sizeof(rt->prefix));
		put(st, &rt->methods, sizeof(rt->methods));
		put_str(st, rt->handler);
		put_str(st, k != NULL ? k->name : "");
		put_str(st, rt->file);
		put(st, &rt->line, sizeof(rt->line));
		put_conf(st, &rt->conf);
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

/* The check process: dies with the master, leads its own group (so the master can kill what
 * a hook forked with it), holds none of the master's descriptors, reads the configuration
 * with every hook and writes the report in one write. Never returns. */
static void __attribute__((noreturn))
check_main(int fd, pid_t master, struct lg_gen *all, int argc, char **argv, const int *closes,
    int n)
{
	struct lg_precheck_report rep = { .magic = LG_PRECHECK_MAGIC };
	struct lg_config cfg;
	struct lg_command cmd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != master)
		_exit(1);
	setpgid(0, 0);
	for (int i = 0; i < n; i++)
		if (closes[i] >= 0)
			close(closes[i]);
	lg_gen_forget_all(all, -1);
	lg_log_set_role("check", 0);
	prctl(PR_SET_NAME, "lagless-check");
	if (lg_options_load(argc, argv, &cfg, &cmd, rep.err, sizeof(rep.err)) == 0) {
		rep.ok = 1;
		rep.digest = lg_precheck_digest(cfg.reg);
	}
	(void)!write(fd, &rep, sizeof(rep));
	_exit(0); /* no atexit handler of the master's, no leak report of what the load built */
}

int
lg_precheck_start(struct lg_precheck *c, struct lg_gen *all, int argc, char **argv,
    const int *closes, int n, uint64_t timeout_ms)
{
	int fds[2];
	pid_t master = getpid(), pid;

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) == -1)
		return -1;
	fflush(NULL); /* the child must not write our buffered output again */
	if ((pid = fork()) == -1) {
		int saved = errno;

		close(fds[0]);
		close(fds[1]);
		errno = saved;
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		fcntl(fds[1], F_SETFL, 0); /* the report is written whole */
		check_main(fds[1], master, all, argc, argv, closes, n);
	}
	setpgid(pid, pid); /* as the child does: whichever runs first */
	close(fds[1]);
	c->pid = pid;
	c->fd = fds[0];
	c->deadline_ns = lg_now_ns() + timeout_ms * LG_NS_PER_MS;
	c->exited = c->status = 0;
	c->got = 0;
	return 0;
}

int
lg_precheck_read(struct lg_precheck *c)
{
	ssize_t k;

	while (c->fd >= 0 && c->got < sizeof(c->rep) &&
	    (k = read(c->fd, (char *)&c->rep + c->got, sizeof(c->rep) - c->got)) > 0)
		c->got += (size_t)k;
	if (c->got < sizeof(c->rep))
		return 0;
	if (c->rep.magic != LG_PRECHECK_MAGIC) {
		c->rep.ok = 0;
		snprintf(c->rep.err, sizeof(c->rep.err), "the check process wrote a malformed report");
	}
	c->rep.err[sizeof(c->rep.err) - 1] = '\0';
	return 1;
}

void
lg_precheck_end(struct lg_precheck *c)
{
	if (c->pid > 0 && !c->exited)
		kill(-c->pid, SIGKILL);
	if (c->fd >= 0)
		close(c->fd);
	c->pid = 0;
	c->fd = -1;
	c->exited = 0;
	c->got = 0;
}
