#include "worker/observe.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/stats.h"
#include "worker/access.h"

static void
lag_arm(struct lg_worker *w)
{
	uint64_t iv = w->env->cfg->lag_interval_ms * LG_NS_PER_MS;

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
	return w->env->cfg->slow_callback_ms > 0;
}

void
lg_obs_cb_begin(struct lg_worker *w, struct lg_conn *c)
{
	if (!slow_on(w))
		return;
	w->obs.cb_start_ns = lg_now_ns();
	w->obs.cb_conn = c;
	w->obs.worst_unit_ns = 0;
	w->obs.worst_route = NULL;
}

/* "METHOD target" of c's current request (the target cut at 96 bytes) into out, "-" when no
 * head was parsed; always terminated. Copied, not formatted: it runs for every request. */
static void
describe(const struct lg_conn *c, char *out, size_t cap)
{
	const struct lg_http_req *r = &c->http.req;
	const char *m = r->path != NULL ? http_method_str(r->method) : "-";
	size_t mlen = strlen(m), tlen = r->path != NULL ? r->target_len : 0, n = 0;

	if (cap == 0)
		return;
	if (tlen > 96)
		tlen = 96;
	if (mlen > cap - 1)
		mlen = cap - 1;
	memcpy(out, m, mlen);
	n = mlen;
	if (r->path != NULL && n + 1 < cap) {
		out[n++] = ' ';
		if (tlen > cap - 1 - n)
			tlen = cap - 1 - n;
		memcpy(out + n, r->target, tlen);
		n += tlen;
	}
	out[n] = '\0';
}

void
lg_obs_cb_end(struct lg_worker *w, const char *cb)
{
	uint64_t took, limit = w->env->cfg->slow_callback_ms * LG_NS_PER_MS;

	if (!slow_on(w))
		return;
	took = lg_now_ns() - w->obs.cb_start_ns;
	if (took >= limit) {
		lg_stats_add(&w->env->page->slow_callbacks, 1);
		if (w->obs.worst_route == NULL && w->obs.cb_conn != NULL &&
		    w->obs.cb_conn->obs.req_start_ns) {
			w->obs.worst_route = w->obs.cb_conn->rt.route_label;
			describe(w->obs.cb_conn, w->obs.worst_what, sizeof(w->obs.worst_what));
			w->obs.worst_unit_ns = took;
		}
		if (w->obs.worst_route != NULL)
			log_warn("slow callback: %s ran %.1f ms (limit %llu ms); route %s, request "
			    "\"%s\" took %.1f ms of it", cb, (double)took / 1e6,
			    (unsigned long long)w->env->cfg->slow_callback_ms, w->obs.worst_route,
			    w->obs.worst_what, (double)w->obs.worst_unit_ns / 1e6);
		else
			log_warn("slow callback: %s ran %.1f ms (limit %llu ms); no request step in it",
			    cb, (double)took / 1e6, (unsigned long long)w->env->cfg->slow_callback_ms);
	}
	w->obs.cb_conn = NULL;
}

void
lg_obs_unit_begin(struct lg_worker *w, const struct lg_conn *c)
{
	if (!slow_on(w))
		return;
	w->obs.unit_route = c->rt.route_label;
	describe(c, w->obs.unit_what, sizeof(w->obs.unit_what));
	w->obs.unit_start_ns = lg_now_ns();
}

void
lg_obs_unit_end(struct lg_worker *w)
{
	uint64_t took;

	if (!slow_on(w))
		return;
	took = lg_now_ns() - w->obs.unit_start_ns;
	if (w->obs.worst_route == NULL || took > w->obs.worst_unit_ns) {
		w->obs.worst_unit_ns = took;
		w->obs.worst_route = w->obs.unit_route;
		memcpy(w->obs.worst_what, w->obs.unit_what, sizeof(w->obs.worst_what));
	}
}

void
lg_obs_request_begin(struct lg_conn *c)
{
	c->obs.req_start_ns = lg_now_ns();
	lg_rt_none(&c->rt, &c->w->rt);
	c->obs.resp_status = 0;
	c->obs.resp_bytes = 0;
	c->job.queue_ns = c->job.run_ns = 0;
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
	struct lg_proc_page *p = c->w->env->page;
	uint64_t took = c->obs.req_start_ns ? lg_now_ns() - c->obs.req_start_ns : 0;
	unsigned route = c->rt.route_row;

	struct lg_route_stats *rs = lg_arena_route_stats(c->w->env->arena, c->w->env->index, route);

	lg_stats_add(&rs->responses[lg_stats_code_index(c->obs.resp_status)], 1);
	lg_hist_observe(&rs->duration, lg_stats_time_bounds, LG_STATS_BOUNDS, took);
	if (c->obs.resp_status == 413)
		lg_stats_add(&p->rejected_large, 1);
	if (c->w->env->cfg->access_log)
		lg_access_line(c, took);
	if (c->obs.req_start_ns)
		request_done(c);
}

void
lg_obs_conn_closed(struct lg_conn *c)
{
	if (c->w->obs.cb_conn == c)
		c->w->obs.cb_conn = NULL;
	if (c->obs.req_start_ns == 0)
		return;
	if (lg_job_holds_slot(&c->job) && c->state == LG_CONN_JOB)
		lg_stats_add(&c->w->env->page->cancelled, 1); /* the client left while it waited */
	request_done(c);
}

void
lg_obs_route_hit(struct lg_conn *c)
{
	atomic_fetch_add(&lg_arena_route_stats(c->w->env->arena, c->w->env->index,
	    c->rt.route_row)->hits, 1);
}

void
lg_obs_conns(struct lg_worker *w)
{
	atomic_store_explicit(&w->env->page->connections, (uint32_t)w->nconns,
	    memory_order_relaxed);
}
