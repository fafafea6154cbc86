#include "worker/route/routes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "http/fwd.h"
#include "kinds/registry.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "worker/flight/coalesce.h"
#include "worker/route/inline.h"
#include "worker/observe.h"
#include "worker/job/offload.h"
#include "worker/loop.h"
#include "worker/upstream/upstream.h"

/* A row of this loop worker's router, built from the registry's routes at start. */
struct lg_route {
	const struct lg_route_def *def;
	int (*handler)(struct lg_conn *c); /* a loop handler, or NULL for a kind */
	unsigned row;                      /* statistics row */
	size_t path_len;                   /* strlen(def->path) */
};

/* The route-method bit of method m (http/method.h's: the parser answers 501 for any other). */
static uint64_t
method_bit(unsigned m)
{
	return m < LG_HTTP_NMETHODS ? LG_HTTP_METHOD_BIT(m) : 0;
}

/* How specific route d is for r's path: 0 no match, a prefix route its length + 1, an exact
 * route more than any prefix (nginx's location rule: an exact path wins, then the longest
 * prefix; a catch-all prefix route never takes /ping from its exact route). */
static size_t
path_rank(const struct lg_route *rt, const struct lg_http_req *r)
{
	const struct lg_route_def *d = rt->def;
	size_t n = rt->path_len;

	if (d->prefix)
		return r->path_len >= n && memcmp(d->path, r->path, n) == 0 ? n + 1 : 0;
	return n == r->path_len && memcmp(d->path, r->path, n) == 0 ? SIZE_MAX : 0;
}

static int
path_matches(const struct lg_route *rt, const struct lg_http_req *r)
{
	return path_rank(rt, r) != 0;
}

/* path_rank for the routes this server serves (test-only routes need --enable-test-jobs). */
static size_t
match_rank(const struct lg_worker *w, const struct lg_route *rt, const struct lg_http_req *r)
{
	if (rt->def->test_only && !w->env->cfg->enable_test_jobs)
		return 0;
	return path_rank(rt, r);
}

/* The route for path and method: among the routes whose path matches best (match_rank), the
 * first in the table whose methods include it; else the first of them (405); else NULL
 * (404). A less specific route never answers a method the best match lacks. */
static const struct lg_route *
find_route(const struct lg_worker *w, const struct lg_http_req *r)
{
	const struct lg_route *best = NULL;
	size_t rank = 0;
	uint64_t bit = method_bit(r->method);

	for (unsigned i = 0; i < LG_WRT(w)->nroutes; i++) {
		size_t k = match_rank(w, &LG_WRT(w)->routes[i], r);

		if (k == 0 || k < rank)
			continue;
		if (k > rank || (!(best->def->methods & bit) && (LG_WRT(w)->routes[i].def->methods & bit)))
			best = &LG_WRT(w)->routes[i];
		rank = k;
		if (rank == SIZE_MAX && (best->def->methods & bit))
			break; /* an exact route that takes the method: nothing can beat it */
	}
	return best;
}

static int
method_ok(const struct lg_route *rt, unsigned method)
{
	return (rt->def->methods & method_bit(method)) != 0;
}

/* OPTIONS * (RFC 9112 section 3.2.4): a question about the server, not a resource. */
static int
is_asterisk(const struct lg_http_req *r)
{
	return r->method == HTTP_OPTIONS && r->path_len == 1 && r->path[0] == '*';
}

static int
reject(struct lg_conn *c, int status)
{
	lg_conn_reject(c, status);
	if (status == 503)
		snprintf(c->reject_extra, sizeof(c->reject_extra), LG_CONN_RETRY_AFTER);
	return LG_HTTP_REJECT;
}

