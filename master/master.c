#include "master/master.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "cpupool/compute.h"
#include "cpupool/jobs.h"
#include "master/notify.h"
#include "shm/arena.h"
#include "shm/channel.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "worker/loop.h"

enum role { ROLE_LOOP = 1, ROLE_COMPUTE = 2 };

#define BACKOFF_MIN_NS     (100 * LG_NS_PER_MS)
#define BACKOFF_MAX_NS     (5000 * LG_NS_PER_MS)
#define QUICK_DEATH_NS     (1000 * LG_NS_PER_MS) /* dying sooner than this counts as a crash loop */
#define CRASH_LOOP_LIMIT   10                     /* quick deaths in a row before giving up */
#define TRIM_PERIOD_NS     (1000 * LG_NS_PER_MS)
#define TRIM_MIN_BYTES     (1u << 20)             /* punch regions of slots that used >= 1 MiB */

/* The child table (OpenBSD httpd procs[], nginx stop escalation): one row per process slot,
 * loop workers first, then compute processes; row k uses proc page k of the arena. */
struct child {
	enum role role;
	uint32_t index;        /* within its role */
	pid_t pid;             /* 0 while not running */
	uint32_t generation;   /* incarnations so far */
	uint32_t restarts;
	uint32_t quick_deaths;
	int killed_by_us;      /* deadline kill: an expected death, not a crash */
	int stuck;             /* SIGKILLed for a stale heartbeat (still counts as a crash) */
	uint64_t started_ns;
	uint64_t respawn_at;   /* CLOCK_MONOTONIC ns; valid while pid == 0 */
	uint64_t backoff_ns;
	uint64_t kill_at;      /* escalate SIGTERM to SIGKILL at this time; 0 = none */
};

struct master {
	const struct lg_config *cfg;
	const struct lg_sizing *sz;
	pid_t pid;
	int listen_fd;
	int sigfd;
	struct lg_arena arena;
	struct lg_channels ch;
	struct child *children;
	uint32_t nloops, ncompute, nchildren;
	int stopping;          /* 0 running, 1 graceful drain, 2 immediate */
	int computes_stopped;
	int exit_code;
	uint64_t drain_deadline;
	uint64_t next_trim;
	int ready;             /* READY=1 sent: every loop worker started accepting */
	uint64_t watchdog_ns;  /* systemd watchdog interval; 0 when off */
	uint64_t next_watchdog;
	uint64_t next_status;
};

static void begin_stop(struct master *m, int how);

/* An exit we caused (drain, deadline kill) is news; any other is a warning. */
#define log_exit(m, c, ...) do { \
	if ((m)->stopping || (c)->killed_by_us) log_info(__VA_ARGS__); \
	else log_warn(__VA_ARGS__); \
} while (0)

static const char *
role_name(enum role r)
{
	return r == ROLE_LOOP ? "loop" : "compute";
}

/* SIGUSR1 in a child: lg_log_reopen is async-signal-safe (open, dup2, close). */
static void
reopen_log_handler(int sig)
{
	int saved = errno;

	(void)sig;
	lg_log_reopen();
	errno = saved;
}

/* Runs in the freshly forked child: drop the master's signal set-up, die with the master,
 * keep only this role's descriptors, and run the role. Never returns. */
static void
child_main(struct master *m, struct child *c)
{
	struct lg_proc_page *page = &m->arena.procs[c - m->children];
	sigset_t none;
	int rc;

	/* PR_SET_PDEATHSIG, then check the parent did not die before it took effect
	 * (prctl(2)): a SIGKILLed master leaves nothing running. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != m->pid)
		_exit(1);
	close(m->sigfd);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR1, reopen_log_handler);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	lg_log_set_role(role_name(c->role), (int)c->index);
	prctl(PR_SET_NAME, c->role == ROLE_LOOP ? "lagless-loop" : "lagless-compute");
	atomic_store(&page->pid, (int32_t)getpid());
	atomic_store(&page->job, LG_NO_JOB);
	/* A loop worker publishes its first heartbeat once it accepts; readiness waits for it. */
	atomic_store(&page->heartbeat_ns, c->role == ROLE_LOOP ? 0 : lg_now_ns());
	page->role = (uint32_t)c->role;
	if (c->role == ROLE_LOOP) {
		struct lg_loop_env env = {
			.cfg = m->cfg, .arena = &m->arena, .ch = &m->ch, .listen_fd = m->listen_fd,
			.index = c->index, .nloops = m->nloops, .page = page,
		};
		lg_channels_keep(&m->ch, 'l', c->index);
		rc = lg_loop_main(&env);
	} else {
		struct lg_compute_env env = {
			.cfg = m->cfg, .arena = &m->arena, .ch = &m->ch, .index = c->index,
			.page = page,
		};
		close(m->listen_fd); /* a compute process holds no client or listen socket */
		lg_channels_keep(&m->ch, 'c', c->index);
		rc = lg_compute_main(&env);
	}
	_exit(rc);
}

