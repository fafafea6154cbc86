#include "master/master.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "master/agent.h"
#include "master/app.h"
#include "master/site_up.h"
#include "master/gen.h"
#include "master/notify.h"
#include "master/pidfile.h"
#include "master/reload.h"
#include "master/respawn.h"
#include "master/state.h"
#include "shm/slot.h"

#define TRIM_PERIOD_NS     (250 * LG_NS_PER_MS)  /* pages of a free slot back in 0.25-0.5 s */
#define TRIM_MIN_BYTES     (1u << 20)             /* punch regions of slots that used >= 1 MiB */

static void
signal_role(struct lg_gen *g, enum lg_role role, int sig)
{
	for (uint32_t k = 0; k < g->nchildren; k++) {
		struct lg_child *c = &g->children[k];

		if (c->pid > 0 && c->role == role) {
			kill(c->pid, sig);
			if (sig == SIGTERM && role == LG_ROLE_COMPUTE)
				c->kill_at = lg_now_ns() + g->cfg.jobs.kill_grace_ms * LG_NS_PER_MS;
		}
	}
}

/* Tells g's loop workers to drain; the timers stop its compute processes once they are gone,
 * and SIGKILL what is left after the drain timeout. */
static void
retire(struct lg_gen *g, uint64_t deadline)
{
	if (g->retiring)
		return;
	g->retiring = 1;
	g->retire_deadline = deadline;
	atomic_store(&g->arena.master->stopping, 1); /* its loops' /ready answers 503 */
	signal_role(g, LG_ROLE_LOOP, SIGTERM);
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
	lg_listeners_close(&m->more);
	m->stopping = how;
	for (struct lg_gen *g = m->gens; g != NULL; g = g->next) {
		if (how == 1) {
			/* A generation already retiring keeps its own (earlier) deadline. */
			retire(g, lg_now_ns() + g->cfg.master.drain_timeout_ms * LG_NS_PER_MS);
		} else {
			g->retiring = g->computes_stopped = 1;
			g->retire_deadline = UINT64_MAX;
			signal_role(g, LG_ROLE_LOOP, SIGKILL);
			signal_role(g, LG_ROLE_COMPUTE, SIGKILL);
		}
		atomic_store(&g->arena.master->stopping, (uint32_t)how); /* /ready: 503 */
	}
}

/* SIGTERM/SIGINT. With --drain-delay-ms, /ready answers 503 at once (every generation) while
 * the listener stays open and everything is served as usual; run_timers begins the graceful
 * stop when the delay has passed. The delay is for the endpoints of a load balancer (a
 * Kubernetes Service) to drop this instance: a connection routed here meanwhile is served,
 * not refused. A second signal during the delay begins the stop at once. */
static void
stop_signal(struct master *m)
{
	uint64_t delay = lg_agent_drain_delay_ms(&m->gens->cfg.master) * LG_NS_PER_MS;

	if (m->stopping || m->drain_at || delay == 0) {
		m->drain_at = 0;
		begin_stop(m, 1);
		return;
	}
	m->drain_at = lg_now_ns() + delay;
	log_info("graceful stop in %llu ms (--drain-delay-ms): /ready answers 503, still accepting",
	    (unsigned long long)lg_agent_drain_delay_ms(&m->gens->cfg.master));
	lg_notify_stopping();
	for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
		atomic_store(&g->arena.master->stopping, 1);
}

/* SIGTERMs the compute process of g whose proc page names job (slot << 32 | gen), with SIGKILL
 * after the grace. The job id is compared with the process's own page so a process that already
 * moved on to another job is left alone. Returns 1 when a process was signalled. */
static int
kill_runner(struct lg_gen *g, uint64_t job, const char *why, enum lg_restart_reason reason)
{
	for (uint32_t k = g->nloops; k < g->nchildren; k++) {
		struct lg_child *c = &g->children[k];

		if (c->pid <= 0 || c->killed_by_us || atomic_load(&g->arena.procs[k].job) != job)
			continue;
		log_info("killing compute[%u] pid=%d: slot %u %s", c->index, (int)c->pid,
		    (unsigned)(job >> 32), why);
		kill(c->pid, SIGTERM);
		c->killed_by_us = (int)reason;
		c->kill_at = lg_now_ns() + g->cfg.jobs.kill_grace_ms * LG_NS_PER_MS;
		return 1;
	}
	return 0;
}

