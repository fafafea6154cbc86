/* Single-flight and the result cache, loop side (worker/flight/coalesce.h). */
#include "worker/flight/coalesce.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/policy.h"
#include "shm/cache.h"
#include "shm/flight.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "worker/observe.h"
#include "worker/job/offload.h"
#include "worker/flight/coalesce_int.h"
#include "worker/flight/cluster.h"

/* A failed flight's message for the waiters of other loops is stored under the key's hash
 * changed by this (a lookup never finds it, and it never replaces the key's answer), kept
 * long enough for them to read it. */
#define MESSAGE_HASH 0x9e3779b97f4a7c15ull
#define MESSAGE_TTL_MS 5000u
/* A background refresh holds its key's gate for its deadline and this margin (a loop killed
 * with it held lets it go then). */
#define REFRESH_LEASE_MS 1000u

int
lg_coal_setup(struct lg_worker *w)
{
	const struct lg_loop_env *env = w->env;
	struct lg_coal *k = calloc(1, sizeof(*k));

	if (k == NULL || (k->by_slot = calloc(env->arena->nslots, sizeof(*k->by_slot))) == NULL) {
		free(k);
		errno = ENOMEM;
		return -1;
	}
	k->ctr = env->cache != NULL ? lg_cache_row(env->cache, env->index) : NULL;
	w->coal = k;
	return 0;
}

int
lg_coal_wants(struct lg_conn *c, const struct lg_policy *pol)
{
	struct lg_coal *k = c->w->coal;

	if (k == NULL || k->ctr == NULL || pol == NULL)
		return 0;
	LG_FLIGHT(c)->pol = pol;
	return LG_FLIGHT(c)->coal = 1;
}

static void
count(struct lg_conn *c, _Atomic uint64_t *field)
{
	(void)c;
	lg_stats_add(field, 1);
}

/* A job slot for c's job: the transit buffer it already holds (a request with a body, claimed
 * at head time, its body in it), else the router's claim. A request with a body that no longer
 * holds its buffer (it went to a background refresh) cannot run again: -1, answered 503. */
int
lg_coal_job_slot(struct lg_conn *c)
{
	if (lg_job_held(c))
		return 0;
	if (lg_coal_has_body(c) || c->w->coal->claim == NULL)
		return -1;
	return c->w->coal->claim(c);
}

static struct lg_lflight *
find(struct lg_coal *k, uint32_t idx, uint32_t gen)
{
	for (struct lg_lflight *f = k->list; f != NULL; f = f->next)
		if (f->ref.idx == idx && f->ref.gen == gen)
			return f;
	return NULL;
}

static void deadline_cb(struct ev_loop *ev, ev_timer *t, int revents);

struct lg_lflight *
lg_coal_add_flight(struct lg_worker *w, const struct lg_flight_ref *ref,
    const struct lg_policy *pol)
{
	struct lg_lflight *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	f->w = w;
	f->ref = *ref;
	f->pol = pol;
	f->slot = -1;
	ev_timer_init(&f->deadline, deadline_cb, 1., 0.);
	f->deadline.data = f;
	f->next = w->coal->list;
	w->coal->list = f;
	return f;
}

