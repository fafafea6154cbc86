/* The open-loop engine (load/engine.h): schedules, connections, results. */
#include "load/engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/version.h"

static void conn_done(struct ll_lconn *c, struct ll_lreq *r);
static void conn_closed(struct ll_lconn *c);
static const struct ll_lconn_ops pool_ops = { conn_done, conn_closed };

static int
stats_init(struct ll_rstats *s)
{
	memset(s, 0, sizeof(*s));
	return ll_hist_init(&s->all) == 0 && ll_hist_init(&s->send_lag) == 0 ? 0 : -1;
}

static void
stats_free(struct ll_rstats *s)
{
	unsigned i;

	for (i = 0; i < s->ncodes; i++)
		ll_hist_free(&s->by_code[i]);
	ll_hist_free(&s->all);
	ll_hist_free(&s->send_lag);
}

static void
stats_record(struct ll_rstats *s, int code, uint64_t ns)
{
	unsigned i;

	ll_hist_record(&s->all, ns);
	for (i = 0; i < s->ncodes; i++)
		if (s->codes[i] == code)
			break;
	if (i == s->ncodes) {
		if (i == LL_MAX_STATUSES || ll_hist_init(&s->by_code[i]) == -1) {
			s->other++;
			return;
		}
		s->codes[s->ncodes++] = code;
	}
	ll_hist_record(&s->by_code[i], ns);
}

uint64_t
ll_rstats_count(const struct ll_rstats *s, int lo, int hi)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < s->ncodes; i++)
		if (s->codes[i] >= lo && s->codes[i] <= hi)
			n += s->by_code[i].total;
	return n;
}

void
ll_rstats_merge(const struct ll_rstats *s, int lo, int hi, struct ll_hist *out)
{
	unsigned i;

	ll_hist_reset(out);
	for (i = 0; i < s->ncodes; i++)
		if (s->codes[i] >= lo && s->codes[i] <= hi)
			ll_hist_merge(out, &s->by_code[i]);
}

/* 1 when the header list hs ("Name: value\r\n"...) has a field called name */
static int
has_header(const char *hs, const char *name)
{
	size_t n = strlen(name);

	for (; hs != NULL && *hs; hs = strstr(hs, "\r\n") + 2)
		if (strncasecmp(hs, name, n) == 0 && hs[n] == ':')
			return 1;
	return 0;
}

/* The request head: the given headers (global, then the route's) replace the generator's own
 * Host, User-Agent and Content-Type when they name them. */
static char *
build_head(const char *method, const char *path, const char *host, const char *global,
           const char *own, size_t body_len, size_t *len)
{
	int body = body_len > 0 || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
	char *p = NULL, cl[48] = "";
	int n;

	if (!global)
		global = "";
	if (!own)
		own = "";
	if (body)
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", body_len);
	n = asprintf(&p, "%s %s HTTP/1.1\r\n%s%s%s%s%s%s%s%s%s\r\n", method, path,
	             has_header(global, "Host") || has_header(own, "Host") ? "" : "Host: ",
	             has_header(global, "Host") || has_header(own, "Host") ? "" : host,
	             has_header(global, "Host") || has_header(own, "Host") ? "" : "\r\n",
	             has_header(global, "User-Agent") || has_header(own, "User-Agent") ? "" :
	             "User-Agent: lagless-load/" LG_VERSION "\r\n",
	             body && !has_header(global, "Content-Type") && !has_header(own, "Content-Type")
	             ? "Content-Type: application/octet-stream\r\n" : "", cl, global, own, "");
	if (n < 0)
		return NULL;
	*len = (size_t)n;
	return p;
}