/* A loop worker asked for the runner of (slot, gen) to be killed: its deadline passed or its
 * client left (--on-client-gone kill). The header does not say which; the slot's deadline
 * does (a loop's deadline timer fires at it, give or take one callback). */
static void
handle_kill(struct lg_gen *g, const struct lg_msg *msg)
{
	uint64_t deadline = g->arena.slots[msg->kill.slot].job.deadline_ns;
	int late = deadline != 0 && lg_now_ns() + 100 * LG_NS_PER_MS >= deadline;

	kill_runner(g, ((uint64_t)msg->kill.slot << 32) | msg->kill.gen, late ? "passed its deadline" :
	    "lost its client (--on-client-gone kill)",
	    late ? LG_RESTART_DEADLINE : LG_RESTART_CLIENT_GONE);
}

/* The deadline holds for a job nobody waits for any more too: a client that left while its
 * job ran (--on-client-gone finish) or a loop worker that died. Its loop no longer has a timer
 * for it, so the master kills the runner of an ABANDONED slot once its deadline passes; the
 * compute process is then free for the queue. Lowers *next to the nearest such deadline. */
static void
enforce_abandoned_deadlines(struct lg_gen *g, uint64_t now, uint64_t *next)
{
	for (uint32_t i = 0; i < g->arena.nslots; i++) {
		struct lg_slot *s = &g->arena.slots[i];
		uint64_t w = atomic_load(&s->word), deadline = s->job.deadline_ns;

		if (lg_slot_state(w) != LG_SLOT_ABANDONED || deadline == 0)
			continue;
		if (now < deadline) {
			if (deadline < *next)
				*next = deadline;
			continue;
		}
		kill_runner(g, ((uint64_t)i << 32) | lg_slot_gen(w),
		    "passed its deadline with nobody waiting for it", LG_RESTART_DEADLINE);
	}
}

static void
read_ctl(struct lg_gen *g)
{
	struct lg_msg msg;
	int r;

	while ((r = lg_chan_recv(g->ch.ctl[1], &msg, MSG_DONTWAIT)) != -1) {
		if (r == 1 && msg.type == LG_MSG_KILL && msg.kill.slot < g->arena.nslots)
			handle_kill(g, &msg);
		else
			log_warn("dropped a control header that failed validation");
	}
}


static void
forward_usr1(struct master *m)
{
	/* Log rotation: reopen ours, then every child reopens its own fd 2. */
	if (lg_log_reopen() == -1)
		log_error("cannot reopen the error log: %s", strerror(errno));
	for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
		for (uint32_t k = 0; k < g->nchildren; k++)
			if (g->children[k].pid > 0)
				kill(g->children[k].pid, SIGUSR1);
	log_info("SIGUSR1: log file reopened");
}

static void
read_signals(struct master *m)
{
	struct signalfd_siginfo si;

	while (read(m->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			lg_respawn_reap(m);
			break;
		case SIGTERM:
		case SIGINT:
			stop_signal(m);
			break;
		case SIGQUIT:
			begin_stop(m, 2);
			break;
		case SIGHUP:
			m->reload_from = (pid_t)si.ssi_pid;
			m->reload_asked_ns = lg_now_ns(); /* after the read: no later than any */
			lg_reload(m, 0);
			break;
		case SIGUSR1:
			forward_usr1(m);
			break;
		}
	}
}

/* True when every loop worker row of g has a process that has set up its loop (its page says
 * RUNNING or DRAINING) and whose heartbeat is younger than max_age_ns. */
static int
loops_healthy(struct lg_gen *g, uint64_t now, uint64_t max_age_ns)
{
	for (uint32_t k = 0; k < g->nloops; k++) {
		uint64_t hb = atomic_load(&g->arena.procs[k].heartbeat_ns);

		if (g->children[k].pid <= 0 || hb == 0 || (hb < now && now - hb > max_age_ns) ||
		    atomic_load(&g->arena.procs[k].state) == LG_PROC_DOWN)
			return 0;
	}
	return 1;
}