/* "Allow: ...\r\n" for a 405 (RFC 9110 section 15.5.6): every method of the path's routes. */
static void
allow_header(const struct lg_conn *c, char *buf, size_t cap)
{
	const struct lg_worker *w = c->w;
	uint64_t set = 0;
	char list[320];

	for (unsigned i = 0; i < LG_WRT(w)->nroutes; i++)
		if (path_matches(&LG_WRT(w)->routes[i], &c->http.req))
			set |= LG_WRT(w)->routes[i].def->methods;
	/* whole names only, so the line always ends: "Allow: " and CRLF take 9 bytes of cap */
	lg_http_methods_str(set, list, cap > 9 && cap - 9 < sizeof(list) ? cap - 9 : sizeof(list));
	snprintf(buf, cap, "Allow: %s\r\n", list);
}

/* Whether a body that will be dropped is better read (the connection stays usable) than left
 * unread (answered at once, and the connection closes): not when the client holds it back for a
 * 100 Continue (RFC 9110 section 10.1.1), nor when it is declared longer than --max-discard,
 * beyond which reading costs more than the client's reconnect. A chunked body is bounded as it
 * arrives (lg_route_body). */
static int
discard_ok(const struct lg_conn *c, const struct lg_http_req *r)
{
	int has_body = r->chunked || (r->content_length != LG_HTTP_NO_LENGTH &&
	    r->content_length > 0);

	if (!has_body)
		return 1;
	return !r->expect_continue && (r->chunked ||
	    r->content_length <= c->w->env->cfg->http.max_discard);
}

/* "Retry-After: N" in c->reject_extra, copied rather than formatted (every refusal of a
 * flood takes this path). */
static void
set_retry_after(struct lg_conn *c, uint64_t retry_s)
{
	static const char name[] = "Retry-After: ";
	char *p = c->reject_extra;

	_Static_assert(sizeof(name) - 1 + LG_FMT_U64_MAX + 3 <= sizeof(c->reject_extra),
	    "reject_extra holds a Retry-After line");
	memcpy(p, name, sizeof(name) - 1);
	p += sizeof(name) - 1;
	p += lg_fmt_u64(p, retry_s);
	memcpy(p, "\r\n", 3);
}

/* Whether kind's module is marked failed in the master page (its init failed or crashed in
 * some process); *retry_s, when given, the seconds until the master's next retry (at least 1). */
static int
module_down(const struct lg_worker *w, uint32_t kind, uint64_t *retry_s)
{
	uint32_t mod = lg_registry_module_of(w->env->cfg->reg, kind);
	const struct lg_module_health *h;

	if (mod >= LG_MODULE_HEALTH)
		return 0;
	h = &w->env->arena->master->modules[mod];
	if (!atomic_load(&h->failed))
		return 0;
	if (retry_s != NULL) {
		uint64_t at = atomic_load(&h->retry_ns), now = lg_now_ns();

		*retry_s = at > now ? (at - now + 999999999u) / 1000000000u : 1;
	}
	return 1;
}

/* A refusal that keeps the connection when discarding the body is cheap: answered at dispatch,
 * in order behind any pipelined request before it, after the parser has read and dropped the
 * body; otherwise at once, closing. status is 503 or 429 (Retry-After: retry_s). */
static int
refuse_keep(struct lg_conn *c, const struct lg_http_req *r, int status, uint64_t retry_s)
{
	set_retry_after(c, retry_s);
	if (!discard_ok(c, r)) {
		lg_conn_reject(c, status);
		return LG_HTTP_REJECT;
	}
	LG_RT(c)->refuse_status = status;
	return LG_HTTP_BODY_PARSER;
}

/* A request that will not be served (404, 405) but announces a body with Expect: 100-continue
 * is answered at once instead of waiting for a body the client holds back (RFC 9110 section
 * 10.1.1); the connection then closes, since the body was never read. The same for a body
 * declared longer than --max-discard. */
static int
refuse_early(struct lg_conn *c, const struct lg_http_req *r)
{
	if (LG_RT(c)->route == NULL)
		return reject(c, 404);
	allow_header(c, c->reject_extra, sizeof(c->reject_extra));
	return reject(c, 405);
}

