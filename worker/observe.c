#include "worker/observe.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pool.h"
#include "shm/stats.h"
#include "shm/upstream.h"
#include "worker/core/access.h"
#include "worker/job/job.h"

static void
lag_arm(struct lg_worker *w)
{
	uint64_t iv = w->env->cfg->loop.lag_interval_ms * LG_NS_PER_MS;

	/* libev times the timer from the loop's cached time; refresh it so the due time below
	 * and libev's agree (ev_now_update, libev(3) "The special problem of time updates"). */
	ev_now_update(w->ev);
	w->obs.lag_due_ns = lg_now_ns() + iv;
	ev_timer_set(&w->obs.lag, (double)iv / 1e9, 0.);
	ev_timer_start(w->ev, &w->obs.lag);
}

static void
lag_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_worker *w = t->data;
	uint64_t now = lg_now_ns();

	lg_stats_lag(w->env->page, now, now > w->obs.lag_due_ns ? now - w->obs.lag_due_ns : 0);
	lag_arm(w);
}

void
lg_obs_start(struct lg_worker *w)
{
	struct lg_proc_page *p = w->env->page;

	atomic_store(&p->inflight, 0);
	atomic_store(&p->connections, 0);
	ev_init(&w->obs.lag, lag_cb);
	w->obs.lag.data = w;
	lag_arm(w);
	atomic_store(&p->state, LG_PROC_RUNNING);
}

void
lg_obs_draining(struct lg_worker *w)
{
	atomic_store(&w->env->page->state, LG_PROC_DRAINING);
}

static int
slow_on(const struct lg_worker *w)
{
	return w->env->cfg->loop.slow_callback_ms > 0;
}

/* Notes c's current request (its target cut at 96 bytes) into out: copied, not formatted, as it
 * runs for every request step. */
static void
note_what(const struct lg_conn *c, struct lg_obs_what *out)
{
	const struct lg_http_req *r = &c->http.req;
	size_t tlen = r->path != NULL ? r->target_len : 0;

	if (tlen > sizeof(out->target))
		tlen = sizeof(out->target);
	out->method = r->path != NULL ? (int)r->method : -1;
	out->target_len = (unsigned)tlen;
	if (tlen > 0)
		memcpy(out->target, r->target, tlen);
}

/* "METHOD target" of a noted request into out (cap > 0 bytes), "-" when no head was parsed;
 * always terminated. */
static void
format_what(const struct lg_obs_what *what, char *out, size_t cap)
{
	if (what->method < 0)
		snprintf(out, cap, "-");
	else
		snprintf(out, cap, "%s %.*s", http_method_str((unsigned)what->method),
		    (int)what->target_len, what->target);
}

/* The step that ended last (lg_obs_unit_end) took until now: the longest so far is kept (its
 * noted request becomes the worst's, the other buffer the next step's). */
static void
close_unit(struct lg_worker *w, uint64_t now)
{
	uint64_t took = now - w->obs.unit_start_ns;

	w->obs.unit_open = 0;
	if (w->obs.worst_route == NULL || took > w->obs.worst_unit_ns) {
		w->obs.worst_unit_ns = took;
		w->obs.worst_route = w->obs.unit_route;
		w->obs.unit_what ^= 1;
	}
}

/* Reads the clock inside a timed callback (its last reading from now on): the step that ended
 * and the requests answered since the previous reading end now. Returns the time (ns). */
static uint64_t
reading(struct lg_worker *w)
{
	uint64_t now = lg_now_ns();

	w->obs.mark_ns = now;
	if (w->obs.unit_open)
		close_unit(w, now);
	for (unsigned i = 0; i < w->obs.npending; i++)
		lg_hist_observe(w->obs.pending[i].duration, lg_stats_time_bounds, LG_STATS_BOUNDS,
		    now - w->obs.pending[i].start_ns);
	w->obs.npending = 0;
	return now;
}

void
lg_obs_cb_begin(struct lg_worker *w, struct lg_conn *c)
{
	if (!slow_on(w))
		return;
	if (w->obs.timing && (w->obs.unit_open || w->obs.npending > 0))
		reading(w); /* begun again (an idle connection woken up): what waits ends here */
	w->obs.timing = 1;
	w->obs.unit_open = 0;
	w->obs.cb_start_ns = w->obs.mark_ns = lg_now_ns();
	w->obs.cb_conn = c;
	w->obs.worst_unit_ns = 0;
	w->obs.worst_route = NULL;
}

/* The longest request step of a slow callback of `took` ns as "METHOD target" into out (cap
 * bytes): the callback's connection's request when no step was timed. Returns 0 when there is
 * none to name. */
static int
worst_step(struct lg_worker *w, uint64_t took, char *out, size_t cap)
{
	if (w->obs.worst_route == NULL && w->obs.cb_conn != NULL &&
	    w->obs.cb_conn->obs.req_start_ns) {
		w->obs.worst_route = LG_RT(w->obs.cb_conn)->route_label;
		note_what(w->obs.cb_conn, &w->obs.what[w->obs.unit_what ^ 1]);
		w->obs.worst_unit_ns = took;
	}
	if (w->obs.worst_route == NULL)
		return 0;
	format_what(&w->obs.what[w->obs.unit_what ^ 1], out, cap);
	return 1;
}

