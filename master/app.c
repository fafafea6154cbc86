/* The app supervisor: runs of app processes, their restarts, start-up failures, stop, reload
 * staging and what /status and the upstreams see of them. */
#include "master/app.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pwd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "master/appproc.h"
#include "shm/layout.h"
#include "shm/stats.h"

#define BACKOFF_MIN_NS  (100 * LG_NS_PER_MS)  /* as master/respawn.c's */
#define BACKOFF_MAX_NS  (5000 * LG_NS_PER_MS)
#define QUICK_DEATH_NS  (1000 * LG_NS_PER_MS)
#define SHORT_LIFE_NS   (10000 * LG_NS_PER_MS) /* systemd's StartLimitIntervalSec default */
#define MAX_RUNS        (2 * LG_APP_MAX)

enum run_state { RUN_STAGED, RUN_ACTIVE, RUN_OLD, RUN_STOPPING };

struct run {
	struct lg_app_conf conf;
	uint32_t serial;
	enum run_state state;
	uint32_t from_gen;       /* the first generation that routes to it (0: from the first) */
	uint32_t stop_after;     /* RUN_OLD: the first generation that does not route to it; it
	                          * is stopped once no generation older than that is left */
	int up;                  /* every process was ready at once: failures restart from now */
	int failed;              /* it could not start (why) */
	int initial;             /* started with the master: its failure fails the start-up */
	int staged;              /* started by a reload, not yet committed */
	int killed;              /* stopped at once: its process groups were sent SIGKILL */
	char why[640];
	char dir[192];           /* its socket directory ("": none) */
	uint64_t restarts;
	int n;
	struct lg_app_proc proc[LG_APP_PROCS_MAX];
	struct lg_app_tail tail;
};

struct lg_appsup {
	pid_t master;
	char dir[128];
	int dir_made;            /* it is there (made or found) */
	int dir_ours;            /* we made it: removed by lg_app_free */
	uint32_t serial;
	struct run *runs[MAX_RUNS];
	int nruns;
	int stopping;            /* 1: every run stopping, 2: every run SIGKILLed */
	/* a run that could not start, kept here: the run itself may be freed (no process left)
	 * in the same tick, before the master asks lg_app_failed or lg_app_staged */
	int failed_initial;      /* a run started with the master: the start-up fails */
	int failed_staged;       /* a run started by the pending reload: the reload is refused */
	char why[640];
};

/* The socket directory of the master pid into out (cap bytes). */
static void
sock_dir(pid_t pid, char *out, size_t cap)
{
	const char *rt = getenv("RUNTIME_DIRECTORY"), *tmp = getenv("TMPDIR");

	if (rt != NULL && rt[0] == '/' && strchr(rt, ':') == NULL) /* systemd: one directory */
		snprintf(out, cap, "%s", rt);
	else
		snprintf(out, cap, "%s/lagless-%d", tmp && tmp[0] == '/' ? tmp : "/tmp", (int)pid);
}

struct lg_appsup *
lg_app_new(pid_t master_pid)
{
	struct lg_appsup *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->master = master_pid;
	sock_dir(master_pid, s->dir, sizeof(s->dir));
	return s;
}

/* Every socket path of the run serial of app a (n processes) under dir fits a sockaddr_un;
 * else -1 with the reason in err (cap bytes). */
static int
check_socket(const char *dir, const struct lg_app_conf *a, int n, uint32_t serial, char *err,
    size_t cap)
{
	char path[108];

	if (a->addr != LG_APP_ADDR_SOCKET || n == 0 ||
	    lg_appconf_socket_path(dir, a->name, serial, n - 1, path, sizeof(path)) == 0)
		return 0;
	snprintf(err, cap, "app %s: its socket path %.120s/%s.%u/%d.sock is longer than a unix "
	    "socket address holds (107 bytes): set RUNTIME_DIRECTORY or TMPDIR to a shorter "
	    "directory, or give the app a {port}", a->name, dir, a->name, serial, n - 1);
	return -1;
}

int
lg_app_check_paths(const struct lg_apps *conf, pid_t pid, int budget, char *err, size_t cap)
{
	int nauto = lg_appconf_nauto(conf);
	char dir[128];

	sock_dir(pid, dir, sizeof(dir));
	for (int i = 0; conf != NULL && i < conf->n; i++)
		if (check_socket(dir, &conf->app[i], lg_appconf_count(&conf->app[i], budget, nauto),
		    (uint32_t)i + 1, err, cap) == -1)
			return -1;
	return 0;
}

