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

int
lg_registry_run(const struct lg_registry *r, const struct lg_job_in *j, uint64_t *out_len)
{
	const struct lg_kind *k = lg_registry_kind(r, j->kind);
	const struct lg_module *m;
	struct lg_view v;

	*out_len = 0;
	if (j->out_cap < LG_OUT_META + 1)
		return LG_JOB_ERROR;
	memset(j->out, 0, sizeof(struct lg_out_meta));
	if (k == NULL || j->route >= r->nroutes || r->routes[j->route].kind != j->kind) {
		log_warn("job names kind %u on route %u, which do not match", j->kind, j->route);
		return LG_JOB_ERROR;
	}
	m = &r->modules[k->module];
	if (m->test_only && !j->test_jobs)
		return LG_JOB_BAD_INPUT;
	if (lg_view_decode(j->in, j->in_cap, &v) == -1 || v.len > j->in_cap ||
	    j->in_len > j->in_cap - v.len) {
		log_warn("job of kind %s has a malformed request view", k->name);
		return LG_JOB_ERROR;
	}
	if (!m->ready)
		return LG_JOB_ERROR;
	struct lg_run run = { k->desc.run, m->state, k->desc.data, m->name,
	    &r->routes[j->route].conf, &v, j->in + v.len, j->in_len, j->out, j->out_cap,
	    j->deadline_ns, j->enqueue_ns, j->start_ns, r->routes[j->route].kconf,
	    k->qparams, k->nqparams, k->query_size };
	return lg_host_run(&run, out_len);
}
