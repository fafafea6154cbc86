#include "worker/routes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "cpupool/jobs.h"
#include "cpupool/testjobs.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "worker/metrics.h"
#include "worker/observe.h"
#include "worker/offload.h"
#include "worker/status.h"

struct lg_route {
	const char *path;
	unsigned method;                         /* HTTP_GET (HEAD allowed too) or HTTP_POST */
	uint32_t kind;                           /* 0: answered inline */
	int (*inline_fn)(struct lg_conn *c);
	int (*parse_arg)(const struct lg_http_req *r, uint64_t *arg); /* 0, or -1 for 400 */
	int test_only;                           /* served only with --enable-test-jobs */
};

static int
route_ping(struct lg_conn *c)
{
	return lg_conn_respond(c, 200, "text/plain", NULL, "ok", 2);
}

static int route_health(struct lg_conn *c);

static int
route_ready(struct lg_conn *c)
{
	if (lg_status_ready(c->w->env->arena->master, c->w->draining))
		return lg_conn_respond(c, 200, "text/plain", NULL, "ready\n", 6);
	return lg_conn_respond(c, 503, "text/plain", NULL, "not ready\n", 10);
}

/* The loop's render buffer, or a heap copy of the same size while a previous rendering is still
 * being written to another client. Handed to the connection, which gives it back once written. */
static char *
render_buffer(struct lg_worker *w)
{
	if (!w->render_busy) {
		w->render_busy = 1;
		return w->render;
	}
	return malloc(w->render_cap);
}

/* The renderers' labels: every route row, and the kind names by kind number. */
static void
stats_names(struct lg_stats_names *nm)
{
	static const char *route_names[LG_STATS_ROUTES];
	static const char *kind_names[LG_KIND_TEST_ALLOC + 1];

	if (route_names[0] == NULL) {
		for (unsigned i = 0; i < lg_route_rows(); i++)
			route_names[i] = lg_route_label(i);
		for (uint32_t k = 1; k <= LG_KIND_TEST_ALLOC; k++)
			if (k < LG_KIND_MAX || lg_testjobs_is_test(k))
				kind_names[k] = lg_jobs_name(k);
	}
	*nm = (struct lg_stats_names){ lg_route_rows(), route_names,
	    sizeof(kind_names) / sizeof(kind_names[0]), kind_names };
}

static int
route_rendered(struct lg_conn *c, int metrics)
{
	struct lg_stats_names nm;
	struct lg_worker *w = c->w;
	struct lg_buf b;
	char *p = render_buffer(w);
	int r;

	if (p == NULL)
		return lg_conn_error(c, 500, 0, NULL);
	c->wbody_owned = p;
	lg_buf_init(&b, p, w->render_cap);
	stats_names(&nm);
	r = metrics ? lg_metrics_render(&b, w->env->arena, &nm, lg_now_ns()) :
	    lg_status_render(&b, w->env->arena, &nm, lg_now_ns(), w->draining);
	if (r == -1) {
		log_error("%s does not fit in %zu bytes", metrics ? "/metrics" : "/status",
		    w->render_cap);
		return lg_conn_error(c, 500, 0, NULL);
	}
	return lg_conn_respond(c, 200, metrics ? LG_METRICS_CTYPE : "application/json", NULL, p,
	    b.len);
}

static int
route_metrics(struct lg_conn *c)
{
	return route_rendered(c, 1);
}

static int
route_status(struct lg_conn *c)
{
	return route_rendered(c, 0);
}

/* --inline-heavy: the /heavy job on the loop itself, to show (and test) what a blocking
 * handler does to loop lag and to every other request of this loop worker. */
static int
route_heavy_inline(struct lg_conn *c)
{
	char body[192];
	uint64_t t0 = lg_now_ns(), x;
	int n;

	if (c->route->parse_arg(&c->http.req, &c->arg) == -1)
		return lg_conn_error(c, 400, 0, NULL);
	x = lg_jobs_heavy(c->arg);
	c->run_ns = lg_now_ns() - t0;
	n = snprintf(body, sizeof(body), "{\"iterations\":%" PRIu64 ",\"result\":%" PRIu64
	    ",\"queue_ms\":0.000,\"run_ms\":%.3f,\"inline\":true}\n", c->arg, x,
	    (double)c->run_ns / 1e6);
	return lg_conn_respond(c, 200, "application/json", NULL, body, (size_t)n);
}