/* The newest generation becomes ready once every loop worker accepts and every app process
 * passed its readiness probe: READY=1 (after start-up or a reload), and every older generation
 * is retired. */
static void
check_ready(struct master *m, uint64_t now)
{
	struct lg_gen *g = m->gens;

	if (g->ready || g->retiring || !loops_healthy(g, now, UINT64_MAX) || !lg_app_ready(m->apps))
		return;
	g->ready = 1;
	atomic_store(&g->arena.master->ready, 1); /* /ready answers 200 from now */
	log_info("ready: generation %u, %u loop worker(s) accepting, %d compute process(es), "
	    "%d app process(es)", g->id, g->nloops, g->sz.compute_workers, lg_app_alive(m->apps));
	for (struct lg_gen *o = g->next; o != NULL; o = o->next) {
		if (!o->retiring)
			log_info("retiring generation %u", o->id);
		retire(o, now + o->cfg.master.drain_timeout_ms * LG_NS_PER_MS);
	}
	if (g->id == m->reload_gen) {
		char text[32 + sizeof(m->gen_kept)];

		/* a change the reload could not apply is said to -s reload too, not only logged */
		snprintf(text, sizeof(text), "generation %u%s", g->id, m->gen_kept);
		lg_reload_outcome(m, m->gen_from, m->gen_asked_ns, 1, text);
	}
	lg_master_send_status(m, 1);
	m->next_status = now + 1000 * LG_NS_PER_MS;
}

/* systemd: STATUS= once a second, WATCHDOG=1 only while every loop worker of the serving
 * generation has a fresh heartbeat (a stuck loop stops the pings). Lowers *next. */
static void
notify_duties(struct master *m, uint64_t now, uint64_t *next)
{
	struct lg_gen *g = lg_master_serving(m);

	if (m->stopping || !g->ready)
		return;
	if (now >= m->next_status) {
		lg_master_send_status(m, 0);
		m->next_status = now + 1000 * LG_NS_PER_MS;
	}
	if (m->watchdog_ns && now >= m->next_watchdog) {
		if (loops_healthy(g, now, m->watchdog_ns / 2))
			lg_notify_watchdog();
		else
			log_warn("a loop worker's heartbeat is stale; withholding the watchdog ping");
		m->next_watchdog = now + m->watchdog_ns / 4;
	}
	if (m->next_status < *next)
		*next = m->next_status;
	if (m->watchdog_ns && m->next_watchdog < *next)
		*next = m->next_watchdog;
}

/* Every TRIM_PERIOD_NS (250 ms): punch the pages of large finished jobs and publish how much
 * of the arena is backed by memory. */
static void
housekeeping(struct lg_gen *g, uint64_t now, uint64_t *next)
{
	struct stat st;

	if (now >= g->next_trim) {
		for (uint32_t i = 0; i < g->arena.nslots; i++)
			lg_slot_trim(&g->arena, i, TRIM_MIN_BYTES);
		/* Expired cache entries go here, off the loops' hot path (shm/cache.h). */
		lg_cache_sweep(&g->cache, now);
		lg_memwatch_tick(g, now, next);
		g->next_trim = now + TRIM_PERIOD_NS;
		/* st_blocks counts the pages the sparse memfd really holds (stat(2)). */
		if (fstat(g->arena.fd, &st) == 0)
			atomic_store(&g->arena.master->shm_bytes, (uint64_t)st.st_blocks * 512u);
	}
	if (g->next_trim < *next)
		*next = g->next_trim;
}

/* A loop worker refreshes its heartbeat every 100 ms from a libev timer; one that has not done
 * so for --stuck-loop-ms is blocked (a handler that never returns, a livelock, SIGSTOP) and
 * serves nobody, so it is killed and the reaper replaces it. Loops never run jobs, so heavy
 * load does not delay the tick by more than one callback. Lowers *next to the next check. */
static void
check_heartbeats(struct lg_gen *g, uint64_t now, uint64_t *next)
{
	uint64_t limit = g->cfg.loop.stuck_loop_ms * LG_NS_PER_MS;

	for (uint32_t k = 0; k < g->nloops; k++) {
		struct lg_child *c = &g->children[k];
		uint64_t hb = atomic_load(&g->arena.procs[k].heartbeat_ns);

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
		    (unsigned long long)g->cfg.loop.stuck_loop_ms);
		kill(c->pid, SIGKILL);
		c->stuck = 1;
	}
}