static void
spawn(struct master *m, struct child *c)
{
	pid_t pid = fork();

	if (pid == -1) {
		log_error("fork %s[%u]: %s", role_name(c->role), c->index, strerror(errno));
		c->backoff_ns = c->backoff_ns ? c->backoff_ns : BACKOFF_MIN_NS;
		c->respawn_at = lg_now_ns() + c->backoff_ns;
		return;
	}
	if (pid == 0)
		child_main(m, c);
	c->pid = pid;
	c->generation++;
	c->started_ns = lg_now_ns();
	c->kill_at = 0;
	c->killed_by_us = 0;
	c->stuck = 0;
	atomic_store(&m->arena.procs[c - m->children].pid, (int32_t)pid);
	if (c->generation > 1)
		log_info("respawn %s[%u] pid=%d (restart %u)", role_name(c->role), c->index,
		    (int)pid, c->restarts);
}

/* A compute process died: fail the job it was running (or had taken from the channel), and
 * tell the owner loop so its client gets 502 now instead of waiting for the deadline. */
static void
reclaim_compute_job(struct master *m, struct lg_proc_page *page)
{
	uint64_t job = atomic_exchange(&page->job, LG_NO_JOB);
	uint64_t now = lg_now_ns();

	if (job == LG_NO_JOB || (job >> 32) >= m->arena.nslots)
		return;
	uint32_t slot = (uint32_t)(job >> 32), gen = (uint32_t)job;
	struct lg_slot *s = &m->arena.slots[slot];
	int r = lg_slot_finish(s, gen, LG_JOB_CRASHED, now);

	if (r == -1 && lg_slot_start(s, gen, 0, now) == 0) /* died between naming and starting */
		r = lg_slot_finish(s, gen, LG_JOB_CRASHED, now);
	if (r != 1)
		return;
	uint32_t owner = lg_slot_owner(atomic_load(&s->word));
	struct lg_msg done = { .type = LG_MSG_DONE, .slot = slot, .gen = gen,
	    .status = LG_JOB_CRASHED };
	if (owner >= m->nloops || lg_chan_send(m->ch.done[owner][1], &done, MSG_DONTWAIT) == -1)
		log_warn("cannot tell loop %u that slot %u failed: %s", owner, slot, strerror(errno));
}

/* lagless_process_restarts_total{role,reason}: the master is the only writer of its page. */
static void
count_restart(struct master *m, const struct child *c, int status)
{
	enum lg_restart_reason why = c->killed_by_us ? LG_RESTART_DEADLINE :
	    WIFSIGNALED(status) ? LG_RESTART_CRASH : LG_RESTART_EXIT;

	lg_stats_add(&m->arena.master->restarts[c->role - 1][why], 1);
}

static void
on_exit_status(struct master *m, struct child *c, int status)
{
	struct lg_proc_page *page = &m->arena.procs[c - m->children];
	uint64_t now = lg_now_ns();
	int n;

	atomic_store(&page->pid, 0);
	atomic_store(&page->state, LG_PROC_DOWN); /* the writer is dead; the entry is ours now */
	if (c->role == ROLE_COMPUTE)
		reclaim_compute_job(m, page);
	else if ((n = lg_slot_reclaim_owner(&m->arena, c->index)) > 0)
		log_info("reclaimed %d slot(s) of loop[%u]", n, c->index);
	if (WIFSIGNALED(status))
		log_exit(m, c, "%s[%u] pid=%d killed by signal %d", role_name(c->role), c->index,
		    (int)c->pid, WTERMSIG(status));
	else
		log_exit(m, c, "%s[%u] pid=%d exited with status %d", role_name(c->role),
		    c->index, (int)c->pid, WEXITSTATUS(status));
	c->pid = 0;
	if (m->stopping)
		return;
	if (c->killed_by_us || now - c->started_ns >= QUICK_DEATH_NS) {
		c->quick_deaths = 0;
		c->backoff_ns = 0;
	} else {
		c->quick_deaths++;
		c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : BACKOFF_MIN_NS;
		if (c->backoff_ns > BACKOFF_MAX_NS)
			c->backoff_ns = BACKOFF_MAX_NS;
	}
	if (c->quick_deaths >= CRASH_LOOP_LIMIT) {
		log_error("%s[%u] died %u times in a row within %llu ms of starting; giving up",
		    role_name(c->role), c->index, c->quick_deaths,
		    (unsigned long long)(QUICK_DEATH_NS / LG_NS_PER_MS));
		m->exit_code = 1;
		begin_stop(m, 2);
		return;
	}
	c->restarts++;
	c->respawn_at = now + c->backoff_ns;
	count_restart(m, c, status);
}

