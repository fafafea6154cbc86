/* Child deaths (master/ only): what a dead loop worker or compute process leaves behind is
 * reclaimed, its death is counted and charged, and its row is respawned after a back-off, or
 * the master gives up on a role that cannot even start. */
#include "master/respawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common/clock.h"
#include "common/log.h"
#include "cpupool/compute.h"
#include "kinds/registry.h"
#include "master/app.h"
#include "master/gen.h"
#include "master/state.h"
#include "shm/slot.h"
#include "shm/stats.h"

#define BACKOFF_MIN_NS     (100 * LG_NS_PER_MS)
#define BACKOFF_MAX_NS     (5000 * LG_NS_PER_MS)
#define QUICK_DEATH_NS     (1000 * LG_NS_PER_MS) /* dying sooner than this counts as a crash loop */
#define CRASH_LOOP_LIMIT   10                     /* quick deaths in a row before giving up */
#define JOB_BACKOFF_MIN_NS (10 * LG_NS_PER_MS)     /* respawn after a job killed a young process */
#define JOB_BACKOFF_MAX_NS (1000 * LG_NS_PER_MS)

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
	struct lg_msg done = { .type = LG_MSG_DONE, .done = { .slot = slot, .gen = gen } };
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
	struct lg_msg m;

	if (what == LG_FLIGHT_UNWANTED) {
		m = (struct lg_msg){ .type = LG_MSG_UNWANTED,
		    .unwanted = { .flight = ref->idx, .flight_gen = ref->gen } };
		if (ref->owner < g->nloops &&
		    lg_chan_send(g->ch.done[ref->owner][1], &m, MSG_DONTWAIT) == -1)
			log_warn("cannot tell loop %u to cancel an unwanted job: %s", ref->owner,
			    strerror(errno));
		return;
	}
	m = (struct lg_msg){ .type = LG_MSG_WAKE, /* http_status 0: run again */
	    .wake = { .flight = ref->idx, .flight_gen = ref->gen, .http_status = 0 } };
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

/* The row of g's master page for job kind `kind` on route `route`, taken on first use; NULL
 * when the table is full (such a pair is counted nowhere and never quarantined). */
