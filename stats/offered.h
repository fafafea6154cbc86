/* Offered load per pool: the compute work offered per compute process, smoothed.
 *
 *   offered = (completed + refused job rate) x mean run time / compute processes
 *
 * 1.0 is exactly full, 3.0 three times more than the pool can do. Unlike utilisation (busy
 * processes / processes, pinned at 1.0 once saturated) and queue wait (held at its target by
 * the CoDel admission, shm/codel.h), it keeps rising with the load past saturation, because a
 * refused job counts as offered work: that is what an autoscaler and a balancer need (issue 21;
 * docs/OPERATIONS.md "Autoscaling"). It reads the counters the pool already keeps: the run
 * histograms of its compute processes (jobs and their summed run time), the pool's `full`
 * count (503, no free slot) and its CoDel refusals and sheds. One process (the master) samples
 * and smooths them and publishes the result in the pool page (offered_milli); every renderer
 * and the agent read that one number. Depends on shm/ only. */
#ifndef LG_STATS_OFFERED_H
#define LG_STATS_OFFERED_H

#include <stdint.h>

#include "common/buf.h"
#include "shm/arena.h"

/* Time constant of the smoothing (an exponentially weighted moving average in time: a step
 * of the load shows 63% after it, 95% after three). */
#define LG_OFFERED_TAU_NS  (3000ull * 1000000ull)
/* How often the master samples: often enough for the agent's one-second checks. */
#define LG_OFFERED_PERIOD_NS (500ull * 1000000ull)
/* The ceiling of one sample, before smoothing (so of the gauge too). A refused request costs
 * its client one round trip, so a closed-loop client that retries 503s at once, ignoring
 * Retry-After, is refused as fast as the loop workers can answer: a few connections made
 * 30,000 refusals a second against a pool doing 10 jobs, and each refusal, priced at the mean
 * run time, read as offered work (3,549 to 4,526 on one replica). Counters cannot tell such a
 * loop from many real clients, so the reading is bounded instead: at most 4 (three times
 * more than the pool can do refused on top of a full pool). An HPA at a target of 0.7 then
 * asks for at most ceil(4 / 0.7) = 6 replicas per replica in one step, not its maxReplicas;
 * a real load above 4x is still followed, replica step by replica step, since each step's
 * share reads 4 until it falls below. Issue 39 section 3; docs/OPERATIONS.md "Autoscaling". */
#define LG_OFFERED_CEIL 4.0

/* The cumulative counters of one pool at one instant. */
struct lg_offered_counts {
	uint64_t jobs;     /* jobs that ran to an end (any outcome) */
	uint64_t run_ns;   /* their summed run time, ns */
	uint64_t refused;  /* jobs refused: no slot (503), CoDel refusal at admission, CoDel shed */
};

/* Smoothing state of one pool, owned by its one sampler (process memory, zeroed to start). */
struct lg_offered {
	struct lg_offered_counts last;
	uint64_t last_ns;      /* CLOCK_MONOTONIC of the last sample; 0: none yet */
	double mean_run_ns;    /* last known mean run time (kept while no job completes) */
	double load;           /* the smoothed offered load */
};

/* Reads pool p's counters from a into *out (sums over its compute processes' rows). */
void lg_offered_read(const struct lg_arena *a, uint32_t p, struct lg_offered_counts *out);

/* Feeds one sample: counters c at now_ns (CLOCK_MONOTONIC) for a pool of computes processes
 * (0 counts as 1), smoothing with time constant tau_ns. The first sample (or one whose counters
 * went backwards) only primes st. Each sample is clamped to [0, LG_OFFERED_CEIL] before it is
 * smoothed. Returns the smoothed offered load (0 to LG_OFFERED_CEIL). Pure: no I/O. */
double lg_offered_step(struct lg_offered *st, const struct lg_offered_counts *c, uint64_t now_ns,
    uint32_t computes, uint64_t tau_ns);

/* The master, every LG_OFFERED_PERIOD_NS: samples every pool of a (st: LG_MAX_POOLS states
 * kept by the caller) and publishes the loads in the pool pages. Lowers *next to the next
 * sample time. */
void lg_offered_tick(struct lg_offered *st, uint64_t *due_ns, struct lg_arena *a,
    uint64_t now_ns, uint64_t *next);

/* Pool p's published smoothed offered load (0 before the first samples). */
double lg_offered_load(const struct lg_arena *a, uint32_t p);

/* The largest published offered load over a's pools. */
double lg_offered_max(const struct lg_arena *a);

/* Appends the lagless_offered_load gauge (label pool), Prometheus text format 0.0.4. */
void lg_offered_metrics(struct lg_buf *b, const struct lg_arena *a);

/* Weights the agent reports never go below this percentage: a replica at weight 0 would get
 * no traffic left to measure its load by (and 0% means "drain" to HAProxy). */
#define LG_WEIGHT_MIN 10
/* A new weight replaces the last one only when it differs by at least this many percent of it. */
#define LG_WEIGHT_BAND 15

/* The agent weight, percent of the configured one (haproxy configuration manual 5.2
 * "agent-check": "NN%"): 100 up to an offered load of 1.0, then 100 / load^2, at least
 * LG_WEIGHT_MIN. The square: when every replica is past saturation, weights of 100 / load
 * would settle the shares at the square root of the capacity ratios (share ~ sqrt(capacity)),
 * the square settles them at the 2/3 power, nearer proportional, without the oscillation an
 * integrating controller risks between one-second checks. Damped against last (the weight reported before; <= 0: none): a change smaller
 * than LG_WEIGHT_BAND % of last keeps last, so a load that wobbles around a value does not
 * make weights oscillate between checks; below a load of 0.9 it is 100 again. */
int lg_offered_weight(double load, int last);

#endif