void
lg_coal_drop_flight(struct lg_lflight *f)
{
	struct lg_coal *k = f->w->coal;

	for (struct lg_lflight **p = &k->list; *p != NULL; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	ev_timer_stop(f->w->ev, &f->deadline);
	if (f->cl != NULL)
		lg_cluster_drop(f); /* a lease still held is given back */
	if (f->up != NULL && f->asking)
		lg_coal_up_free(f->up); /* never sent: no exchange holds it */
	if (f->owner && f->slot >= 0 && k->by_slot[f->slot] == f)
		k->by_slot[f->slot] = NULL;
	free(f);
}

void
lg_coal_park(struct lg_conn *c, struct lg_lflight *f, const char *label)
{
	LG_FLIGHT(c)->fl = f;
	lg_conn_hold(c, LG_CONN_HELD_PARKED);
	LG_FLIGHT(c)->fl_label = label;
	LG_FLIGHT(c)->fl_prev = NULL;
	LG_FLIGHT(c)->fl_next = f->waiters;
	if (f->waiters)
		LG_FLIGHT(f->waiters)->fl_prev = c;
	f->waiters = c;
	f->nwait++;
	lg_conn_wait_job(c, lg_job_deadline_ms(c)); /* the route's, set at head time */
}

void
lg_coal_unpark(struct lg_conn *c)
{
	struct lg_lflight *f = LG_FLIGHT(c)->fl;

	if (LG_FLIGHT(c)->fl_prev)
		LG_FLIGHT(LG_FLIGHT(c)->fl_prev)->fl_next = LG_FLIGHT(c)->fl_next;
	else
		f->waiters = LG_FLIGHT(c)->fl_next;
	if (LG_FLIGHT(c)->fl_next)
		LG_FLIGHT(LG_FLIGHT(c)->fl_next)->fl_prev = LG_FLIGHT(c)->fl_prev;
	f->nwait--;
	LG_FLIGHT(c)->fl = NULL;
	lg_conn_unhold(c, LG_CONN_HELD_PARKED);
	lg_conn_stop_timer(c);
}

static void
send_to_loop(struct lg_worker *w, uint32_t loop, const struct lg_msg *m)
{
	if (loop >= w->env->nloops || lg_chan_send(w->env->ch->done[loop][1], m, MSG_DONTWAIT) == -1)
		log_warn("cannot send a single-flight message to loop %u: %s", loop, strerror(errno));
}

/* Gives the owner's job slot back without an answer: a queued job never runs, a running one is
 * abandoned (and killed when its pool's on_client_gone is kill, as a job without waiters is:
 * a pool may say finish against the server-wide default). */
static void
cancel_job(struct lg_lflight *f)
{
	struct lg_worker *w = f->w;

	if (f->up != NULL && !f->asking) /* a proxied answer: read on for the cache; its end
	                                  * drops f */
		return;
	if (f->slot < 0) { /* a cluster key still asking Redis: no job yet */
		lg_coal_drop_flight(f);
		return;
	}
	lg_stats_add(&w->coal->ctr->cancelled, 1);
	if (lg_slot_release(&w->env->arena->slots[f->slot], f->slot_gen) == LG_SLOT_ABANDONED &&
	    w->env->cfg->jobs.pools[f->pool].on_client_gone == LG_GONE_KILL)
		lg_offload_kill(w, (uint32_t)f->slot, f->slot_gen);
	log_info("every waiter of a coalesced job left: job on slot %d cancelled", f->slot);
	lg_coal_drop_flight(f);
}

/* c leaves its flight (gone, deadline, answered otherwise). The last waiter of the server
 * leaving cancels the job and frees the key at once (shm/flight.h). */
static void
leave(struct lg_conn *c)
{
	struct lg_lflight *f = LG_FLIGHT(c)->fl;
	struct lg_worker *w = c->w;
	int r;

	lg_coal_unpark(c);
	if (f->nwait > 0 || f->background)
		return;
	r = lg_flight_leave(w->env->flights, &f->ref, w->env->index);
	if (f->owner) {
		if (r != 0)
			cancel_job(f); /* nobody anywhere waits (or the entry is gone) */
		return;                /* others wait: the job goes on for them */
	}
	if (r == 1) {
		struct lg_msg m = { .type = LG_MSG_UNWANTED,
		    .unwanted = { .flight = f->ref.idx, .flight_gen = f->ref.gen } };
		send_to_loop(w, f->ref.owner, &m);
	}
	lg_coal_drop_flight(f);
}

void
lg_coal_gone(struct lg_conn *c)
{
	leave(c);
	if (lg_job_held(c))
		lg_offload_release(c); /* a request with a body keeps it while parked */
}

int
lg_coal_deadline(struct lg_conn *c)
{
	char extra[64];

	leave(c);
	if (lg_job_held(c))
		lg_offload_release(c);
	atomic_fetch_add(&c->w->env->page->timed_out, 1);
	snprintf(extra, sizeof(extra), "X-Cache: %s\r\n", LG_FLIGHT(c)->fl_label);
	if (lg_conn_error(c, 504, 0, extra) == -1)
		return -1;
	return lg_conn_resume(c);
}

/* Ends owner flight f: frees the entry, wakes every other loop that waits (status: an HTTP
 * status, or WAKE_RETRY / WAKE_ALONE; m names the stored answer for 200), answers f's own
 * parked connections with status and body, and drops f. */

/* Sends one WAKE to every loop of mask but this one, for flight ref (status: an HTTP status,
 * or WAKE_RETRY / WAKE_ALONE; m names the stored answer for 200, NULL when there is none). */
void
lg_coal_broadcast(struct lg_worker *w, const struct lg_flight_ref *ref, int64_t mask,
    int status, const struct lg_cache_meta *m, uint64_t queue_ns, uint64_t run_ns)
{
	struct lg_msg wake = { .type = LG_MSG_WAKE, .wake = {
	    .flight = ref->idx, .flight_gen = ref->gen,
	    .http_status = (uint32_t)(OK(status) && m == NULL ? WAKE_ALONE : status),
	    .cache_idx = m ? m->idx : 0, .cache_word = m ? m->seq : 0, .queue_ns = queue_ns,
	    .run_ns = run_ns } };

	for (uint32_t i = 0; mask > 0 && i < LG_FLIGHT_LOOPS; i++)
		if (i != w->env->index && (mask & (1ll << i)))
			send_to_loop(w, i, &wake);
}

/* Ends flight f: an owner frees the entry and wakes every other loop that waits (see
 * broadcast); then f's own parked connections are answered with status and body b (each takes
 * a reference): a 2xx's answer (NULL: 503), or a failed job's own message (NULL: the reason
 * phrase), and f is dropped. Never called from inside one of f's connections' own dispatch. */
void
lg_coal_end_flight(struct lg_lflight *f, int status, const struct lg_cache_meta *m,
    const char *ctype, struct lg_body *b, uint64_t queue_ns, uint64_t run_ns)
{
	struct lg_worker *w = f->w;

	/* A failure whose message the other loops cannot read is theirs to ask again for. */
	if (f->owner)
		lg_coal_broadcast(w, &f->ref, lg_flight_complete(w->env->flights, &f->ref),
		    !OK(status) && b != NULL && m == NULL ? WAKE_RETRY : status, m, queue_ns, run_ns);
	/* A refresh that did not replace the stale answer failed: the next one waits (an
	 * answer stored meanwhile changed the entry, and then nothing is done). */
	if (f->gated)
		lg_cache_refresh_end(w->env->cache, f->stale_idx, f->stale_seq, lg_now_ns(), 1);
	while (f->waiters != NULL) {
		struct lg_conn *c = f->waiters;
		const char *label = LG_FLIGHT(c)->fl_label;
		int rc;

		lg_coal_unpark(c);
		if (lg_job_held(c))
			lg_offload_release(c); /* answered from the shared job: the body is not needed */
		lg_obs_job_times(&c->obs, queue_ns, run_ns);
		lg_obs_unit_begin(w, c);
		if (f->pol->whole_query) /* ctype: the app's fields (coalesce_up.c) */
			rc = lg_coal_up_answer(c, status, label, ctype, b);
		else if (OK(status))
			rc = lg_coal_answer(c, status, ctype, label, 0, 0, b);
		else
			rc = lg_coal_answer_failed(c, status, label, b);
		lg_obs_unit_end(w);
		if (rc == 0)
			lg_conn_resume(c);
	}
	lg_coal_drop_flight(f);
}

/* Whether loops other than f's own wait on it now (one that joins later and finds no message
 * for it is told to ask again: end_flight). */
int
lg_coal_others_wait(struct lg_lflight *f)
{
	uint64_t word = atomic_load(&f->w->env->flights->e[f->ref.idx].word);

	return lg_flight_gen(word) == f->ref.gen &&
	    (lg_flight_mask(word) & ~(1u << f->w->env->index)) != 0;
}

/* The key of owner flight f, read back from its shared entry (constant while it is live). */
const char *
lg_coal_flight_key(struct lg_lflight *f, size_t *len, uint64_t *hash)
{
	const struct lg_flight *e = &f->w->env->flights->e[f->ref.idx];

	*len = e->key_len;
	*hash = e->hash;
	return e->key;
}

/* The owner's job failed (word: its slot word; q, r: its queue wait and run time, ns): every
 * waiter, on every loop, gets its status and the kind's message, or the reason phrase. */
static void
fail_flight(struct lg_lflight *f, uint64_t word, uint64_t q, uint64_t r)
{
	struct lg_worker *w = f->w;
	struct lg_slot *s = &w->env->arena->slots[f->slot];
	int ended = lg_slot_state(word) == LG_SLOT_FAILED;
	uint32_t st = ended ? s->status : LG_JOB_ERROR;
	int code = lg_offload_failure_status(st, st == LG_JOB_BAD_INPUT || st == LG_JOB_ERROR ?
	    lg_arena_out(w->env->arena, (uint32_t)f->slot) : NULL);
	char msg[LG_FAIL_TEXT_CAP] = "", text[LG_FAIL_TEXT_CAP + 64];
	size_t mlen = ended ? lg_offload_failure_text(w, f->slot, st, msg, sizeof(msg)) : 0;
	struct lg_cache_meta m;
	size_t klen;
	uint64_t hash;
	const char *key = lg_coal_flight_key(f, &klen, &hash);

	snprintf(text, sizeof(text), "%s%s", mlen ? msg : lg_http_reason(code), mlen ? "" : "\n");
	lg_stats_add(st == LG_JOB_CRASHED ? &w->env->page->failed_crash :
	    &w->env->page->failed_error, 1);
	if (code >= 400 && code <= 499) /* the client's input refused: counted, not warned */
		lg_stats_add(&w->env->page->jobs_client_error, 1);
	LG_LOG_AT(code >= 400 && code <= 499 ? LG_LOG_DEBUG : LG_LOG_WARN,
	    "coalesced job on slot %d failed (status %u): %d to every waiter%s%.*s",
	    f->slot, st, code, mlen ? ": " : "", (int)(mlen ? mlen - 1 : 0), msg);
	/* Only a kind-level error may be kept, and only for the negative TTL, and never over
	 * the stale answer a refresh was for (RFC 5861 section 4: stale-if-error). */
	int kept = ((code >= 400 && code <= 499) || code == 500) && !f->background &&
	    f->pol->negative_ttl_ms > 0 && lg_coal_store(f, key, klen, hash, code, "text/plain",
	    text, strlen(text), f->pol->negative_ttl_ms, &m) == 0;

	if (kept && f->cl != NULL)
		lg_cluster_store(f, code, "text/plain", text, strlen(text),
		    f->pol->negative_ttl_ms);
	/* The waiters of other loops read the kind's message from the kept entry, else from one
	 * made for them (end_flight has them ask again when there is neither). */
	if (!kept && mlen && lg_coal_others_wait(f))
		kept = lg_coal_store(f, key, klen, hash ^ MESSAGE_HASH, code, "text/plain", msg,
		    mlen, MESSAGE_TTL_MS, &m) == 0;
	/* The owner's own waiters get the kind's message in any case. */
	struct lg_body *b = mlen ? lg_body_new(mlen) : NULL;

	if (b != NULL)
		memcpy(b->data, msg, mlen);
	lg_slot_release(s, f->slot_gen); /* the message is copied; end_flight frees f */
	lg_coal_end_flight(f, code, kept ? &m : NULL, NULL, b, q, r);
	lg_body_unref(b);
}

/* The owner's job ended (word: the slot word, DONE or FAILED). */
static void
finish(struct lg_lflight *f, uint64_t word)
{
	struct lg_worker *w = f->w;
	struct lg_arena *a = w->env->arena;
	struct lg_slot *s = &a->slots[f->slot];
	uint64_t q = lg_slot_queue_ns(s);
	uint64_t r = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
	struct lg_cache_meta m;
	size_t klen;
	uint64_t hash;
	const char *key = lg_coal_flight_key(f, &klen, &hash);
	char tmp[192];

	w->coal->by_slot[f->slot] = NULL;
	ev_timer_stop(w->ev, &f->deadline);
	const char *ctype;
	const void *body;
	size_t len;
	int code = 500;

	if (lg_slot_state(word) == LG_SLOT_FAILED || lg_offload_render(w, f->slot, f->ctype, tmp,
	    sizeof(tmp), &code, &ctype, &body, &len) == -1) {
		fail_flight(f, word, q, r);
		return;
	}
	/* Stored before the flight ends: a request arriving after it finds the answer. */
	int shared = lg_coal_store(f, key, klen, hash, code, ctype, body, len, f->pol->ttl_ms,
	    &m) == 0;

	if (f->cl != NULL)
		lg_cluster_store(f, code, ctype, body, len, f->pol->ttl_ms);
	uint32_t gen = f->slot_gen; /* end_flight frees f */
	/* One copy for every waiter here (none for a background refresh): the slot is released
	 * at once, not when the slowest of them has read its answer. */
	struct lg_body *b = f->waiters != NULL ? lg_body_new(len) : NULL;

	if (b != NULL)
		memcpy(b->data, body, len);
	lg_coal_end_flight(f, code, shared ? &m : NULL, ctype, b, q, r);
	lg_body_unref(b);
	lg_slot_release(s, gen); /* every own waiter has its reference to b */
}

int
lg_coal_completion(struct lg_worker *w, const struct lg_msg *m)
{
	struct lg_lflight *f = w->coal ? w->coal->by_slot[m->done.slot] : NULL;
	uint64_t word;

	if (f == NULL || f->slot_gen != m->done.gen)
		return 0;
	word = atomic_load(&w->env->arena->slots[m->done.slot].word);
	if (lg_slot_gen(word) != m->done.gen || (lg_slot_state(word) != LG_SLOT_DONE &&
	    lg_slot_state(word) != LG_SLOT_FAILED))
		return 0;
	finish(f, word);
	return 1;
}

static void
deadline_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_lflight *f = t->data;
	struct lg_worker *w = f->w;
	struct lg_slot *s = &w->env->arena->slots[f->slot];
	uint64_t word = atomic_load(&s->word);
	enum lg_slot_state st = lg_slot_state(word);

	if (lg_slot_gen(word) == f->slot_gen && (st == LG_SLOT_DONE || st == LG_SLOT_FAILED)) {
		finish(f, word); /* finished just now; its header is still in the channel */
		return;
	}
	log_warn("coalesced job on slot %d past its deadline (%s): 504 to every waiter", f->slot,
	    st == LG_SLOT_RUNNING ? "running" : "queued");
	w->coal->by_slot[f->slot] = NULL;
	lg_slot_release(s, f->slot_gen);
	if (st == LG_SLOT_RUNNING)
		lg_offload_kill(w, (uint32_t)f->slot, f->slot_gen);
	for (struct lg_conn *c = f->waiters; c != NULL; c = LG_FLIGHT(c)->fl_next)
		atomic_fetch_add(&w->env->page->timed_out, 1);
	lg_coal_end_flight(f, 504, NULL, NULL, NULL, 0, 0);
}

