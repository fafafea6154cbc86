#include "kinds/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shm/layout.h"
#include "kinds/builtin.h"
#include "kinds/params.h"
#include "kinds/testjobs.h"

/* The modules compiled into lagless, registered before any loaded one, with the query
 * parameters of their kinds. */
static const struct {
	const struct lagless_module *m;
	const struct lg_kind_query *query;
} builtin[] = { { &lg_builtin_module, lg_builtin_query }, { &lg_test_module, lg_test_query } };
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))

/* Sizes of the descriptors of ABI 1.0: the least a module may hand over. */
#define UNBOUNDED_AHEAD (1u << 20) /* output backed beyond the input for a kind with no bound */
#define MODULE_SIZE_1_0 (offsetof(struct lagless_module, exit) + sizeof(void (*)(void)))
#define KIND_SIZE_1_0   (offsetof(struct lagless_kind, data) + sizeof(const void *))
#define PARAM_SIZE_1_1  sizeof(struct lagless_param) /* the first struct lagless_param */
#define PARAM_SIZE_MAX  1024u
#define PARAMS_MAX      64u   /* declared parameters of one kind, each list */
#define QUERY_SIZE_MAX  4096u /* bytes of a kind's query struct (ABI 1.2), parsed per run */
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(MODULE_SIZE_1_0 == 80 && KIND_SIZE_1_0 == 64, "the ABI 1.0 sizes (LP64)");
#endif

static int
grow(void **arr, uint32_t n, size_t elem)
{
	void *p = realloc(*arr, (n + 1) * elem);

	if (p == NULL)
		return -1;
	*arr = p;
	memset((char *)p + n * elem, 0, elem);
	return 0;
}

/* Gives kinds[first..] (a built-in module's) their query parameters from table q; a built-in
 * kind missing from it is a build error caught at start, never an unknown key. */
static int
builtin_query(struct lg_registry *r, uint32_t first, const struct lg_kind_query *q, char *err,
    size_t cap)
{
	for (uint32_t i = first; i < r->nkinds; i++) {
		size_t j = 0;

		while (q[j].kind != NULL && strcmp(q[j].kind, r->kinds[i].name) != 0)
			j++;
		if (q[j].kind == NULL && r->kinds[i].query != NULL)
			continue; /* it declares them (ABI 1.1) */
		if (q[j].kind == NULL) {
			snprintf(err, cap, "built-in kind %s does not say its query parameters "
			    "(kinds/builtin.h)", r->kinds[i].name);
			return -1;
		}
		r->kinds[i].query = q[j].query;
	}
	return 0;
}

int
lg_registry_init(struct lg_registry *r, char *err, size_t cap)
{
	memset(r, 0, sizeof(*r));
	if (grow((void **)&r->kinds, 0, sizeof(*r->kinds)) == -1) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	r->nkinds = 1;
	for (size_t i = 0; i < NBUILTIN; i++) {
		uint32_t first = r->nkinds;

		if (lg_registry_add_module(r, builtin[i].m, "", NULL, NULL, err, cap) == -1 ||
		    builtin_query(r, first, builtin[i].query, err, cap) == -1)
			return -1;
	}
	return 0;
}