/* A bad query argument: 400 before the job claims a slot or a coalescing key, whatever the
 * pool's state (issue: a malformed argument used to wait behind running jobs for the compute
 * process to refuse it). Answered at dispatch (worded from the one parse, worker/job/args.c)
 * behind any pipelined request, the body read and dropped; or at once, closing, when the body
 * is not worth reading. */
static int
refuse_query(struct lg_conn *c, const struct lg_http_req *r)
{
	c->reject_extra[0] = '\0';
	atomic_fetch_add(&c->w->env->page->rejected_query, 1);
	if (!discard_ok(c, r))
		return reject(c, 400);
	LG_RT(c)->refuse_status = 400;
	return LG_HTTP_BODY_PARSER;
}

/* The request view the kind sees: method, path, raw query and the route's listed fields. */
static void
request_view(const struct lg_conn *c, const struct lg_route_def *d, struct lg_view *v)
{
	const struct lg_http_req *r = &c->http.req;
	const char *m = http_method_str(r->method);

	memset(v, 0, sizeof(*v));
	v->method = m;
	v->method_len = strlen(m);
	v->path = r->path;
	v->path_len = r->path_len;
	v->query = r->query ? r->query : "";
	v->query_len = r->query ? r->query_len : 0;
	for (unsigned i = 0; i < d->nfields; i++) {
		size_t len;
		const char *val = lg_http_field_get(r, d->fields[i], &len);

		if (val == NULL)
			continue;
		v->fields[v->nfields++] = (struct lagless_field){ d->fields[i],
		    strlen(d->fields[i]), val, len };
	}
}

/* Claims a job slot for c's kind route and writes its request view (at head time, or at
 * dispatch for a coalescing route's job). Returns 0, or -1 (no free slot, or the view could
 * not be backed: counted; the caller answers 503). */
static int
route_claim(struct lg_conn *c)
{
	const struct lg_route_def *d = LG_RT(c)->route->def;
	struct lg_view v;
	/* the job's one record (shm/layout.h struct lg_job): the route's index is the registry's */
	struct lg_job job = { .kind = d->kind,
	    .route = (uint32_t)(LG_RT(c)->route - LG_WRT(c->w)->routes), .pool = d->pool,
	    .where = d->where, .deadline_ms = d->deadline_ms };

	request_view(c, d, &v);
	return lg_offload_claim(c, &job, &v);
}

/* --admin-listen: a connection it accepted gets the loop's own answers (ping, health, ready,
 * metrics, status) and nothing else, and the other listeners no longer answer /metrics and
 * /status, so probes and scrapes stay on a port a Service does not expose. */
static int
admin_allows(const struct lg_conn *c, const struct lg_route *rt)
{
	static const char *const admin[] = { "ping", "health", "ready", "metrics", "status" };
	const char *h = rt->def->handler;
	int i = 0;

	if (c->w->env->admin_fd < 0)
		return 1;
	while (i < 5 && (rt->handler == NULL || strcmp(h, admin[i]) != 0))
		i++;
	return lg_loop_admin_conn(c->fd) ? i < 5 : i < 3 || i == 5;
}

/* The methods of every route c's listener serves (the admin listener only its GET/HEAD
 * handlers): what OPTIONS * answers in Allow. */
static uint64_t
served_methods(const struct lg_conn *c)
{
	uint64_t set = 0;

	for (unsigned i = 0; i < LG_WRT(c->w)->nroutes; i++)
		if (admin_allows(c, &LG_WRT(c->w)->routes[i]))
			set |= LG_WRT(c->w)->routes[i].def->methods;
	return set;
}

/* A new request head on c: its route (NULL for none, or one the admin listener rule hides),
 * its metrics row and label, its body limit, and the per-request state of the last one
 * cleared. */