/* path is a directory of ours, not a link (one that existed before us may be a stale one of a
 * master that had our pid, or RUNTIME_DIRECTORY). */
static int
dir_is_ours(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() ? 0 : -1;
}

/* The socket directory: made on first use (ours when it exists: RUNTIME_DIRECTORY), 0711 so
 * that each app's user reaches its run's own directory (run_dir) and lists none. */
static int
make_dir(struct lg_appsup *s, const struct lg_apps *conf, char *err, size_t cap)
{
	if (s->dir_made || conf == NULL || conf->n == 0)
		return 0;
	s->dir_ours = mkdir(s->dir, 0711) == 0;
	if ((!s->dir_ours && (errno != EEXIST || dir_is_ours(s->dir) == -1)) ||
	    chmod(s->dir, 0711) == -1) {
		snprintf(err, cap, "cannot make the apps' socket directory %s: %s", s->dir,
		    errno == EEXIST ? "it exists and is not a directory of ours" : strerror(errno));
		return -1;
	}
	s->dir_made = 1;
	return 0;
}

/* The run's socket directory DIR/NAME.SERIAL: 0700, given to the app's user when we are root
 * (each run its own: apps of different users, and a reload that changes the user). */
static void
run_dir(struct lg_appsup *s, struct run *r)
{
	struct passwd *pw;

	snprintf(r->dir, sizeof(r->dir), "%s/%s.%u", s->dir, r->conf.name, r->serial);
	if ((mkdir(r->dir, 0700) == -1 && (errno != EEXIST || dir_is_ours(r->dir) == -1)) ||
	    chmod(r->dir, 0700) == -1) {
		log_error("app %s: cannot make its socket directory %s: %s", r->conf.name, r->dir,
		    errno == EEXIST ? "it exists and is not a directory of ours" : strerror(errno));
		r->dir[0] = '\0';
		return;
	}
	if (geteuid() == 0 && r->conf.user[0] && (pw = getpwnam(r->conf.user)) != NULL &&
	    chown(r->dir, pw->pw_uid, pw->pw_gid) == -1)
		log_warn("cannot give %s to %s: %s", r->dir, r->conf.user, strerror(errno));
}

/* Removes r's socket files and directory. */
static void
run_unlink(struct run *r)
{
	for (int k = 0; k < r->n; k++)
		if (r->proc[k].sock[0])
			unlink(r->proc[k].sock);
	if (r->dir[0])
		rmdir(r->dir);
}

static struct run *
run_new(struct lg_appsup *s, const struct lg_app_conf *a, int budget, int nauto,
    enum run_state state)
{
	struct run *r;

