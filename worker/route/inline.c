/* The inline handlers: the routes a loop worker answers itself, on the loop, without a job
 * (worker/route/inline.h). */
#include "worker/route/inline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "http/method.h"
#include "kinds/registry.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "stats/cluster_metrics.h"
#include "stats/coalesce_metrics.h"
#include "stats/metrics.h"
#include "stats/procstat.h"
#include "stats/status.h"
#include "stats/upstream_metrics.h"
#include "worker/loop.h"

static int
route_ping(struct lg_conn *c)
{
	return lg_conn_respond(c, 200, "text/plain", NULL, "ok", 2);
}

/* Ready: started, not stopping or draining, and, with --redis, every loop worker's first Redis
 * connect settled (docs/CACHE.md "Across replicas": a replica taking traffic before its
 * subscription is up would run its cluster keys' jobs alone). */
static int
route_ready(struct lg_conn *c)
{
	const struct lg_loop_env *env = c->w->env;

	if (lg_status_ready(env->arena->master, c->w->draining) &&
	    (env->cfg->cluster.redis[0] == '\0' || lg_cache_cluster_settled(env->cache)))
		return lg_conn_respond(c, 200, "text/plain", NULL, "ready\n", 6);
	return lg_conn_respond(c, 503, "text/plain", NULL, "not ready\n", 10);
}

/* The loop's render buffer, or a heap copy of the same size while a previous rendering is still
 * being written to another client. Handed to the connection, which gives it back once written. */
static char *
render_buffer(struct lg_worker *w)
{
	if (!w->render.busy) {
		w->render.busy = 1;
		return w->render.buf;
	}
	return malloc(w->render.cap);
}

/* The renderers' labels: every route row, and the kind names by kind number. */
static void
stats_names(const struct lg_worker *w, struct lg_stats_names *nm)
{
	*nm = (struct lg_stats_names){ LG_WRT(w)->nrows, LG_WRT(w)->row_names, w->env->cfg->reg->nkinds,
	    LG_WRT(w)->kind_names };
}

int
lg_inline_start(struct lg_worker *w)
{
	const struct lg_loop_env *env = w->env;
	struct lg_stats_names nm;

	stats_names(w, &nm);
	w->render.cap = lg_metrics_bound(env->nloops, &nm) + 16384; /* + coalescing's, cluster's */
	w->render.cap += lg_procstat_bound(env->arena->nprocs); /* + process_* families */
	w->render.cap += lg_up_metrics_bound(env->ups ? env->ups->n : 0);
	if (w->render.cap < lg_status_bound(env->arena->nprocs))
		w->render.cap = lg_status_bound(env->arena->nprocs);
	if ((w->render.buf = malloc(w->render.cap)) == NULL)
		return -1;
	w->render.busy = 0;
	return 0;
}

/* The upstream families of /metrics, or their member of /status's object (its closing "}\n"
 * moved after it), labelled by the registry's names (stats/upstream_metrics.h). */