static struct lg_kind_health *
kind_row(struct lg_gen *g, uint32_t kind, uint32_t route)
{
	struct lg_kind_health *rows = g->arena.master->kinds;

	for (unsigned i = 0; i < LG_KIND_HEALTH; i++) {
		uint32_t k = atomic_load(&rows[i].kind);

		if (k == kind && rows[i].route == route)
			return &rows[i];
		if (k == 0) {
			rows[i].route = route; /* before the kind: readers match on both */
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

static const char *
route_name(const struct lg_gen *g, uint32_t route)
{
	return route < g->cfg.reg->nroutes ? g->cfg.reg->routes[route].path : "unknown";
}

/* A compute process of g died while its page named a job of `kind` on `route` (not a kill of
 * ours): count it against that pair, log it, and quarantine the pair when --quarantine-deaths
 * such deaths happened within --quarantine-ms (Kore charges a crash to its handler the same
 * way; by route too since module ABI 1.2, so one Python route does not take the others). */
static void
charge_kind(struct lg_gen *g, const struct lg_child *c, uint32_t kind, uint32_t route,
    uint64_t now)
{
	struct lg_kind_health *h = kind_row(g, kind, route);
	uint64_t window = g->cfg.jobs.quarantine_ms * LG_NS_PER_MS;

	log_warn("compute[%u] pid=%d died running a %s job of route %s; its client gets 502",
	    c->index, (int)c->pid, kind_name(g, kind), route_name(g, route));
	if (h == NULL)
		return;
	lg_stats_add(&h->deaths, 1);
	if (now - h->window_ns > window || atomic_load(&h->until_ns) > now) {
		h->window_ns = now;
		h->recent = 0;
	}
	if (g->cfg.jobs.quarantine_deaths == 0 || ++h->recent < (uint32_t)g->cfg.jobs.quarantine_deaths)
		return;
	log_error("quarantining job kind %s on route %s for %llu ms: %u compute process deaths "
	    "within %llu ms (--quarantine-deaths); its requests get 503 meanwhile",
	    kind_name(g, kind), route_name(g, route), (unsigned long long)g->cfg.jobs.quarantine_ms,
	    h->recent,
	    (unsigned long long)g->cfg.jobs.quarantine_ms);
	atomic_store(&h->until_ns, now + window);
	lg_stats_add(&h->quarantines, 1);
	h->recent = 0;
}

/* What row c of g leaves behind once dead: its proc page (the master's now), the processes its
 * jobs forked, the job it ran (compute) or the slots, flights and cache entries it held (loop).
 * Sets *oom when the OOM killer took a compute process. Returns 1 when a compute process had a
 * job (reclaim_compute_job), else 0. Processes left behind are a warning when the process
 * ended by itself; after an exit we caused (log_exit: a deadline, a drain, a retirement) the
 * ones its job or its kind's runtime had running (the python module's python3) end with it
 * as planned. */
static int
reclaim_child(struct master *m, struct lg_gen *g, struct lg_child *c, struct lg_proc_page *page,
    int status, int *oom)
{
	int n, job_death = 0;

	atomic_store(&page->pid, 0);
	atomic_store(&page->state, LG_PROC_DOWN); /* the writer is dead; the entry is ours now */
	/* What its kinds forked ends with it: it led a process group (cpupool/compute.c,
	 * worker/loop.c). */
	if (kill(-c->pid, SIGKILL) == 0)
		log_exit(m, g, c, "%s[%u] pid=%d left processes of its jobs behind; killed them",
		    lg_gen_role_name(c->role), c->index, (int)c->pid);
	if (c->role == LG_ROLE_COMPUTE) {
		/* The OOM killer's SIGKILL: the memory of the whole cgroup ran out, not the job's
		 * fault (503 memory, never charged to its kind). */
		*oom = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !c->killed_by_us &&
		    lg_memwatch_oom_killed(g);
		job_death = reclaim_compute_job(g, page, *oom ? LG_JOB_NO_SPACE : LG_JOB_CRASHED);
		if (*oom)
			lg_stats_add(&g->arena.master->oom_kills, 1);
	} else {
		if ((n = lg_slot_reclaim_owner(&g->arena, c->index)) > 0)
			log_info("reclaimed %d slot(s) of loop[%u]", n, c->index);
		for (uint32_t u = 0; u < g->ups.n; u++)
			if ((n = (int)lg_upadm_reclaim(&g->ups.adm[u], c->index)) > 0)
				log_info("released %d upstream place(s) of loop[%u]", n, c->index);
		if ((n = lg_flight_reclaim_loop(&g->flights, c->index, flight_orphan, g)) > 0)
			log_info("freed %d single-flight entr%s of loop[%u]", n, n == 1 ? "y" : "ies",
			    c->index);
		lg_cache_reclaim_pid(&g->cache, (int32_t)c->pid);
	}
	lg_arena_recount(&g->arena); /* a charge it made but had not recorded in its slot */
	return job_death;
}

/* The exits that are no failure: a compute process a live resize retired after its job
 * (state: its page's state before it died), or one that recycled itself and is replaced at
 * once. Returns 1 when c's exit was one (c->pid is then 0), else 0. */
static int
planned_exit(struct master *m, struct lg_gen *g, struct lg_child *c, uint32_t state, int status,
    int job_death)
{
	if (!m->stopping && !g->retiring && lg_resize_exited(g, c, state)) {
		log_info("compute[%u] pid=%d retired after its job (live resize)", c->index,
		    (int)c->pid);
		c->pid = 0;
		return 1;
	}
	if (c->role == LG_ROLE_COMPUTE && !job_death && WIFEXITED(status) &&
	    WEXITSTATUS(status) == LG_COMPUTE_RECYCLE && !m->stopping && !g->retiring) {
		/* max_jobs / max_rss: a planned exit between jobs, replaced at once */
		log_info("compute[%u] pid=%d recycled itself; replacing it", c->index, (int)c->pid);
		c->pid = 0;
		c->quick_deaths = 0;
		c->backoff_ns = 0;
		c->respawn_at = lg_now_ns();
		return 1;
	}
	return 0;
}

/* Logs how c died; a job death that was neither an OOM kill nor a kill of ours is charged to
 * the job's kind on its route (charge_kind). */
static void
log_death(struct master *m, struct lg_gen *g, const struct lg_child *c, int status,
    uint32_t kind, uint32_t route, int job_death, int oom)
{
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
		charge_kind(g, c, kind, route, lg_now_ns());
}

static void
on_exit_status(struct master *m, struct lg_gen *g, struct lg_child *c, int status)
{
	struct lg_proc_page *page = page_of(g, c);
	uint32_t kind = atomic_load(&page->job_kind), state = atomic_load(&page->state);
	uint32_t route = atomic_load(&page->job_route);
	int job_death, oom = 0;

	job_death = reclaim_child(m, g, c, page, status, &oom);
	if (planned_exit(m, g, c, state, status, job_death))
		return;
	log_death(m, g, c, status, kind, route, job_death, oom);
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
		m->stop(m, 2);
		return;
	}
	count_restart(g, c, status, job_death);
}

void
lg_respawn_reap(struct master *m)
{
	pid_t pid;
	int status;

	/* As PID 1 in a container this also reaps orphans that were reparented to us. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == m->check.pid) { /* lg_reload_check_step applies its report */
			kill(-pid, SIGKILL); /* what its hooks forked and left in its group */
			m->check.exited = 1;
			m->check.status = status;
			continue;
		}
		if (lg_app_reaped(m->apps, pid, status))
			continue;
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

void
lg_respawn_spawn_all(struct master *m, struct lg_gen *g)
{
	for (uint32_t k = 0; k < g->nchildren; k++)
		if (!g->children[k].parked)
			lg_gen_spawn(m->gens, g, &g->children[k], m->listen_fd, m->sigfd);
}
