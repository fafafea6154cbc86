#include "master/gen.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "cpupool/compute.h"
#include "kinds/registry.h"
#include "shm/codel.h"
#include "shm/slot.h"
#include "shm/upeject.h"
#include "worker/loop.h"

#define BACKOFF_MIN_NS (100 * LG_NS_PER_MS)

const char *
lg_gen_role_name(enum lg_role r)
{
	return r == LG_ROLE_LOOP ? "loop" : "compute";
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
publish_sizing(struct lg_gen *g, pid_t master_pid, const struct lg_gen *prev)
{
	struct lg_master_page *mp = g->arena.master;
	const struct lg_sizing *sz = &g->sz;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	atomic_store(&mp->pid, (int32_t)master_pid);
	mp->start_unix_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	mp->start_mono_ns = lg_now_ns();
	if (prev != NULL) {
		const struct lg_master_page *pp = prev->arena.master;

		mp->start_unix_ms = pp->start_unix_ms;
		mp->start_mono_ns = pp->start_mono_ns;
		for (int r = 0; r < 2; r++)
			for (int k = 0; k < LG_RESTART_REASONS; k++)
				atomic_store(&mp->restarts[r][k], atomic_load(&pp->restarts[r][k]));
	}
	atomic_store(&mp->budget, (uint32_t)sz->budget);
	atomic_store(&mp->quota, sz->quota);
	mp->cpus_override = sz->cpus_override;
	mp->online = sz->online;
	mp->affinity = sz->affinity;
	mp->cpuset = sz->cpuset;
	mp->loop_workers = g->nloops;
	atomic_store(&mp->live_resize, (uint32_t)sz->live_resize);
	mp->compute_max = g->ncompute;
	mp->queue_max = 0;
	for (uint32_t p = 0; p < g->npools; p++)
		mp->queue_max += (uint32_t)sz->pool_queue_max[p];
	lg_gen_publish_targets(g);
	snprintf(mp->cgroup, sizeof(mp->cgroup), "%s", sz->cgroup_version);
	snprintf(mp->rounding, sizeof(mp->rounding), "%s",
	    sz->rounding == LG_ROUND_CEIL ? "ceil" : "floor");
	cpu_stat_path(mp->cpu_stat, sizeof(mp->cpu_stat), sz);
	atomic_store(&mp->mem_limit, sz->mem.limit);
	atomic_store(&mp->shm_budget, sz->mem.budget);
}

/* The pool pages: each pool's part of the slot table and of the child table, its slow-job
 * threshold and its admission state (shm/layout.h struct lg_pool_page). */
static void
publish_pools(struct lg_gen *g)
{
	struct lg_master_page *mp = g->arena.master;
	uint32_t slot = 0, row = g->nloops;

	for (uint32_t p = 0; p < g->npools; p++) {
		struct lg_pool_page *pp = &mp->pools[p];
		const struct lg_pool_cfg *pc = &g->cfg.jobs.pools[p];
		struct lg_codel_params cp = lg_codel_params_of(pc);

		snprintf(pp->name, sizeof(pp->name), "%s", pc->name);
		pp->first_slot = slot;
		/* its transit buffers; the first C + Q of their tokens are its job slots */
		pp->nslots = lg_gen_transit_buffers(&g->cfg,
		    (uint32_t)(g->sz.pool_compute_max[p] + g->sz.pool_queue_max[p]));
		pp->first_row = row;
		pp->nrows = (uint32_t)g->sz.pool_compute_max[p];
		pp->slow_ns = pc->deadline_ms * LG_NS_PER_MS / 2;
		lg_codel_init(&pp->codel, &cp);
		slot += pp->nslots;
		row += pp->nrows;
	}
	mp->npools = g->npools;
}

void
lg_gen_publish_targets(struct lg_gen *g)
{
	struct lg_master_page *mp = g->arena.master;
	uint32_t c = 0, q = 0;

	for (uint32_t p = 0; p < g->npools; p++) {
		struct lg_pool_page *pp = &mp->pools[p];

		atomic_store(&pp->compute_target, (uint32_t)g->sz.pool_compute[p]);
		atomic_store(&pp->queue_capacity, (uint32_t)g->sz.pool_queue[p]);
		atomic_store(&pp->slot_limit, (uint32_t)(g->sz.pool_compute[p] + g->sz.pool_queue[p]));
		c += (uint32_t)g->sz.pool_compute[p];
		q += (uint32_t)g->sz.pool_queue[p];
	}
	atomic_store(&mp->compute_workers, c);
	atomic_store(&mp->queue_capacity, q);
}

static void
pool_status(const struct lg_gen *g, char *buf, size_t cap)
{
	const struct lg_master_page *mp = g->arena.master;
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t p = 0; p < g->npools && n < cap; p++) {
		const struct lg_pool_page *pp = &mp->pools[p];
		uint32_t census[LG_SLOT_STATES], alive = 0, active = 0;
		int w;

		for (uint32_t k = pp->first_row; k < pp->first_row + pp->nrows; k++) {
			alive += g->children[k].pid > 0;
			active += atomic_load(&g->arena.procs[k].job) != LG_NO_JOB;
		}
		lg_slot_census_pool(&g->arena, p, census);
		w = snprintf(buf + n, cap - n, "; pool %s: %u/%u active/processes, queue %u/%u, "
		    "full %llu", pp->name, active, alive, census[LG_SLOT_QUEUED],
		    atomic_load(&pp->queue_capacity), (unsigned long long)atomic_load(&pp->full));
		if (w < 0)
			break;
		n += (size_t)w;
	}
}

