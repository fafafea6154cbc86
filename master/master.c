#include "master/master.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "cpupool/compute.h"
#include "kinds/registry.h"
#include "master/agent.h"
#include "master/gen.h"
#include "master/notify.h"
#include "master/options.h"
#include "master/pidfile.h"
#include "shm/slot.h"
#include "shm/stats.h"

#define BACKOFF_MIN_NS     (100 * LG_NS_PER_MS)
#define BACKOFF_MAX_NS     (5000 * LG_NS_PER_MS)
#define QUICK_DEATH_NS     (1000 * LG_NS_PER_MS) /* dying sooner than this counts as a crash loop */
#define CRASH_LOOP_LIMIT   10                     /* quick deaths in a row before giving up */
#define JOB_BACKOFF_MIN_NS (10 * LG_NS_PER_MS)     /* respawn after a job killed a young process */
#define JOB_BACKOFF_MAX_NS (1000 * LG_NS_PER_MS)
#define TRIM_PERIOD_NS     (250 * LG_NS_PER_MS)  /* pages of a free slot back in 0.25-0.5 s */
#define TRIM_MIN_BYTES     (1u << 20)             /* punch regions of slots that used >= 1 MiB */
#define MAX_GENS           4                      /* running + retiring generations at once */

struct master {
	pid_t pid;
	int listen_fd;
	int sigfd;
	int argc;              /* the command line, parsed again on SIGHUP */
	char **argv;
	struct lg_gen *gens;   /* newest first; gens is the current one unless it is retiring */
	uint32_t next_id;
	int stopping;          /* 0 running, 1 graceful drain, 2 immediate */
	int exit_code;
	uint64_t watchdog_ns;  /* systemd watchdog interval; 0 when off */
	uint64_t next_watchdog;
	uint64_t next_status;
	int reload_pending;    /* a SIGHUP that found MAX_GENS alive; applied once one has gone */
	uint64_t drain_at;     /* --drain-delay-ms: when the delayed graceful stop begins; 0 none */
	char pid_file[256];    /* --pid-file at start-up ("" none); a reload does not move it */
	struct lg_listeners more; /* the listeners after listen_fd, and the admin one */
	uint64_t reload_seq;   /* reload outcomes written so far */
	pid_t reload_from;     /* the sender of the SIGHUP being answered (the latest, coalesced) */
	uint32_t reload_gen;   /* the generation that reload started; its readiness is the answer */
	char reload_error[400]; /* why the last reload was refused; "" after one that succeeded */
	struct lg_agent agent;  /* --agent-listen (master/agent.h) */
};

static void begin_stop(struct master *m, int how);
static struct lg_gen *serving(struct master *m);
static void send_status(struct master *m, int ready);
static void reload_done(struct master *m, int notified);

/* An exit we caused (drain, deadline kill, retirement) is news; any other is a warning. */
#define log_exit(m, g, c, ...) do { \
	if ((m)->stopping || (g)->retiring || (c)->killed_by_us) log_info(__VA_ARGS__); \
	else log_warn(__VA_ARGS__); \
} while (0)

static struct lg_proc_page *
page_of(struct lg_gen *g, struct lg_child *c)
{
	return &g->arena.procs[c - g->children];
}

/* A compute process died: fail the job it was running (or had taken from the channel) with st
 * (CRASHED: 502; NO_SPACE for an OOM kill: 503), and tell the owner loop so its client is
 * answered now instead of at the deadline. Returns 1 when the process had a job, 0 when it
 * was idle. */
