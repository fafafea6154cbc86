#include "worker/job/offload.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "kinds/registry.h"
#include "shm/codel.h"
#include "shm/share.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "worker/job/fairshare.h"
#include "worker/job/offload_int.h"
#include "worker/observe.h"

/* Input is backed this far ahead of the body bytes received, one window at a time: backing
 * 64 MiB at once took 20-40 ms of one loop callback (fallocate zeroes the pages), which would
 * stall every other connection of the loop; a 1 MiB window costs well under a millisecond. */
#define RESERVE_AHEAD (1u << 20)

int
lg_offload_body(struct lg_conn *c, struct lg_http *h, const char *at, size_t len)
{
	const struct lg_arena *a = c->w->env->arena;

	if (LG_JOB(c)->body_got + len > a->in_cap - LG_JOB(c)->job.body_off) {
		h->status = 413;
		return -1;
	}
	if (LG_JOB(c)->body_got + len > LG_JOB(c)->reserved) {
		/* lg_offload_body_room bounds what the parser is given: never reached */
		log_error("%zu body bytes for slot %d past the %llu backed; 503", len, LG_JOB(c)->slot,
		    (unsigned long long)LG_JOB(c)->reserved);
		h->status = 503;
		return -1;
	}
	memcpy(lg_arena_in(a, (uint32_t)LG_JOB(c)->slot) + LG_JOB(c)->job.body_off + LG_JOB(c)->body_got,
	    at, len);
	LG_JOB(c)->body_got += len;
	atomic_store_explicit(&a->slots[LG_JOB(c)->slot].up_bytes, LG_JOB(c)->body_got,
	    memory_order_relaxed);
	return 0;
}

/* Asks the loop's helper thread to back c's input region up to `upto` bytes (never past a
 * Content-Length or the region), from the last page already backed: fallocate(2) can wait in
 * memory reclaim for seconds, which must not happen on the loop (worker/job/backing.h). Nothing is
 * posted while a request is already out or when that much is backed. Returns 0, or -1 when
 * the request could not be posted. */
static int
back_async(struct lg_conn *c, uint64_t upto)
{
	struct lg_arena *a = c->w->env->arena;
	uint64_t room = a->in_cap - LG_JOB(c)->job.body_off;
	uint64_t from = (LG_JOB(c)->job.body_off + LG_JOB(c)->reserved) & ~(uint64_t)(LG_PAGE - 1);

	if (!c->http.req.chunked && upto > LG_JOB(c)->body_need)
		upto = LG_JOB(c)->body_need;
	if (upto > room)
		upto = room;
	if (LG_JOB(c)->backing_wait || upto <= LG_JOB(c)->reserved)
		return 0;
	/* Within the memory budget first (a chunked body's next window; a Content-Length body
	 * was charged whole at head time): beyond it, 503 before anything is backed. */
	if (lg_arena_charge_in(a, (uint32_t)LG_JOB(c)->slot, LG_JOB(c)->job.body_off + upto) == -1)
		return -1;
	struct lg_backing_msg m = {
		.slot = (uint32_t)LG_JOB(c)->slot, .gen = LG_JOB(c)->gen, .upto = upto,
		.off = lg_arena_in_off(a, (uint32_t)LG_JOB(c)->slot) + from,
		.len = LG_JOB(c)->job.body_off + upto - from,
	};
	/* The master punches a slot's pages once it is free again if this many were touched. */
	a->slots[LG_JOB(c)->slot].touched = LG_JOB(c)->job.body_off + upto;
	if (lg_backing_post(&LG_WJOB(c->w)->backing, &m) == -1) {
		log_warn("cannot post a backing request for slot %d: %s", LG_JOB(c)->slot, strerror(errno));
		return -1;
	}
	LG_JOB(c)->backing_wait = 1;
	return 0;
}

/* 503 for a body whose memory cannot be backed (the connection closes: the body is unread). */
static int
refuse_memory(struct lg_conn *c)
{
	atomic_fetch_add(&c->w->env->page->rejected_memory, 1);
	lg_offload_release(c);
	return lg_conn_error(c, 503, 1, LG_CONN_RETRY_AFTER);
}