void
lg_obs_cb_end(struct lg_worker *w, const char *cb)
{
	uint64_t took, limit = w->env->cfg->loop.slow_callback_ms * LG_NS_PER_MS;
	char worst[128];

	if (!w->obs.timing)
		return;
	took = reading(w) - w->obs.cb_start_ns;
	w->obs.timing = 0;
	if (took >= limit) {
		lg_stats_add(&w->env->page->slow_callbacks, 1);
		if (worst_step(w, took, worst, sizeof(worst)))
			log_warn("slow callback: %s ran %.1f ms (limit %llu ms); route %s, request "
			    "\"%s\" took %.1f ms of it", cb, (double)took / 1e6,
			    (unsigned long long)w->env->cfg->loop.slow_callback_ms, w->obs.worst_route,
			    worst, (double)w->obs.worst_unit_ns / 1e6);
		else
			log_warn("slow callback: %s ran %.1f ms (limit %llu ms); no request step in it",
			    cb, (double)took / 1e6, (unsigned long long)w->env->cfg->loop.slow_callback_ms);
	}
	w->obs.cb_conn = NULL;
}

void
lg_obs_unit_begin(struct lg_worker *w, const struct lg_conn *c)
{
	if (!w->obs.timing)
		return;
	if (w->obs.unit_open)
		reading(w); /* the step before ends here */
	w->obs.unit_start_ns = w->obs.mark_ns; /* the callback's start, or the step before's end */
	w->obs.unit_route = LG_RT(c)->route_label;
	note_what(c, &w->obs.what[w->obs.unit_what]);
}

void
lg_obs_unit_end(struct lg_worker *w)
{
	if (w->obs.timing)
		w->obs.unit_open = 1; /* its duration: until the next reading */
}

void
lg_obs_request_begin(struct lg_conn *c)
{
	/* In a timed callback its bytes came no later than the last reading. */
	c->obs.req_start_ns = c->w->obs.timing ? c->w->obs.mark_ns : lg_now_ns();
	/* pipelined requests parsed at one reading share a start: their ids must not */
	c->obs.rid = c->w->obs.last_rid = c->obs.req_start_ns > c->w->obs.last_rid ?
	    c->obs.req_start_ns : c->w->obs.last_rid + 1;
	lg_rt_none(LG_RT(c), LG_WRT(c->w));
	c->obs.resp_status = 0;
	c->obs.resp_bytes = 0;
	c->obs.why = NULL;
	c->obs.up_addr = NULL;
	lg_obs_job_times(&c->obs, 0, 0);
	atomic_store_explicit(&c->w->env->page->inflight, ++c->w->obs.inflight, memory_order_relaxed);
	lg_stats_add(&c->w->env->page->begun, 1);
}

static void
request_done(struct lg_conn *c)
{
	c->obs.req_start_ns = 0;
	atomic_store_explicit(&c->w->env->page->inflight, --c->w->obs.inflight, memory_order_relaxed);
}

void
lg_obs_request_end(struct lg_conn *c)
{
	struct lg_worker *w = c->w;
	struct lg_proc_page *p = w->env->page;
	uint64_t start = c->obs.req_start_ns, took = 0;
	struct lg_route_stats *rs = lg_arena_route_stats(w->env->arena, w->env->index,
	    LG_RT(c)->route_row);
	int log = w->env->cfg->conn.access_log;

	lg_stats_add(&rs->responses[lg_stats_code_index(c->obs.resp_status)], 1);
	if (start && w->obs.timing && !log && w->obs.npending < LG_OBS_PENDING) {
		/* Observed at the callback's next clock reading (its end, for the last one). */
		w->obs.pending[w->obs.npending].duration = &rs->duration;
		w->obs.pending[w->obs.npending++].start_ns = start;
	} else {
		took = start ? lg_now_ns() - start : 0;
		lg_hist_observe(&rs->duration, lg_stats_time_bounds, LG_STATS_BOUNDS, took);
	}
	if (c->obs.resp_status == 413)
		lg_stats_add(&p->rejected_large, 1);
	if (log)
		lg_access_line(c, took);
	if (start)
		request_done(c);
}

/* A request cut without its answer's end, by a room's fault it named (c->obs.why) or while an
 * upstream exchange held it (the client left: nginx's 499 when nothing of the answer went
 * out), still gets its access line, with the reason. */
static void
cut_line(struct lg_conn *c)
{
	if (c->obs.why == NULL && !(c->held & LG_CONN_HELD_UP))
		return;
	if (c->obs.why == NULL)
		c->obs.why = lg_up_reason_str(LG_UPR_CLIENT_GONE);
	if (c->obs.resp_status == 0)
		c->obs.resp_status = 499;
	if (c->w->env->cfg->conn.access_log)
		lg_access_line(c, lg_now_ns() - c->obs.req_start_ns);
}

void
lg_obs_conn_closed(struct lg_conn *c)
{
	if (c->w->obs.cb_conn == c)
		c->w->obs.cb_conn = NULL;
	if (c->obs.req_start_ns == 0)
		return;
	cut_line(c);
	if (lg_job_held(c) && c->state == LG_CONN_JOB)
		lg_stats_add(&c->w->env->page->cancelled, 1); /* the client left while it waited */
	request_done(c);
}

void
lg_obs_route_hit(struct lg_conn *c)
{
	/* this loop's row: a single writer, so no locked read-modify-write (shm/layout.h) */
	lg_stats_add(&lg_arena_route_stats(c->w->env->arena, c->w->env->index,
	    LG_RT(c)->route_row)->hits, 1);
}

void
lg_obs_conns(struct lg_worker *w)
{
	atomic_store_explicit(&w->env->page->connections, (uint32_t)w->nconns,
	    memory_order_relaxed);
}

void
lg_obs_conn_buffers(struct lg_worker *w, const struct lg_pool *p)
{
	atomic_store_explicit(&w->env->page->conn_buffers, (uint32_t)(p->mapped - p->len),
	    memory_order_relaxed);
	atomic_store_explicit(&w->env->page->conn_buffers_free, p->len, memory_order_relaxed);
}
