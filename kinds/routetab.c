/* The registry's routes (kinds/registry.h): a route added with its kind's keys parsed and
 * checked, removed (`off = yes`), the routes served without configuration, and the routes table
 * lagless -t prints. The kinds they name are kinds/registry.c's; their jobs run in kinds/run.c. */
#include "kinds/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds/builtin.h"
#include "kinds/params.h"
#include "kinds/registry_int.h"

/* A kind's declared route keys (ABI 1.1), parsed once into a new route struct at rt->kconf,
 * then a built-in kind's rule between its keys (kinds/builtin.h). */
static int
route_keys(const struct lg_kind *k, const struct lg_route_def *rt, void **kconf, char *err,
    size_t cap)
{
	const char *key = NULL;
	char why[512];
	int line = 0;

	if (k->route_size == 0 && k->rparams == NULL)
		return 0;
	if ((*kconf = calloc(1, k->route_size ? k->route_size : 1)) == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (lg_params_parse_route(k->rparams, k->nrparams, &rt->conf, *kconf, k->route_size,
	    &line, why, sizeof(why)) == -1 ||
	    lg_builtin_route_check(&k->desc, *kconf, &key, why, sizeof(why)) == -1) {
		for (unsigned i = 0; key != NULL && i < rt->conf.n; i++)
			if (strcmp(rt->conf.kv[i].key, key) == 0)
				line = rt->conf.kv[i].line;
		free(*kconf);
		*kconf = NULL;
		if (line > 0)
			snprintf(err, cap, "route %s: kind %s: line %d: key %s", rt->path, k->name,
			    line, why);
		else
			snprintf(err, cap, "route %s: kind %s: key %s", rt->path, k->name, why);
		return -1;
	}
	return 0;
}

int
lg_registry_add_route(struct lg_registry *r, const struct lg_route_def *rt, char *err,
    size_t cap)
{
	const struct lg_kind *k = lg_registry_kind(r, rt->kind);
	char why[256] = "";
	void *kconf = NULL;

	for (uint32_t i = 0; i < r->nroutes; i++)
		if (strcmp(r->routes[i].path, rt->path) == 0 && r->routes[i].prefix == rt->prefix &&
		    (r->routes[i].methods & rt->methods)) {
			snprintf(err, cap, "route %s%s is declared twice", rt->path,
			    rt->prefix ? "*" : "");
			return -1;
		}
	if (k != NULL) {
		uint32_t allowed = k->desc.where ? k->desc.where : LAGLESS_WHERE_POOL;

		if (!(allowed & rt->where)) {
			snprintf(err, cap, "route %s: kind %s may not run where=%s", rt->path, k->name,
			    rt->where == LAGLESS_WHERE_LOOP ? "loop" : "pool");
			return -1;
		}
		if (route_keys(k, rt, &kconf, err, cap) == -1)
			return -1;
		lg_host_set_module(r->modules[k->module].name);
		int bad = k->desc.check != NULL && !lg_registry_skip_hooks &&
		    k->desc.check(&lg_host, &rt->conf, why, sizeof(why)) != 0;
		lg_host_set_module(NULL);
		if (bad) {
			char prefix[LG_PATH_MAX + 2 * LG_NAME_MAX + 16];

			free(kconf);
			snprintf(prefix, sizeof(prefix), "route %s: kind %s: ", rt->path, k->name);
			lg_registry_refused(&rt->conf, prefix, why, err, cap);
			return -1;
		}
	} else if (rt->handler[0] == '\0' && (rt->upstream == 0 || rt->upstream > r->nupstreams)) {
		snprintf(err, cap, "route %s has neither a kind, a handler nor an upstream", rt->path);
		return -1;
	}
	if (lg_registry_grow((void **)&r->routes, r->nroutes, sizeof(*r->routes)) == -1) {
		free(kconf);
		snprintf(err, cap, "out of memory");
		return -1;
	}
	r->routes[r->nroutes] = *rt;
	r->routes[r->nroutes++].kconf = kconf;
	return 0;
}

int
lg_registry_remove_route(struct lg_registry *r, const char *path)
{
	for (uint32_t i = 0; i < r->nroutes; i++)
		if (strcmp(r->routes[i].path, path) == 0) {
			free(r->routes[i].kconf);
			memmove(&r->routes[i], &r->routes[i + 1],
			    (r->nroutes - i - 1) * sizeof(*r->routes));
			r->nroutes--;
			return 0;
		}
	return -1;
}

/* The routes served without configuration: path, methods, handler or kind, test only. */
static const struct {
	const char *path;
	uint64_t methods;
	const char *handler, *kind;
	int test_only;
} defaults[] = {
	{ "/ping", LG_M_GET, "ping", NULL, 0 },
	{ "/health", LG_M_GET, "health", NULL, 0 },
	{ "/ready", LG_M_GET, "ready", NULL, 0 },
	{ "/metrics", LG_M_GET, "metrics", NULL, 0 },
	{ "/status", LG_M_GET, "status", NULL, 0 },
	{ "/heavy", LG_M_GET, NULL, "heavy", 0 },
	{ "/compress", LG_M_POST, NULL, "compress", 0 },
	{ "/decompress", LG_M_POST, NULL, "decompress", 0 },
	{ "/hash", LG_M_POST, NULL, "hash", 0 },
	{ "/verify", LG_M_POST, NULL, "verify", 0 },
	{ "/test/crash", LG_M_GET, NULL, "test-crash", 1 },
	{ "/test/spin", LG_M_GET, NULL, "test-spin", 1 },
	{ "/test/alloc", LG_M_GET, NULL, "test-alloc", 1 },
	{ "/test/sleep", LG_M_GET, NULL, "test-sleep", 1 },
	{ "/test/block", LG_M_GET, "test-block", NULL, 1 },
};

int
lg_registry_is_default(const char *path)
{
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (strcmp(defaults[i].path, path) == 0)
			return 1;
	return 0;
}

static int
routed(const struct lg_registry *r, const char *path)
{
	for (uint32_t i = 0; i < r->nroutes; i++)
		if (strcmp(r->routes[i].path, path) == 0)
			return 1;
	return 0;
}

int
lg_registry_default_routes(struct lg_registry *r, uint64_t deadline_ms, uint64_t max_body,
    int inline_heavy, char *err, size_t cap)
{
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		struct lg_route_def rt;
		const struct lg_kind *k = defaults[i].kind ? lg_registry_find(r, defaults[i].kind) :
		    NULL;

		if (routed(r, defaults[i].path) || (defaults[i].kind && k == NULL))
			continue; /* declared (or removed) by the configuration; or not built in */
		memset(&rt, 0, sizeof(rt));
		snprintf(rt.path, sizeof(rt.path), "%s", defaults[i].path);
		rt.methods = defaults[i].methods | (defaults[i].methods & LG_M_GET ? LG_M_HEAD : 0);
		if (defaults[i].handler)
			snprintf(rt.handler, sizeof(rt.handler), "%s", defaults[i].handler);
		rt.kind = k ? k->id : 0;
		rt.where = inline_heavy && k && strcmp(k->name, "heavy") == 0 ? LAGLESS_WHERE_LOOP :
		    LAGLESS_WHERE_POOL;
		rt.deadline_ms = deadline_ms;
		rt.max_body = max_body;
		rt.test_only = defaults[i].test_only;
		if (lg_registry_add_route(r, &rt, err, cap) == -1)
			return -1;
	}
	return 0;
}