void
lg_gen_status_line(const struct lg_gen *g, char *buf, size_t cap)
{
	uint32_t census[LG_SLOT_STATES];
	int loops = 0, computes = 0, n;

	lg_slot_census(&g->arena, census);
	for (uint32_t k = 0; k < g->nchildren; k++)
		*(g->children[k].role == LG_ROLE_LOOP ? &loops : &computes) += g->children[k].pid > 0;
	n = snprintf(buf, cap, "%d/%u loop workers, %d/%u compute, queue %u/%u, running %u, "
	    "budget %d CPU, generation %u", loops, g->nloops, computes,
	    atomic_load(&g->arena.master->compute_workers), census[LG_SLOT_QUEUED],
	    atomic_load(&g->arena.master->queue_capacity), census[LG_SLOT_RUNNING], g->sz.budget,
	    g->id);
	if (g->npools > 1 && n > 0 && (size_t)n < cap)
		pool_status(g, buf + n, cap - (size_t)n);
}

/* Rows: loop workers, then each pool's compute rows; those beyond a pool's current target
 * are parked (room for a live resize). */
static void
make_rows(struct lg_gen *g)
{
	uint32_t k = 0;

	for (; k < g->nloops; k++) {
		g->children[k].role = LG_ROLE_LOOP;
		g->children[k].index = k;
	}
	for (uint32_t p = 0; p < g->npools; p++)
		for (int r = 0; r < g->sz.pool_compute_max[p]; r++, k++) {
			struct lg_child *c = &g->children[k];

			c->role = LG_ROLE_COMPUTE;
			c->index = k - g->nloops;
			c->pool = p;
			if (r >= g->sz.pool_compute[p]) {
				c->parked = 1;
				atomic_store(&g->arena.procs[k].state, LG_PROC_RETIRED);
			}
		}
}

/* The upstreams' admission records, bounded by their max_conns and queue, each with its CoDel
 * settings, then the route bulkheads' (shm/upstream.h). */