/* The ABI checks of module.h, in the order a user can act on them. */
static int
check_abi(const struct lagless_module *m, const char *path, char *err, size_t cap)
{
	const char *file = path[0] ? path : "(built in)";

	if (m->magic != LAGLESS_MODULE_MAGIC) {
		snprintf(err, cap, "%s: not a lagless module (descriptor magic 0x%08x, expected "
		    "0x%08x)", file, m->magic, LAGLESS_MODULE_MAGIC);
		return -1;
	}
	if (m->abi_major != LAGLESS_ABI_MAJOR || m->abi_minor > LAGLESS_ABI_MINOR) {
		snprintf(err, cap, "%s: module compiled with module ABI %u.%u, lagless has ABI "
		    "%u.%u; rebuild it against this lagless's lagless/module.h", file, m->abi_major,
		    m->abi_minor, LAGLESS_ABI_MAJOR, LAGLESS_ABI_MINOR);
		return -1;
	}
	if (m->size < MODULE_SIZE_1_0 || m->kind_size < KIND_SIZE_1_0) {
		snprintf(err, cap, "%s: module descriptor of %u bytes (kinds %u), lagless expects at "
		    "least %zu (kinds %zu)", file, m->size, m->kind_size, (size_t)MODULE_SIZE_1_0,
		    (size_t)KIND_SIZE_1_0);
		return -1;
	}
	if (m->kind_size > LG_MODULE_KIND_SIZE_MAX || m->nkinds > LG_MODULE_NKINDS_MAX) {
		snprintf(err, cap, "%s: module descriptor says %u kinds of %u bytes; lagless takes "
		    "at most %u kinds of at most %u bytes", file, m->nkinds, m->kind_size,
		    LG_MODULE_NKINDS_MAX, LG_MODULE_KIND_SIZE_MAX);
		return -1;
	}
	if (m->signature == NULL || strcmp(m->signature, LAGLESS_SIGNATURE) != 0) {
		snprintf(err, cap, "%s: module built for signature \"%s\", lagless is \"%s\"", file,
		    m->signature ? m->signature : "(none)", LAGLESS_SIGNATURE);
		return -1;
	}
	if (!lg_params_name_ok(m->name, LG_NAME_MAX) || m->nkinds == 0 || m->kinds == NULL) {
		snprintf(err, cap, "%s: module name \"%s\" is not [a-z0-9_-]+ or it has no kinds",
		    file, m->name ? m->name : "(none)");
		return -1;
	}
	return 0;
}

static void
drop_params(struct lg_kind *k)
{
	free(k->qparams);
	free(k->rparams);
	free(k->qnames);
}

/* n declarations of stride bytes at src, copied to the host's struct (zero-extended) into
 * *dst and checked (kinds/params.h). */
static int
copy_params(const void *src, uint32_t n, uint32_t stride, int route, uint32_t route_size,
    struct lagless_param **dst, char *err, size_t cap)
{
	char why[200];

	if (src == NULL || n == 0)
		return 0;
	if (n > PARAMS_MAX || stride < PARAM_SIZE_1_1 || stride > PARAM_SIZE_MAX) {
		snprintf(err, cap, "declares %u parameters of %u bytes (at most %u of %zu..%u)", n,
		    stride, PARAMS_MAX, (size_t)PARAM_SIZE_1_1, PARAM_SIZE_MAX);
		return -1;
	}
	if ((*dst = calloc(n, sizeof(**dst))) == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < n; i++)
		memcpy(&(*dst)[i], (const char *)src + (size_t)i * stride,
		    stride < sizeof(**dst) ? stride : sizeof(**dst));
	if (lg_params_valid(*dst, n, route, route_size, why, sizeof(why)) == -1) {
		snprintf(err, cap, "%s %s", route ? "route key" : "query", why);
		return -1;
	}
	return 0;
}

/* The ABI 1.1 declarations of row's kind; its query names become row->query. */
static int
take_params(struct lg_kind *row, char *err, size_t cap)
{
	const struct lagless_kind *d = &row->desc;
	size_t len;

	if (d->query_size > QUERY_SIZE_MAX) {
		snprintf(err, cap, "query_size %u is over %u bytes", d->query_size, QUERY_SIZE_MAX);
		return -1;
	}
	/* with a query struct (ABI 1.2), each query argument's offset must hold its value */
	if (copy_params(d->query_params, d->nquery_params, d->param_size, d->query_size > 0,
	    d->query_size, &row->qparams, err, cap) == -1 || copy_params(d->route_params,
	    d->nroute_params, d->param_size, 1, d->route_size, &row->rparams, err, cap) == -1)
		return -1;
	row->query_size = d->query_size;
	row->nqparams = row->qparams ? d->nquery_params : 0;
	row->nrparams = row->rparams ? d->nroute_params : 0;
	row->route_size = d->route_params != NULL || d->route_size ? d->route_size : 0;
	if (row->qparams == NULL)
		return 0;
	len = (size_t)row->nqparams * LG_NAME_MAX;
	if ((row->qnames = malloc(len)) == NULL ||
	    lg_params_names(row->qparams, row->nqparams, row->qnames, len) == -1) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	row->query = row->qnames;
	return 0;
}

