#include "stats/poolview.h"

#include <inttypes.h>

#include "shm/codel.h"
#include "shm/slot.h"

#define P(...) lg_buf_printf(b, __VA_ARGS__)

struct view {
	const struct lg_pool_page *pp;
	uint32_t idle, active, total;  /* its compute processes alive, and doing what */
	uint32_t depth;                /* jobs queued now */
};

uint32_t
lg_poolview_count(const struct lg_arena *a)
{
	return a->master->npools > 0 ? a->master->npools : 1;
}

static void
read_view(const struct lg_arena *a, uint32_t p, struct view *v)
{
	uint32_t n[LG_SLOT_STATES];

	v->pp = &a->master->pools[p];
	v->idle = v->active = v->total = 0;
	for (uint32_t k = v->pp->first_row; k < v->pp->first_row + v->pp->nrows && k < a->nprocs;
	    k++) {
		if (atomic_load_explicit(&a->procs[k].pid, memory_order_relaxed) == 0)
			continue;
		v->total++;
		if (atomic_load_explicit(&a->procs[k].job, memory_order_relaxed) != LG_NO_JOB)
			v->active++;
		else
			v->idle++;
	}
	lg_slot_census_pool(a, p, n);
	v->depth = n[LG_SLOT_QUEUED];
}

/* One gauge or counter line per pool for a uint64 the caller reads from the view. */
#define EACH(metric, type, help, fmt, expr) do { \
	P("# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type); \
	for (uint32_t p = 0; p < np; p++) { \
		const struct view *v = &views[p]; \
		P("%s{pool=\"%s\"} " fmt "\n", metric, v->pp->name, expr); \
	} \
} while (0)

void
lg_poolview_metrics(struct lg_buf *b, const struct lg_arena *a)
{
	struct view views[LG_MAX_POOLS];
	uint32_t np = a->master->npools;

	if (np == 0 || np > LG_MAX_POOLS)
		return;
	for (uint32_t p = 0; p < np; p++)
		read_view(a, p, &views[p]);
	P("# HELP lagless_pool_processes Compute processes of the pool alive, by what they do.\n"
	    "# TYPE lagless_pool_processes gauge\n");
	for (uint32_t p = 0; p < np; p++)
		P("lagless_pool_processes{pool=\"%s\",state=\"idle\"} %u\n"
		    "lagless_pool_processes{pool=\"%s\",state=\"active\"} %u\n", views[p].pp->name,
		    views[p].idle, views[p].pp->name, views[p].active);
	EACH("lagless_pool_processes_target", "gauge", "Compute processes the pool is sized for.",
	    "%u", atomic_load(&v->pp->compute_target));
	EACH("lagless_pool_queue_depth", "gauge", "Jobs of the pool waiting.", "%u", v->depth);
	EACH("lagless_pool_queue_capacity", "gauge", "Waiting jobs the pool allows.", "%u",
	    atomic_load(&v->pp->queue_capacity));
	EACH("lagless_pool_queue_depth_max", "gauge", "Largest queue depth the pool has seen.",
	    "%u", atomic_load(&v->pp->max_depth));
	EACH("lagless_pool_full_total", "counter",
	    "Requests refused with 503 because every job slot of the pool was taken.",
	    "%" PRIu64, atomic_load(&v->pp->full));
	EACH("lagless_pool_slow_jobs_total", "counter",
	    "Jobs that ran longer than half the pool's deadline.", "%" PRIu64,
	    atomic_load(&v->pp->slow_jobs));
	EACH("lagless_pool_restarts_total", "counter",
	    "Compute processes of the pool the master respawned.", "%" PRIu64,
	    atomic_load(&v->pp->restarts));
	EACH("lagless_queue_wait_overloaded", "gauge", "1 while the shortest queue wait of the "
	    "pool's last interval was above its target: new jobs get 503.", "%d",
	    lg_codel_overloaded(&v->pp->codel));
	EACH("lagless_queue_wait_overloaded_intervals_total", "counter",
	    "Queue-wait intervals of the pool judged overloaded.", "%" PRIu64,
	    atomic_load(&v->pp->codel.overloaded_intervals));
}

void
lg_poolview_status(struct lg_buf *b, const struct lg_arena *a)
{
	uint32_t np = a->master->npools;

	P("\"pools\":[");
	for (uint32_t p = 0; p < np && p < LG_MAX_POOLS; p++) {
		struct view v;
		const struct lg_codel *c;

		read_view(a, p, &v);
		c = &v.pp->codel;
		P("%s{\"name\":\"%s\",\"processes\":{\"idle\":%u,\"active\":%u,\"total\":%u,"
		    "\"target\":%u},\"queue\":{\"depth\":%u,\"capacity\":%u,\"max_depth\":%u},"
		    "\"full\":%" PRIu64 ",\"slow_jobs\":%" PRIu64 ",\"restarts\":%" PRIu64 ",",
		    p ? "," : "", v.pp->name, v.idle, v.active, v.total,
		    atomic_load(&v.pp->compute_target), v.depth, atomic_load(&v.pp->queue_capacity),
		    atomic_load(&v.pp->max_depth), atomic_load(&v.pp->full),
		    atomic_load(&v.pp->slow_jobs), atomic_load(&v.pp->restarts));
		P("\"admission\":{\"queue_wait_target_ms\":%.3f,\"interval_ms\":%.3f,"
		    "\"overloaded\":%s,\"refused\":%" PRIu64 ",\"shed\":%" PRIu64 ",\"samples\":%"
		    PRIu64 ",\"intervals\":%" PRIu64 ",\"overloaded_intervals\":%" PRIu64 "}}",
		    (double)c->target_ns / 1e6, (double)c->interval_ns / 1e6,
		    lg_codel_overloaded(c) ? "true" : "false", atomic_load(&c->refused),
		    atomic_load(&c->shed), atomic_load(&c->samples), atomic_load(&c->intervals),
		    atomic_load(&c->overloaded_intervals));
	}
	P("]");
}

uint64_t
lg_poolview_queue_wait(const struct lg_arena *a, int which)
{
	uint64_t n = 0;

	for (uint32_t p = 0; p < a->master->npools && p < LG_MAX_POOLS; p++)
		n += atomic_load(which ? &a->master->pools[p].codel.shed :
		    &a->master->pools[p].codel.refused);
	return n;
}