static void
route_begin(struct lg_conn *c, const struct lg_http_req *r)
{
	const struct lg_config *cfg = c->w->env->cfg;

	LG_RT(c)->route = find_route(c->w, r);
	if (LG_RT(c)->route != NULL && !admin_allows(c, LG_RT(c)->route))
		LG_RT(c)->route = NULL; /* 404, as for a path that has no route */
	lg_flight_begin(c);
	lg_job_begin(c);
	LG_RT(c)->route_row = LG_RT(c)->route ? LG_RT(c)->route->row : LG_WRT(c->w)->none_row;
	LG_RT(c)->route_label = LG_WRT(c->w)->row_names[LG_RT(c)->route_row];
	lg_conn_head_begin(c);
	LG_RT(c)->refuse_status = 0;
	LG_RT(c)->max_body = LG_RT(c)->route &&
	    (LG_RT(c)->route->def->kind || LG_RT(c)->route->def->upstream) ?
	    LG_RT(c)->route->def->max_body : cfg->http.max_body;
}

/* Single-flight's copy of an owner's answer (worker/flight/coalesce.h lg_coal_up_*). */
static const struct lg_up_tee coal_tee = {
	.head = lg_coal_up_head, .data = lg_coal_up_data, .end = lg_coal_up_end,
};

/* Single-flight's proxy (lg_coal_up_dispatch): c's complete request goes to its route's app
 * now, its answer copied to flight fl (NULL: not), extra in the client's head. A request the
 * upstream refuses (503, 429, 431) is refused to fl's waiters too. Returns 0 or -1 (closed). */
static int
route_up_proxy(struct lg_conn *c, void *fl, const char *extra)
{
	int st = lg_up_head(c, LG_RT(c)->route->def);

	if (st != 0) {
		if (fl != NULL)
			lg_coal_up_end(fl, 0, st == 431 ? 0 : st);
		return lg_conn_error(c, st, st == 431, st == 503 || st == 429 ?
		    LG_CONN_RETRY_AFTER : NULL);
	}
	lg_up_tee(c, fl != NULL ? &coal_tee : NULL, fl, extra);
	return lg_up_dispatch(c);
}

/* Single-flight's background refresh of a stale answer: c's request once more, for fl alone
 * (lg_up_refresh). */
static int
route_up_refresh(struct lg_conn *c, void *fl)
{
	return lg_up_refresh(c, LG_RT(c)->route->def, &coal_tee, fl);
}

/* Whether c's request to upstream route d coalesces (docs/CACHE.md "Proxied routes"): a GET or
 * HEAD without a body and without Upgrade, of a route with a rule. */
static int
up_coalesces(struct lg_conn *c, const struct lg_http_req *r, const struct lg_route_def *d,
    int has_body)
{
	if (!d->has_coal || has_body || (r->method != HTTP_GET && r->method != HTTP_HEAD) ||
	    lg_fwd_upgrade_request(r))
		return 0;
	lg_job_set_deadline(c, d->deadline_ms); /* a parked request's */
	lg_job_set_route(c, (uint32_t)(LG_RT(c)->route - LG_WRT(c->w)->routes)); /* its cluster
	                                                                          * key's maker */
	return lg_coal_wants(c, &d->coal);
}

/* A route to an upstream: admission and the head toward the app (worker/upstream/upstream.h);
 * full is a 503 at once, before any body byte is read (a small body read and dropped, keeping
 * the connection, as for a kind). */
static int
route_upstream(struct lg_conn *c, const struct lg_http_req *r, const struct lg_route_def *d)
{
	int has_body = r->chunked || (r->content_length != LG_HTTP_NO_LENGTH &&
	    r->content_length > 0);

	if (up_coalesces(c, r, d, has_body))
		return LG_HTTP_BODY_PARSER; /* decided at dispatch: a hit needs no place */
	if (d->request_buffering && has_body) {
		/* request_buffering = on: the body is received whole into a transit buffer (the
		 * rules of a kind's body), then the request takes its place (route_body_done); a
		 * full upstream is still a 503 now, before a byte of the body is read. */
		int full = lg_up_full(c, d);

		if (full != 0 || lg_offload_claim_body(c, d->pool, d->deadline_ms) == -1)
			return refuse_keep(c, r, full ? full : 503, 1);
		lg_conn_expect_continue(c, r->expect_continue);
		return lg_job_body_expected(c) ? LG_HTTP_BODY_SELF : LG_HTTP_BODY_PARSER;
	}
	int st = lg_up_head(c, d);

	if (st == 503 || st == 429)
		return refuse_keep(c, r, st, 1);
	if (st != 0)
		return reject(c, st);
	lg_conn_expect_continue(c, r->expect_continue && has_body && lg_up_body_room(c) > 0);
	return LG_HTTP_BODY_PARSER;
}

