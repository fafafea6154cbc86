/* The offload path seen from the loop: a job slot claimed at head time, the body read into its
 * input region one backed window at a time, the job queued to the compute pool, its
 * completion matched to the connection, the deadline enforced, the slot given back. The router
 * (worker/route/routes.c) starts it; the connection answers through lg_conn_respond. */
#ifndef LG_WORKER_OFFLOAD_H
#define LG_WORKER_OFFLOAD_H

#include <stdint.h>

#include "worker/core/conn.h"
#include "worker/job/job.h"

#include "kinds/host.h"

/* Claims a free job slot of pool job->pool for c's request at head time (or at dispatch, a
 * coalescing route's), keeps job (its record as the router filled it from the route: kind,
 * route, pool, where, deadline_ms; shm/layout.h) for it, and writes the request view v at the
 * start of its input region, then the loop's parse of its query when lg_job_parse_query kept
 * one for it and it fits the slot's kept bytes (else the job's runner parses the view's
 * query). Returns 0 (LG_JOB(c)->slot set, body counters reset,
 * LG_JOB(c)->body_need from the Content-Length), or -1 when the pool refuses it (queue-wait
 * admission), none of its slots is free (the pool's bounded queue is full; the slowest upload
 * is then asked to be cut, worker/job/fairshare.h), c's client address holds its share of the
 * pool's transit buffers or had its slow upload cut a moment ago (shm/share.h), or the view
 * could not be backed: the caller answers 503; counted (a full pool in its page). */
int lg_offload_claim(struct lg_conn *c, const struct lg_job *job, const struct lg_view *v);

/* The one parse of c's request's query (q, qlen bytes, raw; NULL for none) against the query
 * arguments its kind declares (kinds/params.h lg_params_parse_query): into the loop's scratch
 * when the kind has a query struct (ABI 1.2), kept for lg_offload_claim to write into the job's
 * slot, so the runner does not parse it again; checked only when it has none (ABI 1.1).
 * Returns 0, or -1 when an argument is refused (the fault kept in c until the next request:
 * lg_job_query_why words it). The scratch grows on the heap; when it cannot, the parse is not
 * kept (the runner parses) and the check still holds. */
int lg_job_parse_query(struct lg_conn *c, uint32_t kind, const char *q, size_t qlen);

/* Why lg_job_parse_query refused c's current request's query for kind: "NAME: reason\n" into
 * why (cap bytes, NUL-terminated), worded from the kept fault without parsing again. Returns
 * its length, 0 when it was not refused. */
size_t lg_job_query_why(const struct lg_conn *c, uint32_t kind, char *why, size_t cap);

/* Claims a transit buffer of pool `pool` (cfg->jobs.pools) for c's request body alone, no job to
 * follow (a route with request_buffering = on receives its body whole before it goes to an
 * upstream app, worker/upstream/upstream.h lg_up_head_body): the same transit-buffer rules as
 * a job's body (the client's share, the memory budget charged for a Content-Length body at
 * lg_offload_start, windows backed as it comes, the upload timeouts and fair-share cuts), no
 * job admission, no request view, no output charged. The body is then read as a job's
 * (lg_offload_start, lg_offload_body, ...) and, whole, handed to ops->body_done; it lies at
 * lg_job_body until the buffer is given back (lg_offload_release, ops->release). Returns 0,
 * or -1 (no buffer free, the client's share used up): the caller answers 503; counted. */
int lg_offload_claim_body(struct lg_conn *c, uint32_t pool, uint64_t deadline_ms);

/* The parser's body hook (struct lg_http on_body) for a chunked body: copies len bytes at `at`
 * into c's slot, backing the input region as it goes. Returns 0, or -1 with h->status 413 (over
 * the region) or 503 (shared memory could not be backed). */
int lg_offload_body(struct lg_conn *c, struct lg_http *h, const char *at, size_t len);

/* The request head is complete and c holds a slot: moves the body bytes that came with the
 * head into the slot and either waits for the rest (state LG_CONN_BODY) or queues the job.
 * Returns 0, or -1 when the connection was closed. */
int lg_offload_start(struct lg_conn *c);

/* The body sink of a Content-Length body read into c's slot (struct lg_conn_ops body_buf,
 * body_took, body_got). lg_offload_body_buf: before reading more, asks the loop's helper thread
 * to back the next window once the current one is half filled (fallocate never runs on the
 * loop); returns 0 with *dst the next byte of the body in the slot's input region and *len the
 * bytes backed there and still owed (> 0), 1 when nothing is backed beyond the bytes taken yet
 * (stop reading; lg_conn_body_ready resumes it), or -1 after answering 503 with Connection:
 * close (nothing may be written then). lg_offload_body_took: n bytes were written at *dst;
 * returns 1 when the body is complete, else 0. lg_offload_body_got: body bytes so far. */
int lg_offload_body_buf(struct lg_conn *c, unsigned char **dst, size_t *len);
int lg_offload_body_took(struct lg_conn *c, size_t n);
uint64_t lg_offload_body_got(const struct lg_conn *c);

/* For a body the parser reads (chunked) into c's slot: how many more input bytes may be parsed
 * now, the body bytes backed and not yet filled (an input byte carries at most one), asking
 * the helper thread for the next window ahead as lg_offload_body_buf does. 0 means wait
 * for lg_conn_body_ready; SIZE_MAX once the whole region is backed. When the request cannot
 * be posted: 0 with h->status 503, counted as a memory rejection. */
size_t lg_offload_body_room(struct lg_conn *c, struct lg_http *h);

/* worker/job/backing.h outcome callback (ctx is the struct lg_worker): records the window backed
 * for the connection holding the slot, moves the body bytes that came with the head, queues a
 * complete body, resumes reading; 503 (reason memory) when it could not be backed; nothing
 * when the connection has given the slot up. */