/* Respawns and SIGKILL escalation for g's rows. Returns how many processes are alive; sets
 * *loops to how many of them are loop workers. */
static int
child_timers(struct master *m, struct lg_gen *g, uint64_t now, uint64_t *next, int *loops)
{
	int alive = 0;

	*loops = 0;
	for (uint32_t k = 0; k < g->nchildren; k++) {
		struct lg_child *c = &g->children[k];

		if (c->pid == 0 && !c->parked && !m->stopping && !g->retiring) {
			if (c->respawn_at <= now)
				lg_gen_spawn(m->gens, g, c, m->listen_fd, m->sigfd);
			else if (c->respawn_at < *next)
				*next = c->respawn_at;
		}
		if (c->pid > 0 && c->kill_at) {
			if (c->kill_at <= now) {
				log_warn("%s[%u] pid=%d ignored SIGTERM; SIGKILL",
				    lg_gen_role_name(c->role), c->index, (int)c->pid);
				kill(c->pid, SIGKILL);
				c->kill_at = 0;
			} else if (c->kill_at < *next) {
				*next = c->kill_at;
			}
		}
		alive += c->pid > 0;
		*loops += c->pid > 0 && c->role == LG_ROLE_LOOP;
	}
	return alive;
}

/* A retiring generation: once its loops are gone no job result is awaited, so its compute
 * processes stop; past its deadline whatever is left is killed. Returns 1 when nothing of it
 * is left running. */
static int
retire_progress(struct lg_gen *g, uint64_t now, uint64_t *next, int alive, int loops)
{
	if (loops == 0 && !g->computes_stopped) {
		signal_role(g, LG_ROLE_COMPUTE, SIGTERM);
		g->computes_stopped = 1;
	}
	if (alive > 0 && now >= g->retire_deadline) {
		log_warn("generation %u: drain timeout passed with %d process(es) left; killing them",
		    g->id, alive);
		signal_role(g, LG_ROLE_LOOP, SIGKILL);
		signal_role(g, LG_ROLE_COMPUTE, SIGKILL);
		g->retire_deadline = UINT64_MAX;
	}
	if (g->retire_deadline < *next)
		*next = g->retire_deadline;
	return alive == 0;
}

/* The grace of what was reparented to the master when no app gives one (PID 1 in a
 * container without apps). */
#define ADOPTED_GRACE_MS 3000

/* The apps' timers (master/app.h), with the oldest generation alive for the stop of replaced
 * runs. An app that cannot start before the first READY=1 stops the master (exit 1), as a
 * role that cannot start does; once every generation is gone the apps are stopped, and what
 * they left behind (master/adopted.h) with them. Returns -2 when the generations, the apps
 * and what they left are all gone, else 0. */
static int
app_timers(struct master *m, uint64_t now, uint64_t *next)
{
	uint32_t oldest = UINT32_MAX;
	char why[700];

	for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
		oldest = g->id < oldest ? g->id : oldest;
	int left = 0;

	if (m->gens == NULL) { /* SIGQUIT or a failed start: no grace for the apps either */
		lg_app_stop_all(m->apps, m->stopping == 2);
		left = lg_adopted_step(&m->adopted, lg_app_owns, m->apps, m->stopping == 2,
		    lg_app_grace_ms(m->apps, ADOPTED_GRACE_MS), now, next);
	}
	lg_app_tick(m->apps, now, next, oldest);
	for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
		lg_app_publish(m->apps, g->arena.master, g->id);
	if (m->gens == NULL && lg_app_alive(m->apps) == 0 && left == 0)
		return -2;
	if (!m->stopping && lg_app_failed(m->apps, why, sizeof(why))) {
		log_error("start-up failed: %s", why);
		m->exit_code = 1;
		begin_stop(m, 2);
	}
	return 0;
}

/* Timers of every generation, readiness and systemd. Returns the poll timeout in ms, or -2
 * when the master has stopped and nothing is left. */