/* c has claimed a job slot (lg_job_slot, lg_job_gen) for the job of new owner flight ref: sends
 * it and hands the slot over to the flight; c is parked on it unless this is a background
 * refresh. Returns 0, or -1 after answering c 503 (c closed or finished). A background refresh
 * never answers c: 0, with the slot given back when the job could not be sent. */
int
lg_coal_own(struct lg_conn *c, struct lg_lflight *f, int background, int parked)
{
	struct lg_worker *w = c->w;

	if (lg_offload_send(c) == -1) {
		lg_offload_release(c);
		return -1;
	}
	f->owner = 1;
	f->slot = lg_job_slot(c);
	f->slot_gen = lg_job_gen(c);
	f->pool = lg_job_pool(c);
	f->background = background;
	f->deadline_ms = lg_job_deadline_ms(c);
	f->ctype = lg_job_ctype(c);
	lg_job_hand_over(c); /* the flight holds it now: completions go to it (lg_coal_completion) */
	w->coal->by_slot[f->slot] = f;
	lg_stats_add(&w->coal->ctr->jobs, 1);
	ev_timer_set(&f->deadline, f->deadline_ms / 1000., 0.);
	ev_timer_start(w->ev, &f->deadline);
	if (!background && !parked)
		lg_coal_park(c, f, "miss");
	return 0;
}