static int
create_upstreams(struct lg_gen *g, const struct lg_config *cfg)
{
	struct lg_registry *reg = cfg->reg;
	uint32_t nu = reg ? reg->nupstreams : 0, n = nu + (reg ? lg_registry_bulkheads(reg) : 0);
	uint32_t max[n ? n : 1], q[n ? n : 1];

	for (uint32_t i = 0; i < nu; i++) {
		max[i] = reg->upstreams[i].max_conns;
		q[i] = reg->upstreams[i].queue;
	}
	for (uint32_t k = 0; reg && k < reg->nroutes; k++)
		if (reg->routes[k].bulkhead) {
			max[nu + reg->routes[k].bulkhead - 1] = reg->routes[k].max_conns;
			q[nu + reg->routes[k].bulkhead - 1] = reg->routes[k].queue;
		}
	if (lg_upshm_create(&g->ups, nu, n - nu, max, q) == -1) {
		log_error("cannot map the upstreams' admission records: %s", strerror(errno));
		return -1;
	}
	for (uint32_t i = 0; i < nu; i++) {
		const struct lg_upstream_def *u = &reg->upstreams[i];
		const char *addrs[LG_UP_SERVERS];
		struct lg_codel_params p = {
			.target_ns = u->queue_wait_target_ms * LG_NS_PER_MS,
			.interval_ns = u->queue_wait_interval_ms * LG_NS_PER_MS };

		lg_codel_init(&g->ups.adm[i].codel, &p);
		for (unsigned s = 0; s < u->nservers && s < LG_UP_SERVERS; s++)
			addrs[s] = u->servers[s].addr;
		lg_upadm_setup(&g->ups.adm[i], u->nservers, addrs, u->eject_after, u->eject_ms,
		    u->eject_max_percent, u->retry_budget_percent, u->retry_budget_min);
	}
	return 0;
}

/* The shared memory and channels of g: the arena of shape s with its request views backed, the
 * channels, the flight table and the cache. Returns 0, or -1 with the error logged (what was
 * made stays in g for lg_gen_destroy). */
static int
create_shared(struct lg_gen *g, const struct lg_config *cfg, const struct lg_arena_shape *s)
{
	if (lg_arena_create_sized(&g->arena, s->nslots, g->nchildren, s->in_cap, s->out_cap,
	    s->nroutes, s->nkinds) == -1) {
		log_error("cannot create the shared-memory arena: %s", strerror(errno));
		return -1;
	}
	/* The request views' pages stay backed, so claiming a slot needs no fallocate(2) on a
	 * loop thread (shm/arena.h). */
	if (lg_arena_keep(&g->arena, LG_VIEW_BOUND(cfg->http.max_head)) == -1) {
		log_error("cannot back %u request views of %zu bytes (--max-head): %s",
		    s->nslots, (size_t)LG_VIEW_BOUND(cfg->http.max_head), strerror(errno));
		return -1;
	}
	if (lg_channels_create(&g->ch, g->nloops, g->npools) == -1) {
		log_error("cannot create the channels: %s", strerror(errno));
		return -1;
	}
	/* The flight table is backed at once (counted in the memory budget's fixed part). */
	if (lg_flight_create_table(&g->flights, lg_flight_entries(g->arena.nslots)) == -1 ||
	    lg_cache_create(&g->cache, cfg->flights.cache_bytes, cfg->flights.cache_max_entry, g->nloops) == -1) {
		log_error("cannot create the single-flight table or the cache: %s", strerror(errno));
		return -1;
	}
	return create_upstreams(g, cfg);
}