/* Finds name=value in a query string (RFC 3986 section 3.4, '&'-separated pairs). Returns the
 * value (not NUL-terminated) and its length in *len, or NULL when the name is absent. */
static const char *
query_param(const struct lg_http_req *r, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	const char *p = r->query, *end;

	if (p == NULL)
		return NULL; /* no '?': NULL + 0 would be undefined behaviour (C11 6.5.6) */
	end = p + r->query_len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;

		if ((size_t)(stop - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
			*len = (size_t)(stop - p) - nl - 1;
			return p + nl + 1;
		}
		p = amp ? amp + 1 : end;
	}
	return NULL;
}

/* Parses a decimal integer parameter in [min, max], or def when absent. */
static int
uint_param(const struct lg_http_req *r, const char *name, uint64_t def, uint64_t min,
    uint64_t max, uint64_t *out)
{
	size_t len;
	const char *v = query_param(r, name, &len);
	uint64_t x = 0;

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (len == 0 || len > 20)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (x < min || x > max)
		return -1;
	*out = x;
	return 0;
}

static int
heavy_arg(const struct lg_http_req *r, uint64_t *arg)
{
	return uint_param(r, "iterations", LG_HEAVY_DEFAULT_ITERATIONS, 0,
	    LG_HEAVY_MAX_ITERATIONS, arg);
}

static int
compress_arg(const struct lg_http_req *r, uint64_t *arg)
{
	return uint_param(r, "level", LG_COMPRESS_DEFAULT_LEVEL, LG_COMPRESS_MIN_LEVEL,
	    LG_COMPRESS_MAX_LEVEL, arg);
}

static int
spin_arg(const struct lg_http_req *r, uint64_t *arg)
{
	return uint_param(r, "ignore_term", 0, 0, 1, arg);
}

static int
alloc_arg(const struct lg_http_req *r, uint64_t *arg)
{
	return uint_param(r, "mib", 0, 0, 65536, arg);
}

static int
no_arg(const struct lg_http_req *r, uint64_t *arg)
{
	*arg = 0;
	return 0;
}

/* Test only: blocks this loop worker for ?ms= milliseconds (default 1000, at most 10 min), the
 * way a buggy handler would, so the master's stuck-loop detection is exercised for real. */
static int
route_test_block(struct lg_conn *c)
{
	uint64_t ms;
	struct timespec ts;

	if (uint_param(&c->http.req, "ms", 1000, 0, 600000, &ms) == -1)
		return lg_conn_error(c, 400, 0, NULL);
	log_warn("blocking the loop for %llu ms on request (--enable-test-jobs)",
	    (unsigned long long)ms);
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
	return lg_conn_respond(c, 200, "text/plain", NULL, "unblocked", 9);
}

static const struct lg_route routes[] = {
	{ "/ping", HTTP_GET, 0, route_ping, NULL, 0 },
	{ "/health", HTTP_GET, 0, route_health, NULL, 0 },
	{ "/ready", HTTP_GET, 0, route_ready, NULL, 0 },
	{ "/metrics", HTTP_GET, 0, route_metrics, NULL, 0 },
	{ "/status", HTTP_GET, 0, route_status, NULL, 0 },
	{ "/heavy", HTTP_GET, LG_KIND_HEAVY, route_heavy_inline, heavy_arg, 0 },
	{ "/compress", HTTP_POST, LG_KIND_COMPRESS, NULL, compress_arg, 0 },
	{ "/test/crash", HTTP_GET, LG_KIND_TEST_CRASH, NULL, no_arg, 1 },
	{ "/test/spin", HTTP_GET, LG_KIND_TEST_SPIN, NULL, spin_arg, 1 },
	{ "/test/alloc", HTTP_GET, LG_KIND_TEST_ALLOC, NULL, alloc_arg, 1 },
	{ "/test/block", HTTP_GET, 0, route_test_block, NULL, 1 },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))
/* The stats table has one more row, "none", for requests that matched no route. */
_Static_assert(NROUTES < LG_STATS_ROUTES, "routes fit the proc page's stats table");

unsigned
lg_route_rows(void)
{
	return NROUTES + 1;
}

unsigned
lg_route_index(const struct lg_route *rt)
{
	return rt == NULL ? NROUTES : (unsigned)(rt - routes);
}