static int
start_owner(struct lg_conn *c, const struct lg_flight_ref *ref, int background)
{
	struct lg_worker *w = c->w;
	struct lg_lflight *f = lg_coal_add_flight(w, ref, LG_FLIGHT(c)->pol);

	if (f == NULL || lg_coal_own(c, f, background, 0) == -1) {
		if (f == NULL)
			lg_offload_release(c);
		/* Anyone who joined meanwhile is told 503 too. */
		lg_coal_broadcast(w, ref, lg_flight_complete(w->env->flights, ref), 503, NULL, 0,
		    0);
		if (f != NULL)
			lg_coal_drop_flight(f);
		return background ? 0 : lg_coal_refuse(c, "miss");
	}
	return 0;
}

/* c runs its own job, not shared: claim at dispatch and queue. Returns 0 or -1 (closed). */
static int
run_alone(struct lg_conn *c)
{
	lg_stats_add(&c->w->coal->ctr->jobs, 1);
	LG_FLIGHT(c)->coal_alone = 1;
	lg_job_mark_bypass(c); /* its answer says X-Cache: bypass (worker/job/offload.c) */
	if (lg_coal_job_slot(c) == -1)
		return lg_coal_refuse(c, "bypass");
	LG_FLIGHT(c)->coal = 0; /* its body complete, lg_offload_start queues it as any job */
	return lg_offload_start(c);
}