struct lg_gen *
lg_gen_create(uint32_t id, const struct lg_config *cfg, const struct lg_sizing *sz,
    pid_t master_pid, const struct lg_gen *prev)
{
	struct lg_gen *g = calloc(1, sizeof(*g));
	struct lg_arena_shape s;

	if (g == NULL)
		return NULL;
	g->id = id;
	g->cfg = *cfg;
	g->sz = *sz;
	g->arena.fd = -1;
	for (int p = 0; p < LG_MAX_POOLS; p++)
		g->ch.job[p][0] = g->ch.job[p][1] = -1;
	g->ch.ctl[0] = g->ch.ctl[1] = -1;
	g->flights.fd = g->cache.fd = -1;
	g->nloops = (uint32_t)sz->loop_workers;
	g->npools = g->sz.npools >= 1 ? (uint32_t)g->sz.npools : 1;
	g->ncompute = 0;
	for (uint32_t p = 0; p < g->npools; p++) {
		lg_pool_max(sz, p, &g->sz.pool_compute_max[p], &g->sz.pool_queue_max[p]);
		g->ncompute += (uint32_t)g->sz.pool_compute_max[p];
	}
	g->nchildren = g->nloops + g->ncompute;
	lg_arena_shape(cfg, &g->sz, &s);
	if (create_shared(g, cfg, &s) == -1)
		goto fail;
	if ((g->children = calloc(g->nchildren, sizeof(*g->children))) == NULL)
		goto fail;
	make_rows(g);
	publish_pools(g);
	publish_sizing(g, master_pid, prev);
	lg_memwatch_start(g);
	log_info("generation %u: %u loop worker(s), %d compute, %d job slots (%d running + %d "
	    "queued open), %u transit buffers, arena of %llu MiB virtual%s", id, g->nloops,
	    sz->compute_workers, sz->compute_workers + sz->queue_capacity, sz->compute_workers,
	    sz->queue_capacity, g->arena.nslots, (unsigned long long)(g->arena.size >> 20),
	    g->sz.live_resize ? ", following the CPU budget" : "");
	return g;
fail:
	lg_gen_destroy(g);
	return NULL;
}