static int
reclaim_compute_job(struct lg_gen *g, struct lg_proc_page *page, enum lg_job_status st)
{
	uint64_t job = atomic_exchange(&page->job, LG_NO_JOB);
	uint64_t now = lg_now_ns();

	if (job == LG_NO_JOB || (job >> 32) >= g->arena.nslots)
		return 0;
	uint32_t slot = (uint32_t)(job >> 32), gen = (uint32_t)job;
	struct lg_slot *s = &g->arena.slots[slot];
	int r = lg_slot_finish(s, gen, st, now);

	if (r == -1 && lg_slot_start(s, gen, 0, now) == 0) /* died between naming and starting */
		r = lg_slot_finish(s, gen, st, now);
	if (r != 1)
		return 1;
	uint32_t owner = lg_slot_owner(atomic_load(&s->word));
	struct lg_msg done = { .type = LG_MSG_DONE, .slot = slot, .gen = gen,
	    .status = st };
	if (owner >= g->nloops || lg_chan_send(g->ch.done[owner][1], &done, MSG_DONTWAIT) == -1)
		log_warn("cannot tell loop %u that slot %u failed: %s", owner, slot, strerror(errno));
	return 1;
}

/* lg_flight_reclaim_loop callback: the dead loop owned a flight others wait on (wake them to
 * run their requests again), or was the last waiter of another loop's flight (tell the owner
 * to cancel the job). */
static void
flight_orphan(void *arg, enum lg_flight_orphan what, const struct lg_flight_ref *ref,
    uint32_t mask)
{
	struct lg_gen *g = arg;
	struct lg_msg m = { .slot = ref->idx, .gen = ref->gen };

	if (what == LG_FLIGHT_UNWANTED) {
		m.type = LG_MSG_UNWANTED;
		if (ref->owner < g->nloops &&
		    lg_chan_send(g->ch.done[ref->owner][1], &m, MSG_DONTWAIT) == -1)
			log_warn("cannot tell loop %u to cancel an unwanted job: %s", ref->owner,
			    strerror(errno));
		return;
	}
	m.type = LG_MSG_WAKE;
	m.status = 0; /* run again */
	for (uint32_t i = 0; i < g->nloops && i < LG_FLIGHT_LOOPS; i++)
		if ((mask & (1u << i)) && lg_chan_send(g->ch.done[i][1], &m, MSG_DONTWAIT) == -1)
			log_warn("cannot wake loop %u after its flight's owner died: %s", i,
			    strerror(errno));
}

/* lagless_process_restarts_total{role,reason}: the master is the only writer of its page. */
static void
count_restart(struct lg_gen *g, const struct lg_child *c, int status, int job_death)
{
	enum lg_restart_reason why = c->killed_by_us == LG_RESTART_CLIENT_GONE ?
	    LG_RESTART_CLIENT_GONE : c->killed_by_us ? LG_RESTART_DEADLINE :
	    c->stuck ? LG_RESTART_STUCK : job_death ? LG_RESTART_JOB :
	    WIFSIGNALED(status) ? LG_RESTART_CRASH : LG_RESTART_EXIT;

	lg_stats_add(&g->arena.master->restarts[c->role - 1][why], 1);
	if (c->role == LG_ROLE_COMPUTE && c->pool < g->npools)
		lg_stats_add(&g->arena.master->pools[c->pool].restarts, 1);
}

/* Back-off for the next start of row c. A process that died serving (served: a compute process
 * killed by the job it ran, or a loop worker that requests had reached) is respawned at once
 * after a normal life and after a back-off doubling from 10 ms to 1 s when it dies young, and
 * never makes the master give up: a request or its job failed (a client reset on a cache hit
 * once crashed loops in a row), not the server. Any other death within a second of starting
 * doubles the back-off from 100 ms to 5 s, and CRASH_LOOP_LIMIT of those in a row (a process
 * that cannot even start) return -1. */
static int
plan_respawn(struct lg_child *c, uint64_t now, int served)
{
	int young = now - c->started_ns < QUICK_DEATH_NS;

	if (c->killed_by_us || !young) {
		c->quick_deaths = 0;
		c->backoff_ns = 0;
	} else if (served) {
		c->quick_deaths = 0;
		c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : JOB_BACKOFF_MIN_NS;
		if (c->backoff_ns > JOB_BACKOFF_MAX_NS)
			c->backoff_ns = JOB_BACKOFF_MAX_NS;
	} else {
		c->quick_deaths++;
		c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : BACKOFF_MIN_NS;
		if (c->backoff_ns > BACKOFF_MAX_NS)
			c->backoff_ns = BACKOFF_MAX_NS;
	}
	if (c->quick_deaths >= CRASH_LOOP_LIMIT)
		return -1;
	c->restarts++;
	c->respawn_at = now + c->backoff_ns;
	return 0;
}