static int
run_timers(struct master *m)
{
	uint64_t now = lg_now_ns(), next = now + 1000 * LG_NS_PER_MS;
	struct lg_gen **pg = &m->gens;

	if (app_timers(m, now, &next) == -2)
		return -2;
	if (m->gens != NULL)
		lg_reload_app_step(m); /* before a stop can take the last generation away */
	while (*pg != NULL) {
		struct lg_gen *g = *pg;
		int loops, alive = child_timers(m, g, now, &next, &loops);

		if (g->retiring && retire_progress(g, now, &next, alive, loops)) {
			log_info("generation %u retired", g->id);
			*pg = g->next;
			lg_gen_destroy(g);
			continue;
		}
		enforce_abandoned_deadlines(g, now, &next);
		if (!g->retiring) {
			int fds[2] = { m->listen_fd, m->sigfd };

			check_heartbeats(g, now, &next);
			housekeeping(g, now, &next);
			lg_offered_tick(g->offered, &g->offered_due, &g->arena, now, &next);
			if (!m->stopping)
				lg_modprobe_tick(&g->probes, g->cfg.reg, g->arena.master, now, &next,
				    fds, 2);
			if (lg_resize_tick(m->gens, g, m->listen_fd, m->sigfd, now, &next) &&
			    g->ready && !m->stopping)
				lg_master_send_status(m, 0); /* STATUS= names the new budget at once */
		}
		pg = &g->next;
	}
	if (m->gens == NULL) /* the loops have drained: now the apps stop */
		return app_timers(m, now, &next) == -2 ? -2 : next <= now ? 0 :
		    (int)((next - now + LG_NS_PER_MS - 1) / LG_NS_PER_MS);
	if (m->drain_at && now >= m->drain_at) {
		m->drain_at = 0;
		begin_stop(m, 1);
	} else if (m->drain_at && m->drain_at < next) {
		next = m->drain_at;
	}
	lg_reload_check_step(m, now, &next);
	if (!m->stopping) {
		lg_reload_apply_pending(m);
		check_ready(m, now);
		if (!m->gens->ready)
			next = now + 10 * LG_NS_PER_MS < next ? now + 10 * LG_NS_PER_MS : next;
		notify_duties(m, now, &next);
	}
	return next <= now ? 0 : (int)((next - now + LG_NS_PER_MS - 1) / LG_NS_PER_MS);
}

/* Logs passed descriptor fd (number i of n) by its address: "listening on 127.0.0.1:8080
 * (socket activation, fd 3)", a unix socket by its path, and whether it takes a PROXY header:
 * the i-th listen entry's ",proxy" applies to the i-th passed socket (worker/loop.c
 * takes_proxy numbers them so), which its address need not match. */
static void
log_activated(const struct lg_config *cfg, int fd, int i, int n)
{
	const char *proxy = cfg->master.listen_proxy & 1u << i ? ", PROXY header first" : "";
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "?";
	int port = 0, v6 = 0;

	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_UNIX) {
		log_info("listening on unix:%s (socket activation, fd %d, %d of %d%s)",
		    ((struct sockaddr_un *)&ss)->sun_path, fd, i + 1, n, proxy);
		return;
	}
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
		v6 = ss.ss_family == AF_INET6;
		inet_ntop(ss.ss_family, v6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr :
		    (void *)&((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
		port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
		    ((struct sockaddr_in *)&ss)->sin_port);
	}
	log_info("listening on %s%s%s:%d (socket activation, fd %d, %d of %d%s)", v6 ? "[" : "",
	    addr, v6 ? "]" : "", port, fd, i + 1, n, proxy);
}

/* The listening sockets: those systemd passed (socket activation: every one is served, the
 * first as listen_fd, the others as listen's further listeners; more than listen takes, or one
 * that is not a listening stream socket, refuses the start), else our own. They belong to the
 * master and outlive generations, so a reload never refuses a connection. */