/* Before reading more of a Content-Length body into c's slot: asks the loop's helper thread
 * to back the next window once the current one is half filled (fallocate never runs on the
 * loop). Returns 0 (LG_JOB(c)->reserved > LG_JOB(c)->body_got), 1 when nothing is backed beyond
 * LG_JOB(c)->body_got yet, or -1 after answering 503 with Connection: close. */
static int
body_window(struct lg_conn *c)
{
	/* The rate a claim that finds no free buffer judges this upload by (shm/share.h). */
	atomic_store_explicit(&c->w->env->arena->slots[LG_JOB(c)->slot].up_bytes, LG_JOB(c)->body_got,
	    memory_order_relaxed);
	/* The next window is asked for while the current one is still half empty, so reading
	 * normally never waits for it. */
	if (LG_JOB(c)->body_got + RESERVE_AHEAD / 2 >= LG_JOB(c)->reserved &&
	    back_async(c, LG_JOB(c)->body_got + RESERVE_AHEAD) == -1) {
		refuse_memory(c);
		return -1;
	}
	return LG_JOB(c)->body_got < LG_JOB(c)->reserved ? 0 : 1;
}

int
lg_offload_body_buf(struct lg_conn *c, unsigned char **dst, size_t *len)
{
	int rc = body_window(c);

	if (rc != 0)
		return rc;
	struct lg_conn_job *j = LG_JOB(c);
	uint64_t want = j->body_need - j->body_got, room = j->reserved - j->body_got;

	*dst = lg_arena_in(c->w->env->arena, (uint32_t)LG_JOB(c)->slot) + LG_JOB(c)->job.body_off +
	    LG_JOB(c)->body_got;
	*len = (size_t)(want < room ? want : room);
	return 0;
}

int
lg_offload_body_took(struct lg_conn *c, size_t n)
{
	LG_JOB(c)->body_got += (uint64_t)n;
	return LG_JOB(c)->body_got >= LG_JOB(c)->body_need;
}

uint64_t
lg_offload_body_got(const struct lg_conn *c)
{
	return LG_JOB(c)->body_got;
}

static void answer_mapped(struct lg_conn *c);

size_t
lg_offload_body_room(struct lg_conn *c, struct lg_http *h)
{
	const struct lg_arena *a = c->w->env->arena;
	uint64_t region = a->in_cap - LG_JOB(c)->job.body_off;

	if (LG_JOB(c)->reserved >= region)
		return SIZE_MAX; /* all backed: past it lg_offload_body answers 413 */
	/* As for a Content-Length body: the next window is asked for while the current one is
	 * still half empty, so parsing normally never waits for it. */
	if (LG_JOB(c)->body_got + RESERVE_AHEAD / 2 >= LG_JOB(c)->reserved &&
	    back_async(c, LG_JOB(c)->body_got + RESERVE_AHEAD) == -1) {
		atomic_fetch_add(&c->w->env->page->rejected_memory, 1);
		h->status = 503;
		return 0;
	}
	return (size_t)(LG_JOB(c)->reserved - LG_JOB(c)->body_got);
}

void
lg_offload_backed(void *ctx, const struct lg_backing_msg *m)
{
	struct lg_worker *w = ctx;
	struct lg_conn *c = m->slot < w->env->arena->nslots ? LG_WJOB(w)->pending[m->slot] : NULL;
	struct lg_arena *a = w->env->arena;

	if (c == NULL || LG_JOB(c)->slot != (int)m->slot || LG_JOB(c)->gen != m->gen ||
	    !LG_JOB(c)->backing_wait)
		return; /* the connection gave the slot up meanwhile */
	LG_JOB(c)->backing_wait = 0;
	if (m->op == LG_BACKING_MAP) {
		if (c->state == LG_CONN_JOB)
			answer_mapped(c);
		return;
	}
	if (c->state != LG_CONN_HEAD && c->state != LG_CONN_BODY)
		return; /* a window asked ahead of a chunked body that ended meanwhile */
	if (m->err) {
		log_warn("cannot back %llu bytes of input for slot %d: %s; 503",
		    (unsigned long long)m->upto, LG_JOB(c)->slot, strerror(m->err));
		refuse_memory(c);
		return;
	}
	if (m->upto > LG_JOB(c)->reserved)
		LG_JOB(c)->reserved = m->upto;
	if (LG_JOB(c)->head_body > 0) {
		/* The first window: move the body bytes that came with the head. */
		size_t n = LG_JOB(c)->head_body;

		lg_conn_take(c, lg_arena_in(a, (uint32_t)LG_JOB(c)->slot) + LG_JOB(c)->job.body_off, n);
		LG_JOB(c)->body_got = n;
		LG_JOB(c)->head_body = 0;
	}
	if (c->state == LG_CONN_BODY && LG_JOB(c)->body_got >= LG_JOB(c)->body_need) {
		if (c->w->ops->body_done(c) == -1) /* the router decides: queue it, or coalesce */
			return;
	}
	lg_conn_body_ready(c);
}

