#include "cpupool/compute.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "kinds/registry.h"
#include "shm/codel.h"
#include "shm/slot.h"
#include "shm/stats.h"

/* lagless_job_queue_wait_seconds / lagless_job_run_seconds, by kind. Times are this process's
 * own (the slot may be reused as soon as it is finished). */
static void
observe(const struct lg_compute_env *env, uint32_t kind, uint64_t enqueue, uint64_t start,
    uint64_t end)
{
	struct lg_kind_stats *ks;

	if (kind >= env->arena->stat_kinds)
		return;
	ks = lg_arena_kind_stats(env->arena, lg_arena_proc_index(env->arena, env->page), kind);
	lg_hist_observe(&ks->queue_wait, lg_stats_time_bounds, LG_STATS_BOUNDS,
	    start > enqueue ? start - enqueue : 0);
	lg_hist_observe(&ks->run, lg_stats_time_bounds, LG_STATS_BOUNDS, end - start);
}

/* Backs the output region before the job writes to it (the kind's bound for this input, else
 * the whole region), so a memory cgroup limit or a full shared-memory filesystem is an error
 * answer (503) rather than SIGBUS in the middle of the job; then runs the kind. */
static int
run_kind(const struct lg_compute_env *env, uint32_t slot, const struct lg_job *m, uint64_t start,
    uint64_t *out_len)
{
	const struct lg_registry *reg = env->cfg->reg;
	struct lg_arena *a = env->arena;
	uint64_t need;
	int too_large = lg_registry_out_need(reg, m->kind, m->route, m->in_len, a->out_cap,
	    &need) == -1;

	struct lg_init_guard guard = { a->master->modules, &env->page->in_init };

	*out_len = 0;
	if (!lg_registry_usable(env->cfg->reg, m->kind, &guard))
		return LG_JOB_UNAVAILABLE; /* its module's init failed: 503, not run */
	if (too_large)
		need = LG_OUT_META;
	/* Within the memory budget (shm/arena.h) before backing: beyond it, 503 memory. */
	if (lg_arena_charge_out(a, slot, need) == -1) {
		log_debug("%llu output bytes for slot %u are over the shared-memory budget",
		    (unsigned long long)need, slot);
		return LG_JOB_NO_SPACE;
	}
	if (lg_arena_reserve(a, lg_arena_out_off(a, slot), need) == -1) {
		log_warn("cannot back %llu output bytes for slot %u: %s",
		    (unsigned long long)need, slot, strerror(errno));
		return LG_JOB_NO_SPACE;
	}
	a->slots[slot].touched += need; /* the master punches large jobs' pages out */
	if (too_large) {
		memset(lg_arena_out(a, slot), 0, sizeof(struct lg_out_meta));
		return LG_JOB_TOO_LARGE;
	}
	return lg_registry_run(reg, m, lg_arena_in(a, slot), a->in_cap, lg_arena_out(a, slot),
	    a->out_cap, start, env->cfg->enable_test_jobs, out_len);
}

/* The pool's memory (--compute-memory for the default pool): RLIMIT_DATA (setrlimit(2); since Linux 4.7 it counts private writable
 * mappings and the heap, not the shared arena), so a kind that allocates without bound gets
 * NULL from malloc and answers an error instead of inviting the OOM killer. */
static void
limit_memory(uint64_t bytes)
{
	struct rlimit rl = { bytes, bytes };

	if (bytes > 0 && setrlimit(RLIMIT_DATA, &rl) == -1)
		log_warn("cannot set RLIMIT_DATA to %llu bytes: %s", (unsigned long long)bytes,
		    strerror(errno));
}

void
lg_compute_prefer_oom_kill(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd == -1 || write(fd, "1000", 4) != 4)
		log_warn("cannot raise oom_score_adj: %s", strerror(errno));
	if (fd != -1)
		close(fd);
}

