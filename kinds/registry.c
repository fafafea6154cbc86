#include "kinds/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shm/layout.h"
#include "kinds/builtin.h"
#include "kinds/params.h"
#include "kinds/registry_int.h"
#include "kinds/testjobs.h"

/* The modules compiled into lagless, registered before any loaded one, with the query
 * parameters of their kinds. */
static const struct {
	const struct lagless_module *m;
	const struct lg_kind_query *query;
} builtin[] = { { &lg_builtin_module, lg_builtin_query }, { &lg_test_module, lg_test_query } };
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))

/* Sizes of the descriptors of ABI 1.0: the least a module may hand over. */
#define MODULE_SIZE_1_0 (offsetof(struct lagless_module, exit) + sizeof(void (*)(void)))
#define KIND_SIZE_1_0   (offsetof(struct lagless_kind, data) + sizeof(const void *))
#define PARAM_SIZE_1_1  sizeof(struct lagless_param) /* the first struct lagless_param */
#define PARAM_SIZE_MAX  1024u
#define PARAMS_MAX      64u   /* declared parameters of one kind, each list */
#define QUERY_SIZE_MAX  4096u /* bytes of a kind's query struct (ABI 1.2), parsed per request */
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(MODULE_SIZE_1_0 == 80 && KIND_SIZE_1_0 == 64, "the ABI 1.0 sizes (LP64)");
#endif

int
lg_registry_grow(void **arr, uint32_t n, size_t elem)
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
	if (lg_registry_grow((void **)&r->kinds, 0, sizeof(*r->kinds)) == -1) {
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
	if (lg_registry_grow((void **)&r->kinds, r->nkinds, sizeof(*r->kinds)) == -1) {
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
void
lg_registry_refused(const struct lagless_conf *conf, const char *prefix, const char *why, char *err,
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
	if (lg_registry_grow((void **)&r->modules, r->nmodules, sizeof(*r->modules)) == -1) {
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
		lg_registry_refused(&row->conf, prefix, why, err, cap);
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

uint64_t
lg_registry_methods(const char *list)
{
	uint64_t set = lg_http_methods_parse(list);

	return set & LG_M_GET ? set | LG_M_HEAD : set;
}