int
lg_route_head(struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;
	const struct lg_config *cfg = c->w->env->cfg;
	const struct lg_route_def *d;
	int has_body = r->chunked || (r->content_length != LG_HTTP_NO_LENGTH &&
	    r->content_length > 0);

	route_begin(c, r);
	/* RFC 9110 section 15.5.14: refuse a body too large before reading it. */
	if (r->content_length != LG_HTTP_NO_LENGTH && r->content_length > LG_RT(c)->max_body)
		return reject(c, 413);
	if ((LG_RT(c)->route == NULL && !is_asterisk(r)) ||
	    (LG_RT(c)->route && !method_ok(LG_RT(c)->route, r->method))) {
		if (!discard_ok(c, r))
			return refuse_early(c, r);
		return LG_HTTP_BODY_PARSER; /* 404 or 405: the parser discards any body */
	}
	if (is_asterisk(r) || LG_RT(c)->route->handler != NULL) {
		if (has_body && !r->chunked && r->content_length > cfg->http.max_discard)
			return reject(c, 413); /* a body nobody reads, longer than is worth reading */
		lg_conn_expect_continue(c, r->expect_continue && has_body); /* read, then dropped */
		return LG_HTTP_BODY_PARSER;
	}
	d = LG_RT(c)->route->def;
	if (d->upstream != 0)
		return route_upstream(c, r, d);
	if (lg_job_parse_query(c, d->kind, r->query, r->query ? r->query_len : 0) == -1)
		return refuse_query(c, r);
	uint64_t left = lg_stats_quarantine_left(c->w->env->arena->master, d->kind,
	    (uint32_t)(LG_RT(c)->route - LG_WRT(c->w)->routes), lg_now_ns());
	if (left > 0) {
		/* A kind that keeps killing compute processes is refused for a while
		 * (--quarantine-deaths); Retry-After says when it is tried again. */
		atomic_fetch_add(&c->w->env->page->rejected_quarantine, 1);
		return refuse_keep(c, r, 503, (left + 999999999u) / 1000000000u);
	}
	if (module_down(c->w, d->kind, &left)) {
		/* Its module's init failed or crashed: refused (with the reason, at dispatch)
		 * until the master's retry of the init succeeds; Retry-After is that retry. */
		atomic_fetch_add(&c->w->env->page->rejected_module, 1);
		return refuse_keep(c, r, 503, left);
	}
	/* A coalescing route decides at dispatch: a cached answer or a job already in flight
	 * needs no slot (worker/flight/coalesce.h). A request with a body takes its transit buffer now
	 * like any job, and is decided once the body (hashed into its key) is complete. */
	lg_job_set_deadline(c, d->deadline_ms);
	if (d->where != LAGLESS_WHERE_LOOP && lg_coal_wants(c, d->has_coal ? &d->coal : NULL) &&
	    !has_body)
		return LG_HTTP_BODY_PARSER;
	/* The bounded queue: no free slot means 503 now, before any body byte is read into
	 * shared memory; a small body is read and dropped so the connection stays usable. */
	if (route_claim(c) == -1)
		return refuse_keep(c, r, 503, 1);
	/* The slot is ours, so the body will be read: only now is a 100 Continue due. The
	 * connection sends it while the body is awaited (worker/core/conn.c). */
	lg_conn_expect_continue(c, r->expect_continue && has_body);
	return lg_job_body_expected(c) ? LG_HTTP_BODY_SELF : LG_HTTP_BODY_PARSER;
}