/* The pool's scheduling policy (sched(7)); SCHED_OTHER by default. Under SCHED_IDLE any task
 * woken on the CPU where a job runs preempts it at once (the kernel checks the policy per task,
 * across cgroups), so a loop worker never waits for the job's slice to end (up to a tick, 4 ms
 * at HZ = 250); but on a machine shared with other busy programs the jobs then yield to all of
 * them (a test suite's 1 s job took over 3 s at load 6). Lowering the policy needs no
 * privilege; nice(2) weighs only under SCHED_BATCH and SCHED_OTHER. */
static void
set_policy(int policy)
{
	struct sched_param sp = { .sched_priority = 0 };

	if (policy != SCHED_OTHER && sched_setscheduler(0, policy, &sp) == -1)
		log_warn("cannot set scheduling policy %d: %s", policy, strerror(errno));
}

/* sched_setattr(2)'s struct sched_attr as of its first version (SCHED_ATTR_SIZE_VER0, 48 bytes),
 * declared here: glibc declares it in <sched.h> only from 2.41, and <linux/sched/types.h>
 * then clashes with it. */
struct lg_sched_attr {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime;  /* ns; under SCHED_OTHER, BATCH and IDLE the requested time slice */
	uint64_t deadline;
	uint64_t period;
};

/* The pool's requested time slice, slice_ms > 0 (0: the kernel's default is kept). Since Linux
 * 6.12 (EEVDF custom slices, sched_setattr(2) sched_runtime, clamped by the kernel to 0.1-100
 * ms) a task woken with a shorter slice than the running one's preempts it at once if it is
 * eligible (PREEMPT_SHORT), where it otherwise waits for the running task's slice to end, seen
 * at the next tick (4 ms at HZ = 250): with a slice longer than the default (0.7 ms x (1 +
 * log2 CPUs), at most 8 CPUs counted), a loop worker or an app process woken beside a job
 * takes the CPU at once. The weight, hence the job's CPU share over time, is the nice's, so
 * unlike SCHED_IDLE a busy machine does not starve the jobs. Kernels before 6.12 ignore
 * sched_runtime outside SCHED_DEADLINE. The call restates the policy and the current nice
 * (sched_setattr sets both); keeping one's nice needs no privilege. */
static void
set_slice(int policy, uint64_t slice_ms)
{
	struct lg_sched_attr a = { .size = sizeof(a), .policy = (uint32_t)policy,
	    .runtime = slice_ms * 1000000 };

	if (slice_ms == 0)
		return;
	errno = 0;
	a.nice = getpriority(PRIO_PROCESS, 0);
	if (errno != 0 || syscall(SYS_sched_setattr, 0, &a, 0) == -1)
		log_warn("cannot set a time slice of %llu ms: %s", (unsigned long long)slice_ms,
		    strerror(errno));
}

/* A queue-wait target far below the jobs' run time refuses jobs well below capacity: a job
 * that arrives while every compute process is busy waits for one to finish, however healthy
 * the queue (5 ms against 140 ms jobs refused 34 % at 0.8x capacity). Said once per pool, by
 * the first process that sees a job run more than twice the target. */