static int
open_listener(struct master *m, const struct lg_config *cfg)
{
	int fds[LG_LISTEN_MAX], n, port = 0;
	char err[256];

	if ((n = lg_notify_listen_fds(fds, LG_LISTEN_MAX, err, sizeof(err))) == -1) {
		log_error("socket activation: %s", err);
		return -1;
	}
	if (n > 0) {
		m->listen_fd = fds[0];
		for (int i = 0; i < n; i++)
			log_activated(cfg, fds[i], i, n);
		for (int i = 1; i < n; i++)
			m->more.more[m->more.nmore++] = fds[i];
		return lg_listeners_open(&m->more, cfg, NULL, 1);
	}
	if (cfg->master.listen_addr[0] == '\0') /* unix:/path first: no TCP listener */
		return lg_listeners_open(&m->more, cfg, &m->listen_fd, 0);
	m->listen_fd = lg_master_listen(cfg->master.listen_addr, cfg->master.port, cfg->master.backlog, &port);
	if (m->listen_fd == -1) {
		log_error("cannot listen on %s:%d: %s", cfg->master.listen_addr, cfg->master.port, strerror(errno));
		return -1;
	}
	/* IPv6 in brackets, so the line can be pasted back into --listen. */
	log_info("listening on %s%s%s:%d", strchr(cfg->master.listen_addr, ':') ? "[" : "",
	    cfg->master.listen_addr, strchr(cfg->master.listen_addr, ':') ? "]" : "", port);
	return lg_listeners_open(&m->more, cfg, NULL, 0);
}

/* --max-conns is per loop worker and each connection is a descriptor, but the usual soft
 * RLIMIT_NOFILE is 1024: raise the soft limit to the hard one (getrlimit(2); no privilege
 * needed), and warn with the numbers when even that is short of L x --max-conns. */
static void
raise_fd_limit(const struct lg_config *cfg, const struct lg_sizing *sz)
{
	struct rlimit rl;
	uint64_t want = (uint64_t)cfg->conn.max_conns + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t old = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			log_info("RLIMIT_NOFILE raised from %llu to the hard limit %llu",
			    (unsigned long long)old, (unsigned long long)rl.rlim_cur);
		else
			rl.rlim_cur = old;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
		log_warn("RLIMIT_NOFILE is %llu but --max-conns %d per loop worker (%d loop workers) "
		    "needs about %llu per loop worker: connections past it wait in the accept queue; "
		    "raise the hard limit (LimitNOFILE=, ulimit -Hn)", (unsigned long long)rl.rlim_cur,
		    cfg->conn.max_conns, sz->loop_workers, (unsigned long long)want);
}

/* The app processes start first, so their addresses are known when the first generation is
 * created (an upstream's servers), and run beside the loops (the first READY=1 waits for
 * both); the supervisor takes the configuration's apps over. */
static int
start_apps(struct master *m, const struct lg_config *cfg, const struct lg_sizing *sz)
{
	char err[512];

	if ((m->apps = lg_app_new(m->pid)) == NULL) {
		log_error("out of memory");
		return -1;
	}
	lg_gen_set_child_close(lg_app_close_in_child, m->apps);
	if (cfg->master.apps != NULL)
		prctl(PR_SET_CHILD_SUBREAPER, 1); /* what an app daemonizes is still reaped here */
	if (lg_app_start(m->apps, cfg->master.apps, sz->budget, err, sizeof(err)) == -1 ||
	    lg_site_up_take_apps(cfg->reg, m->apps, err, sizeof(err)) == -1) {
		log_error("%s", err);
		return -1;
	}
	return 0;
}

static int
setup(struct master *m, const struct lg_config *cfg, const struct lg_sizing *sz)
{
	sigset_t set;
	pid_t other;

	prctl(PR_SET_NAME, LG_MASTER_COMM); /* whatever the binary is called: lg_pidfile_is_master */
	raise_fd_limit(cfg, sz);

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
	if (open_listener(m, cfg) == -1 || lg_agent_open(&m->agent, &cfg->master) == -1)
		return -1;
	if (cfg->master.pid_file[0] && lg_pidfile_read(cfg->master.pid_file, &other) == 0 && other != m->pid &&
	    lg_pidfile_is_master(other)) {
		log_error("the pid file %s names a running master (pid %d): stop it, or give this "
		    "server another --pid-file", cfg->master.pid_file, (int)other);
		return -1;
	}
	if (cfg->master.pid_file[0] && lg_pidfile_write(cfg->master.pid_file, m->pid) == -1) {
		log_error("cannot write the pid file %s: %s", cfg->master.pid_file, strerror(errno));
		return -1;
	}
	snprintf(m->pid_file, sizeof(m->pid_file), "%s", cfg->master.pid_file);
	if (start_apps(m, cfg, sz) == -1 ||
	    (m->gens = lg_gen_create(m->next_id++, cfg, sz, m->pid, NULL)) == NULL)
		return -1;
	m->gens->cfg.master.apps = NULL; /* the supervisor's now */
	m->watchdog_ns = lg_notify_watchdog_usec() * 1000;
	return 0;
}