const char *
lg_route_label(unsigned i)
{
	return i < NROUTES ? routes[i].path : "none";
}

/* Whether c's route runs on the loop: inline routes, and /heavy under --inline-heavy. */
static int
runs_inline(const struct lg_conn *c)
{
	return c->route->kind == 0 ||
	    (c->route->kind == LG_KIND_HEAVY && c->w->env->cfg->inline_heavy);
}

_Static_assert(sizeof(routes) / sizeof(routes[0]) <= LG_ROUTE_COUNTERS, "a counter per route");

/* "routes":{"/ping":n,...}: requests that reached each handler, summed over every loop
 * worker's proc page. Returns the bytes written to buf (at most cap - 1). */
static size_t
route_hits_json(const struct lg_arena *a, char *buf, size_t cap)
{
	size_t len = 0;

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		uint64_t sum = 0;

		for (uint32_t p = 0; p < a->nprocs; p++)
			if (a->procs[p].role == 1)
				sum += atomic_load(&a->procs[p].route_hits[i]);
		int n = snprintf(buf + len, cap - len, "%s\"%s\":%" PRIu64, i ? "," : "",
		    routes[i].path, sum);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
	}
	return len;
}

static int
route_health(struct lg_conn *c)
{
	const struct lg_loop_env *env = c->w->env;
	uint32_t n[8];
	char body[1024], hits[640];
	int len;

	lg_slot_census(env->arena, n);
	route_hits_json(env->arena, hits, sizeof(hits));
	len = snprintf(body, sizeof(body),
	    "{\"status\":\"ok\",\"worker\":%u,\"pid\":%d,\"connections\":%d,"
	    "\"slots\":{\"total\":%u,\"free\":%u,\"queued\":%u,\"running\":%u},"
	    "\"routes\":{%s}}\n",
	    env->index, (int)atomic_load(&env->page->pid), c->w->nconns, env->arena->nslots,
	    n[LG_SLOT_FREE] + n[LG_SLOT_RECLAIMING], n[LG_SLOT_QUEUED], n[LG_SLOT_RUNNING], hits);
	return lg_conn_respond(c, 200, "application/json", NULL, body, (size_t)len);
}

static const struct lg_route *
find_route(const struct lg_http_req *r, int test_jobs)
{
	for (size_t i = 0; i < NROUTES; i++)
		if ((test_jobs || !routes[i].test_only) && strlen(routes[i].path) == r->path_len &&
		    memcmp(routes[i].path, r->path, r->path_len) == 0)
			return &routes[i];
	return NULL;
}

static int
method_ok(const struct lg_route *rt, unsigned method)
{
	return method == rt->method || (rt->method == HTTP_GET && method == HTTP_HEAD);
}

/* OPTIONS * (RFC 9112 section 3.2.4): a question about the server, not a resource. */
static int
is_asterisk(const struct lg_http_req *r)
{
	return r->method == HTTP_OPTIONS && r->path_len == 1 && r->path[0] == '*';
}

/* 200 with Allow listing every method some route serves, and OPTIONS itself (RFC 9110 section
 * 9.3.7); no body, so Content-Length: 0. */
static int
route_options_any(struct lg_conn *c)
{
	int get = 0, post = 0;
	char allow[64];

	for (size_t i = 0; i < NROUTES; i++) {
		get |= routes[i].method == HTTP_GET;
		post |= routes[i].method == HTTP_POST;
	}
	snprintf(allow, sizeof(allow), "Allow: %s%sOPTIONS\r\n", get ? "GET, HEAD, " : "",
	    post ? "POST, " : "");
	return lg_conn_respond(c, 200, NULL, allow, NULL, 0);
}

static int
reject(struct lg_conn *c, int status)
{
	c->reject_status = status;
	if (status == 503)
		snprintf(c->reject_extra, sizeof(c->reject_extra), "Retry-After: 1\r\n");
	return LG_HTTP_REJECT;
}

/* "Allow: ...\r\n" for a 405 (RFC 9110 section 15.5.6). */
static void
allow_header(const struct lg_route *rt, char *buf, size_t cap)
{
	snprintf(buf, cap, "Allow: %s\r\n",
	    rt->method == HTTP_GET ? "GET, HEAD" : http_method_str(rt->method));
}

/* A request that will not be served (404, 405) but announces a body with Expect: 100-continue
 * is answered at once instead of waiting for a body the client holds back (RFC 9110 section
 * 10.1.1); the connection then closes, since the body was never read. */