int
ll_engine_init(struct ll_engine *e, const struct sockaddr *addr, socklen_t addrlen,
               const char *host, const char *headers, struct ll_route *routes, unsigned n,
               unsigned max_conns,
               double timeout_s, uint64_t seed, size_t max_samples)
{
	unsigned i, ph;

	memset(e, 0, sizeof(*e));
	e->timerfd = -1;
	e->loop = ev_default_loop(EVFLAG_AUTO);
	memcpy(&e->addr, addr, addrlen);
	e->addrlen = addrlen;
	e->host = host;
	e->headers = headers;
	e->routes = routes;
	e->nroutes = n;
	e->max_conns = max_conns;
	e->timeout_s = timeout_s;
	e->seed = seed;
	e->closed_route = -1;
	e->active = calloc(n, 1);
	e->samples_cap = max_samples;
	e->samples = calloc(max_samples ? max_samples : 1, sizeof(*e->samples));
	if (e->loop == NULL || e->active == NULL || e->samples == NULL)
		goto nomem;
	for (i = 0; i < n; i++) {
		routes[i].head = build_head(routes[i].method, routes[i].path, host, e->headers,
		                            routes[i].headers, routes[i].body_len,
		                            &routes[i].head_len);
		if (routes[i].head == NULL)
			goto nomem;
		for (ph = 0; ph < LL_PH_COUNT; ph++)
			if (stats_init(&routes[i].st[ph]) == -1)
				goto nomem;
	}
	/* a timerfd fires at the due time to the nanosecond (hrtimers), where libev's epoll
	 * timeouts round up to the next millisecond and would add that to every latency */
	e->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (e->timerfd == -1)
		return -1;
	return 0;
nomem:
	errno = ENOMEM;
	return -1;
}

static void close_idle(struct ll_engine *e);

void
ll_engine_free(struct ll_engine *e)
{
	unsigned i, ph;

	close_idle(e);
	for (i = 0; i < e->nroutes; i++) {
		free(e->routes[i].head);
		for (ph = 0; ph < LL_PH_COUNT; ph++)
			stats_free(&e->routes[i].st[ph]);
	}
	if (e->timerfd != -1)
		close(e->timerfd);
	free(e->active);
	free(e->samples);
	free(e->points);
}

/* ---- connections and dispatch */

static void
idle_push(struct ll_engine *e, struct ll_lconn *c)
{
	c->prev = NULL;
	c->next = e->idle;
	if (e->idle)
		e->idle->prev = c;
	e->idle = c;
}