int
lg_offload_setup(struct lg_worker *w)
{
	LG_WJOB(w)->args = NULL;
	LG_WJOB(w)->args_cap = LG_WJOB(w)->args_len = 0;
	LG_WJOB(w)->args_of = NULL;
	LG_WJOB(w)->pending = calloc(w->env->arena->nslots, sizeof(*LG_WJOB(w)->pending));
	return LG_WJOB(w)->pending == NULL ? -1 : 0;
}

void
lg_offload_watch(struct lg_worker *w, void (*cb)(struct ev_loop *, ev_io *, int), int fd)
{
	ev_io_init(&LG_WJOB(w)->done_io, cb, fd, EV_READ);
	LG_WJOB(w)->done_io.data = w;
	ev_io_start(w->ev, &LG_WJOB(w)->done_io);
}

int
lg_offload_backing_start(struct lg_worker *w)
{
	const struct lg_arena *a = w->env->arena;

	return lg_backing_start(&LG_WJOB(w)->backing, w->ev, a->fd, a->base, lg_offload_backed, w);
}

/* Request-view bytes lg_offload_map_views maps on the loop thread before the loop starts
 * (4,096 pages: a few ms at most; the default 12 slots of 20 KiB take about 0.1 ms). */
#define MAP_ON_LOOP_BYTES (16ull << 20)

void
lg_offload_map_views(struct lg_worker *w)
{
	const struct lg_arena *a = w->env->arena;
	uint64_t mapped = 0;

	for (uint32_t i = 0; i < a->nslots && a->keep > 0; i++) {
		struct lg_backing_msg m = {
			.slot = UINT32_MAX, .op = LG_BACKING_MAP, /* no connection: outcome dropped */
			.off = lg_arena_in_off(a, i), .len = a->keep,
		};

		/* On this thread first: a helper thread, once started, leaves the process
		 * multi-threaded as glibc counts it for good, and then every recv and send pays
		 * its cancellation-point bookkeeping (pthreads(7)); a loop that serves only
		 * inline routes need never start one. A failure is no error: the page faults in
		 * at the slot's first claim. */
		if (mapped + a->keep <= MAP_ON_LOOP_BYTES) {
			(void)madvise(a->base + m.off, (size_t)m.len, MADV_POPULATE_READ);
			mapped += a->keep;
		} else if (lg_backing_post(&LG_WJOB(w)->backing, &m) == -1) {
			return; /* the pipe is full: the rest fault in at their first claim */
		}
	}
}

/* The pool's settings and shared page for c's job. */
static const struct lg_pool_cfg *
pool_cfg(const struct lg_conn *c)
{
	return &c->w->env->cfg->jobs.pools[LG_JOB(c)->job.pool];
}

/* The pool's admission of c's request before any slot is claimed (LG_JOB(c)->job set, its pool
 * made valid here). Returns 0 when admitted, -1 when refused (counted). */
static int
admit(struct lg_conn *c)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_pool_page *pp;
	struct lg_codel_params cp;

	if (LG_JOB(c)->job.pool >= a->master->npools)
		LG_JOB(c)->job.pool = 0;
	struct lg_slot_pool spool = { .arena = a, .pool = LG_JOB(c)->job.pool };
	pp = &a->master->pools[LG_JOB(c)->job.pool];
	cp = lg_codel_params_of(pool_cfg(c));
	struct lg_proc_page *p = c->w->env->page;
	struct lg_jobslots js = lg_jobslots_of(a, LG_JOB(c)->job.pool);

	/* Admission first: with C + Q jobs of the pool waiting for or running on compute, refuse
	 * before a byte of the body is read. The job slot itself is taken once the body is
	 * complete. */
	if (lg_jobslot_in_use(&js, a) >= lg_jobslot_open(&js, a)) {
		atomic_fetch_add(&pp->full, 1);
		atomic_fetch_add(&p->rejected_full, 1);
		return -1;
	}
	/* A standing queue (its shortest wait stayed above the target for an interval): refuse
	 * now rather than let the job wait out the target and be shed (counted in the state). */
	if (LG_JOB(c)->job.where != LAGLESS_WHERE_LOOP && lg_codel_refuse(&pp->codel, &cp,
	    lg_now_ns(), lg_slot_queued_floor, &spool))
		return -1;
	return 0;
}

