/* The offload path's part of a connection and of the loop worker (worker/job/offload.c, with the
 * helper thread of worker/job/backing.c): held by struct lg_conn as part_job and by struct
 * lg_worker as part_job (worker/core/conn.h LG_PART), so the connection core holds them without
 * knowing what is in them; reached as LG_JOB(c) and LG_WJOB(w), only inside worker/job/ (make
 * lint): the other rooms call the verbs of worker/job/job.h. */
#ifndef LG_WORKER_OFFLOAD_STATE_H
#define LG_WORKER_OFFLOAD_STATE_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/layout.h"
#include "worker/core/conn.h"
#include "worker/job/backing.h"

struct lg_conn;

/* The current offloaded job of a connection (set at head time by lg_offload_claim). */
struct lg_conn_job {
	int slot;                     /* -1 when the connection holds no slot */
	uint32_t gen;
	struct lg_job job;            /* its record (shm/layout.h), as the router filled it
	                               * (deadline_ms from head time); copied into the slot when
	                               * the job is queued or run here */
	int bypass;                   /* a coalescing route's request runs its own job: its
	                               * answer says X-Cache: bypass (lg_job_mark_bypass) */
	uint32_t query_fault;         /* why its query was refused (kinds/params.h
	                               * lg_params_parse_query), 0 when it was not */
	uint64_t body_need, body_got; /* bytes of a Content-Length body, and read so far */
	uint64_t reserved;            /* body bytes of the slot's input region backed (fallocate) */
	int backing_wait;             /* a backing request for the slot is with the helper */
	size_t head_body;             /* body bytes that came with the head, still in rbuf until
	                               * the first window is backed */
};

#define LG_JOB(c) ((struct lg_conn_job *)(void *)(c)->part_job.b)
_Static_assert(sizeof(struct lg_conn_job) <= sizeof(((struct lg_conn *)0)->part_job) &&
    _Alignof(struct lg_conn_job) <= LG_PART_ALIGN, "the job part of struct lg_conn");

/* Readies a connection's job part: no slot held, no backing asked for. */
static inline void
lg_job_init(struct lg_conn_job *j)
{
	j->slot = -1;
	j->bypass = 0;
	j->query_fault = 0;
	j->backing_wait = 0;
	j->head_body = 0;
}

/* 1 when the connection holds a job slot (j->slot is its index), else 0. */
static inline int
lg_job_holds_slot(const struct lg_conn_job *j)
{
	return j->slot >= 0;
}

/* The loop worker's side of the offload path. */
struct lg_worker_job {
	ev_io done_io;                /* completion headers from the compute pool */
	struct lg_conn **pending;     /* by slot index: the connection holding it, or NULL */
	struct lg_backing backing;    /* helper thread that backs input regions (worker/job/backing.h) */
	/* The loop's last parse of a request's query (worker/job/args.c): the kind's query struct,
	 * then the decoded strings, args_len bytes of args (heap, args_cap, grown as needed), for
	 * the request of connection args_of (NULL: none kept) whose query is args_q (args_qlen
	 * bytes) and whose kind is args_kind; copied into the slot at claim time. */
	unsigned char *args;
	size_t args_cap, args_len;
	const struct lg_conn *args_of;
	const char *args_q;
	size_t args_qlen;
	uint32_t args_kind;
};

#define LG_WJOB(w) ((struct lg_worker_job *)(void *)(w)->part_job.b)
_Static_assert(sizeof(struct lg_worker_job) <= sizeof(((struct lg_worker *)0)->part_job) &&
    _Alignof(struct lg_worker_job) <= LG_PART_ALIGN, "the job part of struct lg_worker");

/* Completions and backing outcomes for slot no longer find c (single-flight took the slot
 * over): clears wj->pending[slot] when it is c. slot is a valid index. */
static inline void
lg_job_unpend(struct lg_worker_job *wj, const struct lg_conn *c, int slot)
{
	if (wj->pending[slot] == c)
		wj->pending[slot] = NULL;
}

#endif
