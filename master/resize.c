#include "master/resize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "master/gen.h"
#include "shm/stats.h"

#define READ_PERIOD_NS  (1000 * LG_NS_PER_MS) /* "about once a second" */
#define SPAWN_GAP_NS    (100 * LG_NS_PER_MS)  /* growth: at most ten forks a second */

/* A RETIRE header waits behind the queued jobs, each bounded by the deadline; one that is not
 * taken long after that went to a process that died before it could leave (a crash between the
 * recv and the exit), so it is written off and the pass sends another if still needed. */
static uint64_t
retire_lost_ns(const struct lg_gen *g)
{
	return (2 * g->cfg.jobs.deadline_ms + 1000) * LG_NS_PER_MS;
}

static void
quota_text(char *out, size_t cap, double quota)
{
	if (quota > 0)
		snprintf(out, cap, "%g", quota);
	else
		snprintf(out, cap, "none");
}

/* The budget in s was read twice in a row: make it the one in force, and every pool's counts
 * that follow it (a share or the default rule; a count given stays). */
static void
apply(struct lg_gen *g, const struct lg_sizing *s)
{
	struct lg_master_page *mp = g->arena.master;
	int old_b = g->sz.budget;
	char quota[32];
	struct timespec ts;

	quota_text(quota, sizeof(quota), s->quota);
	log_info("CPU budget changed from %d to %d (quota %s%s%s, read twice)", old_b, s->budget,
	    quota, s->quota_source[0] ? " from " : "", s->quota_source);
	for (uint32_t p = 0; p < g->npools; p++) {
		int c, q, old_c = g->sz.pool_compute[p], old_q = g->sz.pool_queue[p];

		if (p == 0)
			lg_sizing_counts(&g->cfg.jobs, s->budget, &c, &q);
		else
			lg_sizing_pool_counts(&g->cfg.jobs.pools[p], s->budget, &c, &q);
		if (c > g->sz.pool_compute_max[p])
			c = g->sz.pool_compute_max[p]; /* more CPUs than were online at start-up */
		if (q > g->sz.pool_queue_max[p])
			q = g->sz.pool_queue_max[p];
		g->sz.pool_compute[p] = c;
		g->sz.pool_queue[p] = q;
		if (c != old_c || q != old_q)
			log_info("pool %s: compute processes %d -> %d, queue %d -> %d",
			    g->cfg.jobs.pools[p].name, old_c, c, old_q, q);
	}
	g->sz.budget = s->budget;
	g->sz.quota = s->quota;
	g->sz.compute_workers = g->sz.pool_compute[0];
	g->sz.queue_capacity = g->sz.pool_queue[0];
	atomic_store(&mp->quota, s->quota);
	atomic_store(&mp->budget, (uint32_t)s->budget);
	lg_gen_publish_targets(g);
	lg_stats_add(&mp->budget_changes, 1);
	clock_gettime(CLOCK_REALTIME, &ts);
	atomic_store(&mp->budget_changed_unix_ms, (uint64_t)ts.tv_sec * 1000u +
	    (uint64_t)ts.tv_nsec / 1000000u);
}

/* Returns 1 when a budget change was applied. */
static int
read_budget(struct lg_gen *g)
{
	struct lg_sizing s;

	lg_sizing_reread(getenv("LAGLESS_SYSROOT"), &s);
	lg_sizing_decide(&s, &g->cfg);
	if (s.budget == g->sz.budget) {
		g->rs.candidate = 0;
		if (s.quota != g->sz.quota) { /* a new quota that rounds to the same budget */
			g->sz.quota = s.quota;
			atomic_store(&g->arena.master->quota, s.quota);
		}
		return 0;
	}
	if (s.budget != g->rs.candidate) {
		log_debug("CPU budget reads %d (in force: %d); waiting for a second reading",
		    s.budget, g->sz.budget);
		g->rs.candidate = s.budget;
		return 0;
	}
	g->rs.candidate = 0;
	apply(g, &s);
	return 1;
}

