/* The job room's verbs on a connection, for the rooms above it (worker/flight, worker/route) and
 * the loop: what they may ask of a connection's job part (struct lg_conn_job, LG_JOB(c)) without
 * reading or writing its fields. Only worker/job/ reaches LG_JOB(c) (make lint). All are
 * inline reads or one-line writes: some run for every request of a keep-alive connection. */
#ifndef LG_WORKER_JOB_H
#define LG_WORKER_JOB_H

#include <stdint.h>

#include <lagless/module.h>

#include "shm/arena.h"
#include "worker/core/conn.h"
#include "worker/job/offload_state.h"

/* Readies c's job part when c gets its block: no slot held, no backing asked for. */
static inline void
lg_job_ready(struct lg_conn *c)
{
	lg_job_init(LG_JOB(c));
}

/* 1 when c holds a job slot (claimed at head time, until released or handed over), else 0. */
static inline int
lg_job_held(const struct lg_conn *c)
{
	return lg_job_holds_slot(LG_JOB(c));
}

/* A new request head on c: the job part forgets the previous request's answer labels. */
static inline void
lg_job_begin(struct lg_conn *c)
{
	LG_JOB(c)->bypass = 0;
	LG_JOB(c)->query_fault = 0;
}

/* The route's job deadline for c's request, queue wait included, in milliseconds (set at head
 * time by lg_job_set_deadline, before any slot is claimed). */
static inline uint64_t
lg_job_deadline_ms(const struct lg_conn *c)
{
	return LG_JOB(c)->job.deadline_ms;
}

/* Sets the deadline of c's request's job, in milliseconds from when it is queued or parked. */
static inline void
lg_job_set_deadline(struct lg_conn *c, uint64_t ms)
{
	LG_JOB(c)->job.deadline_ms = ms;
}

/* Sets the route index of c's request (the registry's) where no job slot is claimed for it:
 * an upstream route's coalescing request, whose cluster key names its route. */
static inline void
lg_job_set_route(struct lg_conn *c, uint32_t route)
{
	LG_JOB(c)->job.route = route;
}

/* 1 when c's request has a Content-Length body its slot reads (the core reads it in state
 * LG_CONN_BODY), 0 when it has none or the parser reads it. */
static inline int
lg_job_body_expected(const struct lg_conn *c)
{
	return LG_JOB(c)->body_need > 0;
}

/* Body bytes of c's request in its slot so far. */
static inline uint64_t
lg_job_body_got(const struct lg_conn *c)
{
	return LG_JOB(c)->body_got;
}

/* The body of c's request as it lies in c's slot's input region (shared memory, valid while c
 * holds the slot): sets *p and *n and returns 0, or -1 when c holds no slot. */
static inline int
lg_job_body(const struct lg_conn *c, const unsigned char **p, uint64_t *n)
{
	if (!lg_job_holds_slot(LG_JOB(c)))
		return -1;
	*p = lg_arena_in(c->w->env->arena, (uint32_t)LG_JOB(c)->slot) + LG_JOB(c)->job.body_off;
	*n = LG_JOB(c)->body_got;
	return 0;
}

/* 1 when c's route is a where=loop kind (run on the loop, never queued), else 0. */
static inline int
lg_job_runs_inline(const struct lg_conn *c)
{
	return LG_JOB(c)->job.where == LAGLESS_WHERE_LOOP;
}

/* The job of c's request as its record names it (shm/layout.h struct lg_job): kind id, route
 * index (its config), pool index. */
static inline uint32_t lg_job_kind(const struct lg_conn *c) { return LG_JOB(c)->job.kind; }
static inline uint32_t lg_job_route(const struct lg_conn *c) { return LG_JOB(c)->job.route; }
static inline uint32_t lg_job_pool(const struct lg_conn *c) { return LG_JOB(c)->job.pool; }

/* The Content-Type of a 2xx answer to c's job unless the kind sets one: its route's, else its
 * kind's, else application/octet-stream (the registry's storage). */
const char *lg_job_ctype(const struct lg_conn *c);

/* The slot c holds and its generation, for a record that names it (a flight's), -1 when none. */
static inline int lg_job_slot(const struct lg_conn *c) { return LG_JOB(c)->slot; }
static inline uint32_t lg_job_gen(const struct lg_conn *c) { return LG_JOB(c)->gen; }

/* c's request ran its own job although its route coalesces (docs/CACHE.md): its job's answer
 * says "X-Cache: bypass". Set by single-flight; reset by lg_job_begin. */
static inline void
lg_job_mark_bypass(struct lg_conn *c)
{
	LG_JOB(c)->bypass = 1;
}

/* Hands c's sent job slot over to another owner (a flight: completions for the slot then go to
 * it, not to c); c holds no slot afterwards. c must hold one. */
static inline void
lg_job_hand_over(struct lg_conn *c)
{
	lg_job_unpend(LG_WJOB(c->w), c, LG_JOB(c)->slot);
	LG_JOB(c)->slot = -1;
	lg_conn_unhold(c, LG_CONN_HELD_BUFFER);
}

#endif
