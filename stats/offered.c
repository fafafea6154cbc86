#include "stats/offered.h"

#include <math.h>
#include <stdlib.h>

#include "shm/stats.h"

void
lg_offered_read(const struct lg_arena *a, uint32_t p, struct lg_offered_counts *out)
{
	const struct lg_pool_page *pp = &a->master->pools[p];

	out->jobs = out->run_ns = 0;
	for (uint32_t k = pp->first_row; k < pp->first_row + pp->nrows && k < a->nprocs; k++)
		for (uint32_t kind = 0; kind < a->stat_kinds; kind++) {
			const struct lg_kind_stats *ks = lg_arena_kind_stats(a, k, kind);

			out->jobs += lg_hist_count(&ks->run, LG_STATS_BOUNDS);
			out->run_ns += atomic_load_explicit(&ks->run.sum_ns, memory_order_relaxed);
		}
	out->refused = atomic_load(&pp->full) + atomic_load(&pp->codel.refused) +
	    atomic_load(&pp->codel.shed);
}

double
lg_offered_step(struct lg_offered *st, const struct lg_offered_counts *c, uint64_t now_ns,
    uint32_t computes, uint64_t tau_ns)
{
	int primed = st->last_ns != 0 && now_ns > st->last_ns && c->jobs >= st->last.jobs &&
	    c->run_ns >= st->last.run_ns && c->refused >= st->last.refused;

	if (primed) {
		double dt = (double)(now_ns - st->last_ns);
		uint64_t jobs = c->jobs - st->last.jobs;
		uint64_t offered = jobs + (c->refused - st->last.refused);
		double inst, alpha;

		if (jobs > 0)
			st->mean_run_ns = (double)(c->run_ns - st->last.run_ns) / (double)jobs;
		/* jobs per ns x ns per job = busy processes' worth of work */
		inst = (double)offered / dt * st->mean_run_ns / (double)(computes ? computes : 1);
		/* a client retrying its 503s at once must not read as thousands (offered.h) */
		if (inst > LG_OFFERED_CEIL)
			inst = LG_OFFERED_CEIL;
		alpha = 1.0 - exp(-dt / (double)(tau_ns ? tau_ns : 1));
		st->load += alpha * (inst - st->load);
		if (st->load < 0)
			st->load = 0;
	}
	st->last = *c;
	st->last_ns = now_ns;
	return st->load;
}

void
lg_offered_tick(struct lg_offered *st, uint64_t *due_ns, struct lg_arena *a,
    uint64_t now_ns, uint64_t *next)
{
	uint32_t np = a->master->npools;

	if (now_ns >= *due_ns) {
		for (uint32_t p = 0; p < np && p < LG_MAX_POOLS; p++) {
			struct lg_pool_page *pp = &a->master->pools[p];
			struct lg_offered_counts c;
			double load;

			lg_offered_read(a, p, &c);
			load = lg_offered_step(&st[p], &c, now_ns, atomic_load(&pp->compute_target),
			    LG_OFFERED_TAU_NS);
			atomic_store(&pp->offered_milli,
			    load * 1000.0 > 4e9 ? 4000000000u : (uint32_t)(load * 1000.0 + 0.5));
		}
		*due_ns = now_ns + LG_OFFERED_PERIOD_NS;
	}
	if (*due_ns < *next)
		*next = *due_ns;
}

double
lg_offered_load(const struct lg_arena *a, uint32_t p)
{
	return (double)atomic_load(&a->master->pools[p].offered_milli) / 1000.0;
}

double
lg_offered_max(const struct lg_arena *a)
{
	double max = 0;

	for (uint32_t p = 0; p < a->master->npools && p < LG_MAX_POOLS; p++)
		if (lg_offered_load(a, p) > max)
			max = lg_offered_load(a, p);
	return max;
}

void
lg_offered_metrics(struct lg_buf *b, const struct lg_arena *a)
{
	uint32_t np = a->master->npools;

	if (np == 0 || np > LG_MAX_POOLS)
		return;
	lg_buf_printf(b, "# HELP lagless_offered_load Compute work offered per compute process "
	    "of the pool, smoothed over a few seconds: (completed + refused job rate) x mean run "
	    "time / processes; 1 = exactly full, keeps rising past saturation, at most 4.\n"
	    "# TYPE lagless_offered_load gauge\n");
	for (uint32_t p = 0; p < np; p++)
		lg_buf_printf(b, "lagless_offered_load{pool=\"%s\"} %.3f\n", a->master->pools[p].name,
		    lg_offered_load(a, p));
}

int
lg_offered_weight(double load, int last)
{
	int target = load <= 1.0 ? 100 : (int)(100.0 / (load * load) + 0.5);

	if (target < LG_WEIGHT_MIN)
		target = LG_WEIGHT_MIN;
	if (last <= 0 || (target == 100 && load < 0.9))
		return target;
	if (abs(target - last) * 100 < LG_WEIGHT_BAND * last)
		return last;
	return target;
}