/* Writes the request view v at the start of c's claimed slot's input region, then the loop's
 * parse of its query (16-byte aligned) when one is kept for it and fits; the body follows at
 * LG_JOB(c)->job.body_off (a multiple of 64). The parse fits when it ends within the kept bytes
 * and leaves the route's max_body its room in the region (else the runner parses the view's
 * query: a body the view alone admitted is never refused for it). Everything lies within the
 * kept bytes of the slot (lg_arena_keep: no fallocate here; mapped into this process at start,
 * lg_offload_map_views).
 * Returns 0, or -1 when the view does not fit them or has too many fields. */
static int
write_view(struct lg_conn *c, int slot, const struct lg_view *v)
{
	struct lg_arena *a = c->w->env->arena;
	unsigned char *in = lg_arena_in(a, (uint32_t)slot);
	size_t vlen = lg_view_size(v), off = (vlen + 15) & ~(size_t)15;
	struct lg_job *j = &LG_JOB(c)->job;
	const struct lg_registry *reg = c->w->env->cfg->reg;
	/* the arguments end in the kept bytes, and leave the route's largest body its room */
	uint64_t body = j->route < reg->nroutes ? reg->routes[j->route].max_body : a->in_cap;
	uint64_t room = a->in_cap > body ? a->in_cap - body : 0;
	size_t lim = (size_t)((room < a->keep ? room : a->keep) & ~(uint64_t)63);

	if (vlen > a->keep || lg_view_encode(in, vlen, v) != vlen) {
		/* Neither case sets errno: the view is longer than the backed bytes of a slot, or
		 * has more fields than LAGLESS_MAX_FIELDS (lg_view_encode returns 0). */
		log_warn("cannot write the request view of %zu bytes into slot %d (%llu bytes kept "
		    "backed per slot, %d fields at most)", vlen, slot, (unsigned long long)a->keep,
		    LAGLESS_MAX_FIELDS);
		return -1;
	}
	j->args_off = j->args_len = 0;
	j->body_off = (uint32_t)vlen;
	if (off < lim && lg_offload_args_write(c, in + off, lim - off, &j->args_len)) {
		j->args_off = (uint32_t)off;
		j->body_off = (uint32_t)((off + j->args_len + 63) & ~(size_t)63);
	}
	a->slots[slot].touched = j->body_off;
	return 0;
}

/* A free transit buffer of LG_JOB(c)->job.pool (valid) for c's body, its client's share
 * allowing: held (LG_CONN_HELD_BUFFER), the deadline the shorter of the job's and the pool's,
 * the body counters reset. Returns 0, or -1 (the caller answers 503; counted). */
static int
claim_buffer(struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;
	struct lg_arena *a = c->w->env->arena;
	uint32_t tag = lg_fair_tag(c);
	int slot;

	if (lg_fair_over_share(c, tag))
		return -1;
	if ((slot = lg_slot_claim_pool(a, LG_JOB(c)->job.pool, c->w->env->index,
	    &LG_JOB(c)->gen)) < 0)
		return lg_fair_refuse_transit(c);
	lg_share_claimed(&a->slots[slot], tag, lg_now_ns());
	LG_JOB(c)->slot = slot;
	lg_conn_hold(c, LG_CONN_HELD_BUFFER);
	/* The route's deadline and the pool's: both default to --deadline-ms, so the shorter is
	 * the one the configuration asked for. */
	if (pool_cfg(c)->deadline_ms < LG_JOB(c)->job.deadline_ms)
		LG_JOB(c)->job.deadline_ms = pool_cfg(c)->deadline_ms;
	LG_JOB(c)->body_got = 0;
	LG_JOB(c)->reserved = 0;
	LG_JOB(c)->backing_wait = 0;
	LG_JOB(c)->head_body = 0;
	LG_JOB(c)->body_need = r->content_length == LG_HTTP_NO_LENGTH ? 0 : r->content_length;
	return 0;
}

