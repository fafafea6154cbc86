#include "worker/job/offload.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
#include "worker/observe.h"

/* Input is backed this far ahead of the body bytes received, one window at a time: backing
 * 64 MiB at once took 20-40 ms of one loop callback (fallocate zeroes the pages), which would
 * stall every other connection of the loop; a 1 MiB window costs well under a millisecond. */
#define RESERVE_AHEAD (1u << 20)
#define SMALL_ANSWER  2048u /* bytes: what lg_conn_respond copies rather than references */

int
lg_offload_body(struct lg_conn *c, struct lg_http *h, const char *at, size_t len)
{
	const struct lg_arena *a = c->w->env->arena;

	if (c->job.body_got + len > a->in_cap - c->job.body_off) {
		h->status = 413;
		return -1;
	}
	if (c->job.body_got + len > c->job.reserved) {
		/* lg_offload_body_room bounds what the parser is given: never reached */
		log_error("%zu body bytes for slot %d past the %llu backed; 503", len, c->job.slot,
		    (unsigned long long)c->job.reserved);
		h->status = 503;
		return -1;
	}
	memcpy(lg_arena_in(a, (uint32_t)c->job.slot) + c->job.body_off + c->job.body_got, at, len);
	c->job.body_got += len;
	atomic_store_explicit(&a->slots[c->job.slot].up_bytes, c->job.body_got, memory_order_relaxed);
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
	uint64_t room = a->in_cap - c->job.body_off;
	uint64_t from = (c->job.body_off + c->job.reserved) & ~(uint64_t)(LG_PAGE - 1);

	if (!c->http.req.chunked && upto > c->job.body_need)
		upto = c->job.body_need;
	if (upto > room)
		upto = room;
	if (c->job.backing_wait || upto <= c->job.reserved)
		return 0;
	/* Within the memory budget first (a chunked body's next window; a Content-Length body
	 * was charged whole at head time): beyond it, 503 before anything is backed. */
	if (lg_arena_charge_in(a, (uint32_t)c->job.slot, c->job.body_off + upto) == -1)
		return -1;
	struct lg_backing_msg m = {
		.slot = (uint32_t)c->job.slot, .gen = c->job.gen, .upto = upto,
		.off = lg_arena_in_off(a, (uint32_t)c->job.slot) + from,
		.len = c->job.body_off + upto - from,
	};
	/* The master punches a slot's pages once it is free again if this many were touched. */
	a->slots[c->job.slot].touched = c->job.body_off + upto;
	if (lg_backing_post(&c->w->job.backing, &m) == -1) {
		log_warn("cannot post a backing request for slot %d: %s", c->job.slot, strerror(errno));
		return -1;
	}
	c->job.backing_wait = 1;
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

int
lg_offload_body_window(struct lg_conn *c)
{
	/* The rate a claim that finds no free buffer judges this upload by (shm/share.h). */
	atomic_store_explicit(&c->w->env->arena->slots[c->job.slot].up_bytes, c->job.body_got,
	    memory_order_relaxed);
	/* The next window is asked for while the current one is still half empty, so reading
	 * normally never waits for it. */
	if (c->job.body_got + RESERVE_AHEAD / 2 >= c->job.reserved &&
	    back_async(c, c->job.body_got + RESERVE_AHEAD) == -1) {
		refuse_memory(c);
		return -1;
	}
	return c->job.body_got < c->job.reserved ? 0 : 1;
}

static void answer_mapped(struct lg_conn *c);

size_t
lg_offload_body_room(struct lg_conn *c, struct lg_http *h)
{
	const struct lg_arena *a = c->w->env->arena;
	uint64_t region = a->in_cap - c->job.body_off;

	if (c->job.reserved >= region)
		return SIZE_MAX; /* all backed: past it lg_offload_body answers 413 */
	/* As for a Content-Length body: the next window is asked for while the current one is
	 * still half empty, so parsing normally never waits for it. */
	if (c->job.body_got + RESERVE_AHEAD / 2 >= c->job.reserved &&
	    back_async(c, c->job.body_got + RESERVE_AHEAD) == -1) {
		atomic_fetch_add(&c->w->env->page->rejected_memory, 1);
		h->status = 503;
		return 0;
	}
	return (size_t)(c->job.reserved - c->job.body_got);
}

void
lg_offload_backed(void *ctx, const struct lg_backing_msg *m)
{
	struct lg_worker *w = ctx;
	struct lg_conn *c = m->slot < w->env->arena->nslots ? w->job.pending[m->slot] : NULL;
	struct lg_arena *a = w->env->arena;

	if (c == NULL || c->job.slot != (int)m->slot || c->job.gen != m->gen || !c->job.backing_wait)
		return; /* the connection gave the slot up meanwhile */
	c->job.backing_wait = 0;
	if (m->op == LG_BACKING_MAP) {
		if (c->state == LG_CONN_JOB)
			answer_mapped(c);
		return;
	}
	if (c->state != LG_CONN_HEAD && c->state != LG_CONN_BODY)
		return; /* a window asked ahead of a chunked body that ended meanwhile */
	if (m->err) {
		log_warn("cannot back %llu bytes of input for slot %d: %s; 503",
		    (unsigned long long)m->upto, c->job.slot, strerror(m->err));
		refuse_memory(c);
		return;
	}
	if (m->upto > c->job.reserved)
		c->job.reserved = m->upto;
	if (c->job.head_body > 0) {
		/* The first window: move the body bytes that came with the head. */
		size_t n = c->job.head_body;

		memcpy(lg_arena_in(a, (uint32_t)c->job.slot) + c->job.body_off, c->rbuf, n);
		memmove(c->rbuf, c->rbuf + n, c->rlen - n);
		c->rlen -= n;
		c->job.body_got = n;
		c->job.head_body = 0;
	}
	if (c->state == LG_CONN_BODY && c->job.body_got >= c->job.body_need) {
		if (c->w->ops->body_done(c) == -1) /* the router decides: queue it, or coalesce */
			return;
	}
	lg_conn_body_ready(c);
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
		} else if (lg_backing_post(&w->job.backing, &m) == -1) {
			return; /* the pipe is full: the rest fault in at their first claim */
		}
	}
}