void
lg_gen_destroy(struct lg_gen *g)
{
	if (g == NULL)
		return;
	lg_channels_close(&g->ch);
	lg_arena_destroy(&g->arena);
	lg_registry_free(g->cfg.reg); /* each configuration load built its own */
	lg_flight_destroy_table(&g->flights);
	lg_cache_destroy(&g->cache);
	lg_upshm_destroy(&g->ups);
	free(g->children);
	free(g);
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

static int master_only_fd = -1; /* lg_gen_set_master_only */
static void (*child_close)(void *);  /* lg_gen_set_child_close */
static void *child_close_arg;

/* In the freshly forked child: drop the master's signal set-up and every other generation's
 * resources, so a retired generation's memory is not kept alive by a new process. */
static void
child_reset(struct lg_gen *all, struct lg_gen *g, int sigfd)
{
	sigset_t none;

	close(sigfd);
	if (master_only_fd >= 0)
		close(master_only_fd);
	if (child_close != NULL)
		child_close(child_close_arg);
	for (struct lg_gen *o = all; o != NULL; o = o->next) {
		if (o == g)
			continue;
		lg_channels_close(&o->ch);
		lg_arena_destroy(&o->arena);
		lg_flight_destroy_table(&o->flights);
		lg_cache_destroy(&o->cache);
		lg_upshm_destroy(&o->ups);
	}
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR1, reopen_log_handler);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static int more_fds[LG_LISTEN_MAX], nmore, admin_fd = -1;

void
lg_gen_set_admin(int fd)
{
	admin_fd = fd;
}

void
lg_gen_set_master_only(int fd)
{
	master_only_fd = fd;
}

void
lg_gen_set_child_close(void (*fn)(void *arg), void *arg)
{
	child_close = fn;
	child_close_arg = arg;
}

void
lg_gen_set_listeners(const int *fds, int n)
{
	nmore = n < 0 ? 0 : n > LG_LISTEN_MAX ? LG_LISTEN_MAX : n;
	if (nmore > 0)
		memcpy(more_fds, fds, (size_t)nmore * sizeof(*fds));
}

void
lg_gen_forget_all(struct lg_gen *all, int sigfd)
{
	child_reset(all, NULL, sigfd);
	for (int i = 0; i < nmore; i++)
		close(more_fds[i]);
	if (admin_fd >= 0)
		close(admin_fd);
}

/* Runs the role in the child. Never returns. */
static void
child_main(struct lg_gen *all, struct lg_gen *g, struct lg_child *c, int listen_fd, int sigfd,
    pid_t master)
{
	struct lg_proc_page *page = &g->arena.procs[c - g->children];
	int rc;

	/* PR_SET_PDEATHSIG, then check the parent did not die before it took effect
	 * (prctl(2)): a SIGKILLed master leaves nothing running. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != master)
		_exit(1);
	if (c->role == LG_ROLE_COMPUTE)
		lg_compute_prefer_oom_kill(); /* before anything else: cpupool/compute.h */
	child_reset(all, g, sigfd);
	lg_log_set_role(lg_gen_role_name(c->role), (int)c->index);
	prctl(PR_SET_NAME, c->role == LG_ROLE_LOOP ? "lagless-loop" : "lagless-compute");
	atomic_store(&page->pid, (int32_t)getpid());
	atomic_store(&page->job, LG_NO_JOB);
	/* A loop worker publishes its first heartbeat once it accepts; readiness waits for it. */
	atomic_store(&page->heartbeat_ns, c->role == LG_ROLE_LOOP ? 0 : lg_now_ns());
	page->role = (uint32_t)c->role;
	if (c->role == LG_ROLE_LOOP) {
		struct lg_loop_env env = {
			.cfg = &g->cfg, .arena = &g->arena, .ch = &g->ch, .listen_fd = listen_fd,
			.more_fds = more_fds, .nmore = nmore, .admin_fd = admin_fd,
			.index = c->index, .nloops = g->nloops, .page = page,
			.flights = &g->flights, .cache = &g->cache, .ups = &g->ups,
		};
		lg_channels_keep(&g->ch, 'l', c->index, 0);
		rc = lg_loop_main(&env);
	} else {
		struct lg_compute_env env = {
			.cfg = &g->cfg, .arena = &g->arena, .ch = &g->ch, .index = c->index,
			.pool = c->pool, .page = page,
		};
		close(listen_fd); /* a compute process holds no client or listen socket */
		for (int i = 0; i < nmore; i++)
			close(more_fds[i]);
		if (admin_fd >= 0)
			close(admin_fd);
		lg_flight_destroy_table(&g->flights); /* loops and the master use them */
		lg_cache_destroy(&g->cache);
		lg_upshm_destroy(&g->ups);
		lg_channels_keep(&g->ch, 'c', c->index, c->pool);
		rc = lg_compute_main(&env);
	}
	_exit(rc);
}

void
lg_gen_spawn(struct lg_gen *all, struct lg_gen *g, struct lg_child *c, int listen_fd, int sigfd)
{
	/* read before the fork: the new loop may count a request at once */
	uint64_t begun = atomic_load(&g->arena.procs[c - g->children].begun);
	pid_t master = getpid(), pid = fork();

	if (pid == -1) {
		log_error("fork %s[%u]: %s", lg_gen_role_name(c->role), c->index, strerror(errno));
		c->backoff_ns = c->backoff_ns ? c->backoff_ns : BACKOFF_MIN_NS;
		c->respawn_at = lg_now_ns() + c->backoff_ns;
		return;
	}
	if (pid == 0)
		child_main(all, g, c, listen_fd, sigfd, master);
	c->pid = pid;
	c->incarnation++;
	c->started_ns = lg_now_ns();
	c->begun_at_start = begun;
	c->kill_at = 0;
	c->killed_by_us = 0;
	c->stuck = 0;
	atomic_store(&g->arena.procs[c - g->children].pid, (int32_t)pid);
	if (c->incarnation > 1)
		log_info("respawn %s[%u] pid=%d (restart %u)", lg_gen_role_name(c->role), c->index,
		    (int)pid, c->restarts);
}