int
lg_offload_claim(struct lg_conn *c, const struct lg_job *job, const struct lg_view *v)
{
	int slot;

	LG_JOB(c)->job = *job;
	if (admit(c) == -1 || claim_buffer(c) == -1)
		return -1;
	slot = LG_JOB(c)->slot;
	if (write_view(c, slot, v) == -1) {
		lg_offload_release(c);
		atomic_fetch_add(&c->w->env->page->rejected_full, 1);
		return -1;
	}
	LG_WJOB(c->w)->pending[slot] = c; /* backing outcomes find the connection by slot */
	return 0;
}

int
lg_offload_claim_body(struct lg_conn *c, uint32_t pool, uint64_t deadline_ms)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_job *j = &LG_JOB(c)->job;

	memset(j, 0, sizeof(*j)); /* kind 0: no job runs, no output is charged (charge_whole) */
	j->pool = pool < a->master->npools ? pool : 0;
	j->where = LAGLESS_WHERE_POOL;
	j->deadline_ms = deadline_ms;
	if (claim_buffer(c) == -1)
		return -1;
	j->body_off = 0; /* no view: the body from the region's first byte */
	a->slots[LG_JOB(c)->slot].touched = 0;
	LG_WJOB(c->w)->pending[LG_JOB(c)->slot] = c; /* backing outcomes find c by slot */
	return 0;
}

/* Charges a Content-Length body and the output bound of its kind for that input to the memory
 * budget (shm/arena.h), both or neither, so a job that cannot be backed whole is refused before
 * any byte is backed and holds nothing: input charged alone held budget for jobs that could
 * never get their output. The compute process then finds its output paid. Returns 0 or -1. */
static int
charge_whole(struct lg_conn *c)
{
	struct lg_arena *a = c->w->env->arena;
	uint64_t need;

	/* inline: the output is charged where it runs; no kind (a body buffered for an upstream,
	 * lg_offload_claim_body): no output; too large: 413, nothing to back */
	if (LG_JOB(c)->job.where == LAGLESS_WHERE_LOOP || LG_JOB(c)->job.kind == 0 ||
	    lg_registry_out_need(c->w->env->cfg->reg,
	    LG_JOB(c)->job.kind, LG_JOB(c)->job.route, LG_JOB(c)->body_need, a->out_cap,
	    &need) == -1)
		need = 0;
	return lg_arena_charge(a, (uint32_t)LG_JOB(c)->slot,
	    LG_JOB(c)->job.body_off + LG_JOB(c)->body_need, need);
}

int
lg_offload_start(struct lg_conn *c)
{
	if (LG_JOB(c)->body_got < LG_JOB(c)->body_need) {
		/* Ask for the first window to be backed (off the loop); the body bytes that came
		 * with the head stay in rbuf until it is, then the rest is read directly into the
		 * slot's input region (lg_offload_body_buf asks for more ahead of it). */
		size_t buffered = lg_conn_buffered(c);

		LG_JOB(c)->head_body = buffered < LG_JOB(c)->body_need ? buffered : (size_t)LG_JOB(c)->body_need;
		/* The whole body must fit the memory budget, decided before any byte is backed
		 * or read into shared memory (issue 18). */
		if (charge_whole(c) == -1 || back_async(c, LG_JOB(c)->head_body + RESERVE_AHEAD) == -1)
			return refuse_memory(c);
		lg_conn_expect_body(c);
		return 0;
	}
	return c->w->ops->body_done(c); /* the router decides: queue it, or coalesce */
}

static int run_here(struct lg_conn *c);

/* The largest queue depth the pool has seen (PHP-FPM's "max listen queue"), raised after a
 * job is queued: a census of the pool's slots, then a CAS that only ever raises it. */
static void
note_depth(struct lg_arena *a, uint32_t pool)
{
	_Atomic uint32_t *max = &a->master->pools[pool].max_depth;
	uint32_t n[LG_SLOT_STATES], seen;

	lg_slot_census_pool(a, pool, n);
	seen = atomic_load(max);
	while (n[LG_SLOT_QUEUED] > seen && !atomic_compare_exchange_weak(max, &seen,
	    n[LG_SLOT_QUEUED]))
		;
}

