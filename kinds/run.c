/* Running a registry's kinds in a process (kinds/registry.h): each module's init after fork
 * (its routes answered through host->route_at, a failure marked in the master page's module
 * row), the check before a job that its module may run here, the output a job's kind needs
 * backed, one job run, and the modules' exit. Used by the compute processes, the loop workers
 * (where=loop kinds) and --run-kind. */
#include "kinds/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "kinds/params.h"
#include "shm/layout.h"

#define UNBOUNDED_AHEAD (1u << 20) /* output backed beyond the input for a kind with no bound */

static int
has_loop_route(const struct lg_registry *r, uint32_t mod)
{
	for (uint32_t i = 0; i < r->nroutes; i++)
		if (r->routes[i].where == LAGLESS_WHERE_LOOP && r->routes[i].kind &&
		    r->kinds[r->routes[i].kind].module == mod)
			return 1;
	return 0;
}

_Static_assert(LG_MODULES_MAX <= LG_MODULE_HEALTH, "a health row for every module");

/* What host->route_at reads during module mod's init. */
struct init_routes {
	const struct lg_registry *r;
	uint32_t mod;
};

/* lg_host_routes_fn over the registry: the i-th route whose kind belongs to module ctx->mod. */
static int
module_route_at(const void *ctx, size_t i, const char **path, const char **kind,
    const struct lagless_conf **conf)
{
	const struct init_routes *ir = ctx;
	const struct lg_registry *r = ir->r;

	for (uint32_t n = 0; n < r->nroutes; n++) {
		const struct lg_route_def *d = &r->routes[n];
		const struct lg_kind *k = d->kind ? lg_registry_kind(r, d->kind) : NULL;

		if (k == NULL || k->module != ir->mod || i-- > 0)
			continue;
		*path = d->path;
		*kind = k->desc.name;
		*conf = &d->conf;
		return 0;
	}
	return -1;
}

/* Calls module mod's init with host->route_at answering its routes. Returns what init did. */
static int
call_init(struct lg_registry *r, uint32_t mod)
{
	struct lg_module *m = &r->modules[mod];
	struct init_routes ir = { r, mod };
	int rc;

	lg_host_set_module(m->name);
	lg_host_set_routes(module_route_at, &ir);
	rc = m->desc.init(&lg_host, &m->conf, &m->state);
	lg_host_set_routes(NULL, NULL);
	lg_host_set_module(NULL);
	return rc;
}

/* Runs module mod's init in this process, its index in *in_init meanwhile (a crash inside is
 * then the module's, not the process's: master/modprobe.c). A failure is marked in the shared
 * row (the process that marks it logs it, once); returns m->ready. */
static int
init_module(struct lg_registry *r, uint32_t mod, const struct lg_init_guard *g)
{
	struct lg_module *m = &r->modules[mod];
	struct lg_module_health *h = g && g->health ? &g->health[mod] : NULL;
	uint32_t ok = 0;

	m->state = NULL;
	if (g && g->in_init)
		atomic_store(g->in_init, mod + 1);
	m->ready = call_init(r, mod) == 0;
	if (g && g->in_init)
		atomic_store(g->in_init, 0);
	if (m->ready)
		return 1;
	if (h == NULL) {
		log_error("module %s: init failed; its jobs answer 500 in this process", m->name);
		return 0;
	}
	atomic_fetch_add(&h->failures, 1);
	atomic_store(&h->cause, 0);
	if (atomic_compare_exchange_strong(&h->failed, &ok, 1))
		log_error("module %s: init failed; its routes answer 503 until a retry of its init "
		    "succeeds", m->name);
	return 0;
}

void
lg_registry_init_process(struct lg_registry *r, int loop_only, const struct lg_init_guard *g)
{
	for (uint32_t i = 0; i < r->nmodules; i++) {
		struct lg_module *m = &r->modules[i];

		m->state = NULL;
		m->ready = m->desc.init == NULL;
		if (m->ready || (loop_only && !has_loop_route(r, i)))
			continue;
		if (g && g->health && atomic_load(&g->health[i].failed))
			continue; /* lg_registry_usable tries again once a probe succeeded */
		init_module(r, i, g);
	}
}

int
lg_registry_usable(struct lg_registry *r, uint32_t kind, const struct lg_init_guard *g)
{
	const struct lg_kind *k = lg_registry_kind(r, kind);
	struct lg_module *m;

	if (k == NULL)
		return 1; /* lg_registry_run refuses it */
	m = &r->modules[k->module];
	if (g && g->health && atomic_load(&g->health[k->module].failed))
		return 0;
	if (m->ready || g == NULL || g->health == NULL)
		return 1; /* not ready without shared health: lg_registry_run answers 500 */
	return init_module(r, k->module, g);
}

int
lg_registry_init_one(struct lg_registry *r, uint32_t mod)
{
	struct lg_module *m = &r->modules[mod];

	if (m->desc.init == NULL)
		return 0;
	return call_init(r, mod) == 0 ? 0 : -1;
}

uint32_t
lg_registry_module_of(const struct lg_registry *r, uint32_t kind)
{
	const struct lg_kind *k = lg_registry_kind(r, kind);

	return k ? k->module : UINT32_MAX;
}

void
lg_registry_exit_process(struct lg_registry *r)
{
	for (uint32_t i = 0; i < r->nmodules; i++) {
		struct lg_module *m = &r->modules[i];

		if (m->desc.exit != NULL && m->ready) {
			lg_host_set_module(m->name);
			m->desc.exit(&lg_host, m->state);
			lg_host_set_module(NULL);
		}
	}
}