static void
reap(struct master *m)
{
	pid_t pid;
	int status;

	/* As PID 1 in a container this also reaps orphans that were reparented to us. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (uint32_t k = 0; k < m->nchildren; k++) {
			if (m->children[k].pid == pid) {
				on_exit_status(m, &m->children[k], status);
				break;
			}
		}
	}
}

static void
signal_role(struct master *m, enum role role, int sig)
{
	for (uint32_t k = 0; k < m->nchildren; k++) {
		struct child *c = &m->children[k];

		if (c->pid > 0 && c->role == role) {
			kill(c->pid, sig);
			if (sig == SIGTERM && role == ROLE_COMPUTE)
				c->kill_at = lg_now_ns() + m->cfg->kill_grace_ms * LG_NS_PER_MS;
		}
	}
}

/* how: 1 graceful drain (SIGTERM/SIGINT), 2 immediate (SIGQUIT, crash loop). */
static void
begin_stop(struct master *m, int how)
{
	if (m->stopping >= how)
		return;
	log_info("%s stop", how == 1 ? "graceful" : "immediate");
	lg_notify_stopping();
	if (m->listen_fd >= 0) {
		close(m->listen_fd);
		m->listen_fd = -1;
	}
	m->stopping = how;
	atomic_store(&m->arena.master->stopping, (uint32_t)how); /* /ready answers 503 from now */
	if (how == 1) {
		m->drain_deadline = lg_now_ns() + m->cfg->drain_timeout_ms * LG_NS_PER_MS;
		signal_role(m, ROLE_LOOP, SIGTERM);
	} else {
		signal_role(m, ROLE_LOOP, SIGKILL);
		signal_role(m, ROLE_COMPUTE, SIGKILL);
	}
}

/* A loop worker asked for the runner of (slot, gen) to be killed: its deadline passed. The
 * job id is compared with the compute process's own page so a process that already moved on
 * to another job is left alone. */
static void
handle_kill(struct master *m, const struct lg_msg *msg)
{
	uint64_t job = ((uint64_t)msg->slot << 32) | msg->gen;

	for (uint32_t k = m->nloops; k < m->nchildren; k++) {
		struct child *c = &m->children[k];

		if (c->pid <= 0 || atomic_load(&m->arena.procs[k].job) != job)
			continue;
		log_info("killing compute[%u] pid=%d: its loop gave up on slot %u "
		    "(deadline or client gone)", c->index, (int)c->pid, msg->slot);
		kill(c->pid, SIGTERM);
		c->killed_by_us = 1;
		c->kill_at = lg_now_ns() + m->cfg->kill_grace_ms * LG_NS_PER_MS;
		return;
	}
}

static void
read_ctl(struct master *m)
{
	struct lg_msg msg;
	int r;

	while ((r = lg_chan_recv(m->ch.ctl[1], &msg, MSG_DONTWAIT)) != -1) {
		if (r == 1 && msg.type == LG_MSG_KILL && msg.slot < m->arena.nslots)
			handle_kill(m, &msg);
		else
			log_warn("dropped a control header that failed validation");
	}
}

static void
read_signals(struct master *m)
{
	struct signalfd_siginfo si;

	while (read(m->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap(m);
			break;
		case SIGTERM:
		case SIGINT:
			begin_stop(m, 1);
			break;
		case SIGQUIT:
			begin_stop(m, 2);
			break;
		case SIGHUP:
			log_warn("SIGHUP: configuration reload is not supported yet; ignored");
			break;
		case SIGUSR1:
			/* Log rotation: reopen ours, then every child reopens its own fd 2. */
			if (lg_log_reopen() == -1)
				log_error("cannot reopen the error log: %s", strerror(errno));
			for (uint32_t k = 0; k < m->nchildren; k++)
				if (m->children[k].pid > 0)
					kill(m->children[k].pid, SIGUSR1);
			log_info("SIGUSR1: log file reopened");
			break;
		}
	}
}

/* True when every loop worker row has a process that has set up its loop (its page says
 * RUNNING or DRAINING) and whose heartbeat is younger than max_age_ns. */
static int
loops_healthy(struct master *m, uint64_t now, uint64_t max_age_ns)
{
	for (uint32_t k = 0; k < m->nloops; k++) {
		uint64_t hb = atomic_load(&m->arena.procs[k].heartbeat_ns);

		if (m->children[k].pid <= 0 || hb == 0 || (hb < now && now - hb > max_age_ns) ||
		    atomic_load(&m->arena.procs[k].state) == LG_PROC_DOWN)
			return 0;
	}
	return 1;
}

/* systemd: READY=1 once every loop worker accepts, STATUS= once a second, WATCHDOG=1 only while
 * every loop worker's heartbeat is fresh (a stuck loop stops the pings). Returns the time of the
 * next duty. */
static uint64_t
notify_duties(struct master *m, uint64_t now, uint64_t next)
{
	uint32_t census[8];
	char status[160];

	if (m->stopping)
		return next;
	if (!m->ready) {
		if (!loops_healthy(m, now, UINT64_MAX))
			return now + 10 * LG_NS_PER_MS < next ? now + 10 * LG_NS_PER_MS : next;
		m->ready = 1;
		atomic_store(&m->arena.master->ready, 1); /* /ready answers 200 from now */
		log_info("ready: %u loop worker(s) accepting, %u compute process(es)", m->nloops,
		    m->ncompute);
	}
	if (now >= m->next_status) {
		int loops = 0, computes = 0;

		lg_slot_census(&m->arena, census);
		for (uint32_t k = 0; k < m->nchildren; k++)
			*(m->children[k].role == ROLE_LOOP ? &loops : &computes) += m->children[k].pid > 0;
		snprintf(status, sizeof(status), "%d/%u loop workers, %d/%u compute, queue %u/%d, "
		    "running %u", loops, m->nloops, computes, m->ncompute, census[LG_SLOT_QUEUED],
		    m->sz->queue_capacity, census[LG_SLOT_RUNNING]);
		if (m->next_status == 0)
			lg_notify_ready(status);
		else
			lg_notify_status(status);
		m->next_status = now + 1000 * LG_NS_PER_MS;
	}
	if (m->watchdog_ns && now >= m->next_watchdog) {
		if (loops_healthy(m, now, m->watchdog_ns / 2))
			lg_notify_watchdog();
		else
			log_warn("a loop worker's heartbeat is stale; withholding the watchdog ping");
		m->next_watchdog = now + m->watchdog_ns / 4;
	}
	if (m->next_status < next)
		next = m->next_status;
	if (m->watchdog_ns && m->next_watchdog < next)
		next = m->next_watchdog;
	return next;
}

/* Once a second: punch the pages of large finished jobs and publish how much of the arena is
 * backed by memory. */
static void
housekeeping(struct master *m, uint64_t now)
{
	struct stat st;

	if (now < m->next_trim)
		return;
	for (uint32_t i = 0; i < m->arena.nslots; i++)
		lg_slot_trim(&m->arena, i, TRIM_MIN_BYTES);
	m->next_trim = now + TRIM_PERIOD_NS;
	/* st_blocks counts the pages the sparse memfd really holds (stat(2)). */
	if (fstat(m->arena.fd, &st) == 0)
		atomic_store(&m->arena.master->shm_bytes, (uint64_t)st.st_blocks * 512u);
}

/* A loop worker refreshes its heartbeat every 100 ms from a libev timer; one that has not done
 * so for --stuck-loop-ms is blocked (a handler that never returns, a livelock, SIGSTOP) and
 * serves nobody, so it is killed and the reaper replaces it. Loops never run jobs, so heavy
 * load does not delay the tick by more than one callback. Lowers *next to the next check. */
static void
check_heartbeats(struct master *m, uint64_t now, uint64_t *next)
{
	uint64_t limit = m->cfg->stuck_loop_ms * LG_NS_PER_MS;

	for (uint32_t k = 0; k < m->nloops; k++) {
		struct child *c = &m->children[k];
		uint64_t hb = atomic_load(&m->arena.procs[k].heartbeat_ns);

		if (c->pid <= 0 || c->killed_by_us || c->stuck)
			continue;
		if (hb < c->started_ns) /* the new incarnation has not written it yet */
			hb = c->started_ns;
		if (hb >= now || now - hb < limit) {
			if (hb + limit < *next)
				*next = hb + limit;
			continue;
		}
		log_warn("loop[%u] pid=%d is stuck: no heartbeat for %llu ms (limit %llu ms); "
		    "killing and replacing it", c->index, (int)c->pid,
		    (unsigned long long)((now - hb) / LG_NS_PER_MS),
		    (unsigned long long)m->cfg->stuck_loop_ms);
		kill(c->pid, SIGKILL);
		c->stuck = 1;
	}
}

/* Timers: respawns, SIGKILL escalation, the drain deadline, page trimming, systemd, loop
 * heartbeats. Returns the poll timeout in ms until the next one. */
static int
run_timers(struct master *m)
{
	uint64_t now = lg_now_ns(), next = now + 1000 * LG_NS_PER_MS;
	int alive_loops = 0, alive = 0;

	for (uint32_t k = 0; k < m->nchildren; k++) {
		struct child *c = &m->children[k];

		if (c->pid == 0 && !m->stopping) {
			if (c->respawn_at <= now)
				spawn(m, c);
			else if (c->respawn_at < next)
				next = c->respawn_at;
		}
		if (c->pid > 0 && c->kill_at) {
			if (c->kill_at <= now) {
				log_warn("%s[%u] pid=%d ignored SIGTERM; SIGKILL", role_name(c->role),
				    c->index, (int)c->pid);
				kill(c->pid, SIGKILL);
				c->kill_at = 0;
			} else if (c->kill_at < next) {
				next = c->kill_at;
			}
		}
		alive += c->pid > 0;
		alive_loops += c->pid > 0 && c->role == ROLE_LOOP;
	}
	if (m->stopping == 1 && alive_loops == 0 && !m->computes_stopped) {
		/* Every loop has drained, so no job result is awaited any more. */
		signal_role(m, ROLE_COMPUTE, SIGTERM);
		m->computes_stopped = 1;
	}
	if (m->stopping == 1 && alive > 0 && now >= m->drain_deadline) {
		log_warn("drain timeout (%llu ms) passed with %d process(es) left; killing them",
		    (unsigned long long)m->cfg->drain_timeout_ms, alive);
		begin_stop(m, 2);
	}
	if (m->stopping == 1 && m->drain_deadline < next)
		next = m->drain_deadline;
	if (!m->stopping)
	if (!m->stopping) {
		check_heartbeats(m, now, &next);
		housekeeping(m, now);
	}
	next = notify_duties(m, now, next);
	if (m->stopping && alive == 0)
		return -2;
	return next <= now ? 0 : (int)((next - now + LG_NS_PER_MS - 1) / LG_NS_PER_MS);
}

/* The listening socket: the one systemd passed (socket activation), else our own. */
static int
open_listener(struct master *m)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if ((m->listen_fd = lg_notify_listen_fd()) >= 0) {
		if (getsockname(m->listen_fd, (struct sockaddr *)&ss, &len) == 0) {
			int v6 = ss.ss_family == AF_INET6;

			inet_ntop(ss.ss_family, v6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr :
			    (void *)&((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
			port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
			    ((struct sockaddr_in *)&ss)->sin_port);
		}
		log_info("listening on %s:%d (socket activation, fd %d)", addr, port, m->listen_fd);
		return 0;
	}
	if (errno != 0) {
		log_error("socket activation: %s", strerror(errno));
		return -1;
	}
	m->listen_fd = lg_master_listen(m->cfg->listen_addr, m->cfg->port, m->cfg->backlog, &port);
	if (m->listen_fd == -1) {
		log_error("cannot listen on %s:%d: %s", m->cfg->listen_addr, m->cfg->port,
		    strerror(errno));
		return -1;
	}
	log_info("listening on %s:%d", m->cfg->listen_addr, port);
	return 0;
}

/* The cpu.stat file of the cgroup holding the tightest quota (cgroup-v2.rst "cpu.stat";
 * sched-bwc.rst for v1's nr_throttled/throttled_time), where throttling shows. */
static void
cpu_stat_path(char *out, size_t cap, const struct lg_sizing *sz)
{
	const char *root = getenv("LAGLESS_SYSROOT");
	const char *slash = strrchr(sz->quota_source, '/');

	out[0] = '\0';
	if (sz->quota < 0 || slash == NULL)
		return;
	snprintf(out, cap, "%s%.*s/cpu.stat", root ? root : "", (int)(slash - sz->quota_source),
	    sz->quota_source);
}

/* Fills the master page before the first fork: what /status and /metrics report about
 * start-up and sizing. */
static void
publish_sizing(struct master *m, const struct lg_sizing *sz)
{
	struct lg_master_page *mp = m->arena.master;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	atomic_store(&mp->pid, (int32_t)m->pid);
	mp->start_unix_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	mp->start_mono_ns = lg_now_ns();
	mp->budget = (uint32_t)sz->budget;
	mp->quota = sz->quota;
	mp->cpus_override = sz->cpus_override;
	mp->online = sz->online;
	mp->affinity = sz->affinity;
	mp->cpuset = sz->cpuset;
	mp->loop_workers = m->nloops;
	mp->compute_workers = m->ncompute;
	mp->queue_capacity = (uint32_t)sz->queue_capacity;
	snprintf(mp->cgroup, sizeof(mp->cgroup), "%s", sz->cgroup_version);
	snprintf(mp->rounding, sizeof(mp->rounding), "%s",
	    sz->rounding == LG_ROUND_CEIL ? "ceil" : "floor");
	cpu_stat_path(mp->cpu_stat, sizeof(mp->cpu_stat), sz);
}

static int
setup(struct master *m, const struct lg_config *cfg, const struct lg_sizing *sz)
{
	sigset_t set;
	uint64_t out_cap;

	memset(m, 0, sizeof(*m));
	m->cfg = cfg;
	m->sz = sz;
	m->pid = getpid();
	m->listen_fd = m->sigfd = -1;
	m->nloops = (uint32_t)sz->loop_workers;
	m->ncompute = (uint32_t)sz->compute_workers;
	m->nchildren = m->nloops + m->ncompute;
	/* Signals become readable events (signalfd(2)); blocked signals are also delivered to
	 * PID 1 in a PID namespace, where default-action signals would be dropped. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((m->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) == -1) {
		log_error("signalfd: %s", strerror(errno));
		return -1;
	}
	if (open_listener(m) == -1)
		return -1;
	out_cap = lg_jobs_compress_bound(cfg->max_body);
	if (lg_arena_create(&m->arena, m->ncompute + (uint32_t)sz->queue_capacity, m->nchildren,
	    cfg->max_body ? cfg->max_body : 1, out_cap < LG_PAGE ? LG_PAGE : out_cap) == -1) {
		log_error("cannot create the shared-memory arena: %s", strerror(errno));
		return -1;
	}
	if (lg_channels_create(&m->ch, m->nloops) == -1) {
		log_error("cannot create the channels: %s", strerror(errno));
		return -1;
	}
	if ((m->children = calloc(m->nchildren, sizeof(*m->children))) == NULL)
		return -1;
	m->watchdog_ns = lg_notify_watchdog_usec() * 1000;
	for (uint32_t k = 0; k < m->nchildren; k++) {
		m->children[k].role = k < m->nloops ? ROLE_LOOP : ROLE_COMPUTE;
		m->children[k].index = k < m->nloops ? k : k - m->nloops;
	}
	publish_sizing(m, sz);
	log_info("arena: %u slots (%d running + %d queued), %llu MiB virtual", m->arena.nslots,
	    sz->compute_workers, sz->queue_capacity, (unsigned long long)(m->arena.size >> 20));
	return 0;
}

static void
teardown(struct master *m)
{
	if (m->listen_fd >= 0)
		close(m->listen_fd);
	if (m->sigfd >= 0)
		close(m->sigfd);
	lg_channels_close(&m->ch);
	lg_arena_destroy(&m->arena);
	free(m->children);
}

int
lg_master_run(const struct lg_config *cfg, const struct lg_sizing *sz)
{
	struct master m;
	int timeout;

	if (setup(&m, cfg, sz) == -1) {
		teardown(&m);
		return 1;
	}
	for (uint32_t k = 0; k < m.nchildren; k++)
		spawn(&m, &m.children[k]);
	while ((timeout = run_timers(&m)) != -2) {
		struct pollfd pfd[2] = {
			{ .fd = m.sigfd, .events = POLLIN },
			{ .fd = m.ch.ctl[1], .events = POLLIN },
		};

		if (poll(pfd, 2, timeout) == -1 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			read_signals(&m);
		if (pfd[1].revents)
			read_ctl(&m);
	}
	log_info("stopped");
	teardown(&m);
	return m.exit_code;
}