/* The row of g's master page for job kind `kind`, taken on first use; NULL when the table is
 * full (such a kind is counted nowhere and never quarantined). */
static struct lg_kind_health *
kind_row(struct lg_gen *g, uint32_t kind)
{
	struct lg_kind_health *rows = g->arena.master->kinds;

	for (unsigned i = 0; i < LG_KIND_HEALTH; i++) {
		uint32_t k = atomic_load(&rows[i].kind);

		if (k == kind)
			return &rows[i];
		if (k == 0) {
			atomic_store_explicit(&rows[i].kind, kind, memory_order_release);
			return &rows[i];
		}
	}
	return NULL;
}

static const char *
kind_name(const struct lg_gen *g, uint32_t kind)
{
	const struct lg_kind *k = lg_registry_kind(g->cfg.reg, kind);

	return k ? k->name : "unknown";
}

/* A compute process of g died while its page named a job of `kind` (not a kill of ours): count
 * it against the kind, log it, and quarantine the kind when --quarantine-deaths such deaths
 * happened within --quarantine-ms (Kore charges a crash to its handler the same way). */
static void
charge_kind(struct lg_gen *g, const struct lg_child *c, uint32_t kind, uint64_t now)
{
	struct lg_kind_health *h = kind_row(g, kind);
	uint64_t window = g->cfg.quarantine_ms * LG_NS_PER_MS;

	log_warn("compute[%u] pid=%d died running a %s job; its client gets 502",
	    c->index, (int)c->pid, kind_name(g, kind));
	if (h == NULL)
		return;
	lg_stats_add(&h->deaths, 1);
	if (now - h->window_ns > window || atomic_load(&h->until_ns) > now) {
		h->window_ns = now;
		h->recent = 0;
	}
	if (g->cfg.quarantine_deaths == 0 || ++h->recent < (uint32_t)g->cfg.quarantine_deaths)
		return;
	log_error("quarantining job kind %s for %llu ms: %u compute process deaths within %llu "
	    "ms (--quarantine-deaths); its requests get 503 meanwhile", kind_name(g, kind),
	    (unsigned long long)g->cfg.quarantine_ms, h->recent,
	    (unsigned long long)g->cfg.quarantine_ms);
	atomic_store(&h->until_ns, now + window);
	lg_stats_add(&h->quarantines, 1);
	h->recent = 0;
}