/* The pool's settings and shared page for c's job. */
static const struct lg_pool_cfg *
pool_cfg(const struct lg_conn *c)
{
	return &c->w->env->cfg->pools[c->job.pool];
}

/* The pool's admission of c's request before any slot is claimed (c->job.pool set from sp).
 * Returns 0 when admitted, -1 when refused (counted). */
static int
admit(struct lg_conn *c, const struct lg_offload_spec *sp)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_pool_page *pp;
	struct lg_codel_params cp;
	struct lg_slot_pool spool = { .arena = a, .pool = sp->pool };

	c->job.pool = sp->pool < a->master->npools ? sp->pool : 0;
	pp = &a->master->pools[c->job.pool];
	cp = lg_codel_params_of(pool_cfg(c));
	struct lg_proc_page *p = c->w->env->page;
	struct lg_jobslots js = lg_jobslots_of(a, c->job.pool);

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
	if (!sp->run_inline && lg_codel_refuse(&pp->codel, &cp, lg_now_ns(), lg_slot_queued_floor,
	    &spool))
		return -1;
	return 0;
}

int
lg_offload_claim(struct lg_conn *c, const struct lg_offload_spec *sp)
{
	const struct lg_http_req *r = &c->http.req;
	struct lg_arena *a = c->w->env->arena;
	size_t vlen = lg_view_size(sp->view);
	int slot;

	if (admit(c, sp) == -1)
		return -1;
	uint32_t tag = lg_fair_tag(c);
	if (lg_fair_over_share(c, tag))
		return -1;
	if ((slot = lg_slot_claim_pool(a, c->job.pool, c->w->env->index, &c->job.gen)) < 0)
		return lg_fair_refuse_transit(c);
	lg_share_claimed(&a->slots[slot], tag, lg_now_ns());
	c->job.slot = slot;
	c->job.kind = sp->kind;
	c->job.arg = sp->route;
	/* The route's deadline and the pool's: both default to --deadline-ms, so the shorter is
	 * the one the configuration asked for. */
	c->job.deadline_ms = sp->deadline_ms < pool_cfg(c)->deadline_ms ? sp->deadline_ms :
	    pool_cfg(c)->deadline_ms;
	c->job.run_inline = sp->run_inline;
	c->job.ctype = sp->ctype;
	c->job.body_got = 0;
	c->job.reserved = 0;
	c->job.backing_wait = 0;
	c->job.head_body = 0;
	c->job.body_need = r->content_length == LG_HTTP_NO_LENGTH ? 0 : r->content_length;
	/* The request view goes first in the input region (kinds/host.h), the body after it; its
	 * pages are kept backed (lg_arena_keep: no fallocate here) and were mapped into this
	 * process at start (lg_offload_map_views). */
	a->slots[slot].touched = vlen;
	if (vlen > a->keep || lg_view_encode(lg_arena_in(a, (uint32_t)slot), vlen, sp->view) !=
	    vlen) {
		/* Neither case sets errno: the view is longer than the backed bytes of a slot, or
		 * has more fields than LAGLESS_MAX_FIELDS (lg_view_encode returns 0). */
		log_warn("cannot write the request view of %zu bytes into slot %d (%llu bytes kept "
		    "backed per slot, %d fields at most)", vlen, slot, (unsigned long long)a->keep,
		    LAGLESS_MAX_FIELDS);
		lg_offload_release(c);
		atomic_fetch_add(&c->w->env->page->rejected_full, 1);
		return -1;
	}
	c->job.body_off = vlen;
	c->w->job.pending[slot] = c; /* backing outcomes find the connection by slot */
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

	/* inline: the output is charged where it runs; too large: 413, nothing to back */
	if (c->job.run_inline || lg_registry_out_need(c->w->env->cfg->reg, c->job.kind,
	    (uint32_t)c->job.arg, c->job.body_need, a->out_cap, &need) == -1)
		need = 0;
	return lg_arena_charge(a, (uint32_t)c->job.slot, c->job.body_off + c->job.body_need, need);
}