static int
add_kind(struct lg_registry *r, const struct lagless_kind *k, size_t ksize, uint32_t mod,
    char *err, size_t cap)
{
	const struct lg_module *m = &r->modules[mod];
	struct lg_kind row;
	char why[256];

	memset(&row, 0, sizeof(row));
	memcpy(&row.desc, k, ksize < sizeof(row.desc) ? ksize : sizeof(row.desc));
	if (!lg_params_name_ok(row.desc.name, LG_NAME_MAX) || row.desc.run == NULL) {
		snprintf(err, cap, "%s: module %s has a kind without a valid name or run function",
		    m->path[0] ? m->path : "(built in)", m->name);
		return -1;
	}
	if (take_params(&row, why, sizeof(why)) == -1) {
		drop_params(&row);
		snprintf(err, cap, "%s: module %s, kind %s: %s", m->path[0] ? m->path : "(built in)",
		    m->name, row.desc.name, why);
		return -1;
	}
	if (m->handle == NULL)
		snprintf(row.name, sizeof(row.name), "%s", row.desc.name);
	else
		snprintf(row.name, sizeof(row.name), "%s.%s", m->name, row.desc.name);
	if (lg_registry_find(r, row.name) != NULL) {
		drop_params(&row);
		snprintf(err, cap, "%s: kind %s of module %s clashes with a kind already registered",
		    m->path[0] ? m->path : "(built in)", row.name, m->name);
		return -1;
	}
	if (grow((void **)&r->kinds, r->nkinds, sizeof(*r->kinds)) == -1) {
		drop_params(&row);
		snprintf(err, cap, "out of memory");
		return -1;
	}
	row.module = mod;
	row.id = r->nkinds;
	r->kinds[r->nkinds++] = row;
	return 0;
}

int lg_registry_skip_hooks;

static int
drop_conf(const struct lagless_conf *conf)
{
	if (conf != NULL)
		free((void *)conf->kv);
	return -1;
}

/* A check hook's refusal why, formatted into err after prefix: when why begins with one of
 * conf's keys ("check_timeout_ms: ...", "callable = ..."), that key's line is named as the
 * declared keys' errors name it ("line 3: key check_timeout_ms: ..."). */
static void
check_refused(const struct lagless_conf *conf, const char *prefix, const char *why, char *err,
    size_t cap)
{
	for (unsigned i = 0; conf != NULL && why[0] && i < conf->n; i++) {
		size_t n = strlen(conf->kv[i].key);

		if (strncmp(why, conf->kv[i].key, n) == 0 && (why[n] == ':' || why[n] == ' ')) {
			snprintf(err, cap, "%sline %d: key %s", prefix, conf->kv[i].line, why);
			return;
		}
	}
	snprintf(err, cap, "%s%s", prefix, why[0] ? why : "configuration refused");
}