static void
on_exit_status(struct master *m, struct lg_gen *g, struct lg_child *c, int status)
{
	struct lg_proc_page *page = page_of(g, c);
	uint32_t kind = atomic_load(&page->job_kind), state = atomic_load(&page->state);
	int n, job_death = 0, oom = 0;

	atomic_store(&page->pid, 0);
	atomic_store(&page->state, LG_PROC_DOWN); /* the writer is dead; the entry is ours now */
	/* What its kinds forked ends with it: it led a process group (cpupool/compute.c,
	 * worker/loop.c). */
	if (kill(-c->pid, SIGKILL) == 0)
		log_warn("%s[%u] pid=%d left processes of its jobs behind; killed them",
		    lg_gen_role_name(c->role), c->index, (int)c->pid);
	if (c->role == LG_ROLE_COMPUTE) {
		/* The OOM killer's SIGKILL: the memory of the whole cgroup ran out, not the job's
		 * fault (503 memory, never charged to its kind). */
		oom = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !c->killed_by_us &&
		    lg_memwatch_oom_killed(g);
		job_death = reclaim_compute_job(g, page, oom ? LG_JOB_NO_SPACE : LG_JOB_CRASHED);
		if (oom)
			lg_stats_add(&g->arena.master->oom_kills, 1);
	} else {
		if ((n = lg_slot_reclaim_owner(&g->arena, c->index)) > 0)
			log_info("reclaimed %d slot(s) of loop[%u]", n, c->index);
		if ((n = lg_flight_reclaim_loop(&g->flights, c->index, flight_orphan, g)) > 0)
			log_info("freed %d single-flight entr%s of loop[%u]", n, n == 1 ? "y" : "ies",
			    c->index);
		lg_cache_reclaim_pid(&g->cache, (int32_t)c->pid);
	}
	lg_arena_recount(&g->arena); /* a charge it made but had not recorded in its slot */
	if (!m->stopping && !g->retiring && lg_resize_exited(g, c, state)) {
		log_info("compute[%u] pid=%d retired after its job (live resize)", c->index,
		    (int)c->pid);
		c->pid = 0;
		return;
	}
	if (c->role == LG_ROLE_COMPUTE && !job_death && WIFEXITED(status) &&
	    WEXITSTATUS(status) == LG_COMPUTE_RECYCLE && !m->stopping && !g->retiring) {
		/* max_jobs / max_rss: a planned exit between jobs, replaced at once */
		log_info("compute[%u] pid=%d recycled itself; replacing it", c->index, (int)c->pid);
		c->pid = 0;
		c->quick_deaths = 0;
		c->backoff_ns = 0;
		c->respawn_at = lg_now_ns();
		return;
	}
	if (WIFSIGNALED(status))
		log_exit(m, g, c, "%s[%u] pid=%d killed by signal %d", lg_gen_role_name(c->role),
		    c->index, (int)c->pid, WTERMSIG(status));
	else
		log_exit(m, g, c, "%s[%u] pid=%d exited with status %d", lg_gen_role_name(c->role),
		    c->index, (int)c->pid, WEXITSTATUS(status));
	if (oom)
		log_warn("compute[%u] pid=%d was killed by the OOM killer (the memory cgroup's "
		    "oom_kill counter rose) running a %s job: 503 for its client, not charged to the "
		    "kind", c->index, (int)c->pid, kind_name(g, kind));
	else if (job_death && !c->killed_by_us && !m->stopping)
		charge_kind(g, c, kind, lg_now_ns());
	char who[32];
	snprintf(who, sizeof(who), "%s[%u]", lg_gen_role_name(c->role), c->index);
	/* A death inside a module's init is that module's (its routes answer 503), not a
	 * process that cannot start: it never counts toward giving up. */
	int init_death = lg_modprobe_child_died(g->cfg.reg, g->arena.master, page, status, who);
	c->pid = 0;
	if (m->stopping || g->retiring)
		return;
	/* A loop that requests reached got to serve: its death is some request's fault; an
	 * OOM kill of an idle compute process is no start-up fault either. */
	int served = job_death || init_death || oom || (c->role == LG_ROLE_LOOP &&
	    atomic_load(&page->begun) != c->begun_at_start);
	if (plan_respawn(c, lg_now_ns(), served) == -1) {
		log_error("%s[%u] died %u times in a row within %llu ms of starting, before %s; "
		    "giving up", lg_gen_role_name(c->role), c->index, c->quick_deaths,
		    (unsigned long long)(QUICK_DEATH_NS / LG_NS_PER_MS),
		    c->role == LG_ROLE_LOOP ? "serving any request" : "taking any job");
		m->exit_code = 1;
		begin_stop(m, 2);
		return;
	}
	count_restart(g, c, status, job_death);
}