static void
idle_remove(struct ll_engine *e, struct ll_lconn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else if (e->idle == c)
		e->idle = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void finish_req(struct ll_engine *e, struct ll_lreq *r);

static void
start_on_new(struct ll_engine *e, struct ll_lreq *r)
{
	struct ll_lconn *c = malloc(sizeof(*c));

	if (c == NULL || ll_lconn_open(c, e->loop, (struct sockaddr *)&e->addr, e->addrlen,
	                               e->timeout_s, &pool_ops, e) == -1) {
		free(c);
		r->status = LL_LERR_CONNECT;
		r->sent_ns = r->end_ns = lg_now_ns();
		finish_req(e, r);
		return;
	}
	e->nconns++;
	e->opened++;
	if (e->nconns > e->peak_conns)
		e->peak_conns = e->nconns;
	ll_lconn_send(c, r);
}

static void
dispatch(struct ll_engine *e, struct ll_lreq *r)
{
	struct ll_lconn *c = e->idle;

	if (c != NULL) {
		idle_remove(e, c);
		ll_lconn_send(c, r);
		return;
	}
	if (e->nconns < e->max_conns) {
		start_on_new(e, r);
		return;
	}
	r->next = NULL;
	if (e->pend_tail)
		e->pend_tail->next = r;
	else
		e->pend_head = r;
	e->pend_tail = r;
	if (++e->npending > e->peak_pending)
		e->peak_pending = e->npending;
}

static struct ll_lreq *
pend_pop(struct ll_engine *e)
{
	struct ll_lreq *r = e->pend_head;

	if (r != NULL) {
		e->pend_head = r->next;
		if (e->pend_head == NULL)
			e->pend_tail = NULL;
		e->npending--;
	}
	return r;
}

static void
issue(struct ll_engine *e, unsigned route, uint64_t due)
{
	struct ll_route *rt = &e->routes[route];
	struct ll_lreq *r = calloc(1, sizeof(*r));

	rt->st[e->phase].issued++;
	e->outstanding++;
	if (r == NULL) {
		struct ll_lreq tmp = { .route = route, .due_ns = due, .status = LL_LERR_CONNECT };

		tmp.sent_ns = tmp.end_ns = lg_now_ns();
		stats_record(&rt->st[e->phase], tmp.status, tmp.end_ns - due);
		e->outstanding--;
		return;
	}
	r->route = route;
	r->due_ns = due;
	r->tvalue = NAN;
	r->iov[0].iov_base = rt->head;
	r->iov[0].iov_len = rt->head_len;
	if (rt->tmpl != NULL) {
		/* a head of its own: the template's next path (a new key, a hit or a miss) */
		char path[4096];
		size_t len;

		if (ll_tmpl_expand(rt->tmpl, path, sizeof(path)) < 0 ||
		    (r->own_head = build_head(rt->method, path, e->host, e->headers, rt->headers,
		                              rt->body_len, &len)) == NULL) {
			r->status = LL_LERR_CONNECT;
			r->sent_ns = r->end_ns = lg_now_ns();
			finish_req(e, r);
			return;
		}
		r->iov[0].iov_base = r->own_head;
		r->iov[0].iov_len = len;
		r->tvalue = rt->tmpl->value;
	}
	r->iov[1].iov_base = rt->body;
	r->iov[1].iov_len = rt->body_len;
	r->head_method = strcmp(rt->method, "HEAD") == 0;
	dispatch(e, r);
}

static void
finish_req(struct ll_engine *e, struct ll_lreq *r)
{
	struct ll_route *rt = &e->routes[r->route];
	struct ll_rstats *st = &rt->st[e->phase];
	uint64_t lat = r->end_ns > r->due_ns ? r->end_ns - r->due_ns : 0;
	uint64_t now;

	stats_record(st, r->status, lat);
	if (r->status >= 200 && r->status < 300 && r->end_ns <= e->phase_end)
		st->ok_in_time++;
	ll_hist_record(&st->send_lag, r->sent_ns > r->due_ns ? r->sent_ns - r->due_ns : 0);
	if (e->phase == LL_PH_RUN) {
		if (e->nsamples < e->samples_cap) {
			struct ll_sample *s = &e->samples[e->nsamples++];

			s->due_ns = r->due_ns - e->origin_ns;
			s->latency_ns = lat;
			s->status = r->status;
			s->route = r->route;
			s->tvalue = r->tvalue;
		} else {
			e->samples_dropped++;
		}
	}
	if (e->phase == LL_PH_CALIBRATE && r->status >= 200 && r->status < 300 &&
	    r->end_ns >= e->warm_end && r->end_ns <= e->phase_end) {
		uint64_t bin = (r->end_ns - e->warm_end) / (uint64_t)(LL_CALIB_BIN_S * 1e9);

		e->calib_ok++;
		if (bin < LL_CALIB_BINS)
			e->calib_bins[bin]++;
	}
	e->outstanding--;
	free(r->own_head);
	r->own_head = NULL;
	now = lg_now_ns();
	if ((int)r->route == e->closed_route && now < e->phase_end) {
		unsigned route = r->route;

		free(r);
		issue(e, route, now);
		return;
	}
	free(r);
	if (!e->scheduling && e->outstanding == 0)
		ev_break(e->loop, EVBREAK_ONE);
}

static void
conn_done(struct ll_lconn *c, struct ll_lreq *r)
{
	struct ll_engine *e = c->ctx;
	struct ll_lreq *next;

	finish_req(e, r);
	if (c->state != LL_LC_IDLE)
		return;   /* closing: conn_closed follows */
	next = pend_pop(e);
	if (next != NULL)
		ll_lconn_send(c, next);
	else
		idle_push(e, c);
}

static void
conn_closed(struct ll_lconn *c)
{
	struct ll_engine *e = c->ctx;
	struct ll_lreq *next;

	idle_remove(e, c);
	free(c);
	e->nconns--;
	/* a request waiting for a connection gets a new one in place of the one that went */
	next = pend_pop(e);
	if (next != NULL)
		start_on_new(e, next);
}

static void
close_idle(struct ll_engine *e)
{
	while (e->idle != NULL)
		ll_lconn_close(e->idle);
}

/* ---- schedules */

static void
arm(struct ll_engine *e)
{
	struct itimerspec its = { 0 };
	uint64_t next = UINT64_MAX;
	unsigned i;

	for (i = 0; e->scheduling && i < e->nroutes; i++)
		if (e->active[i] && (int)i != e->closed_route &&
		    ll_sched_peek(&e->routes[i].sched) < next)
			next = ll_sched_peek(&e->routes[i].sched);
	/* Wake at the end of the phase at the latest: a route whose next request is due after it
	 * (a low rate) must not hold the phase open until the stop timer. */
	if (next > e->phase_end)
		next = e->phase_end;
	its.it_value.tv_sec = (time_t)(next / 1000000000u);
	its.it_value.tv_nsec = (long)(next % 1000000000u);
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	(void)timerfd_settime(e->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void
on_tick(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ll_engine *e = w->data;
	uint64_t expirations, now = lg_now_ns();
	unsigned i;

	(void)!read(e->timerfd, &expirations, sizeof(expirations));
	if (!e->scheduling)
		return;
	for (i = 0; i < e->nroutes; i++) {
		struct ll_sched *s = &e->routes[i].sched;

		if (!e->active[i] || (int)i == e->closed_route)
			continue;
		while (ll_sched_peek(s) <= now && ll_sched_peek(s) < e->phase_end)
			issue(e, i, ll_sched_take(s));
	}
	if (now >= e->phase_end) {
		e->scheduling = 0;
		if (e->outstanding == 0)
			ev_break(loop, EVBREAK_ONE);
		return;
	}
	arm(e);
}

/* ---- /metrics scrapes of the run (load/scraper.h takes them) */

int
ll_engine_add_point(struct ll_engine *e, const struct ll_scrape *m, uint64_t sent_ns,
                    uint64_t end_ns)
{
	struct ll_point *p, *prev;

	/* only scrapes of the scheduled run count: one answered while the last requests drain
	 * would put the drain's figures (or the next phase's) into the run's maxima */
	if (e->phase != LL_PH_RUN || (sent_ns + end_ns) / 2 > e->phase_end)
		return 0;
	if (e->npoints == e->points_cap) {
		size_t cap = e->points_cap ? e->points_cap * 2 : 256;
		struct ll_point *np = realloc(e->points, cap * sizeof(*np));

		if (np == NULL)
			return -1;
		e->points = np;
		e->points_cap = cap;
	}
	p = &e->points[e->npoints];
	memset(p, 0, sizeof(*p));
	/* the scrape is placed at the middle of its exchange, on the samples' axis */
	p->t_s = (double)((int64_t)((sent_ns + end_ns) / 2) - (int64_t)e->origin_ns) / 1e9;
	p->seg = e->nruns - 1;
	p->m = *m;
	prev = e->npoints > 0 ? &e->points[e->npoints - 1] : NULL;
	/* a scrape of other servers than the last one (a load balancer's choice of replica, or a
	 * restart) is never subtracted from it: its counters are another server's */
	if (prev != NULL && !ll_scrape_same(&prev->m, &p->m))
		e->servers_changed++;
	else if (prev != NULL && prev->seg == p->seg) {
		p->has_lag = 1;
		ll_scrape_lag_delta(&prev->m, &p->m, &p->lag_mean_s, &p->lag_max_s);
		p->lag_p50_s = ll_scrape_lag_quantile(&prev->m, &p->m, 0.5);
		p->lag_p99_s = ll_scrape_lag_quantile(&prev->m, &p->m, 0.99);
	}
	e->npoints++;
	return 0;
}

char *
ll_engine_get_head(const struct ll_engine *e, const char *path, const char *host, size_t *len)
{
	return build_head("GET", path, host ? host : e->host, e->headers, NULL, 0, len);
}

/* ---- phases */

static void
on_progress(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ll_engine *e = w->data;

	e->progress(e, e->progress_ctx);
}

static void
on_stop(struct ev_loop *loop, ev_timer *w, int revents)
{
	/* past the end and past every request's timeout: nothing is left to wait for */
	ev_break(loop, EVBREAK_ONE);
}

static void
run_loop(struct ll_engine *e, double seconds)
{
	e->scheduling = 1;
	e->phase_end = e->phase_start + (uint64_t)(seconds * 1e9);
	ev_io_init(&e->tick, on_tick, e->timerfd, EV_READ);
	e->tick.data = e;
	ev_io_start(e->loop, &e->tick);
	ev_timer_init(&e->stop, on_stop, seconds + e->timeout_s + 1, 0);
	e->stop.data = e;
	ev_timer_start(e->loop, &e->stop);
	if (e->progress != NULL) {
		ev_timer_init(&e->progress_timer, on_progress, 0.5, 0.5);
		e->progress_timer.data = e;
		ev_timer_start(e->loop, &e->progress_timer);
	}
	arm(e);
	ev_run(e->loop, 0);
	e->scheduling = 0;
	/* past the stop timer, requests still waiting for a connection are timeouts, and those
	 * on a connection end by their own timeout */
	while (e->outstanding > 0) {
		struct ll_lreq *r;

		while ((r = pend_pop(e)) != NULL) {
			r->status = LL_LERR_TIMEOUT;
			r->sent_ns = r->end_ns = lg_now_ns();
			finish_req(e, r);
		}
		if (e->outstanding > 0)
			ev_run(e->loop, EVRUN_ONCE);
	}
	ev_io_stop(e->loop, &e->tick);
	ev_timer_stop(e->loop, &e->stop);
	ev_timer_stop(e->loop, &e->progress_timer);
	if (e->progress != NULL)
		e->progress(e, e->progress_ctx);
}

int
ll_engine_reset(struct ll_engine *e, enum ll_phase ph)
{
	unsigned i;

	for (i = 0; i < e->nroutes; i++) {
		stats_free(&e->routes[i].st[ph]);
		if (stats_init(&e->routes[i].st[ph]) == -1) {
			errno = ENOMEM;
			return -1;
		}
	}
	return 0;
}

void
ll_engine_stop(struct ll_engine *e)
{
	uint64_t now = lg_now_ns();

	if (e->scheduling && now < e->phase_end) {
		e->phase_end = now;
		arm(e);
	}
}

int
ll_engine_run(struct ll_engine *e, enum ll_phase ph, const unsigned char *active,
              double seconds)
{
	unsigned i;

	e->phase = ph;
	e->closed_route = -1;
	/* a short lead so the first requests are not late before the loop even runs */
	e->phase_start = lg_now_ns() + 5 * LG_NS_PER_MS;
	if (ph == LL_PH_RUN) {
		if (e->nruns++ == 0)
			e->origin_ns = e->phase_start;
	}
	for (i = 0; i < e->nroutes; i++) {
		e->active[i] = active[i];
		if (active[i])
			ll_sched_init(&e->routes[i].sched, e->routes[i].arrival, e->routes[i].rps,
			              e->phase_start, e->seed + 0x9e3779b9u * (i + 1) + ph);
	}
	run_loop(e, seconds);
	return 0;
}

double
ll_engine_calibrate(struct ll_engine *e, unsigned r, unsigned conc, double seconds,
                    double warm)
{
	unsigned i;
	uint64_t now;

	e->phase = LL_PH_CALIBRATE;
	memset(e->active, 0, e->nroutes);
	e->active[r] = 1;
	e->closed_route = (int)r;
	e->calib_ok = 0;
	memset(e->calib_bins, 0, sizeof(e->calib_bins));
	e->phase_start = now = lg_now_ns();
	e->warm_end = now + (uint64_t)(warm * 1e9);
	e->phase_end = now + (uint64_t)(seconds * 1e9);
	for (i = 0; i < conc; i++)
		issue(e, r, now);
	run_loop(e, seconds);
	e->closed_route = -1;
	close_idle(e);
	return seconds > warm ? (double)e->calib_ok / (seconds - warm) : 0;
}

/* ---- one-off requests */

static void
fetch_done(struct ll_lconn *c, struct ll_lreq *r)
{
	ev_break(c->loop, EVBREAK_ONE);
}

static void
fetch_closed(struct ll_lconn *c)
{
}

int
ll_engine_fetch(struct ll_engine *e, const char *path, char *buf, size_t cap)
{
	static const struct ll_lconn_ops ops = { fetch_done, fetch_closed };
	struct ll_lconn *c = malloc(sizeof(*c));
	struct ll_lreq r;
	size_t len;
	char *head = build_head("GET", path, e->host, e->headers, NULL, 0, &len);

	if (c == NULL || head == NULL) {
		free(c);
		free(head);
		return LL_LERR_CONNECT;
	}
	memset(&r, 0, sizeof(r));
	r.status = LL_LERR_IO;
	r.iov[0].iov_base = head;
	r.iov[0].iov_len = len;
	r.body = buf;
	r.body_cap = cap;
	if (ll_lconn_open(c, e->loop, (struct sockaddr *)&e->addr, e->addrlen, e->timeout_s,
	                  &ops, e) == 0) {
		ll_lconn_send(c, &r);
		ev_run(e->loop, 0);
		ll_lconn_close(c);
	}
	free(c);
	free(head);
	return r.status;
}

int
ll_engine_route_stepped(const struct ll_engine *e, unsigned i)
{
	unsigned j;

	if (e->routes[i].heavy)
		return 1;
	for (j = 0; j < e->nroutes; j++)
		if (e->routes[j].heavy)
			return 0;
	return 1;
}