int
lg_offload_send(struct lg_conn *c)
{
	const struct lg_loop_env *env = c->w->env;
	struct lg_arena *a = env->arena;
	struct lg_slot *s = &a->slots[LG_JOB(c)->slot];
	struct lg_jobslots js = lg_jobslots_of(a, LG_JOB(c)->job.pool);
	uint64_t now = lg_now_ns();
	struct lg_msg m = { .type = LG_MSG_JOB,
	    .job = { .slot = (uint32_t)LG_JOB(c)->slot, .gen = LG_JOB(c)->gen } };

	/* The slot holds the job's one record, the header only names it (shm/wire.h). */
	LG_JOB(c)->job.in_len = LG_JOB(c)->body_got;
	LG_JOB(c)->job.enqueue_ns = now;
	LG_JOB(c)->job.deadline_ns = now + LG_JOB(c)->job.deadline_ms * LG_NS_PER_MS;
	s->job = LG_JOB(c)->job;
	s->touched = LG_JOB(c)->job.body_off + LG_JOB(c)->body_got;
	/* QUEUED before the header is visible: a compute process may take it at once. The job
	 * slot is taken in between (a token is valid only for a QUEUED slot); without one, C + Q
	 * jobs wait or run, and the release below (QUEUED -> FREE) leaves no trace. */
	if (lg_slot_move(s, LG_JOB(c)->gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED) == -1 ||
	    lg_jobslot_take(&js, a, (uint32_t)LG_JOB(c)->slot, LG_JOB(c)->gen) == -1 ||
	    lg_chan_send(env->ch->job[LG_JOB(c)->job.pool][0], &m, MSG_DONTWAIT) == -1) {
		log_warn("cannot queue job on slot %d: %s", LG_JOB(c)->slot,
		    errno == EAGAIN ? "every job slot is taken" : strerror(errno));
		lg_stats_add(&env->page->rejected_full, 1);
		return -1;
	}
	return 0;
}

int
lg_offload_queue(struct lg_conn *c)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_slot *s = &a->slots[LG_JOB(c)->slot];

	if (LG_JOB(c)->job.where == LAGLESS_WHERE_LOOP) {
		s->touched = LG_JOB(c)->job.body_off + LG_JOB(c)->body_got;
		return run_here(c);
	}
	if (lg_offload_send(c) == -1) {
		lg_offload_release(c);
		return lg_conn_error(c, 503, 1, LG_CONN_RETRY_AFTER);
	}
	lg_obs_route_hit(c);
	LG_WJOB(c->w)->pending[LG_JOB(c)->slot] = c;
	note_depth(a, LG_JOB(c)->job.pool);
	lg_conn_wait_job(c, LG_JOB(c)->job.deadline_ms);
	return 0;
}

void
lg_offload_kill(const struct lg_worker *w, uint32_t slot, uint32_t gen)
{
	struct lg_msg kill = { .type = LG_MSG_KILL, .kill = { .slot = slot, .gen = gen } };

	if (lg_chan_send(w->env->ch->ctl[0], &kill, MSG_DONTWAIT) == -1)
		log_error("cannot ask the master to kill the runner of slot %u: %s", slot,
		    strerror(errno));
}

void
lg_offload_client_gone(struct lg_conn *c)
{
	uint32_t slot = (uint32_t)LG_JOB(c)->slot;
	int waiting = c->state == LG_CONN_JOB, kill_it = pool_cfg(c)->on_client_gone == LG_GONE_KILL;

	if (lg_offload_release(c) != LG_SLOT_ABANDONED || !waiting) {
		if (waiting)
			log_info("client gone; job on slot %u cancelled before it ran", slot);
		return;
	}
	log_info("client gone while its job on slot %u runs: %s", slot,
	    kill_it ? "asking the master to kill it" : "letting it finish");
	if (kill_it)
		lg_offload_kill(c->w, slot, LG_JOB(c)->gen);
}

/* Asks the loop's helper thread to map the answer of c's finished job (out_len bytes after
 * the metadata page) into this process before it is written: the compute process wrote those
 * pages, so the loop's own sends would fault them in, and the page tables the faults allocate
 * are charged to the memory cgroup (worker/job/backing.h). Returns 0 (lg_offload_backed answers),
 * or -1 when it could not be posted (answer now; the sends map the pages). */