static void
reap(struct master *m)
{
	pid_t pid;
	int status;

	/* As PID 1 in a container this also reaps orphans that were reparented to us. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
			for (uint32_t k = 0; k < g->nchildren; k++)
				if (g->children[k].pid == pid) {
					on_exit_status(m, g, &g->children[k], status);
					goto next;
				}
		for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
			if (lg_modprobe_reaped(&g->probes, g->cfg.reg, g->arena.master, pid, status))
				break;
next:		;
	}
}

static void
signal_role(struct lg_gen *g, enum lg_role role, int sig)
{
	for (uint32_t k = 0; k < g->nchildren; k++) {
		struct lg_child *c = &g->children[k];

		if (c->pid > 0 && c->role == role) {
			kill(c->pid, sig);
			if (sig == SIGTERM && role == LG_ROLE_COMPUTE)
				c->kill_at = lg_now_ns() + g->cfg.kill_grace_ms * LG_NS_PER_MS;
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
			retire(g, lg_now_ns() + g->cfg.drain_timeout_ms * LG_NS_PER_MS);
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
	uint64_t delay = lg_agent_drain_delay_ms(&m->gens->cfg) * LG_NS_PER_MS;

	if (m->stopping || m->drain_at || delay == 0) {
		m->drain_at = 0;
		begin_stop(m, 1);
		return;
	}
	m->drain_at = lg_now_ns() + delay;
	log_info("graceful stop in %llu ms (--drain-delay-ms): /ready answers 503, still accepting",
	    (unsigned long long)lg_agent_drain_delay_ms(&m->gens->cfg));
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
		c->kill_at = lg_now_ns() + g->cfg.kill_grace_ms * LG_NS_PER_MS;
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
	uint64_t deadline = g->arena.slots[msg->slot].deadline_ns;
	int late = deadline != 0 && lg_now_ns() + 100 * LG_NS_PER_MS >= deadline;

	kill_runner(g, ((uint64_t)msg->slot << 32) | msg->gen, late ? "passed its deadline" :
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
		uint64_t w = atomic_load(&s->word), deadline = s->deadline_ns;

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
		if (r == 1 && msg.type == LG_MSG_KILL && msg.slot < g->arena.nslots)
			handle_kill(g, &msg);
		else
			log_warn("dropped a control header that failed validation");
	}
}

static void
spawn_all(struct master *m, struct lg_gen *g)
{
	for (uint32_t k = 0; k < g->nchildren; k++)
		if (!g->children[k].parked)
			lg_gen_spawn(m->gens, g, &g->children[k], m->listen_fd, m->sigfd);
}

/* The answer to the SIGHUP of m->reload_from: PATH.reload for `lagless -s reload`, and a
 * refusal also in every STATUS= line to systemd until a reload succeeds. */
static void
reload_outcome(struct master *m, int ok, const char *text)
{
	struct lg_reload_outcome o = { .seq = ++m->reload_seq, .from = m->reload_from, .ok = ok };

	snprintf(o.text, sizeof(o.text), "%s", text);
	snprintf(m->reload_error, sizeof(m->reload_error), "%s", ok ? "" : text);
	if (m->pid_file[0] && lg_pidfile_put_outcome(m->pid_file, &o) == -1)
		log_error("cannot write %s.reload: %s", m->pid_file, strerror(errno));
	if (!ok && !m->stopping && serving(m)->ready)
		send_status(m, 0);
}

static void
refuse_reload(struct master *m, int notified, const char *why)
{
	log_error("reload refused, keeping the running configuration: %s", why);
	reload_outcome(m, 0, why);
	reload_done(m, notified);
}

static int
same_listen(const struct lg_config *a, const struct lg_config *b)
{
	return strcmp(a->listen_addr, b->listen_addr) == 0 && a->port == b->port &&
	    memcmp(a->listen_more, b->listen_more, sizeof(a->listen_more)) == 0 &&
	    strcmp(a->admin_listen, b->admin_listen) == 0 &&
	    strcmp(a->agent_listen, b->agent_listen) == 0;
}

static int
count_gens(const struct master *m)
{
	int n = 0;

	for (const struct lg_gen *g = m->gens; g != NULL; g = g->next)
		n++;
	return n;
}

/* A reload that will not start a generation after RELOADING=1 was sent (a deferred one): READY=1
 * with the status line, so systemd leaves the reloading state. */
static void
reload_done(struct master *m, int notified)
{
	if (notified && serving(m)->ready)
		send_status(m, 1);
}

/* SIGHUP: read the configuration again; if it is valid, start a new generation beside the
 * running one (the retirement of the old one waits until the new one accepts, so no
 * connection is refused). An invalid configuration changes nothing. While MAX_GENS
 * generations are alive (older ones still draining) the request is remembered, not lost:
 * run_timers applies it once one has gone, reading the configuration then, so repeated
 * requests coalesce into the latest configuration (issue 10 item 4). notified: RELOADING=1 was
 * already sent for this request. */
static void
reload(struct master *m, int notified)
{
	struct lg_config cfg;
	struct lg_command cmd;
	struct lg_sizing sz;
	struct lg_gen *g;
	char err[512];
	int ngens = count_gens(m);

	if (m->stopping || m->drain_at) {
		log_warn("SIGHUP ignored: stopping");
		reload_outcome(m, 0, "the server is stopping");
		return;
	}
	if (ngens >= MAX_GENS) {
		if (!m->reload_pending)
			lg_notify_reloading();
		log_warn("reload deferred: %d generations alive (limit %d, older ones still "
		    "draining); it takes effect with the configuration read once one has gone%s",
		    ngens, MAX_GENS, m->reload_pending ? " (coalesced with the pending one)" : "");
		m->reload_pending = 1;
		return;
	}
	if (lg_options_load(m->argc, m->argv, &cfg, &cmd, err, sizeof(err)) == -1) {
		refuse_reload(m, notified, err);
		return;
	}
	if (!same_listen(&cfg, &m->gens->cfg)) {
		log_warn("reload: the listen address changes only with a restart; keeping %s:%d",
		    m->gens->cfg.listen_addr, m->gens->cfg.port);
		memcpy(cfg.listen_addr, m->gens->cfg.listen_addr, sizeof(cfg.listen_addr));
		memcpy(cfg.listen_more, m->gens->cfg.listen_more, sizeof(cfg.listen_more));
		memcpy(cfg.admin_listen, m->gens->cfg.admin_listen, sizeof(cfg.admin_listen));
		memcpy(cfg.agent_listen, m->gens->cfg.agent_listen, sizeof(cfg.agent_listen));
		cfg.port = m->gens->cfg.port;
	}
	lg_sizing_read(getenv("LAGLESS_SYSROOT"), &sz);
	lg_sizing_decide(&sz, &cfg);
	lg_gen_decide_memory(&cfg, &sz);
	if (lg_sizing_check_pools(&sz, &cfg, err, sizeof(err)) == -1 ||
	    lg_gen_check_arena(&cfg, &sz, err, sizeof(err)) == -1) {
		refuse_reload(m, notified, err);
		return;
	}
	if (strcmp(cfg.error_log, m->gens->cfg.error_log) != 0 && lg_log_open(cfg.error_log) == -1)
		log_error("reload: cannot open the error log %s: %s", cfg.error_log, strerror(errno));
	lg_log_level = cfg.log_level;
	if ((g = lg_gen_create(m->next_id, &cfg, &sz, m->pid, m->gens)) == NULL) {
		snprintf(err, sizeof(err), "cannot create generation %u: %s", m->next_id,
		    strerror(errno));
		refuse_reload(m, notified, err);
		return;
	}
	m->reload_gen = m->next_id++;
	if (!notified)
		lg_notify_reloading(); /* READY=1 follows from check_ready once the new one accepts */
	g->next = m->gens;
	m->gens = g;
	log_info("starting generation %u (budget %d: %d loop, %d compute, queue %d)",
	    g->id, sz.budget, sz.loop_workers, sz.compute_workers, sz.queue_capacity);
	spawn_all(m, g);
}

/* A deferred SIGHUP: applied as soon as fewer than MAX_GENS generations are alive. */
static void
apply_pending_reload(struct master *m)
{
	if (!m->reload_pending || m->stopping || m->drain_at || count_gens(m) >= MAX_GENS)
		return;
	m->reload_pending = 0;
	log_info("applying the deferred reload");
	reload(m, 1);
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
			reap(m);
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
			reload(m, 0);
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

/* The generation that answers for the server: the newest ready one not retiring. */
static struct lg_gen *
serving(struct master *m)
{
	for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
		if (g->ready && !g->retiring)
			return g;
	return m->gens;
}

static void
send_status(struct master *m, int ready)
{
	char status[640];
	size_t n;

	lg_gen_status_line(serving(m), status, sizeof(status));
	if (m->reload_error[0] && (n = strlen(status)) < sizeof(status))
		snprintf(status + n, sizeof(status) - n, "; last reload refused: %s",
		    m->reload_error);
	if (ready)
		lg_notify_ready(status);
	else
		lg_notify_status(status);
}

/* The newest generation becomes ready once every loop worker accepts: READY=1 (after start-up
 * or a reload), and every older generation is retired. */
static void
check_ready(struct master *m, uint64_t now)
{
	struct lg_gen *g = m->gens;

	if (g->ready || g->retiring || !loops_healthy(g, now, UINT64_MAX))
		return;
	g->ready = 1;
	atomic_store(&g->arena.master->ready, 1); /* /ready answers 200 from now */
	log_info("ready: generation %u, %u loop worker(s) accepting, %d compute process(es)", g->id,
	    g->nloops, g->sz.compute_workers);
	for (struct lg_gen *o = g->next; o != NULL; o = o->next) {
		if (!o->retiring)
			log_info("retiring generation %u", o->id);
		retire(o, now + o->cfg.drain_timeout_ms * LG_NS_PER_MS);
	}
	if (g->id == m->reload_gen) {
		char text[32];

		snprintf(text, sizeof(text), "generation %u", g->id);
		reload_outcome(m, 1, text);
	}
	send_status(m, 1);
	m->next_status = now + 1000 * LG_NS_PER_MS;
}

/* systemd: STATUS= once a second, WATCHDOG=1 only while every loop worker of the serving
 * generation has a fresh heartbeat (a stuck loop stops the pings). Lowers *next. */
static void
notify_duties(struct master *m, uint64_t now, uint64_t *next)
{
	struct lg_gen *g = serving(m);

	if (m->stopping || !g->ready)
		return;
	if (now >= m->next_status) {
		send_status(m, 0);
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

/* Once a second: punch the pages of large finished jobs and publish how much of the arena is
 * backed by memory. */
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
	uint64_t limit = g->cfg.stuck_loop_ms * LG_NS_PER_MS;

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
		    (unsigned long long)g->cfg.stuck_loop_ms);
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

/* Timers of every generation, readiness and systemd. Returns the poll timeout in ms, or -2
 * when the master has stopped and nothing is left. */
static int
run_timers(struct master *m)
{
	uint64_t now = lg_now_ns(), next = now + 1000 * LG_NS_PER_MS;
	struct lg_gen **pg = &m->gens;

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
				send_status(m, 0); /* STATUS= names the new budget at once */
		}
		pg = &g->next;
	}
	if (m->gens == NULL)
		return -2;
	if (m->drain_at && now >= m->drain_at) {
		m->drain_at = 0;
		begin_stop(m, 1);
	} else if (m->drain_at && m->drain_at < next) {
		next = m->drain_at;
	}
	if (!m->stopping) {
		apply_pending_reload(m);
		check_ready(m, now);
		if (!m->gens->ready)
			next = now + 10 * LG_NS_PER_MS < next ? now + 10 * LG_NS_PER_MS : next;
		notify_duties(m, now, &next);
	}
	return next <= now ? 0 : (int)((next - now + LG_NS_PER_MS - 1) / LG_NS_PER_MS);
}

/* The listening socket: the one systemd passed (socket activation), else our own. It belongs
 * to the master and outlives generations, so a reload never refuses a connection. */
static int
open_listener(struct master *m, const struct lg_config *cfg)
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
		log_info("listening on %s%s%s:%d (socket activation, fd %d)",
		    strchr(addr, ':') ? "[" : "", addr, strchr(addr, ':') ? "]" : "", port,
		    m->listen_fd);
		return lg_listeners_open(&m->more, cfg, NULL, 1);
	}
	if (errno != 0) {
		log_error("socket activation: %s", strerror(errno));
		return -1;
	}
	if (cfg->listen_addr[0] == '\0') /* unix:/path first: no TCP listener */
		return lg_listeners_open(&m->more, cfg, &m->listen_fd, 0);
	m->listen_fd = lg_master_listen(cfg->listen_addr, cfg->port, cfg->backlog, &port);
	if (m->listen_fd == -1) {
		log_error("cannot listen on %s:%d: %s", cfg->listen_addr, cfg->port, strerror(errno));
		return -1;
	}
	/* IPv6 in brackets, so the line can be pasted back into --listen. */
	log_info("listening on %s%s%s:%d", strchr(cfg->listen_addr, ':') ? "[" : "",
	    cfg->listen_addr, strchr(cfg->listen_addr, ':') ? "]" : "", port);
	return lg_listeners_open(&m->more, cfg, NULL, 0);
}

