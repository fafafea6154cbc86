/* Admission by measured queue wait (CoDel as Facebook runs it for RPC queues), one state per
 * pool in shared memory.
 *
 * CoDel (Nichols and Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012) tells a good
 * queue, which empties now and then, from a standing one by the *minimum* sojourn time over an
 * interval: a burst raises the maximum, only a queue that never drains raises the minimum.
 * Facebook applies it to server request queues ("Fail at Scale", Ben Maurer, ACM Queue 13(8),
 * 2015): while the minimum wait over the last interval N stayed above the target M, a request
 * may wait only M; otherwise it may wait N; and newest-first service is optional while
 * overloaded ("adaptive LIFO"). folly::Codel (folly/executors/Codel.cpp) is that algorithm
 * between threads: the first caller after an interval ends judges it (one atomic exchange
 * decides who) and resets the minimum; later callers lower the minimum.
 *
 * Here the callers are processes: compute processes record the queue wait of each job that
 * ran and was answered (never a 503, 504 or cancelled one: those waits say nothing about what
 * the pool serves), loop workers ask for the verdict before admitting a job, and compute
 * processes ask for the longest wait a job may have had to be run at all. Every field is
 * changed by one compare-and-swap or exchange, so a process killed at any instruction leaves
 * a state the next caller continues from: at worst one interval is judged one interval late.
 * An interval in which no job finished (long jobs, or everything refused) is judged by the
 * youngest job still queued, whose wait is at least its age: a lower bound, as the minimum
 * must be; none queued reads as no wait. */
#ifndef LG_SHM_CODEL_H
#define LG_SHM_CODEL_H

#include <stdint.h>

#include "common/cfg_job.h"
#include "shm/layout.h"

/* Settings of one pool (process-local copies; configuration). target_ns == 0 turns the whole
 * mechanism off. interval_ns >= target_ns. */
struct lg_codel_params {
	uint64_t target_ns;    /* M: the queue wait a standing queue may keep */
	uint64_t interval_ns;  /* N: how long the minimum must stay above M */
	int lifo;              /* serve the newest queued job first while overloaded */
};

/* The parameters of pool p: target and interval in ns, the interval raised to the target. */
struct lg_codel_params lg_codel_params_of(const struct lg_pool_cfg *p);

/* Lower bound of the wait of the jobs still queued, in ns (the youngest one's age), or 0 when
 * none is queued; called only when an interval ends without a sample. */
typedef uint64_t lg_codel_floor_fn(void *arg, uint64_t now_ns);

/* Puts *c in its initial state (no interval started, not overloaded, counters zero) and
 * records p's settings in it for readers. Only before any other process uses it. */
void lg_codel_init(struct lg_codel *c, const struct lg_codel_params *p);

/* Loop worker, before admitting a job at now_ns (CLOCK_MONOTONIC): judges the interval that
 * ended, if one did (floor/arg as above, may be NULL), and returns 1 when the pool is overloaded
 * (the caller answers 503 and the refusal is counted), 0 to admit. Always 0 when p is off. */
int lg_codel_refuse(struct lg_codel *c, const struct lg_codel_params *p, uint64_t now_ns,
    lg_codel_floor_fn *floor, void *arg);

/* Compute process, when it takes a job that waited wait_ns: returns 1 when the job must not
 * run (answered 503, counted as shed): it waited more than the target while overloaded, or
 * more than the interval otherwise (Facebook's rule). Does not record a sample. 0 when off. */
int lg_codel_shed(struct lg_codel *c, const struct lg_codel_params *p, uint64_t wait_ns,
    uint64_t now_ns, lg_codel_floor_fn *floor, void *arg);

/* Compute process, once a job that ran was answered: records its queue wait wait_ns. */
void lg_codel_sample(struct lg_codel *c, const struct lg_codel_params *p, uint64_t wait_ns,
    uint64_t now_ns, lg_codel_floor_fn *floor, void *arg);

/* 1 while the last judged interval was overloaded (for LIFO and for /status). */
int lg_codel_overloaded(const struct lg_codel *c);

#endif