int
lg_registry_add_module(struct lg_registry *r, const struct lagless_module *m,
    const char *path, void *handle, const struct lagless_conf *conf, char *err, size_t cap)
{
	struct lg_module *row;
	char why[256] = "";
	uint32_t idx = r->nmodules;

	if (check_abi(m, path, err, cap) == -1)
		return drop_conf(conf);
	for (uint32_t i = 0; i < r->nmodules; i++)
		if (strcmp(r->modules[i].name, m->name) == 0) {
			snprintf(err, cap, "%s: module name %s is already loaded", path, m->name);
			return drop_conf(conf);
		}
	if (r->nmodules >= LG_MODULES_MAX) {
		snprintf(err, cap, "%s: more than %u modules (the built-in ones included)", path,
		    LG_MODULES_MAX);
		return drop_conf(conf);
	}
	if (grow((void **)&r->modules, r->nmodules, sizeof(*r->modules)) == -1) {
		snprintf(err, cap, "out of memory");
		return drop_conf(conf);
	}
	row = &r->modules[idx];
	memcpy(&row->desc, m, m->size < sizeof(row->desc) ? m->size : sizeof(row->desc));
	snprintf(row->name, sizeof(row->name), "%s", m->name);
	snprintf(row->version, sizeof(row->version), "%s", m->version ? m->version : "");
	snprintf(row->path, sizeof(row->path), "%s", path);
	row->handle = handle;
	row->test_only = m == &lg_test_module;
	if (conf != NULL)
		row->conf = *conf;
	r->nmodules++;
	for (uint32_t i = 0; i < m->nkinds; i++)
		if (add_kind(r, (const struct lagless_kind *)(const void *)((const char *)m->kinds +
		    (size_t)i * m->kind_size), m->kind_size, idx, err, cap) == -1)
			return -1;
	lg_host_set_module(row->name);
	int bad = row->desc.check != NULL && !lg_registry_skip_hooks &&
	    row->desc.check(&lg_host, &row->conf, why, sizeof(why)) != 0;
	lg_host_set_module(NULL);
	if (bad) {
		char prefix[LG_NAME_MAX + 16];

		snprintf(prefix, sizeof(prefix), "module %s: ", row->name);
		check_refused(&row->conf, prefix, why, err, cap);
		return -1;
	}
	return 0;
}

void
lg_registry_free(struct lg_registry *r)
{
	if (r == NULL)
		return;
	for (uint32_t i = 0; i < r->nmodules; i++)
		free((void *)r->modules[i].conf.kv);
	for (uint32_t i = 0; i < r->nroutes; i++) {
		free((void *)r->routes[i].conf.kv);
		free(r->routes[i].kconf);
	}
	for (uint32_t i = 1; i < r->nkinds; i++)
		drop_params(&r->kinds[i]);
	free(r->modules);
	free(r->kinds);
	free(r->routes);
	free(r->upstreams);
	if (r->src_free != NULL)
		r->src_free(r->src);
	free(r);
}

const struct lg_kind *
lg_registry_find(const struct lg_registry *r, const char *name)
{
	for (uint32_t i = 1; i < r->nkinds; i++)
		if (strcmp(r->kinds[i].name, name) == 0)
			return &r->kinds[i];
	return NULL;
}

const struct lg_kind *
lg_registry_kind(const struct lg_registry *r, uint32_t id)
{
	return id > 0 && id < r->nkinds ? &r->kinds[id] : NULL;
}

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
			check_refused(&rt->conf, prefix, why, err, cap);
			return -1;
		}
	} else if (rt->handler[0] == '\0' && (rt->upstream == 0 || rt->upstream > r->nupstreams)) {
		snprintf(err, cap, "route %s has neither a kind, a handler nor an upstream", rt->path);
		return -1;
	}
	if (grow((void **)&r->routes, r->nroutes, sizeof(*r->routes)) == -1) {
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

uint64_t
lg_registry_methods(const char *list)
{
	uint64_t set = lg_http_methods_parse(list);

	return set & LG_M_GET ? set | LG_M_HEAD : set;
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
			fprintf(f, "; coalesce %s, ttl_ms %llu, stale_ms %llu%s", rt->coal.coalesce ?
			    "on" : "off", (unsigned long long)rt->coal.ttl_ms,
			    (unsigned long long)rt->coal.stale_ms,
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

/* Runs module mod's init in this process, its index in *in_init meanwhile (a crash inside is
 * then the module's, not the process's: master/modprobe.c). A failure is marked in the shared
 * row (the process that marks it logs it, once); returns m->ready. */
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