int
lg_route_body(struct lg_http *h, void *conn, const char *at, size_t len)
{
	struct lg_conn *c = conn;

	if (h->body_seen > LG_RT(c)->max_body) {
		h->status = 413;
		return -1;
	}
	if (lg_up_active(c))
		return lg_up_body(c, at, len);
	if (!lg_job_held(c) && h->body_seen > c->w->env->cfg->http.max_discard) {
		/* a chunked body to drop grew past --max-discard: answer, and close; a path with
		 * no route is a 404 and a method it does not serve a 405 with Allow, as with a
		 * long Content-Length (refuse_early) */
		h->status = LG_RT(c)->refuse_status ? LG_RT(c)->refuse_status :
		    LG_RT(c)->route == NULL && !is_asterisk(&h->req) ? 404 :
		    LG_RT(c)->route != NULL && !method_ok(LG_RT(c)->route, h->req.method) ? 405 : 413;
		if (h->status == 405)
			allow_header(c, c->reject_extra, sizeof(c->reject_extra));
		return -1;
	}
	if (!lg_job_held(c))
		return 0; /* a body nobody reads (inline route, refusal) is dropped */
	return lg_offload_body(c, h, at, len);
}

static size_t
route_body_room(struct lg_http *h, void *conn)
{
	struct lg_conn *c = conn;

	if (lg_up_active(c))
		return lg_up_body_room(c);
	return !lg_job_held(c) ? SIZE_MAX : lg_offload_body_room(c, h);
}

int
lg_route_dispatch(struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;

	if (LG_RT(c)->refuse_status) {
		char why[256];
		size_t n = LG_RT(c)->refuse_status == 503 && LG_RT(c)->route && LG_RT(c)->route->def->kind &&
		    module_down(c->w, LG_RT(c)->route->def->kind, NULL) ?
		    lg_offload_unavailable_text(c->w, LG_RT(c)->route->def->kind, why, sizeof(why)) : 0;

		if (n > 0) /* its module's init failed: say so */
			return lg_conn_respond(c, 503, "text/plain", c->reject_extra, why, n);
		if (LG_RT(c)->refuse_status == 400 && LG_RT(c)->route &&
		    (n = lg_job_query_why(c, LG_RT(c)->route->def->kind, why, sizeof(why))) > 0) {
			lg_obs_route_hit(c); /* the route answered it, without a job */
			return lg_conn_respond(c, 400, "text/plain", NULL, why, n);
		}
		return lg_conn_error(c, LG_RT(c)->refuse_status, 0, c->reject_extra);
	}
	if (LG_RT(c)->route == NULL && is_asterisk(r))
		return lg_inline_options_any(c, served_methods(c));
	if (LG_RT(c)->route == NULL)
		return lg_conn_error(c, 404, 0, NULL);
	if (!method_ok(LG_RT(c)->route, r->method)) {
		char allow[330];

		allow_header(c, allow, sizeof(allow));
		return lg_conn_error(c, 405, 0, allow);
	}
	if (LG_RT(c)->route->handler != NULL) {
		lg_obs_route_hit(c);
		return LG_RT(c)->route->handler(c);
	}
	if (lg_up_active(c)) {
		lg_obs_route_hit(c);
		return lg_up_dispatch(c);
	}
	if (LG_RT(c)->route->def->upstream != 0 && lg_flight_wanted(c)) {
		lg_obs_route_hit(c);
		return lg_coal_up_dispatch(c, route_up_proxy, route_up_refresh);
	}
	if (!lg_job_held(c) && lg_flight_wanted(c))
		return lg_coal_dispatch(c, route_claim);
	return lg_offload_start(c);
}

/* A body held in a transit buffer is whole: an upstream route's (request_buffering) goes to
 * its app now, with its length; a kind's is queued or coalesced. Returns 0, or -1 (closed). */