static int
refuse_early(struct lg_conn *c, const struct lg_http_req *r)
{
	if (c->route == NULL)
		return reject(c, 404);
	allow_header(c->route, c->reject_extra, sizeof(c->reject_extra));
	return reject(c, 405);
}

int
lg_route_head(struct lg_http *h, void *conn)
{
	struct lg_conn *c = conn;
	const struct lg_http_req *r = &h->req;
	const struct lg_config *cfg = c->w->env->cfg;

	int has_body = r->chunked || (r->content_length != LG_HTTP_NO_LENGTH &&
	    r->content_length > 0);

	c->route = find_route(r, cfg->enable_test_jobs);
	c->route_row = lg_route_index(c->route);
	c->route_label = lg_route_label(c->route_row);
	c->want_continue = 0;
	c->cont_off = 0;
	c->reject_extra[0] = '\0';
	/* RFC 9110 section 15.5.14: refuse a body too large before reading it. */
	if (r->content_length != LG_HTTP_NO_LENGTH && r->content_length > cfg->max_body)
		return reject(c, 413);
	if (is_asterisk(r)) {
		c->want_continue = r->expect_continue && has_body; /* read, then discarded */
		return LG_HTTP_BODY_PARSER;
	}
	if (c->route == NULL || !method_ok(c->route, r->method)) {
		if (r->expect_continue && has_body)
			return refuse_early(c, r);
		return LG_HTTP_BODY_PARSER; /* 404 or 405: the parser discards any body */
	}
	if (runs_inline(c)) {
		c->want_continue = r->expect_continue && has_body; /* read, then discarded */
		return LG_HTTP_BODY_PARSER;
	}
	if (c->route->parse_arg(r, &c->arg) == -1)
		return reject(c, 400);
	uint64_t left = lg_stats_quarantine_left(c->w->env->arena->master, c->route->kind,
	    lg_now_ns());
	if (left > 0) {
		/* A kind that keeps killing compute processes is refused for a while
		 * (--quarantine-deaths); Retry-After says when it is tried again. */
		atomic_fetch_add(&c->w->env->page->rejected_quarantine, 1);
		reject(c, 503);
		snprintf(c->reject_extra, sizeof(c->reject_extra), "Retry-After: %llu\r\n",
		    (unsigned long long)((left + 999999999u) / 1000000000u));
		return LG_HTTP_REJECT;
	}
	/* The bounded queue: no free slot means 503 now, before any body byte is read. */
	if (lg_offload_claim(c, c->route->kind, c->arg) == -1)
		return reject(c, 503);
	/* The slot is ours, so the body will be read: only now is a 100 Continue due. The
	 * connection sends it while the body is awaited (worker/conn.c). */
	c->want_continue = r->expect_continue && has_body;
	return c->body_need > 0 ? LG_HTTP_BODY_SELF : LG_HTTP_BODY_PARSER;
}

int
lg_route_body(struct lg_http *h, void *conn, const char *at, size_t len)
{
	struct lg_conn *c = conn;

	if (h->body_seen > c->w->env->cfg->max_body) {
		h->status = 413;
		return -1;
	}
	if (c->slot < 0)
		return 0; /* a body to an inline route is read and dropped */
	return lg_offload_body(c, h, at, len);
}

int
lg_route_dispatch(struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;

	if (c->route == NULL && is_asterisk(r))
		return route_options_any(c);
	if (c->route == NULL)
		return lg_conn_error(c, 404, 0, NULL);
	if (!method_ok(c->route, r->method)) {
		char allow[64];

		allow_header(c->route, allow, sizeof(allow));
		return lg_conn_error(c, 405, 0, allow);
	}
	if (runs_inline(c)) {
		lg_obs_route_hit(c);
		return c->route->inline_fn(c);
	}
	return lg_offload_start(c);
}

static int
route_release(struct lg_conn *c)
{
	return lg_offload_release(c);
}

const struct lg_conn_ops lg_route_conn_ops = {
	.head = lg_route_head,
	.body = lg_route_body,
	.dispatch = lg_route_dispatch,
	.body_window = lg_offload_body_window,
	.body_done = lg_offload_queue,
	.job_timeout = lg_offload_deadline,
	.release = route_release,
	.gone = lg_offload_client_gone,
};