static void
check_target(struct lg_pool_page *pool, const struct lg_codel_params *cp, uint64_t run_ns,
    uint32_t kind, const struct lg_registry *reg)
{
	uint32_t no = 0;
	const struct lg_kind *k;

	if (cp->target_ns == 0 || run_ns <= 2 * cp->target_ns ||
	    atomic_load_explicit(&pool->target_warned, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong(&pool->target_warned, &no, 1))
		return;
	k = lg_registry_kind(reg, kind);
	log_warn("pool %s: a %s job ran %.1f ms, far over the queue-wait target of %.1f ms: "
	    "admission then refuses jobs well below capacity (a job waits for a busy process to "
	    "finish one); set queue_wait_target_ms to at least the jobs' typical run time and "
	    "the interval to four or five of them (docs/OPERATIONS.md, admission)", pool->name,
	    k ? k->name : "?", (double)run_ns / 1e6, (double)cp->target_ns / 1e6);
}

/* Tells the owner loop that slot (slot, gen) is DONE or FAILED: status, out_len and the times
 * are in the slot. Blocking send: the channel holds far more headers than there are slots, so
 * this only waits if the owner loop is stuck, and then the master replaces that loop. */
static void
notify_owner(const struct lg_compute_env *env, uint32_t slot, uint32_t gen, uint32_t owner)
{
	struct lg_msg done = { .type = LG_MSG_DONE, .done = { .slot = slot, .gen = gen } };

	if (owner >= env->ch->nloops || lg_chan_send(env->ch->done[owner][1], &done, 0) == -1)
		log_warn("completion for slot %u to loop %u: %s", slot, owner, strerror(errno));
}

/* Runs job m of slot `slot` at generation gen (owner loop `owner`), the slot started at now
 * (CLOCK_MONOTONIC ns), or refuses it (quarantined, shed); finishes the slot and tells the
 * owner. */
static void
run_started(const struct lg_compute_env *env, uint32_t slot, uint32_t gen, uint32_t owner,
    const struct lg_job *m, uint64_t now)
{
	struct lg_arena *a = env->arena;
	struct lg_slot *s = &a->slots[slot];
	uint64_t out_len;
	int st;

	atomic_store_explicit(&env->page->job_since_ns, now, memory_order_relaxed);
	/* A job of a kind quarantined while it waited is not run: 503 instead of one more death;
	 * nor one that waited past the queue-wait limit: its client has waited long enough. */
	uint64_t wait = now > m->enqueue_ns ? now - m->enqueue_ns : 0;
	struct lg_codel_params cp = lg_codel_params_of(&env->cfg->jobs.pools[env->pool]);
	struct lg_pool_page *pool = &a->master->pools[env->pool];
	struct lg_slot_pool sp = { .arena = a, .pool = env->pool };

	out_len = 0;
	if (lg_stats_quarantine_left(a->master, m->kind, m->route, now))
		st = LG_JOB_QUARANTINED;
	else if (lg_codel_shed(&pool->codel, &cp, wait, now, lg_slot_queued_floor, &sp))
		st = LG_JOB_SHED;
	else
		st = run_kind(env, slot, m, now, &out_len);
	s->out_len = out_len;
	s->touched += out_len; /* beyond what was backed, for a kind with no bound */
	uint64_t end = lg_now_ns();
	int notify = lg_slot_finish(s, gen, (enum lg_job_status)st, end);
	atomic_store(&env->page->job, LG_NO_JOB);
	atomic_fetch_add(&env->page->requests, 1);
	observe(env, m->kind, m->enqueue_ns, now, end);
	if (st != LG_JOB_SHED && st != LG_JOB_QUARANTINED && end - now > pool->slow_ns)
		atomic_fetch_add(&pool->slow_jobs, 1);
	if (st == LG_JOB_OK)
		check_target(pool, &cp, end - now, m->kind, env->cfg->reg);
	if (notify != 1)
		return; /* the owner abandoned it and the slot is free again */
	/* Only a job that ran and is answered is a sample: a refused (503), timed-out (504) or
	 * cancelled job's wait says nothing about the queue the served jobs saw. */
	if (st == LG_JOB_OK)
		lg_codel_sample(&pool->codel, &cp, wait, end, lg_slot_queued_floor, &sp);
	notify_owner(env, slot, gen, owner);
}

/* Runs the job of a JOB header that passed lg_wire_check_job. The slot is named in the proc
 * page before it is started, so the master can find and fail the job if this process dies at
 * any instruction after that; its record is read once it is ours (RUNNING). */
static void
run_one(const struct lg_compute_env *env, uint32_t slot, uint32_t gen)
{
	struct lg_arena *a = env->arena;
	struct lg_slot *s = &a->slots[slot];
	struct lg_job j;
	uint32_t owner = 0;
	uint64_t now = lg_now_ns();

	/* A label for the master if this process dies: racy before the start, checked after. */
	atomic_store(&env->page->job_kind, s->job.kind);
	atomic_store(&env->page->job_route, s->job.route);
	atomic_store(&env->page->job, ((uint64_t)slot << 32) | gen);
	if (lg_slot_start(s, gen, atomic_load(&env->page->pid), now) == -1) {
		/* Cancelled (client gone, deadline) or a stale header: skip it. */
		atomic_store(&env->page->job, LG_NO_JOB);
		log_debug("skip slot %u gen %u: %s", slot, gen, strerror(errno));
		return;
	}
	if (lg_slot_job_read(a, slot, gen, env->ch->nloops, &j, &owner) == -1) {
		/* A record no loop of ours wrote: answered 500 when its owner is one of ours. */
		int err = errno, notify = lg_slot_finish(s, gen, LG_JOB_ERROR, lg_now_ns());

		atomic_store(&env->page->job, LG_NO_JOB);
		atomic_fetch_add(&env->page->bad_headers, 1);
		log_warn("slot %u gen %u holds a job that failed validation: %s", slot, gen,
		    strerror(err));
		if (notify == 1 && err == ERANGE)
			notify_owner(env, slot, gen, owner);
		return;
	}
	atomic_store(&env->page->job_kind, j.kind);
	atomic_store(&env->page->job_route, j.route);
	run_started(env, slot, gen, owner, &j, now);
}

/* A process a kind forks must not outlive this one (it would hold the arena and the channels
 * after the server stopped). As a subreaper (prctl(2) PR_SET_CHILD_SUBREAPER) the orphans of a
 * kind's children (a daemon's double fork) become ours instead of init's, and as the leader of
 * a process group of its own every descendant that stays in it ends with this process: the
 * master SIGKILLs the group when it reaps us (master/master.c), whatever we died of. */
static void
own_descendants(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		log_warn("cannot become a subreaper: %s", strerror(errno));
	if (setpgid(0, 0) == -1)
		log_warn("cannot lead a process group: %s", strerror(errno));
}

/* Reaps the descendants of jobs that ended (our children, or orphans given to us). */
static void
reap_descendants(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Process pid's private memory in bytes (0: this process): RssAnon of /proc/PID/status
 * (proc(5)), which a leak grows, unlike the shared arena's pages it touched (RssShmem); 0 when
 * unreadable. */
static uint64_t
rss_anon_of(pid_t pid)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *f;

	if (pid == 0)
		snprintf(line, sizeof(line), "/proc/self/status");
	else
		snprintf(line, sizeof(line), "/proc/%d/status", (int)pid);
	if ((f = fopen(line, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* The private memory of this process and of its children (/proc/self/task/TID/children,
 * proc(5), Linux 3.5): a kind's helper process is part of the compute process's footprint, as
 * the python module's python3 process is (modules/python/relay.h). */
static uint64_t
rss_anon(void)
{
	char path[64];
	uint64_t sum = rss_anon_of(0);
	int pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	if ((f = fopen(path, "re")) == NULL)
		return sum;
	while (fscanf(f, "%d", &pid) == 1)
		sum += rss_anon_of(pid);
	fclose(f);
	return sum;
}

/* After a job: 1 when its pool's max_jobs or max_rss says this process should go (gunicorn's
 * max_requests, PHP-FPM's pm.max_requests, uWSGI's reload-on-rss), logged with the reason. */
static int
recycle_due(const struct lg_pool_cfg *pool, uint64_t jobs)
{
	uint64_t rss;

	if (pool->max_jobs && jobs >= pool->max_jobs) {
		log_info("recycling after %llu jobs (max_jobs of pool %s)", (unsigned long long)jobs,
		    pool->name);
		return 1;
	}
	if (pool->max_rss && (rss = rss_anon()) > pool->max_rss) {
		log_info("recycling: private memory %llu KiB past max_rss %llu KiB of pool %s",
		    (unsigned long long)(rss >> 10), (unsigned long long)(pool->max_rss >> 10),
		    pool->name);
		return 1;
	}
	return 0;
}

/* After a job: 1 when its kind asked for this process to be replaced (host->recycle, module
 * ABI 1.2), logged. The answer is already handed over: only later jobs are spared. */
static int
kind_recycle(void)
{
	if (!lg_host_recycle_asked())
		return 0;
	log_info("recycling: the kind of the last job asked for it (host->recycle)");
	return 1;
}

/* Judges a header taken from the job channel (r from lg_chan_recv, not RETIRE): 1 when m names
 * a slot of this pool at its current generation, to run; 0 for a stale one (its job was
 * cancelled and the slot reused since), skipped; -1 for one no loop of ours wrote (a slot out
 * of range or of another pool, another type, a datagram that did not decode), counted. */
static int
job_header(const struct lg_compute_env *env, int r, const struct lg_msg *m)
{
	const struct lg_pool_page *pp = &env->arena->master->pools[env->pool];
	int rc = r == 1 ? lg_wire_check_job(m, env->arena) : -1;

	if (rc == -1 && r == 1 && errno == ESTALE && m->job.slot - pp->first_slot < pp->nslots) {
		log_debug("skip slot %u gen %u: reused since", m->job.slot, m->job.gen);
		return 0;
	}
	if (rc == -1 || m->job.slot - pp->first_slot >= pp->nslots) {
		atomic_fetch_add(&env->page->bad_headers, 1);
		log_warn("dropped a job header that failed validation");
		return -1;
	}
	return 1;
}

int
lg_compute_main(const struct lg_compute_env *env)
{
	const struct lg_pool_cfg *pool = &env->cfg->jobs.pools[env->pool];
	struct lg_msg m;
	uint64_t jobs = 0;

	if (pool->nice > 0)
		(void)!nice(pool->nice);
	set_policy(pool->policy);
	set_slice(pool->policy, pool->slice_ms);
	limit_memory(pool->memory);
	own_descendants();
	if (lg_arena_protect_inputs(env->arena) == -1)
		log_warn("cannot map the input regions read-only: %s", strerror(errno));
	struct lg_init_guard guard = { env->arena->master->modules, &env->page->in_init };

	lg_registry_init_process(env->cfg->reg, 0, &guard);
	atomic_store(&env->page->state, LG_PROC_RUNNING);
	log_info("started");
	for (;;) {
		int r = lg_chan_recv(env->ch->job[env->pool][1], &m, 0);

		if (r == -1) {
			if (errno == EINTR)
				continue;
			log_error("job channel: %s", strerror(errno));
			return 1;
		}
		atomic_store(&env->page->heartbeat_ns, lg_now_ns());
		if (r == 1 && m.type == LG_MSG_RETIRE) {
			/* Live resize: the pool shrinks by one. Taken between jobs, so no job is
			 * lost; the state tells the master not to respawn this row. */
			atomic_store(&env->page->state, LG_PROC_RETIRED);
			log_info("retiring (the CPU budget shrank; request %u)", m.retire.seq);
			lg_registry_exit_process(env->cfg->reg);
			return 0;
		}
		if (job_header(env, r, &m) != 1)
			continue;
		run_one(env, m.job.slot, m.job.gen);
		reap_descendants();
		if (recycle_due(pool, ++jobs) || kind_recycle()) {
			/* a graceful exit: the modules' exit hooks run (<lagless/module.h>), so
			 * that what they started (the python module's python3) ends first */
			lg_registry_exit_process(env->cfg->reg);
			return LG_COMPUTE_RECYCLE;
		}
	}
}