void lg_offload_backed(void *ctx, const struct lg_backing_msg *m);

/* The loop worker's job part (LG_WJOB(w)) at loop start: lg_offload_setup allocates the table of
 * pending connections by slot (returns 0, or -1 with errno ENOMEM); lg_offload_watch watches
 * completion channel fd (the loop's end of it, not owned) with cb, w as the watcher's data;
 * lg_offload_backing_start starts the helper thread that backs input regions (0, or -1 with
 * errno set; worker/job/backing.h). */
int lg_offload_setup(struct lg_worker *w);
void lg_offload_watch(struct lg_worker *w, void (*cb)(struct ev_loop *, ev_io *, int), int fd);
int lg_offload_backing_start(struct lg_worker *w);

/* At loop start, before it serves: maps every slot's kept view pages (lg_arena_keep) into this
 * process, so writing a view at claim time neither faults nor allocates a page table (charged
 * to the memory cgroup) while the loop serves. The first 16 MiB of them on the loop thread
 * itself (madvise(2) MADV_POPULATE_READ, before any request: a stall here delays no answer),
 * the rest by the helper thread. Best effort. */
void lg_offload_map_views(struct lg_worker *w);

/* Sends the JOB header for c's claimed slot, after moving it CLAIMED -> QUEUED, without
 * parking c (a coalesced job's flight takes the slot over). Returns 0, or -1 (logged, counted
 * as a 503; the slot is still c's). */
int lg_offload_send(struct lg_conn *c);

/* The answer of DONE slot `slot` (read from its output region's metadata page, kinds/host.h):
 * HTTP status, content type (the kind's, copied into tmp of cap > 64 bytes, else
 * ctype_default) and body, valid while the slot is held. Returns 0, or -1 when the recorded
 * length does not fit the region. */
int lg_offload_render(struct lg_worker *w, int slot, const char *ctype_default, char *tmp,
    size_t cap, int *code, const char **ctype, const void **body, size_t *len);

/* HTTP status answering a failed job's enum lg_job_status; meta (struct lg_out_meta) the
 * kind's metadata when it ended by itself with bad input (its own 4xx), else NULL. */
int lg_offload_failure_status(uint32_t st, const void *meta);

/* The kind's own message for the job that failed with status st (an enum lg_job_status) in
 * slot `slot`: copied into dst (cap bytes, at least LG_FAIL_TEXT_CAP) and ended with exactly
 * one '\n'; returns its length, or 0 when the kind gave none or st
 * is not the kind's own verdict (a crash, a deadline, a refusal), and then the HTTP reason phrase
 * is the body. Reads the slot's output metadata: call before the slot is released. */
size_t lg_offload_failure_text(struct lg_worker *w, int slot, uint32_t st, char *dst, size_t cap);
/* Why kind's module is refused (its init failed or crashed: the master page's module row),
 * as "module NAME is unavailable: its init was killed by signal 6 (Aborted); ..." and a '\n',
 * into dst (cap bytes, NUL-terminated, cut to fit). Returns its length, 0 for no module. */
size_t lg_offload_unavailable_text(const struct lg_worker *w, uint32_t kind, char *dst,
    size_t cap);

#define LG_FAIL_TEXT_CAP (sizeof(((struct lg_out_meta *)0)->msg) + 2)

/* The body in c's slot is complete: queue the job (or, for a where=loop kind, run it here and
 * answer). Returns 0 or -1 (closed). Offload itself reaches this through the router's
 * body_done op (struct lg_conn_ops), which may decide otherwise (a coalescing route). */
int lg_offload_queue(struct lg_conn *c);

struct lg_msg;

/* Where the completion headers that are no waiting connection's go: given by the loop
 * (worker/loop.c), so offload decides nothing about coalescing (it sits below it). */
struct lg_offload_sink {
	/* a DONE header for slot m->slot that no connection waits for: returns 1 when the callee
	 * took it (a job it owns, e.g. a flight's), 0 to drop it as stale */
	int (*unclaimed)(struct lg_worker *w, const struct lg_msg *m);
	/* a WAKE or UNWANTED header (not a job's completion) */
	void (*message)(struct lg_worker *w, const struct lg_msg *m);
};

/* Reads every completion header waiting on the loop's completion channel and answers the
 * connections they belong to; headers no connection waits for go to sink; stale and
 * malformed headers are counted and dropped. */
void lg_offload_completions(struct lg_worker *w, const struct lg_offload_sink *sink);

/* The job deadline of c passed: answer 504 at once, cancel a queued job, and ask the master to
 * kill the compute process running it. Returns 0 or -1 (closed). */
int lg_offload_deadline(struct lg_conn *c);

/* Gives up c's slot (response written, deadline, connection closing): a queued job is
 * cancelled, a running one is left to finish and its result discarded. Returns the slot's
 * resulting state (LG_SLOT_FREE or LG_SLOT_ABANDONED), or -1 if it was no longer c's. */
int lg_offload_release(struct lg_conn *c);

/* The connection is closing while it holds a slot (the client left, or a write failed): releases
 * it like lg_offload_release, and when the job was running and --on-client-gone is kill, asks
 * the master to kill its compute process so the CPU is not spent on an answer nobody reads. */
void lg_offload_client_gone(struct lg_conn *c);

/* Asks the master to kill the compute process running slot `slot` at generation gen (a KILL
 * header on the control channel; only the master knows that pid is still its own child): the
 * job's deadline passed, or its last client left under --on-client-gone kill. A full channel or
 * another send(2) error is logged, and the job then runs to its end. */
void lg_offload_kill(const struct lg_worker *w, uint32_t slot, uint32_t gen);

#endif