int
lg_offload_start(struct lg_conn *c)
{
	if (c->job.body_got < c->job.body_need) {
		/* Ask for the first window to be backed (off the loop); the body bytes that came
		 * with the head stay in rbuf until it is, then the rest is read directly into the
		 * slot's input region (lg_offload_body_window asks for more ahead of it). */
		c->job.head_body = c->rlen < c->job.body_need ? c->rlen : (size_t)c->job.body_need;
		/* The whole body must fit the memory budget, decided before any byte is backed
		 * or read into shared memory (issue 18). */
		if (charge_whole(c) == -1 || back_async(c, c->job.head_body + RESERVE_AHEAD) == -1)
			return refuse_memory(c);
		c->state = LG_CONN_BODY;
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
	struct lg_slot *s = &a->slots[c->job.slot];
	struct lg_jobslots js = lg_jobslots_of(a, c->job.pool);
	uint64_t now = lg_now_ns();
	struct lg_msg m = { .type = LG_MSG_JOB, .job = { .slot = (uint32_t)c->job.slot, .gen = c->job.gen } };

	/* The slot is the job's one record, the header only names it (shm/wire.h). */
	s->kind = c->job.kind;
	s->arg = c->job.arg;
	s->in_len = c->job.body_got;
	s->touched = c->job.body_off + c->job.body_got;
	s->enqueue_ns = now;
	s->deadline_ns = now + c->job.deadline_ms * LG_NS_PER_MS;
	/* QUEUED before the header is visible: a compute process may take it at once. The job
	 * slot is taken in between (a token is valid only for a QUEUED slot); without one, C + Q
	 * jobs wait or run, and the release below (QUEUED -> FREE) leaves no trace. */
	if (lg_slot_move(s, c->job.gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED) == -1 ||
	    lg_jobslot_take(&js, a, (uint32_t)c->job.slot, c->job.gen) == -1 ||
	    lg_chan_send(env->ch->job[c->job.pool][0], &m, MSG_DONTWAIT) == -1) {
		log_warn("cannot queue job on slot %d: %s", c->job.slot,
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
	struct lg_slot *s = &a->slots[c->job.slot];

	if (c->job.run_inline) {
		s->arg = c->job.arg;
		s->in_len = c->job.body_got;
		s->touched = c->job.body_off + c->job.body_got;
		return run_here(c);
	}
	if (lg_offload_send(c) == -1) {
		lg_offload_release(c);
		return lg_conn_error(c, 503, 1, LG_CONN_RETRY_AFTER);
	}
	lg_obs_route_hit(c);
	c->w->job.pending[c->job.slot] = c;
	c->state = LG_CONN_JOB;
	ev_timer_stop(c->w->ev, &c->timer);
	ev_timer_set(&c->timer, c->job.deadline_ms / 1000., 0.);
	note_depth(a, c->job.pool);
	ev_timer_start(c->w->ev, &c->timer);
	return 0;
}

int
lg_offload_release(struct lg_conn *c)
{
	struct lg_slot *s = &c->w->env->arena->slots[c->job.slot];
	int to;

	if (c->w->job.pending[c->job.slot] == c)
		c->w->job.pending[c->job.slot] = NULL;
	if ((to = lg_slot_release(s, c->job.gen)) == LG_SLOT_ABANDONED)
		log_debug("slot %d abandoned while running; the compute process frees it", c->job.slot);
	c->job.slot = -1;
	return to;
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
	uint32_t slot = (uint32_t)c->job.slot;
	int waiting = c->state == LG_CONN_JOB, kill_it = pool_cfg(c)->on_client_gone == LG_GONE_KILL;

	if (lg_offload_release(c) != LG_SLOT_ABANDONED || !waiting) {
		if (waiting)
			log_info("client gone; job on slot %u cancelled before it ran", slot);
		return;
	}
	log_info("client gone while its job on slot %u runs: %s", slot,
	    kill_it ? "asking the master to kill it" : "letting it finish");
	if (kill_it)
		lg_offload_kill(c->w, slot, c->job.gen);
}

static const char *
kind_name(const struct lg_worker *w, uint32_t kind)
{
	return kind < w->env->cfg->reg->nkinds && w->rt.kind_names[kind] ? w->rt.kind_names[kind] :
	    "unknown";
}

/* The HTTP status of a failed job: the kind's own 4xx for bad input when it set one. */
int
lg_offload_failure_status(uint32_t st, const void *m)
{
	const struct lg_out_meta *meta = m;

	switch (st) {
	case LG_JOB_BAD_INPUT:
		return meta && meta->http_status >= 400 && meta->http_status <= 499 ?
		    (int)meta->http_status : 400;
	case LG_JOB_TOO_LARGE:
		return 413;
	case LG_JOB_CRASHED:
		return 502;
	case LG_JOB_NO_SPACE:
	case LG_JOB_QUARANTINED:
	case LG_JOB_SHED:
	case LG_JOB_UNAVAILABLE:
		return 503;
	default:
		return 500;
	}
}

/* Copies the kind's short message or content type out of the metadata, bounded and limited to
 * visible ASCII (a message may hold spaces and newlines). Returns its length, 0 when none. */
static size_t
meta_text(const char *src, uint32_t len, size_t max, char *dst, int header)
{
	size_t n = len < max ? len : 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)src[i];

		if (ch > 0x7e || (ch < 0x20 && (header || (ch != '\n' && ch != '\t'))))
			return 0;
		dst[i] = (char)ch;
	}
	dst[n] = '\0';
	return n;
}

/* The X-Queue-Ms / X-Run-Ms header lines of an answer to a job that reached the pool, from
 * c->job.queue_ns and c->job.run_ns, then "Retry-After: 1" when retry: every offloaded answer
 * carries them, 200 or 502/503/504 (README, response headers). */
static void
timing_headers(const struct lg_conn *c, char *buf, size_t cap, int retry)
{
	/* A request of a coalescing route that ran its own job says so (docs/CACHE.md). */
	snprintf(buf, cap, "X-Queue-Ms: %.3f\r\nX-Run-Ms: %.3f\r\n%s%s",
	    (double)c->job.queue_ns / 1e6, (double)c->job.run_ns / 1e6, retry ? LG_CONN_RETRY_AFTER : "",
	    c->flight.coal_alone ? "X-Cache: bypass\r\n" : "");
}

/* Answers c with the out_len bytes after its slot's metadata page (they fit the output
 * region): status code, the kind's content type (else ctype_default), extra header lines. A
 * small body is copied and the slot given back first; a larger one is sent from the region,
 * the slot held until it is written. Returns as lg_conn_respond. */
static int
answer_region(struct lg_conn *c, int code, uint64_t out_len, const char *ctype_default,
    const char *extra)
{
	struct lg_arena *a = c->w->env->arena;
	const unsigned char *region = lg_arena_out(a, (uint32_t)c->job.slot);
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	char text[LG_FAIL_TEXT_CAP];
	const char *ctype = meta_text(meta->ctype, meta->ctype_len, sizeof(meta->ctype), text,
	    1) ? text : ctype_default;

	if (out_len > SMALL_ANSWER)
		return lg_conn_respond(c, code, ctype, extra, region + LG_OUT_META,
		    (size_t)out_len);
	/* A small answer is copied and the slot given back before the first byte is
	 * written, so a client that reads it and at once sends the next job finds the
	 * slot free (the connection copies bodies this small anyway). */
	char body[SMALL_ANSWER], ct[sizeof(text)];
	memcpy(body, region + LG_OUT_META, (size_t)out_len);
	snprintf(ct, sizeof(ct), "%s", ctype);
	lg_offload_release(c);
	return lg_conn_respond(c, code, ct, extra, body, (size_t)out_len);
}

/* Answers c from its job that ended OK with out_len answer bytes: the kind's 2xx (else 200)
 * and content type (else the route's). Returns as lg_conn_respond. */
static int
answer_ok(struct lg_conn *c, uint64_t out_len, const char *extra)
{
	const struct lg_out_meta *meta =
	    (const struct lg_out_meta *)lg_arena_out(c->w->env->arena, (uint32_t)c->job.slot);
	int code = meta->http_status >= 200 && meta->http_status <= 299 ?
	    (int)meta->http_status : 200;

	return answer_region(c, code, out_len, c->job.ctype, extra);
}

/* Answers c from its job's result: st (enum lg_job_status), out_len answer bytes after the
 * metadata page of the output region. The slot stays held until the response is written when
 * the body is read from the output region. */
static int
answer_result(struct lg_conn *c, uint32_t st, uint64_t out_len)
{
	struct lg_arena *a = c->w->env->arena;
	const unsigned char *region = lg_arena_out(a, (uint32_t)c->job.slot);
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	/* The metadata is the runner's only when the job ended by itself. */
	int own = st == LG_JOB_OK || st == LG_JOB_BAD_INPUT || st == LG_JOB_ERROR ||
	    st == LG_JOB_TOO_LARGE;
	char extra[128], text[LG_FAIL_TEXT_CAP];

	timing_headers(c, extra, sizeof(extra), 0);
	if (st == LG_JOB_OK && out_len <= a->out_cap - LG_OUT_META)
		return answer_ok(c, out_len, extra);
	if (st == LG_JOB_OK)
		st = LG_JOB_ERROR;
	if (st == LG_JOB_SHED) { /* counted in the pool's queue-wait state */
		log_debug("%s job on slot %d shed after waiting %.1f ms: 503",
		    kind_name(c->w, c->job.kind), c->job.slot, (double)c->job.queue_ns / 1e6);
		lg_offload_release(c);
		timing_headers(c, extra, sizeof(extra), 1);
		return lg_conn_error(c, 503, 0, extra);
	}
	int code = lg_offload_failure_status(st, own ? meta : NULL);
	size_t n = st == LG_JOB_UNAVAILABLE ?
	    lg_offload_unavailable_text(c->w, c->job.kind, text, sizeof(text)) :
	    lg_offload_failure_text(c->w, c->job.slot, st, text, sizeof(text));

	struct lg_proc_page *p = c->w->env->page;

	lg_stats_add(st == LG_JOB_QUARANTINED ? &p->rejected_quarantine :
	    st == LG_JOB_UNAVAILABLE ? &p->rejected_module :
	    st == LG_JOB_NO_SPACE ? &p->rejected_memory :
	    code == 502 ? &p->failed_crash : &p->failed_error, 1);
	/* A 4xx is the client's request refused by the kind: a client can send any number of
	 * them, so they are counted (lagless_jobs_client_errors_total), logged at debug only. */
	if (code >= 400 && code <= 499)
		lg_stats_add(&p->jobs_client_error, 1);
	LG_LOG_AT(code >= 400 && code <= 499 ? LG_LOG_DEBUG : LG_LOG_WARN,
	    "%s job on slot %d failed (status %u): %d%s%.*s", kind_name(c->w, c->job.kind),
	    c->job.slot, st, code, n ? ": " : "", (int)(n ? n - 1 : 0), text);
	timing_headers(c, extra, sizeof(extra), code == 503);
	/* The kind's whole error body (host->error_body, ABI 1.2), not only its short message;
	 * a large one is not mapped ahead as a 2xx is (map_output): the sends fault it in. */
	if (own && st != LG_JOB_TOO_LARGE && (meta->flags & LG_OUT_ERROR_BODY) &&
	    out_len <= a->out_cap - LG_OUT_META)
		return answer_region(c, code, out_len, "text/plain", extra);
	lg_offload_release(c);
	if (n == 0)
		return lg_conn_error(c, code, code == 502, extra);
	return lg_conn_respond(c, code, "text/plain", extra, text, n);
}

size_t
lg_offload_unavailable_text(const struct lg_worker *w, uint32_t kind, char *dst, size_t cap)
{
	const struct lg_registry *reg = w->env->cfg->reg;
	uint32_t mod = lg_registry_module_of(reg, kind);
	const struct lg_module_health *h;
	char why[64];
	int n;

	if (mod >= reg->nmodules || mod >= LG_MODULE_HEALTH)
		return 0;
	h = &w->env->arena->master->modules[mod];
	lg_stats_init_cause(atomic_load(&h->cause), why, sizeof(why));
	n = snprintf(dst, cap, "module %s is unavailable: its init %s; it is retried in the "
	    "background\n", reg->modules[mod].name, why);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t
lg_offload_failure_text(struct lg_worker *w, int slot, uint32_t st, char *dst, size_t cap)
{
	const struct lg_out_meta *meta =
	    (const struct lg_out_meta *)lg_arena_out(w->env->arena, (uint32_t)slot);
	size_t n;

	if (cap > 0)
		dst[0] = '\0';
	/* The metadata is the runner's only when the job ended by itself. */
	if ((st != LG_JOB_BAD_INPUT && st != LG_JOB_ERROR && st != LG_JOB_TOO_LARGE) ||
	    cap < LG_FAIL_TEXT_CAP)
		return 0;
	n = meta_text(meta->msg, meta->msg_len, sizeof(meta->msg), dst, 0);
	while (n > 0 && dst[n - 1] == '\n')
		n--;
	if (n == 0)
		return 0;
	dst[n++] = '\n';
	dst[n] = '\0';
	return n;
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
		.slot = (uint32_t)c->job.slot, .gen = c->job.gen, .op = LG_BACKING_MAP,
		.off = lg_arena_out_off(a, (uint32_t)c->job.slot),
		.len = (LG_OUT_META + out_len + LG_PAGE - 1) & ~(uint64_t)(LG_PAGE - 1),
	};

	if (c->job.backing_wait || lg_backing_post(&c->w->job.backing, &m) == -1)
		return -1;
	c->job.backing_wait = 1;
	return 0;
}

/* Answers c from its finished slot (DONE or FAILED); a large answer once the helper has
 * mapped it (map_output). */
static int
answer_finished(struct lg_conn *c, uint64_t word)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_slot *s = &a->slots[c->job.slot];
	int ok = lg_slot_state(word) != LG_SLOT_FAILED;

	ev_timer_stop(c->w->ev, &c->timer);
	c->job.queue_ns = s->start_ns > s->enqueue_ns ? s->start_ns - s->enqueue_ns : 0;
	c->job.run_ns = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
	if (ok && s->out_len > SMALL_ANSWER && s->out_len <= a->out_cap - LG_OUT_META &&
	    map_output(c, s->out_len) == 0)
		return 0; /* still pending: the outcome finds c by slot */
	c->w->job.pending[c->job.slot] = NULL;
	return answer_result(c, ok ? LG_JOB_OK : s->status, s->out_len);
}

