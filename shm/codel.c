#include "shm/codel.h"

#define NO_SAMPLE UINT64_MAX

struct lg_codel_params
lg_codel_params_of(const struct lg_pool_cfg *pool)
{
	struct lg_codel_params p = {
		.target_ns = pool->queue_wait_target_ms * 1000000u,
		.interval_ns = pool->queue_wait_interval_ms * 1000000u,
	};

	if (p.interval_ns < p.target_ns)
		p.interval_ns = p.target_ns;
	return p;
}

void
lg_codel_init(struct lg_codel *c, const struct lg_codel_params *p)
{
	c->target_ns = p->target_ns;
	c->interval_ns = p->interval_ns;
	atomic_store(&c->interval_end_ns, 0);
	atomic_store(&c->min_wait_ns, NO_SAMPLE);
	atomic_store(&c->overloaded, 0);
	atomic_store(&c->intervals, 0);
	atomic_store(&c->overloaded_intervals, 0);
	atomic_store(&c->refused, 0);
	atomic_store(&c->shed, 0);
	atomic_store(&c->samples, 0);
}

/* If the current interval has ended, the one caller whose compare-and-swap moves its end
 * judges it. Killed after the CAS, the minimum just keeps growing into the next interval;
 * killed after the exchange, the verdict waits one interval. */
static void
judge(struct lg_codel *c, const struct lg_codel_params *p, uint64_t now,
    lg_codel_floor_fn *floor, void *arg)
{
	uint64_t end = atomic_load(&c->interval_end_ns), min;
	int over;

	if (now < end || !atomic_compare_exchange_strong(&c->interval_end_ns, &end,
	    now + p->interval_ns))
		return;
	if (end == 0)
		return; /* the first call starts the first interval */
	min = atomic_exchange(&c->min_wait_ns, NO_SAMPLE);
	if (min == NO_SAMPLE)
		min = floor != NULL ? floor(arg, now) : 0;
	over = min > p->target_ns;
	atomic_store(&c->overloaded, (uint32_t)over);
	atomic_fetch_add(&c->intervals, 1);
	if (over)
		atomic_fetch_add(&c->overloaded_intervals, 1);
}

/* Admission by queue wait is on for p (it has a target): judges the interval (judge) and
 * returns 1; off: returns 0 and touches nothing. */
static int
active(struct lg_codel *c, const struct lg_codel_params *p, uint64_t now,
    lg_codel_floor_fn *floor, void *arg)
{
	if (p->target_ns == 0)
		return 0;
	judge(c, p, now, floor, arg);
	return 1;
}

int
lg_codel_refuse(struct lg_codel *c, const struct lg_codel_params *p, uint64_t now_ns,
    lg_codel_floor_fn *floor, void *arg)
{
	if (!active(c, p, now_ns, floor, arg) || !atomic_load(&c->overloaded))
		return 0;
	atomic_fetch_add(&c->refused, 1);
	return 1;
}

int
lg_codel_shed(struct lg_codel *c, const struct lg_codel_params *p, uint64_t wait_ns,
    uint64_t now_ns, lg_codel_floor_fn *floor, void *arg)
{
	uint64_t limit;

	if (!active(c, p, now_ns, floor, arg))
		return 0;
	limit = atomic_load(&c->overloaded) ? p->target_ns : p->interval_ns;
	if (wait_ns <= limit)
		return 0;
	atomic_fetch_add(&c->shed, 1);
	return 1;
}

void
lg_codel_sample(struct lg_codel *c, const struct lg_codel_params *p, uint64_t wait_ns,
    uint64_t now_ns, lg_codel_floor_fn *floor, void *arg)
{
	uint64_t cur;

	if (!active(c, p, now_ns, floor, arg))
		return;
	if (wait_ns == NO_SAMPLE)
		wait_ns--;
	cur = atomic_load(&c->min_wait_ns);
	while (wait_ns < cur && !atomic_compare_exchange_weak(&c->min_wait_ns, &cur, wait_ns))
		;
	atomic_fetch_add(&c->samples, 1);
}

int
lg_codel_overloaded(const struct lg_codel *c)
{
	return (int)atomic_load(&c->overloaded);
}