/* --max-conns is per loop worker and each connection is a descriptor, but the usual soft
 * RLIMIT_NOFILE is 1024: raise the soft limit to the hard one (getrlimit(2); no privilege
 * needed), and warn with the numbers when even that is short of L x --max-conns. */
static void
raise_fd_limit(const struct lg_config *cfg, const struct lg_sizing *sz)
{
	struct rlimit rl;
	uint64_t want = (uint64_t)cfg->max_conns + 64;

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
		    cfg->max_conns, sz->loop_workers, (unsigned long long)want);
}

static int
setup(struct master *m, const struct lg_config *cfg, const struct lg_sizing *sz)
{
	sigset_t set;

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
	if (open_listener(m, cfg) == -1 || lg_agent_open(&m->agent, cfg) == -1)
		return -1;
	if (cfg->pid_file[0] && lg_pidfile_write(cfg->pid_file, m->pid) == -1) {
		log_error("cannot write the pid file %s: %s", cfg->pid_file, strerror(errno));
		return -1;
	}
	snprintf(m->pid_file, sizeof(m->pid_file), "%s", cfg->pid_file);
	if ((m->gens = lg_gen_create(m->next_id++, cfg, sz, m->pid, NULL)) == NULL)
		return -1;
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
	if (m->sigfd >= 0)
		close(m->sigfd);
	if (m->pid_file[0])
		lg_pidfile_remove(m->pid_file, m->pid);
	while (m->gens != NULL) {
		struct lg_gen *g = m->gens;

		m->gens = g->next;
		lg_gen_destroy(g);
	}
}