void
lg_registry_print(const struct lg_registry *r, void *fp)
{
	FILE *f = fp;

	fprintf(f, "%-20s %-18s %-24s %-5s %11s %10s  %s\n", "route", "methods", "kind/handler",
	    "where", "deadline_ms", "max_body", "declared");
	for (uint32_t i = 0; i < r->nroutes; i++) {
		const struct lg_route_def *rt = &r->routes[i];
		const struct lg_kind *k = lg_registry_kind(r, rt->kind);
		char m[320], path[LG_PATH_MAX + 2];

		lg_http_methods_str(rt->methods, m, sizeof(m));
		snprintf(path, sizeof(path), "%s%s", rt->path, rt->prefix ? "*" : "");
		if (rt->upstream != 0 && rt->upstream <= r->nupstreams)
			fprintf(f, "%-20s %-18s upstream %-15s %-5s %11llu %10llu  ", path, m,
			    r->upstreams[rt->upstream - 1].name, "loop",
			    (unsigned long long)rt->deadline_ms, (unsigned long long)rt->max_body);
		else if (k != NULL)
			fprintf(f, "%-20s %-18s %-24s %-5s %11llu %10llu  ", path, m, k->name,
			    rt->where == LAGLESS_WHERE_LOOP ? "loop" : "pool",
			    (unsigned long long)rt->deadline_ms, (unsigned long long)rt->max_body);
		else
			fprintf(f, "%-20s %-18s %-24s %-5s %11s %10s  ", path, m, rt->handler, "loop",
			    "-", "-");
		if (rt->file[0])
			fprintf(f, "%s:%d%s", rt->file, rt->line, rt->test_only ? " (test)" : "");
		else
			fprintf(f, "default%s", rt->test_only ? " (test jobs only)" : "");
		if (rt->has_coal) /* its single-flight and cache rule (docs/CACHE.md) */
			fprintf(f, "; coalesce %s, ttl_ms %llu, stale_ms %llu, path_share %u%s",
			    rt->coal.coalesce ? "on" : "off", (unsigned long long)rt->coal.ttl_ms,
			    (unsigned long long)rt->coal.stale_ms, rt->coal.path_share,
			    rt->coal.cluster ? ", scope cluster" : "");
		fputc('\n', f);
		if (rt->has_coal) {
			char key[1024];

			lg_policy_describe(&rt->coal, key, sizeof(key));
			fprintf(f, "    key: %s\n", key);
		}
	}
	for (uint32_t i = 0; i < r->nmodules; i++)
		if (r->modules[i].handle != NULL)
			fprintf(f, "module %s %s from %s\n", r->modules[i].name, r->modules[i].version,
			    r->modules[i].path);
	lg_registry_print_upstreams(r, f);
}