/* A stale answer (entry st) is about to be sent to c: start one background job for the key
 * unless one is in flight, a failed one's back-off has not passed (the cache entry's gate: one
 * refresh per key across the loops, never one per request while the origin fails), no slot is
 * free (a full pool keeps serving stale), or this loop drains (it may exit before the job ends,
 * and its generation's cache goes with it). Never answers c: called before the answer, since
 * after it c may be gone. */
static void
refresh(struct lg_conn *c, const struct lg_cache_meta *st, const char *key, size_t len,
    uint64_t hash)
{
	struct lg_worker *w = c->w;
	struct lg_flight_ref ref;
	struct lg_lflight *f;
	int rc;

	if (!LG_FLIGHT(c)->pol->coalesce || w->draining ||
	    lg_flight_peek(w->env->flights, hash, key, len) ||
	    !lg_cache_refresh_take(w->env->cache, st, lg_now_ns(),
	    (lg_job_deadline_ms(c) + REFRESH_LEASE_MS) * LG_NS_PER_MS))
		return;
	if (lg_coal_job_slot(c) == -1) {
		lg_cache_refresh_end(w->env->cache, st->idx, st->seq, lg_now_ns(), 0);
		return;
	}
	rc = lg_flight_create(w->env->flights, hash, key, len, w->env->index, (uint32_t)lg_job_slot(c),
	    lg_job_gen(c), lg_now_ns(), &ref);
	if (rc == LG_FLIGHT_CREATED) {
		lg_stats_add(&w->coal->ctr->refreshes, 1);
		if (start_owner(c, &ref, 1) == 0 && (f = find(w->coal, ref.idx, ref.gen)) != NULL) {
			f->gated = 1;
			f->stale_idx = st->idx;
			f->stale_seq = st->seq;
		} else {
			lg_cache_refresh_end(w->env->cache, st->idx, st->seq, lg_now_ns(), 1);
		}
		return;
	}
	lg_cache_refresh_end(w->env->cache, st->idx, st->seq, lg_now_ns(), 0);
	lg_offload_release(c);
	/* Joined one that appeared since the peek, with no connection to park: leave again. */
	if (rc == LG_FLIGHT_JOINED && find(w->coal, ref.idx, ref.gen) == NULL &&
	    lg_flight_leave(w->env->flights, &ref, w->env->index) == 1) {
		struct lg_msg m = { .type = LG_MSG_UNWANTED,
		    .unwanted = { .flight = ref.idx, .flight_gen = ref.gen } };
		send_to_loop(w, ref.owner, &m);
	}
}