int
lg_master_run(const struct lg_config *cfg, const struct lg_sizing *sz, int argc, char **argv)
{
	struct master m = { .pid = getpid(), .listen_fd = -1, .sigfd = -1,
	    .more = { .admin = -1 }, .agent = { .fd = -1 }, .argc = argc, .argv = argv, .next_id = 1 };
	int timeout;

	lg_memwatch_score(-900); /* the OOM killer takes compute processes first, the master last */
	if (setup(&m, cfg, sz) == -1) {
		teardown(&m);
		return 1;
	}
	spawn_all(&m, m.gens);
	while ((timeout = run_timers(&m)) != -2) {
		struct pollfd pfd[2 + MAX_GENS];
		struct lg_gen *owner[1 + MAX_GENS];
		nfds_t n = 1, agent;

		pfd[0] = (struct pollfd){ .fd = m.sigfd, .events = POLLIN };
		for (struct lg_gen *g = m.gens; g != NULL && n < 1 + MAX_GENS; g = g->next) {
			owner[n] = g;
			pfd[n++] = (struct pollfd){ .fd = g->ch.ctl[1], .events = POLLIN };
		}
		agent = n;
		pfd[n++] = (struct pollfd){ .fd = m.agent.fd, .events = POLLIN }; /* -1: ignored */
		if (poll(pfd, n, timeout) == -1 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			break;
		}
		/* Control headers first: reading signals may destroy nothing, but keep the order
		 * that cannot touch a generation freed in this round. */
		if (pfd[agent].revents)
			lg_agent_serve(&m.agent, &serving(&m)->arena, m.stopping || m.drain_at);
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