int
lg_registry_out_need(const struct lg_registry *r, uint32_t kind, uint32_t route,
    uint64_t in_len, uint64_t region_cap, uint64_t *need)
{
	const struct lg_kind *k = lg_registry_kind(r, kind);
	uint64_t n = 0;

	*need = region_cap;
	if (k == NULL || route >= r->nroutes || region_cap <= LG_OUT_META)
		return 0; /* lg_registry_run refuses it */
	if (k->desc.output_size != NULL)
		n = k->desc.output_size(in_len, &r->routes[route].conf);
	else
		n = k->desc.max_output;
	if (n == 0) {
		/* No bound: back as much as the input plus a window (backing the whole region for
		 * every job, then the master punching it out again, cost milliseconds per job); the
		 * rest is faulted in if written, in this compute process only. */
		uint64_t guess = in_len + UNBOUNDED_AHEAD;

		*need = guess < region_cap - LG_OUT_META ? LG_OUT_META + guess : region_cap;
		return 0;
	}
	if (n > region_cap - LG_OUT_META)
		return -1;
	*need = LG_OUT_META + n;
	return 0;
}

/* Makes the kind's query struct at the top of the output region (16-byte aligned, below
 * region + *cap, which shrinks by it) for rq->query_args: the loop's parse of the request's
 * query, copied from the job's input region (args_off; its strings stay there); or, when the
 * loop could not keep it beside the view (a view and arguments over the slot's kept bytes, or a
 * coalesced job claimed after another request's parse), parsed here from the view's raw query.
 * Returns 0 (*args NULL when the kind has no query struct), or an lg_job_status: TOO_LARGE when
 * the struct does not fit, BAD_INPUT (the reason in the metadata's message) when an argument
 * does not parse, ERROR for a record whose arguments do not hold together. */
static int
query_args(const struct lg_kind *k, const struct lg_job *j, const struct lg_view *v,
    const unsigned char *in, unsigned char *region, size_t *cap, const void **args)
{
	size_t need = k->query_size + (j->args_off ? 0 : v->query_len + k->nqparams + 1);
	unsigned char *p;
	uint32_t fault;

	*args = NULL;
	if (k->query_size == 0)
		return 0;
	if (need > *cap - LG_OUT_META)
		return LG_JOB_TOO_LARGE;
	p = (unsigned char *)(((uintptr_t)(region + *cap) - need) & ~(uintptr_t)15);
	if (p < region + LG_OUT_META)
		return LG_JOB_TOO_LARGE;
	*cap = (size_t)(p - region);
	if (j->args_off != 0) {
		const unsigned char *a = in + j->args_off;

		if (j->args_len < k->query_size)
			return LG_JOB_ERROR;
		memcpy(p, a, k->query_size);
		if (lg_params_query_pack(k->qparams, k->nqparams, p,
		    (const char *)a + k->query_size, j->args_len - k->query_size, 0) == -1)
			return LG_JOB_ERROR;
	} else if (lg_params_parse_query(k->qparams, k->nqparams, v->query, v->query_len, p,
	    k->query_size, (char *)p + k->query_size, need - k->query_size, &fault) == -1) {
		struct lg_out_meta *meta = (struct lg_out_meta *)region;
		size_t n;

		lg_params_query_why(k->qparams, k->nqparams, fault, meta->msg, sizeof(meta->msg) - 1);
		n = strlen(meta->msg);
		meta->msg[n] = '\n';
		meta->msg_len = (uint32_t)n + 1;
		return LG_JOB_BAD_INPUT;
	}
	*args = p;
	return 0;
}

int
lg_registry_run(const struct lg_registry *r, const struct lg_job *j, const unsigned char *in,
    uint64_t in_cap, unsigned char *out, uint64_t out_cap, uint64_t start_ns, int test_jobs,
    uint64_t *out_len)
{
	const struct lg_kind *k = lg_registry_kind(r, j->kind);
	const struct lg_module *m;
	const struct lg_route_def *d;
	struct lagless_request rq;
	struct lg_view v;
	size_t cap = out_cap;
	int st;

	*out_len = 0;
	if (out_cap < LG_OUT_META + 1)
		return LG_JOB_ERROR;
	memset(out, 0, sizeof(struct lg_out_meta));
	if (k == NULL || j->route >= r->nroutes || r->routes[j->route].kind != j->kind) {
		log_warn("job names kind %u on route %u, which do not match", j->kind, j->route);
		return LG_JOB_ERROR;
	}
	m = &r->modules[k->module];
	d = &r->routes[j->route];
	if (m->test_only && !test_jobs)
		return LG_JOB_BAD_INPUT;
	if (lg_view_decode(in, in_cap, &v) == -1 || v.len > j->body_off || j->body_off > in_cap ||
	    j->in_len > in_cap - j->body_off) {
		log_warn("job of kind %s has a malformed request view", k->name);
		return LG_JOB_ERROR;
	}
	if (!m->ready)
		return LG_JOB_ERROR;
	lg_host_request(&rq, &v, in + j->body_off, j->in_len);
	rq.conf = &d->conf;
	rq.state = m->state;
	rq.kind_data = k->desc.data;
	rq.deadline_ns = j->deadline_ns;
	rq.enqueue_ns = j->enqueue_ns;
	rq.start_ns = start_ns;
	rq.route = d->kconf;
	if ((st = query_args(k, j, &v, in, out, &cap, &rq.query_args)) != 0)
		return st;
	return lg_host_call(k->desc.run, m->name, &rq, out, cap, out_len);
}