static int
upstream_render(const struct lg_worker *w, struct lg_buf *b, int metrics)
{
	const struct lg_registry *reg = w->env->cfg->reg;
	const char *names[LG_UP_METRICS_MAX];
	struct lg_upshm u;

	if (w->env->ups == NULL || w->env->ups->n == 0)
		return 0;
	u = *w->env->ups;
	if (u.n > LG_UP_METRICS_MAX)
		u.n = LG_UP_METRICS_MAX;
	if (u.nups > u.n)
		u.nups = u.n;
	for (uint32_t i = 0; i < u.nups; i++)
		names[i] = reg->upstreams[i].name;
	for (uint32_t k = 0; k < reg->nroutes; k++)
		if (reg->routes[k].bulkhead && u.nups + reg->routes[k].bulkhead - 1 < u.n)
			names[u.nups + reg->routes[k].bulkhead - 1] = reg->routes[k].path;
	if (metrics)
		return lg_up_render_metrics(b, &u, names, w->env->nloops);
	if (b->len < 2 || b->overflow)
		return -1;
	b->len -= 2; /* "}\n" */
	lg_buf_printf(b, ",");
	if (lg_up_render_status(b, &u, names, w->env->nloops) == -1)
		return -1;
	return lg_buf_printf(b, "}\n") < 0 || b->overflow ? -1 : 0;
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
	lg_conn_own_body(c, p);
	lg_buf_init(&b, p, w->render.cap);
	stats_names(w, &nm);
	r = metrics ? lg_metrics_render(&b, w->env->arena, &nm, lg_now_ns()) :
	    lg_status_render(&b, w->env->arena, &nm, lg_now_ns(), w->draining);
	if (r == 0 && metrics)
		r = lg_coal_render_metrics(&b, w->env->cache);
	if (r == 0 && metrics && w->env->cfg->cluster.redis[0])
		r = lg_cluster_render_metrics(&b, w->env->cache);
	if (r == 0 && metrics)
		r = lg_procstat_render(&b, w->env->arena, w->env->nloops);
	if (r == 0)
		r = upstream_render(w, &b, metrics);
	if (r == -1) {
		log_error("%s does not fit in %zu bytes", metrics ? "/metrics" : "/status",
		    w->render.cap);
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

/* Parses a decimal integer parameter in [min, max], or def when absent. */
static int
uint_param(const struct lg_http_req *r, const char *name, uint64_t def, uint64_t min,
    uint64_t max, uint64_t *out)
{
	size_t len;
	const char *v = lg_http_query_param(r, name, &len);
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

/* "routes":{"/ping":n,...}: requests that reached each handler, summed over every loop
 * worker's proc page, each path a JSON string (RFC 8259 section 7: a route path may hold '"'
 * or '\\'). Only the routes this server serves: the /test/ ones are in the registry whether
 * or not --enable-test-jobs is on (the router skips them when it is off). Returns the bytes
 * written to buf (at most cap - 1; a route that does not fit is left out whole). */
static size_t
route_hits_json(const struct lg_worker *w, const struct lg_arena *a, char *buf, size_t cap)
{
	struct lg_buf b;
	int first = 1;

	lg_buf_init(&b, buf, cap);
	for (unsigned i = 0; i < LG_WRT(w)->nroutes && i < a->stat_routes; i++) {
		const struct lg_route_def *def = &w->env->cfg->reg->routes[i];
		const char *path = def->path;
		size_t mark = b.len;
		uint64_t sum = 0;

		if (def->test_only && !w->env->cfg->enable_test_jobs)
			continue;
		for (uint32_t p = 0; p < a->nprocs; p++)
			if (a->procs[p].role == LG_ROLE_LOOP)
				sum += atomic_load(&lg_arena_route_stats(a, p, i)->hits);
		lg_buf_printf(&b, "%s\"", first ? "" : ",");
		first = 0;
		lg_buf_json_chars(&b, path, strlen(path));
		lg_buf_printf(&b, "\":%" PRIu64, sum);
		if (b.overflow) {
			b.len = mark;
			buf[mark] = '\0';
			break;
		}
	}
	return b.len;
}

static int
route_health(struct lg_conn *c)
{
	const struct lg_loop_env *env = c->w->env;
	struct lg_arena *a = env->arena;
	/* job slots open now: C + Q summed over the pools; in use: every valid token */
	uint32_t n[LG_SLOT_STATES], open = atomic_load(&a->master->compute_workers) +
	    atomic_load(&a->master->queue_capacity), used = lg_jobslot_in_use(&a->jobs, a);
	char body[4096], hits[3072];
	int len;

	lg_slot_census(a, n);
	route_hits_json(c->w, a, hits, sizeof(hits));
	/* "slots" are the job slots (admission), "transit_buffers" the bodies and results held. */
	len = snprintf(body, sizeof(body),
	    "{\"status\":\"ok\",\"worker\":%u,\"pid\":%d,\"connections\":%d,"
	    "\"slots\":{\"total\":%u,\"free\":%u,\"queued\":%u,\"running\":%u},"
	    "\"transit_buffers\":{\"total\":%u,\"free\":%u},\"routes\":{%s}}\n",
	    env->index, (int)atomic_load(&env->page->pid), c->w->nconns, open,
	    used < open ? open - used : 0, n[LG_SLOT_QUEUED], n[LG_SLOT_RUNNING], a->nslots,
	    n[LG_SLOT_FREE] + n[LG_SLOT_RECLAIMING], hits);
	return lg_conn_respond(c, 200, "application/json", NULL, body, (size_t)len);
}

/* 200 with Allow listing methods, and OPTIONS itself (RFC 9110 section 9.3.7); no body, so
 * Content-Length: 0. */
int
lg_inline_options_any(struct lg_conn *c, uint64_t methods)
{
	char list[320], allow[340];

	/* OPTIONS goes last, once, whether a route serves it or not */
	lg_http_methods_str(methods & ~LG_HTTP_METHOD_BIT(HTTP_OPTIONS), list, sizeof(list));
	snprintf(allow, sizeof(allow), "Allow: %s%sOPTIONS\r\n", list, list[0] ? ", " : "");
	return lg_conn_respond(c, 200, NULL, allow, NULL, 0);
}

static const struct {
	const char *name;
	int (*fn)(struct lg_conn *c);
} handlers[] = {
	{ "ping", route_ping }, { "health", route_health }, { "ready", route_ready },
	{ "metrics", route_metrics }, { "status", route_status }, { "test-block", route_test_block },
};

int (*lg_inline_handler(const char *name))(struct lg_conn *c)
{
	for (size_t k = 0; k < sizeof(handlers) / sizeof(handlers[0]); k++)
		if (strcmp(name, handlers[k].name) == 0)
			return handlers[k].fn;
	return NULL;
}