/* The helper mapped c's answer (map_output): write it. */
static void
answer_mapped(struct lg_conn *c)
{
	struct lg_worker *w = c->w;

	w->job.pending[c->job.slot] = NULL;
	lg_obs_unit_begin(w, c);
	int rc = answer_result(c, LG_JOB_OK, w->env->arena->slots[c->job.slot].out_len);
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
	uint32_t slot = (uint32_t)c->job.slot;
	int st;

	struct lg_init_guard guard = { a->master->modules, &env->page->in_init };

	lg_obs_route_hit(c);
	if (!lg_registry_usable(reg, c->job.kind, &guard)) {
		st = LG_JOB_UNAVAILABLE; /* its module's init failed: 503, not run */
	} else if (lg_registry_out_need(reg, c->job.kind, (uint32_t)c->job.arg, c->job.body_got,
	    a->out_cap, &need) == -1) {
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
		struct lg_job_in j = { c->job.kind, (uint32_t)c->job.arg, lg_arena_in(a, slot), a->in_cap,
		    c->job.body_got, lg_arena_out(a, slot), a->out_cap,
		    t0 + c->job.deadline_ms * LG_NS_PER_MS, 0, t0, env->cfg->enable_test_jobs };

		a->slots[slot].touched = c->job.body_off + c->job.body_got + need;
		st = lg_registry_run(reg, &j, &out_len);
	}
	c->job.queue_ns = 0;
	c->job.run_ns = lg_now_ns() - t0;
	return answer_result(c, (uint32_t)st, out_len);
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
		struct lg_conn *c = w->job.pending[m.done.slot];
		if (c == NULL && sink->unclaimed(w, &m))
			continue;
		uint64_t word = atomic_load(&env->arena->slots[m.done.slot].word);
		enum lg_slot_state st = lg_slot_state(word);

		/* Stale: from before a respawn of this loop, or for a job answered 504 already. */
		if (c == NULL || c->job.gen != m.done.gen || lg_slot_gen(word) != m.done.gen ||
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
	struct lg_slot *s = &env->arena->slots[c->job.slot];
	uint64_t word = atomic_load(&s->word);
	enum lg_slot_state st = lg_slot_state(word);
	uint64_t now = lg_now_ns();
	int running;

	if (lg_slot_gen(word) == c->job.gen && (st == LG_SLOT_DONE || st == LG_SLOT_FAILED)) {
		/* Finished just now; its completion header is still in the channel. */
		if (answer_finished(c, word) == -1)
			return -1;
		return lg_conn_resume(c);
	}
	running = st == LG_SLOT_RUNNING;
	c->job.queue_ns = (running ? s->start_ns : now) - s->enqueue_ns;
	c->job.run_ns = running ? now - s->start_ns : 0;
	log_warn("%s job on slot %d past its %" PRIu64 " ms deadline (%s, queued %.1f ms, "
	    "running %.1f ms): 504", kind_name(c->w, s->kind), c->job.slot, c->job.deadline_ms,
	    running ? "running" : "queued", (double)c->job.queue_ns / 1e6, (double)c->job.run_ns / 1e6);
	atomic_fetch_add(&env->page->timed_out, 1);
	uint32_t slot = (uint32_t)c->job.slot;
	lg_offload_release(c);
	/* The master kills the compute process, because only it knows the pid is still its
	 * own child. A queued job was cancelled by the release above and never runs. */
	if (running)
		lg_offload_kill(c->w, slot, c->job.gen);
	char extra[128];
	timing_headers(c, extra, sizeof(extra), 0);
	if (lg_conn_error(c, 504, 0, extra) == -1)
		return -1;
	return lg_conn_resume(c);
}

int
lg_offload_render(struct lg_worker *w, int slot, const char *ctype_default, char *tmp,
    size_t cap, int *code, const char **ctype, const void **body, size_t *len)
{
	struct lg_arena *a = w->env->arena;
	const unsigned char *region = lg_arena_out(a, (uint32_t)slot);
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	uint64_t out_len = a->slots[slot].out_len;

	if (out_len > a->out_cap - LG_OUT_META)
		return -1;
	*code = meta->http_status >= 200 && meta->http_status <= 299 ? (int)meta->http_status : 200;
	*ctype = meta_text(meta->ctype, meta->ctype_len, sizeof(meta->ctype), tmp, 1) &&
	    cap > sizeof(meta->ctype) ? tmp : ctype_default;
	*body = region + LG_OUT_META;
	*len = (size_t)out_len;
	return 0;
}