static int
map_output(struct lg_conn *c, uint64_t out_len)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_backing_msg m = {
		.slot = (uint32_t)LG_JOB(c)->slot, .gen = LG_JOB(c)->gen, .op = LG_BACKING_MAP,
		.off = lg_arena_out_off(a, (uint32_t)LG_JOB(c)->slot),
		.len = (LG_OUT_META + out_len + LG_PAGE - 1) & ~(uint64_t)(LG_PAGE - 1),
	};

	if (LG_JOB(c)->backing_wait || lg_backing_post(&LG_WJOB(c->w)->backing, &m) == -1)
		return -1;
	LG_JOB(c)->backing_wait = 1;
	return 0;
}

/* Answers c from its finished slot (DONE or FAILED); a large answer once the helper has
 * mapped it (map_output). */
static int
answer_finished(struct lg_conn *c, uint64_t word)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_slot *s = &a->slots[LG_JOB(c)->slot];
	int ok = lg_slot_state(word) != LG_SLOT_FAILED;

	lg_conn_stop_timer(c);
	lg_obs_job_times(&c->obs, lg_slot_queue_ns(s),
	    s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0);
	if (ok && s->out_len > SMALL_ANSWER && s->out_len <= a->out_cap - LG_OUT_META &&
	    map_output(c, s->out_len) == 0)
		return 0; /* still pending: the outcome finds c by slot */
	LG_WJOB(c->w)->pending[LG_JOB(c)->slot] = NULL;
	return lg_offload_answer_result(c, ok ? LG_JOB_OK : s->status, s->out_len);
}

/* The helper mapped c's answer (map_output): write it. */
static void
answer_mapped(struct lg_conn *c)
{
	struct lg_worker *w = c->w;

	LG_WJOB(w)->pending[LG_JOB(c)->slot] = NULL;
	lg_obs_unit_begin(w, c);
	int rc = lg_offload_answer_result(c, LG_JOB_OK, w->env->arena->slots[LG_JOB(c)->slot].out_len);
	lg_obs_unit_end(w);
	if (rc == 0)
		lg_conn_resume(c);
}

/* A where=loop kind: runs here, inline, timed by the callback bracket around it (a run over
 * --slow-callback-ms is named in the warning and counted). The slot stays CLAIMED: no compute
 * process ever sees it. */
static int
run_here(struct lg_conn *c)
{
	const struct lg_loop_env *env = c->w->env;
	struct lg_registry *reg = env->cfg->reg;
	struct lg_arena *a = env->arena;
	uint64_t need, out_len = 0, t0 = lg_now_ns();
	uint32_t slot = (uint32_t)LG_JOB(c)->slot;
	int st;

	struct lg_init_guard guard = { a->master->modules, &env->page->in_init };
	struct lg_job *j = &a->slots[slot].job;

	/* The slot holds the job's one record, read by the run as a compute process reads it. */
	LG_JOB(c)->job.in_len = LG_JOB(c)->body_got;
	LG_JOB(c)->job.enqueue_ns = 0;
	LG_JOB(c)->job.deadline_ns = t0 + LG_JOB(c)->job.deadline_ms * LG_NS_PER_MS;
	*j = LG_JOB(c)->job;
	lg_obs_route_hit(c);
	if (!lg_registry_usable(reg, LG_JOB(c)->job.kind, &guard)) {
		st = LG_JOB_UNAVAILABLE; /* its module's init failed: 503, not run */
	} else if (lg_registry_out_need(reg, LG_JOB(c)->job.kind, LG_JOB(c)->job.route,
	    LG_JOB(c)->body_got, a->out_cap, &need) == -1) {
		/* refused without running: clear the metadata a previous job left */
		st = lg_arena_charge_out(a, slot, LG_OUT_META) == -1 ||
		    lg_arena_reserve(a, lg_arena_out_off(a, slot), LG_OUT_META) == -1 ?
		    LG_JOB_NO_SPACE : LG_JOB_TOO_LARGE;
		if (st == LG_JOB_TOO_LARGE)
			memset(lg_arena_out(a, slot), 0, sizeof(struct lg_out_meta));
	} else if (lg_arena_charge_out(a, slot, need) == -1 ||
	    lg_arena_reserve(a, lg_arena_out_off(a, slot), need) == -1) {
		st = LG_JOB_NO_SPACE;
	} else {
		a->slots[slot].touched = LG_JOB(c)->job.body_off + LG_JOB(c)->body_got + need;
		st = lg_registry_run(reg, j, lg_arena_in(a, slot), a->in_cap, lg_arena_out(a, slot),
		    a->out_cap, t0, env->cfg->enable_test_jobs, &out_len);
	}
	lg_obs_job_times(&c->obs, 0, lg_now_ns() - t0);
	return lg_offload_answer_result(c, (uint32_t)st, out_len);
}