/* c joined flight ref: park it on this loop's record of the flight. */
int
lg_coal_join_local(struct lg_conn *c, const struct lg_flight_ref *ref)
{
	struct lg_lflight *f = find(c->w->coal, ref->idx, ref->gen);

	if (f == NULL && (f = lg_coal_add_flight(c->w, ref, LG_FLIGHT(c)->pol)) == NULL) {
		if (lg_flight_leave(c->w->env->flights, ref, c->w->env->index) == 1) {
			struct lg_msg m = { .type = LG_MSG_UNWANTED,
			    .unwanted = { .flight = ref->idx, .flight_gen = ref->gen } };
			send_to_loop(c->w, ref->owner, &m);
		}
		return lg_coal_refuse(c, "coalesced");
	}
	lg_stats_add(&c->w->coal->ctr->coalesced, 1);
	lg_coal_park(c, f, "coalesced");
	return 0;
}

/* c, holding a job slot, created flight ref for a cluster-scoped key (Redis ready): parks c on a
 * new owner flight and asks Redis. Returns 0, or -1 when it could not (nothing changed: run
 * the key locally, start_owner). */
static int
cluster_begin(struct lg_conn *c, const struct lg_flight_ref *ref)
{
	struct lg_lflight *f = lg_coal_add_flight(c->w, ref, LG_FLIGHT(c)->pol);

	if (f == NULL)
		return -1;
	f->owner = 1;
	f->deadline_ms = lg_job_deadline_ms(c);
	f->ctype = lg_job_ctype(c);
	if (lg_cluster_begin(f, lg_job_kind(c), lg_job_route(c), lg_job_deadline_ms(c)) == -1) {
		lg_coal_drop_flight(f); /* start_owner makes it again */
		return -1;
	}
	lg_coal_park(c, f, "miss"); /* c keeps its job slot meanwhile */
	return 0;
}
/* No job in flight for the key: claim a slot and make this request's job the key's flight,
 * checking the cache once more first (groupcache: another flight may have just filled it). */