static int
route_body_done(struct lg_conn *c)
{
	const struct lg_route_def *d = LG_RT(c)->route ? LG_RT(c)->route->def : NULL;
	const unsigned char *body;
	uint64_t len;
	int st;

	if (d == NULL || d->upstream == 0)
		return lg_coal_body_done(c);
	if (lg_job_body(c, &body, &len) == -1)
		return lg_conn_error(c, 503, 1, LG_CONN_RETRY_AFTER);
	lg_obs_route_hit(c);
	st = lg_up_head_body(c, d, body, len);
	if (st != 0)
		return lg_conn_error(c, st, 0, st == 503 || st == 429 ? LG_CONN_RETRY_AFTER : NULL);
	return 0;
}

/* c's request is answered: its transit buffer goes back, and an upstream exchange still open
 * (lagless refused the request mid-body: 413, 400, 408) is ended toward the app at once, as
 * for a client that left, rather than when the lingering connection closes. */
static int
route_release(struct lg_conn *c)
{
	if (lg_up_active(c))
		lg_up_gone(c);
	return lg_job_held(c) ? lg_offload_release(c) : 0;
}

/* c closes: its upstream exchange, then its slot or flight. */
static void
route_gone(struct lg_conn *c)
{
	lg_up_gone(c);
	if (lg_job_held(c) || lg_conn_parked(c))
		lg_coal_conn_gone(c);
}

/* The rooms' parts of a connection that got its block: no route, no slot, no flight. */
static void
route_init(struct lg_conn *c)
{
	lg_job_ready(c);
	lg_flight_init(c);
	lg_rt_none(LG_RT(c), LG_WRT(c->w));
	lg_up_conn_init(c);
}

const struct lg_conn_ops lg_route_conn_ops = {
	.head = lg_route_head,
	.body = lg_route_body,
	.body_room = route_body_room,
	.dispatch = lg_route_dispatch,
	.body_buf = lg_offload_body_buf,
	.body_took = lg_offload_body_took,
	.body_got = lg_offload_body_got,
	.init = route_init,
	.body_done = route_body_done,
	.job_timeout = lg_coal_job_timeout,
	.release = route_release,
	.gone = route_gone,
	.stream = lg_up_stream,
};

int
lg_router_build(struct lg_worker *w)
{
	const struct lg_registry *reg = w->env->cfg->reg;

	LG_WRT(w)->nroutes = reg->nroutes;
	LG_WRT(w)->routes = calloc(reg->nroutes + 1, sizeof(*LG_WRT(w)->routes));
	/* Statistics rows: one per route, then "none"; the arena's stats area was sized from
	 * the same registry (master/gen.c), so every route has its own row. */
	LG_WRT(w)->nrows = reg->nroutes + 1;
	if (LG_WRT(w)->nrows > w->env->arena->stat_routes) {
		errno = ERANGE;
		return -1;
	}
	LG_WRT(w)->row_names = calloc(LG_WRT(w)->nrows, sizeof(*LG_WRT(w)->row_names));
	LG_WRT(w)->kind_names = calloc(reg->nkinds, sizeof(*LG_WRT(w)->kind_names));
	if (LG_WRT(w)->routes == NULL || LG_WRT(w)->row_names == NULL || LG_WRT(w)->kind_names == NULL)
		return -1;
	for (unsigned i = 0; i < reg->nroutes; i++) {
		struct lg_route *rt = &LG_WRT(w)->routes[i];

		rt->def = &reg->routes[i];
		rt->row = i;
		rt->path_len = strlen(rt->def->path);
		rt->handler = lg_inline_handler(rt->def->handler);
		if (rt->def->kind == 0 && rt->handler == NULL && rt->def->upstream == 0) {
			errno = EINVAL;
			return -1;
		}
		LG_WRT(w)->row_names[i] = rt->def->path;
	}
	LG_WRT(w)->none_row = LG_WRT(w)->nrows - 1;
	LG_WRT(w)->row_names[LG_WRT(w)->none_row] = "none";
	for (uint32_t k = 1; k < reg->nkinds; k++)
		LG_WRT(w)->kind_names[k] = reg->kinds[k].name;
	return lg_up_loop_init(w);
}