	if (s->nruns == MAX_RUNS || (r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->conf = *a;
	r->serial = ++s->serial;
	r->state = state;
	r->staged = state == RUN_STAGED;
	r->initial = state == RUN_ACTIVE;
	r->n = lg_appconf_count(a, budget, nauto);
	if (a->addr == LG_APP_ADDR_SOCKET)
		run_dir(s, r);
	for (int k = 0; k < r->n; k++) {
		struct lg_app_proc *p = &r->proc[k];

		p->index = k;
		p->out = p->probe = -1;
		if (a->addr == LG_APP_ADDR_SOCKET &&
		    lg_appconf_socket_path(s->dir, a->name, r->serial, k, p->sock, sizeof(p->sock)))
			p->sock[0] = '\0';
		if (a->addr == LG_APP_ADDR_PORT)
			p->port = lg_appproc_free_port();
	}
	if (a->user[0] && geteuid() != 0)
		log_warn("app %s: user = %s is honoured only when lagless runs as root; it runs as "
		    "uid %d", a->name, a->user, (int)geteuid());
	s->runs[s->nruns++] = r;
	log_info("app %s: starting %d process(es) (run %u): %s", a->name, r->n, r->serial,
	    a->command);
	return r;
}

static void
start_proc(struct lg_appsup *s, struct run *r, struct lg_app_proc *p)
{
	if (lg_appproc_spawn(&r->conf, p, s->master) == -1) {
		log_error("app %s[%d]: cannot start: %s", r->conf.name, p->index, strerror(errno));
		p->respawn_at = lg_now_ns() + BACKOFF_MAX_NS;
		return;
	}
	if (p->sock[0])
		log_info("app %s[%d] pid=%d started on unix:%s", r->conf.name, p->index,
		    (int)p->pid, p->sock);
	else if (p->port)
		log_info("app %s[%d] pid=%d started on 127.0.0.1:%d", r->conf.name, p->index,
		    (int)p->pid, p->port);
	else
		log_info("app %s[%d] pid=%d started", r->conf.name, p->index, (int)p->pid);
}

static void
start_run(struct lg_appsup *s, struct run *r)
{
	for (int k = 0; k < r->n; k++)
		start_proc(s, r, &r->proc[k]);
}

int
lg_app_start(struct lg_appsup *s, struct lg_apps *conf, int budget, char *err, size_t cap)
{
	int nauto = lg_appconf_nauto(conf), rc = 0;

	if (make_dir(s, conf, err, cap) == -1)
		rc = -1;
	for (int i = 0; rc == 0 && conf != NULL && i < conf->n; i++) {
		struct run *r;

		if (check_socket(s->dir, &conf->app[i], lg_appconf_count(&conf->app[i], budget,
		    nauto), s->serial + 1, err, cap) == -1) {
			rc = -1;
			break;
		}
		if ((r = run_new(s, &conf->app[i], budget, nauto, RUN_ACTIVE)) == NULL) {
			snprintf(err, cap, "app %s: out of memory", conf->app[i].name);
			rc = -1;
			break;
		}
		start_run(s, r);
	}
	lg_appconf_free(conf);
	return rc;
}

static struct run *
active_named(struct lg_appsup *s, const char *name)
{
	for (int i = 0; i < s->nruns; i++)
		if (s->runs[i]->state == RUN_ACTIVE && strcmp(s->runs[i]->conf.name, name) == 0)
			return s->runs[i];
	return NULL;
}

int
lg_app_stage(struct lg_appsup *s, struct lg_apps *conf, int budget, char *err, size_t cap)
{
	int nauto = lg_appconf_nauto(conf), staged = 0;

	s->failed_staged = 0;

	if (make_dir(s, conf, err, cap) == -1) {
		lg_appconf_free(conf);
		return -1;
	}
	for (int i = 0; conf != NULL && i < conf->n; i++) {
		struct run *old = active_named(s, conf->app[i].name), *r;

		if (old != NULL && lg_appconf_same(&old->conf, &conf->app[i]))
			continue;
		if (check_socket(s->dir, &conf->app[i], lg_appconf_count(&conf->app[i], budget,
		    nauto), s->serial + 1, err, cap) == -1) {
			lg_app_unstage(s);
			lg_appconf_free(conf);
			return -1;
		}
		if ((r = run_new(s, &conf->app[i], budget, nauto, RUN_STAGED)) == NULL) {
			snprintf(err, cap, "app %s: too many runs at once (reload again once the "
			    "older ones have stopped)", conf->app[i].name);
			lg_app_unstage(s);
			lg_appconf_free(conf);
			return -1;
		}
		start_run(s, r);
		staged++;
	}
	/* apps the new configuration drops: marked so the commit retires them */
	for (int i = 0; i < s->nruns; i++) {
		struct run *r = s->runs[i];
		int kept = 0;

		for (int j = 0; r->state == RUN_ACTIVE && conf != NULL && j < conf->n; j++)
			kept |= strcmp(conf->app[j].name, r->conf.name) == 0;
		if (r->state == RUN_ACTIVE && !kept)
			r->stop_after = UINT32_MAX; /* a mark, replaced at the commit */
	}
	lg_appconf_free(conf);
	return staged;
}

/* Stops r: SIGTERM with a grace, or (immediate) SIGKILL to every process group at once,
 * also when r was already in its SIGTERM grace. */
static void
stop_run(struct run *r, int immediate)
{
	if (r->state == RUN_STOPPING && (!immediate || r->killed))
		return;
	r->state = RUN_STOPPING;
	r->killed |= immediate;
	for (int k = 0; k < r->n; k++) {
		struct lg_app_proc *p = &r->proc[k];

		lg_appproc_probe_close(p);
		if (p->pid > 0 && immediate) {
			kill(-p->pid, SIGKILL);
			p->stopping = 1;
			p->kill_at = 0;
		} else if (p->pid > 0 && !p->stopping) {
			kill(p->pid, SIGTERM);
			p->stopping = 1;
			p->kill_at = lg_now_ns() + r->conf.stop_grace_ms * LG_NS_PER_MS;
		}
	}
	if (immediate)
		log_info("app %s: stopping run %u at once (SIGKILL)", r->conf.name, r->serial);
	else
		log_info("app %s: stopping run %u (SIGTERM, SIGKILL after %llu ms)", r->conf.name,
		    r->serial, (unsigned long long)r->conf.stop_grace_ms);
}

int
lg_app_staged(struct lg_appsup *s, char *err, size_t cap)
{
	int all = 1;

	if (s->failed_staged) {
		snprintf(err, cap, "%s", s->why);
		lg_app_unstage(s);
		return -1;
	}
	for (int i = 0; i < s->nruns; i++)
		if (s->runs[i]->staged)
			all &= s->runs[i]->up;
	return all;
}

void
lg_app_commit(struct lg_appsup *s, uint32_t gen_id)
{
	for (int i = 0; i < s->nruns; i++) {
		struct run *r = s->runs[i], *old;

		if (r->state == RUN_ACTIVE && r->stop_after == UINT32_MAX) {
			r->state = RUN_OLD; /* its app was removed */
			r->stop_after = gen_id;
		}
		if (r->state != RUN_STAGED)
			continue;
		r->staged = 0;
		if ((old = active_named(s, r->conf.name)) != NULL) {
			r->restarts += old->restarts; /* the app's counter, not the run's */
			old->state = RUN_OLD;
			old->stop_after = gen_id;
		}
		r->state = RUN_ACTIVE;
		r->from_gen = gen_id;
	}
}

void
lg_app_unstage(struct lg_appsup *s)
{
	s->failed_staged = 0;
	for (int i = 0; i < s->nruns; i++) {
		if (s->runs[i]->staged)
			stop_run(s->runs[i], 0);
		s->runs[i]->staged = 0;
		if (s->runs[i]->state == RUN_ACTIVE)
			s->runs[i]->stop_after = 0;
	}
}

int
lg_app_ready(const struct lg_appsup *s)
{
	if (s->failed_initial)
		return 0;
	for (int i = 0; i < s->nruns; i++)
		if (s->runs[i]->state == RUN_ACTIVE && !s->runs[i]->up)
			return 0;
	return 1;
}

int
lg_app_failed(const struct lg_appsup *s, char *err, size_t cap)
{
	if (!s->failed_initial)
		return 0;
	snprintf(err, cap, "%s", s->why);
	return 1;
}

void
lg_app_close_in_child(void *arg)
{
	const struct lg_appsup *s = arg;

	for (int i = 0; s != NULL && i < s->nruns; i++)
		for (int k = 0; k < s->runs[i]->n; k++) {
			const struct lg_app_proc *p = &s->runs[i]->proc[k];

			if (p->out >= 0)
				close(p->out);
			if (p->probe >= 0)
				close(p->probe);
		}
}

int
lg_app_pollfds(const struct lg_appsup *s, struct pollfd *pfd, int max)
{
	int n = 0;

	for (int i = 0; i < s->nruns; i++)
		for (int k = 0; k < s->runs[i]->n; k++) {
			const struct lg_app_proc *p = &s->runs[i]->proc[k];

			if (p->out >= 0 && n < max)
				pfd[n++] = (struct pollfd){ .fd = p->out, .events = POLLIN };
			if (p->probe >= 0 && n < max)
				pfd[n++] = (struct pollfd){ .fd = p->probe,
				    .events = p->probe_sent ? POLLIN : POLLOUT };
		}
	return n;
}

/* The run cannot start: said once, its processes stopped, the reason kept in s for the
 * master (a start-up's run or a pending reload's). */
static void
fail_run(struct lg_appsup *s, struct run *r, const char *what)
{
	char tail[400];

	if (r->failed)
		return;
	lg_appproc_tail_text(&r->tail, tail, sizeof(tail));
	snprintf(r->why, sizeof(r->why), "app %s %s; its last output: %s", r->conf.name, what,
	    tail[0] ? tail : "(none)");
	r->failed = 1;
	log_error("%s", r->why);
	if ((r->initial && !s->failed_initial) || (r->staged && !s->failed_staged))
		snprintf(s->why, sizeof(s->why), "%s", r->why);
	s->failed_initial |= r->initial;
	s->failed_staged |= r->staged;
	stop_run(r, 0);
}

/* A process of r not ready within ready_timeout_ms of its start: before the run was up it
 * fails the run; after, the process is killed and restarted as one that died young. */
static void
check_ready_timeout(struct lg_appsup *s, struct run *r, struct lg_app_proc *p, uint64_t now,
    uint64_t *next)
{
	uint64_t limit = p->started_ns + r->conf.ready_timeout_ms * LG_NS_PER_MS;
	char what[256];

	if (p->pid <= 0 || p->ready || p->stopping)
		return;
	if (now < limit) {
		*next = limit < *next ? limit : *next;
		return;
	}
	snprintf(what, sizeof(what), "process %d was not ready within ready_timeout_ms %llu "
	    "(ready_path %.60s, each probe answered within probe_timeout_ms %llu)", p->index,
	    (unsigned long long)r->conf.ready_timeout_ms,
	    r->conf.ready_path[0] ? r->conf.ready_path : "none: a connection",
	    (unsigned long long)r->conf.probe_timeout_ms);
	if (!r->up) {
		fail_run(s, r, what);
		return;
	}
	log_warn("app %s[%d] pid=%d: %s; killing and restarting it", r->conf.name, p->index,
	    (int)p->pid, what);
	kill(-p->pid, SIGKILL);
	p->started_ns = now - QUICK_DEATH_NS / 2; /* counted as a death before ready */
}

static void
tick_proc(struct lg_appsup *s, struct run *r, struct lg_app_proc *p, uint64_t now,
    uint64_t *next)
{
	if (p->out >= 0)
		lg_appproc_read(r->conf.name, p, &r->tail, 0);
	if (p->pid > 0 && p->kill_at) {
		if (now >= p->kill_at) {
			log_warn("app %s[%d] pid=%d still running %llu ms after SIGTERM (stop_grace_ms); "
			    "SIGKILL",
			    r->conf.name, p->index, (int)p->pid,
			    (unsigned long long)r->conf.stop_grace_ms);
			kill(-p->pid, SIGKILL);
			p->kill_at = 0;
		} else {
			*next = p->kill_at < *next ? p->kill_at : *next;
		}
	}
	if (r->state == RUN_STOPPING || s->stopping)
		return;
	if (p->pid == 0) {
		if (now >= p->respawn_at)
			start_proc(s, r, p);
		else
			*next = p->respawn_at < *next ? p->respawn_at : *next;
	}
	lg_appproc_probe(&r->conf, p, now, next);
	check_ready_timeout(s, r, p, now, next);
	if (lg_appproc_live(&r->conf, p, now, next)) {
		log_warn("app %s[%d] pid=%d failed %u liveness probes in a row; killing and "
		    "restarting it", r->conf.name, p->index, (int)p->pid, p->live_fails);
		kill(-p->pid, SIGKILL); /* a stopped process too; reaped and restarted as a death */
		p->live_fails = 0;
		p->live_at = UINT64_MAX; /* no probe of it until it is reaped */
	}
}

/* Frees runs that are stopping and have no process left. */
static void
sweep(struct lg_appsup *s)
{
	for (int i = 0; i < s->nruns; i++) {
		struct run *r = s->runs[i];
		int alive = 0;

		for (int k = 0; k < r->n; k++)
			alive += r->proc[k].pid > 0 || r->proc[k].out >= 0;
		if (r->state != RUN_STOPPING || alive)
			continue;
		run_unlink(r);
		log_info("app %s: run %u stopped", r->conf.name, r->serial);
		free(r);
		s->runs[i--] = s->runs[--s->nruns];
	}
}

void
lg_app_tick(struct lg_appsup *s, uint64_t now, uint64_t *next, uint32_t oldest)
{
	for (int i = 0; i < s->nruns; i++) {
		struct run *r = s->runs[i];
		int ready = 0;

		if (r->state == RUN_OLD && oldest >= r->stop_after)
			stop_run(r, 0);
		for (int k = 0; k < r->n; k++) {
			tick_proc(s, r, &r->proc[k], now, next);
			ready += r->proc[k].ready;
		}
		if (!r->up && !r->failed && ready == r->n && r->state != RUN_STOPPING) {
			r->up = 1;
			log_info("app %s: %d process(es) ready (run %u)", r->conf.name, r->n,
			    r->serial);
		}
	}
	sweep(s);
}

/* Process p of r died with status: its death before ready counts toward giving up. */
static void
plan_restart(struct lg_appsup *s, struct run *r, struct lg_app_proc *p, int status,
    uint64_t now)
{
	char what[160];
	int young = !p->ready || now - p->started_ns < QUICK_DEATH_NS;

	p->backoff_ns = !young ? 0 : p->backoff_ns ? p->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (p->backoff_ns > BACKOFF_MAX_NS)
		p->backoff_ns = BACKOFF_MAX_NS;
	p->fails = p->ready ? 0 : p->fails + 1;
	p->quick = now - p->started_ns < SHORT_LIFE_NS ? p->quick + 1 : 0;
	p->ready = 0;
	p->respawn_at = now + p->backoff_ns;
	if (!r->up && p->fails >= r->conf.start_failures) {
		snprintf(what, sizeof(what), "process %d died %u time(s) in a row before it was "
		    "ready (last: %s %d)", p->index, p->fails, WIFSIGNALED(status) ? "signal" :
		    "exit status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		fail_run(s, r, what);
		return;
	}
	r->restarts++;
	if (p->fails >= r->conf.start_failures)
		log_error("app %s[%d] died %u times in a row before it was ready; still retrying "
		    "every %llu ms", r->conf.name, p->index, p->fails,
		    (unsigned long long)(p->backoff_ns / LG_NS_PER_MS));
	else if (p->quick >= r->conf.start_failures) /* ready each time, dying soon after */
		log_error("app %s[%d] keeps failing: died %u times in a row within %llu s of "
		    "starting (last: %s %d); still retrying every %llu ms", r->conf.name, p->index,
		    p->quick, (unsigned long long)(SHORT_LIFE_NS / LG_NS_PER_MS / 1000),
		    WIFSIGNALED(status) ? "signal" : "exit status",
		    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
		    (unsigned long long)(p->backoff_ns / LG_NS_PER_MS));
}

int
lg_app_reaped(struct lg_appsup *s, pid_t pid, int status)
{
	for (int i = 0; s != NULL && i < s->nruns; i++)
		for (int k = 0; k < s->runs[i]->n; k++) {
			struct run *r = s->runs[i];
			struct lg_app_proc *p = &r->proc[k];
			int ours = p->stopping || r->state == RUN_STOPPING || s->stopping;

			if (p->pid != pid)
				continue;
			lg_appproc_read(r->conf.name, p, &r->tail, 1);
			lg_appproc_close_output(r->conf.name, p, &r->tail);
			lg_appproc_probe_close(p);
			kill(-pid, SIGKILL); /* what it left in its process group */
			if (WIFSIGNALED(status))
				lg_log_write(ours ? LG_LOG_INFO : LG_LOG_WARN, __func__, "app %s[%d] "
				    "pid=%d killed by signal %d", r->conf.name, k, (int)pid,
				    WTERMSIG(status));
			else
				lg_log_write(ours ? LG_LOG_INFO : LG_LOG_WARN, __func__, "app %s[%d] "
				    "pid=%d exited with status %d", r->conf.name, k, (int)pid,
				    WEXITSTATUS(status));
			p->pid = 0;
			p->kill_at = 0;
			if (!ours)
				plan_restart(s, r, p, status, lg_now_ns());
			return 1;
		}
	return 0;
}

void
lg_app_stop_all(struct lg_appsup *s, int immediate)
{
	/* an immediate stop after a graceful one still kills what is in its SIGTERM grace */
	if (s->stopping >= (immediate ? 2 : 1))
		return;
	s->stopping = immediate ? 2 : 1;
	for (int i = 0; i < s->nruns; i++)
		stop_run(s->runs[i], immediate);
}

int
lg_app_alive(const struct lg_appsup *s)
{
	int n = 0;

	for (int i = 0; s != NULL && i < s->nruns; i++)
		for (int k = 0; k < s->runs[i]->n; k++)
			n += s->runs[i]->proc[k].pid > 0;
	return n;
}

int
lg_app_owns(const void *arg, pid_t pid)
{
	const struct lg_appsup *s = arg;

	for (int i = 0; s != NULL && i < s->nruns; i++)
		for (int k = 0; k < s->runs[i]->n; k++)
			if (s->runs[i]->proc[k].pid == pid)
				return 1;
	return 0;
}

uint64_t
lg_app_grace_ms(const struct lg_appsup *s, uint64_t dflt)
{
	uint64_t ms = 0;

	for (int i = 0; s != NULL && i < s->nruns; i++)
		if (s->runs[i]->conf.stop_grace_ms > ms)
			ms = s->runs[i]->conf.stop_grace_ms;
	return s != NULL && s->nruns > 0 ? ms : dflt;
}

/* Whether generation gen routes to run r: r became active at or before it and was not
 * replaced (or removed) by then. */
static int
run_of_gen(const struct run *r, uint32_t gen)
{
	if (r->staged || r->failed || r->state == RUN_STOPPING)
		return 0;
	return r->from_gen <= gen && (r->state != RUN_OLD || gen < r->stop_after);
}

void
lg_app_publish(const struct lg_appsup *s, struct lg_master_page *mp, uint32_t gen)
{
	int row = 0;

	for (int i = 0; i < s->nruns && row < LG_APP_ROWS; i++) {
		const struct run *r = s->runs[i];
		struct lg_app_row *w = &mp->apps[row];
		uint32_t ready = 0, running = 0;

		if (!run_of_gen(r, gen))
			continue;
		for (int k = 0; k < r->n; k++) {
			ready |= (uint32_t)(r->proc[k].ready && r->proc[k].pid > 0) << k;
			running += r->proc[k].pid > 0;
		}
		_Static_assert(sizeof(w->name) > LG_APP_NAME_LEN, "an app row holds its name");
		memcpy(w->name, r->conf.name, sizeof(w->name));
		atomic_store(&w->processes, (uint16_t)r->n);
		atomic_store(&w->running, (uint16_t)running);
		atomic_store(&w->ready_mask, ready);
		atomic_store(&w->restarts, r->restarts);
		row++;
	}
	atomic_store(&mp->napps, (uint32_t)row);
}

int
lg_app_servers(const struct lg_appsup *s, const char *name, struct lg_app_server *out, int max)
{
	const struct run *best = NULL;

	/* the newest run that is not stopping: a reload's staged one before the active one */
	for (int i = 0; i < s->nruns; i++) {
		const struct run *r = s->runs[i];
		const char *up = r->conf.upstream[0] ? r->conf.upstream : r->conf.name;

		if ((r->state != RUN_ACTIVE && !r->staged) || r->failed ||
		    (strcmp(r->conf.name, name) && strcmp(up, name)))
			continue;
		if (best == NULL || r->serial > best->serial)
			best = r;
	}
	if (best == NULL)
		return -1;
	for (int k = 0; k < best->n && k < max; k++) {
		const struct lg_app_proc *p = &best->proc[k];

		if (p->sock[0])
			snprintf(out[k].addr, sizeof(out[k].addr), "unix:%s", p->sock);
		else if (p->port > 0)
			snprintf(out[k].addr, sizeof(out[k].addr), "127.0.0.1:%d", p->port);
		else
			out[k].addr[0] = '\0';
		out[k].ready = p->ready && p->pid > 0;
		out[k].pid = p->pid;
	}
	return best->n;
}

void
lg_app_free(struct lg_appsup *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < s->nruns; i++) {
		for (int k = 0; k < s->runs[i]->n; k++) {
			struct lg_app_proc *p = &s->runs[i]->proc[k];

			if (p->pid > 0)
				kill(-p->pid, SIGKILL);
			if (p->out >= 0)
				close(p->out);
			lg_appproc_probe_close(p);
		}
		run_unlink(s->runs[i]);
		free(s->runs[i]);
	}
	if (s->dir_ours) /* whatever RUNTIME_DIRECTORY says: one it names is systemd's */
		rmdir(s->dir);
	free(s);
}