static int
start_miss(struct lg_conn *c, const char *key, size_t len, uint64_t hash)
{
	struct lg_worker *w = c->w;
	struct lg_flight_ref ref;
	struct lg_cache_meta m;
	int rc;

	if (lg_coal_job_slot(c) == -1)
		return lg_coal_refuse(c, "miss");
	rc = lg_flight_create(w->env->flights, hash, key, len, w->env->index, (uint32_t)lg_job_slot(c),
	    lg_job_gen(c), lg_now_ns(), &ref);
	if (rc == LG_FLIGHT_BUSY) {
		lg_stats_add(&w->coal->ctr->busy, 1);
		lg_stats_add(&w->coal->ctr->jobs, 1);
		LG_FLIGHT(c)->coal = 0;
		LG_FLIGHT(c)->coal_alone = 1;
		lg_job_mark_bypass(c);
		return lg_offload_start(c);
	}
	if (rc == LG_FLIGHT_JOINED) {
		if (!lg_coal_has_body(c))
			lg_offload_release(c); /* a body stays: the request may have to run again */
		return lg_coal_join_local(c, &ref);
	}
	if (lg_cache_lookup(w->env->cache, hash, key, len, lg_now_ns(), &m) == LG_CACHE_FRESH) {
		/* Filled since our first look: end the new flight with that answer at once (any
		 * loop that joined it meanwhile is woken with the same cache entry). */
		struct lg_body *b;

		lg_offload_release(c);
		lg_coal_broadcast(w, &ref, lg_flight_complete(w->env->flights, &ref), (int)m.status,
		    &m, 0, 0);
		if ((b = lg_coal_cached_body(w, &m)) != NULL)
			return lg_coal_answer_cached(c, &m, b, "hit", &w->coal->ctr->hits);
		return run_alone(c);
	}
	lg_obs_route_hit(c);
	if (LG_FLIGHT(c)->pol->cluster && lg_cluster_ready(w) && cluster_begin(c, &ref) == 0)
		return 0; /* parked while Redis is asked (worker/flight/cluster.c) */
	return start_owner(c, &ref, 0);
}

int
lg_coal_dispatch(struct lg_conn *c, int (*claim)(struct lg_conn *c))
{
	struct lg_worker *w = c->w;
	struct lg_coal *k = w->coal;
	const struct lg_policy *p = LG_FLIGHT(c)->pol;
	char key[LG_FLIGHT_KEY_MAX];
	size_t len;
	uint64_t hash;
	struct lg_cache_meta m;
	struct lg_flight_ref ref;
	struct lg_body *b;

	if (p->whole_query) /* an upstream route's request asks again (retry_all) */
		return lg_coal_up_dispatch(c, NULL, NULL);
	if (claim != NULL)
		k->claim = claim;
	if (!LG_FLIGHT(c)->coal_alone && lg_coal_has_body(c) && lg_job_body_got(c) > p->body_max)
		lg_stats_add(&k->ctr->body_alone, 1);
	if (LG_FLIGHT(c)->coal_alone || lg_coal_key(c, key, &len) == -1)
		return run_alone(c);
	hash = lg_flight_hash(LG_FLIGHT_HASH_INIT, key, len);
	if (p->ttl_ms || p->stale_ms || p->negative_ttl_ms) {
		switch (lg_cache_lookup(w->env->cache, hash, key, len, lg_now_ns(), &m)) {
		case LG_CACHE_FRESH:
			if ((b = lg_coal_cached_body(w, &m)) != NULL)
				return lg_coal_answer_cached(c, &m, b, "hit", &k->ctr->hits);
			break; /* changed under the copy: as a miss */
		case LG_CACHE_STALE:
			/* The refresh starts before the answer, which may close c (a client that
			 * closes after its answer must refresh too); a body in the transit buffer
			 * c holds runs its refresh job there. */
			if ((b = lg_coal_cached_body(w, &m)) != NULL) {
				refresh(c, &m, key, len, hash);
				return lg_coal_answer_cached(c, &m, b, "stale", &k->ctr->stale);
			}
			break;
		default:
			break;
		}
	}
	count(c, &k->ctr->misses);
	if (!p->coalesce)
		return run_alone(c);
	switch (lg_flight_join(w->env->flights, hash, key, len, w->env->index, &ref)) {
	case LG_FLIGHT_JOINED:
		lg_obs_route_hit(c);
		return lg_coal_join_local(c, &ref);
	case LG_FLIGHT_BUSY:
		lg_stats_add(&k->ctr->busy, 1);
		return run_alone(c);
	default:
		return start_miss(c, key, len, hash);
	}
}