static void
teardown(struct master *m)
{
	if (m->listen_fd >= 0)
		close(m->listen_fd);
	lg_listeners_close(&m->more);
	lg_agent_close(&m->agent);
	lg_precheck_end(&m->check);
	if (m->sigfd >= 0)
		close(m->sigfd);
	if (m->pid_file[0])
		lg_pidfile_remove(m->pid_file, m->pid);
	while (m->gens != NULL) {
		struct lg_gen *g = m->gens;

		m->gens = g->next;
		lg_gen_destroy(g);
	}
	lg_reload_forget(m);
	lg_app_free(m->apps); /* SIGKILLs what is left: nothing after a stop */
}

/* The agent's answer for the serving generation: drain while stopping or draining, and while a
 * server with --redis has a loop worker whose first Redis connect has not settled (its
 * cluster keys would run alone; the wait is bounded: redis/redis.h). */
static void
serve_agent(struct master *m)
{
	struct lg_gen *g = lg_master_serving(m);
	int held = g->cfg.cluster.redis[0] != '\0' && !lg_cache_cluster_settled(&g->cache);

	lg_agent_serve(&m->agent, &g->arena, &g->ups, m->stopping || m->drain_at || held);
}

int
lg_master_run(const struct lg_config *cfg, const struct lg_sizing *sz, int argc, char **argv)
{
	struct master m = { .pid = getpid(), .listen_fd = -1, .sigfd = -1,
	    .more = { .admin = -1 }, .agent = { .fd = -1 }, .argc = argc, .argv = argv, .next_id = 1,
	    .stop = begin_stop, .check = { .fd = -1 } };
	int timeout;

	lg_memwatch_score(-900); /* the OOM killer takes compute processes first, the master last */
	if (setup(&m, cfg, sz) == -1) {
		teardown(&m);
		return 1;
	}
	lg_respawn_spawn_all(&m, m.gens);
	while ((timeout = run_timers(&m)) != -2) {
		struct pollfd pfd[3 + MAX_GENS + 4 * LG_APP_MAX * LG_APP_PROCS_MAX];
		struct lg_gen *owner[1 + MAX_GENS];
		nfds_t n = 1, agent;

		pfd[0] = (struct pollfd){ .fd = m.sigfd, .events = POLLIN };
		for (struct lg_gen *g = m.gens; g != NULL && n < 1 + MAX_GENS; g = g->next) {
			owner[n] = g;
			pfd[n++] = (struct pollfd){ .fd = g->ch.ctl[1], .events = POLLIN };
		}
		agent = n;
		pfd[n++] = (struct pollfd){ .fd = m.agent.fd, .events = POLLIN }; /* -1: ignored */
		/* a reload's check: its report wakes the loop; run_timers reads it */
		pfd[n++] = (struct pollfd){ .fd = m.check.fd, .events = POLLIN };
		/* the apps' output and probes: run_timers services them */
		n += (nfds_t)lg_app_pollfds(m.apps, pfd + n, (int)(sizeof(pfd) / sizeof(pfd[0]) - n));
		if (poll(pfd, n, timeout) == -1 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			break;
		}
		/* Control headers first: reading signals may destroy nothing, but keep the order
		 * that cannot touch a generation freed in this round. */
		if (pfd[agent].revents)
			serve_agent(&m);
		for (nfds_t i = 1; i < agent; i++)
			if (pfd[i].revents)
				read_ctl(owner[i]);
		if (pfd[0].revents)
			read_signals(&m);
	}
	log_info("stopped");
	teardown(&m);
	return m.exit_code;
}