static void
grow(struct lg_gen *all, struct lg_gen *g, struct lg_child *c, int listen_fd, int sigfd,
    uint64_t now)
{
	struct lg_resize_pool *rp = &g->rs.pool[c->pool];

	c->parked = 0;
	c->respawn_at = 0;
	c->backoff_ns = 0;
	c->quick_deaths = 0;
	lg_gen_spawn(all, g, c, listen_fd, sigfd);
	lg_stats_add(&g->arena.master->resize_spawned, 1);
	rp->next_spawn = now + SPAWN_GAP_NS;
	log_info("compute[%u] started: pool %s grows to %d", c->index, g->cfg.jobs.pools[c->pool].name,
	    g->sz.pool_compute[c->pool]);
}

/* Sends one RETIRE header; returns 0, or -1 when the job channel is full (tried again on the
 * next pass). */
static int
shrink(struct lg_gen *g, uint32_t p, uint64_t now)
{
	struct lg_resize_pool *rp = &g->rs.pool[p];
	struct lg_msg m = { .type = LG_MSG_RETIRE, .retire = { .seq = rp->retire_seq + 1 } };

	if (lg_chan_send(g->ch.job[p][0], &m, MSG_DONTWAIT) == -1) {
		if (errno != EAGAIN)
			log_warn("cannot send a RETIRE header: %s", strerror(errno));
		return -1;
	}
	rp->retire_seq++;
	rp->retires_out++;
	rp->retire_sent_ns = now;
	log_info("asking one compute process of pool %s to leave after its job (request %u): "
	    "the pool shrinks to %d", g->cfg.jobs.pools[p].name, rp->retire_seq, g->sz.pool_compute[p]);
	return 0;
}

/* Moves the compute rows towards the target: active rows minus the RETIRE headers still on
 * their way is what the pool will have. */
static void
converge(struct lg_gen *all, struct lg_gen *g, uint32_t p, int listen_fd, int sigfd,
    uint64_t now, uint64_t *next)
{
	struct lg_resize_pool *rp = &g->rs.pool[p];
	struct lg_child *parked = NULL;
	int active = 0, target = g->sz.pool_compute[p];

	for (uint32_t k = g->nloops; k < g->nchildren; k++) {
		if (g->children[k].pool != p)
			continue;
		if (!g->children[k].parked)
			active++;
		else if (parked == NULL)
			parked = &g->children[k];
	}
	if (rp->retires_out > 0 && now - rp->retire_sent_ns > retire_lost_ns(g)) {
		log_warn("%u RETIRE header(s) of pool %s were not taken; assuming their process died",
		    rp->retires_out, g->cfg.jobs.pools[p].name);
		rp->retires_out = 0;
	}
	active -= (int)rp->retires_out;
	if (active < target && parked != NULL) {
		if (now >= rp->next_spawn)
			grow(all, g, parked, listen_fd, sigfd, now);
		if (rp->next_spawn < *next)
			*next = rp->next_spawn;
	}
	while (active > target && shrink(g, p, now) == 0)
		active--;
}

int
lg_resize_tick(struct lg_gen *all, struct lg_gen *g, int listen_fd, int sigfd, uint64_t now,
    uint64_t *next)
{
	int changed = 0;

	if (!g->sz.live_resize)
		return 0;
	if (now >= g->rs.next_read) {
		changed = read_budget(g);
		g->rs.next_read = now + READ_PERIOD_NS;
	}
	for (uint32_t p = 0; p < g->npools; p++)
		converge(all, g, p, listen_fd, sigfd, now, next);
	if (g->rs.next_read < *next)
		*next = g->rs.next_read;
	return changed;
}

int
lg_resize_exited(struct lg_gen *g, struct lg_child *c, uint32_t state)
{
	if (c->role != LG_ROLE_COMPUTE || state != LG_PROC_RETIRED)
		return 0;
	c->parked = 1;
	if (g->rs.pool[c->pool].retires_out > 0)
		g->rs.pool[c->pool].retires_out--;
	atomic_store(&g->arena.procs[c - g->children].state, LG_PROC_RETIRED);
	lg_stats_add(&g->arena.master->resize_retired, 1);
	return 1;
}