/* Every parked connection of f is dispatched again (alone: each runs its own job). */
void
lg_coal_retry_all(struct lg_lflight *f, int alone)
{
	struct lg_worker *w = f->w;
	struct lg_conn *list = f->waiters;

	f->waiters = NULL;
	lg_coal_drop_flight(f);
	while (list != NULL) {
		struct lg_conn *c = list;

		list = LG_FLIGHT(c)->fl_next;
		LG_FLIGHT(c)->fl = NULL;
		lg_conn_unhold(c, LG_CONN_HELD_PARKED);
		lg_conn_stop_timer(c);
		LG_FLIGHT(c)->coal_alone = alone;
		lg_obs_unit_begin(w, c);
		int rc = lg_coal_dispatch(c, w->coal->claim);
		lg_obs_unit_end(w);
		if (rc == 0)
			lg_conn_resume(c);
	}
}

/* WAKE on a loop with parked connections: the owner's job ended. */
static void
wake(struct lg_worker *w, const struct lg_msg *msg)
{
	const struct lg_msg_wake *m = &msg->wake;
	struct lg_lflight *f = find(w->coal, m->flight, m->flight_gen);
	struct lg_cache_meta meta;
	struct lg_body *b;

	if (f == NULL || f->owner)
		return; /* nobody left here (they left after the job ended) */
	if (f->pol->whole_query) {
		lg_coal_up_wake(f, m);
		return;
	}
	if (m->http_status == WAKE_RETRY || m->http_status == WAKE_ALONE) {
		lg_coal_retry_all(f, m->http_status == WAKE_ALONE);
		return;
	}
	if (!OK(m->http_status)) {
		/* A failure with the kind's message names the cache entry holding it. */
		b = m->cache_word != 0 &&
		    lg_cache_meta_of(w->env->cache, m->cache_idx, m->cache_word, &meta) == 0 &&
		    (int)meta.status == (int)m->http_status ? lg_coal_cached_body(w, &meta) : NULL;
		if (m->cache_word != 0 && b == NULL) {
			lg_coal_retry_all(f, 0); /* evicted already: ask again rather than answer otherwise */
			return;
		}
		lg_coal_end_flight(f, (int)m->http_status, NULL, NULL, b, m->queue_ns, m->run_ns);
		lg_body_unref(b);
		return;
	}
	if (lg_cache_meta_of(w->env->cache, m->cache_idx, m->cache_word, &meta) == -1 ||
	    (b = lg_coal_cached_body(w, &meta)) == NULL) {
		lg_coal_retry_all(f, 0); /* evicted already: ask again (a hit, or a fresh flight) */
		return;
	}
	lg_coal_end_flight(f, (int)meta.status, NULL, meta.ctype, b, m->queue_ns, m->run_ns);
	lg_body_unref(b);
}

void
lg_coal_message(struct lg_worker *w, const struct lg_msg *m)
{
	struct lg_lflight *f;

	if (w->coal == NULL)
		return;
	if (m->type == LG_MSG_WAKE) {
		wake(w, m);
		return;
	}
	/* UNWANTED: the last waiter elsewhere left our job's flight. */
	f = find(w->coal, m->unwanted.flight, m->unwanted.flight_gen);
	if (f != NULL && f->owner && f->nwait == 0 && !lg_flight_live(w->env->flights, &f->ref))
		cancel_job(f);
}