void
lg_offload_completions(struct lg_worker *w, const struct lg_offload_sink *sink)
{
	const struct lg_loop_env *env = w->env;
	struct lg_msg m;

	for (;;) {
		int r = lg_chan_recv(env->ch->done[env->index][0], &m, MSG_DONTWAIT);

		if (r == -1) {
			if (errno == EINTR)
				continue;
			return; /* EAGAIN: drained */
		}
		if (r == 1 && (m.type == LG_MSG_WAKE || m.type == LG_MSG_UNWANTED ||
		    m.type == LG_MSG_UPWAKE)) {
			sink->message(w, &m);
			continue;
		}
		if (r == 0 || m.type != LG_MSG_DONE || m.done.slot >= env->arena->nslots) {
			atomic_fetch_add(&env->page->bad_headers, 1);
			log_warn("dropped a completion header that failed validation");
			continue;
		}
		struct lg_conn *c = LG_WJOB(w)->pending[m.done.slot];
		if (c == NULL && sink->unclaimed(w, &m))
			continue;
		uint64_t word = atomic_load(&env->arena->slots[m.done.slot].word);
		enum lg_slot_state st = lg_slot_state(word);

		/* Stale: from before a respawn of this loop, or for a job answered 504 already. */
		if (c == NULL || LG_JOB(c)->gen != m.done.gen || lg_slot_gen(word) != m.done.gen ||
		    (st != LG_SLOT_DONE && st != LG_SLOT_FAILED)) {
			log_debug("stale completion for slot %u gen %u", m.done.slot, m.done.gen);
			continue;
		}
		lg_obs_unit_begin(w, c);
		int rc = answer_finished(c, word);
		lg_obs_unit_end(w);
		if (rc == 0)
			lg_conn_resume(c);
	}
}

int
lg_offload_deadline(struct lg_conn *c)
{
	const struct lg_loop_env *env = c->w->env;
	struct lg_slot *s = &env->arena->slots[LG_JOB(c)->slot];
	uint64_t word = atomic_load(&s->word);
	enum lg_slot_state st = lg_slot_state(word);
	uint64_t now = lg_now_ns();
	int running;

	if (lg_slot_gen(word) == LG_JOB(c)->gen && (st == LG_SLOT_DONE || st == LG_SLOT_FAILED)) {
		/* Finished just now; its completion header is still in the channel. */
		if (answer_finished(c, word) == -1)
			return -1;
		return lg_conn_resume(c);
	}
	running = st == LG_SLOT_RUNNING;
	lg_obs_job_times(&c->obs, (running ? s->start_ns : now) - s->job.enqueue_ns,
	    running ? now - s->start_ns : 0);
	log_warn("%s job on slot %d past its %" PRIu64 " ms deadline (%s, queued %.1f ms, "
	    "running %.1f ms): 504", lg_offload_kind_name(c->w, s->job.kind), LG_JOB(c)->slot,
	    LG_JOB(c)->job.deadline_ms, running ? "running" : "queued", (double)c->obs.queue_ns / 1e6,
	    (double)c->obs.run_ns / 1e6);
	atomic_fetch_add(&env->page->timed_out, 1);
	uint32_t slot = (uint32_t)LG_JOB(c)->slot;
	lg_offload_release(c);
	/* The master kills the compute process, because only it knows the pid is still its
	 * own child. A queued job was cancelled by the release above and never runs. */
	if (running)
		lg_offload_kill(c->w, slot, LG_JOB(c)->gen);
	char extra[128];
	lg_offload_timing_headers(c, extra, sizeof(extra), 0);
	if (lg_conn_error(c, 504, 0, extra) == -1)
		return -1;
	return lg_conn_resume(c);
}
