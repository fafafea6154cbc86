#include "master/site.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/value.h"
#include "kinds/registry.h"
#include "master/modules.h"
#include "master/site_up.h"

struct section {
	int route;                /* 1 route, 0 module, 2 upstream */
	char *name;               /* path or module name */
	const char *file;         /* the file it is in (one of lg_site_src's files) */
	int line;                 /* of its first key */
	struct lg_kv *kv;
	unsigned nkv;
};

struct lg_site_src {
	char **files;             /* the files read, in order; sections point at them */
	unsigned nfiles;
	struct section *secs;
	unsigned nsecs;
};

struct lg_site_src *
lg_site_new(const char *file)
{
	struct lg_site_src *s = calloc(1, sizeof(*s));

	if (s != NULL && lg_site_file(s, file) == -1) {
		lg_site_free(s);
		return NULL;
	}
	return s;
}

int
lg_site_file(struct lg_site_src *s, const char *file)
{
	char **files = realloc(s->files, (s->nfiles + 1) * sizeof(*files));

	if (files == NULL)
		return -1;
	s->files = files;
	if ((files[s->nfiles] = strdup(file)) == NULL)
		return -1;
	s->nfiles++;
	return 0;
}

void
lg_site_free(struct lg_site_src *s)
{
	if (s == NULL)
		return;
	for (unsigned i = 0; i < s->nsecs; i++) {
		for (unsigned j = 0; j < s->secs[i].nkv; j++) {
			free(s->secs[i].kv[j].key);
			free(s->secs[i].kv[j].value);
		}
		free(s->secs[i].kv);
		free(s->secs[i].name);
	}
	free(s->secs);
	for (unsigned i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	free(s);
}

static void
site_free(void *s)
{
	lg_site_free(s);
}

static struct section *
section_for(struct lg_site_src *s, int route, const char *name, int line)
{
	struct section *sec;

	const char *file = s->files[s->nfiles - 1];

	if (s->nsecs > 0 && s->secs[s->nsecs - 1].route == route &&
	    s->secs[s->nsecs - 1].file == file && strcmp(s->secs[s->nsecs - 1].name, name) == 0)
		return &s->secs[s->nsecs - 1];
	if ((sec = realloc(s->secs, (s->nsecs + 1) * sizeof(*sec))) == NULL)
		return NULL;
	s->secs = sec;
	sec = &s->secs[s->nsecs++];
	*sec = (struct section){ route, strdup(name), file, line, NULL, 0 };
	return sec->name ? sec : NULL;
}

/* A route path as the router can match it: '/' then visible ASCII without '?' or '#'. The
 * router compares it with the request path, which never holds a query, a fragment, a space or
 * a control byte, and the parser refuses non-ASCII targets (RFC 9112 section 3.2, RFC 3986
 * section 3.3), so a section naming such a path could never serve a request. */
static int
route_path_ok(const char *p)
{
	if (*p != '/')
		return 0;
	for (; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || *p == '?' || *p == '#')
			return 0;
	return 1;
}

/* Keys a and b are the same, '-' and '_' alike (stored keys hold '_'). */
static int
same_key(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_')))
			return 0;
	return *a == *b;
}

int
lg_site_collect(struct lg_site_src *s, const char *section, const char *key,
    const char *value, int line, char *why, size_t cap)
{
	int route = strncmp(section, "route ", 6) == 0 ? 1 :
	    strncmp(section, "upstream ", 9) == 0 ? 2 : 0;
	const char *name = section + (route == 1 ? 6 : route == 2 ? 9 : 7);
	struct section *sec;
	struct lg_kv *kv;

	if (!route && strncmp(section, "module ", 7) != 0)
		return 0;
	name += strspn(name, " \t");
	if (*name == '\0' || (route == 1 && !route_path_ok(name)) || strlen(name) >= LG_PATH_MAX) {
		snprintf(why, cap, "section [%s]: %s", section, route == 2 ? "an upstream needs a "
		    "name" : route ?
		    "a route path starts with '/' and holds no '?', '#', space, control or "
		    "non-ASCII byte (it is matched against the request path, without the query)" :
		    "a module needs a name");
		return -1;
	}
	if ((sec = section_for(s, route, name, line)) == NULL ||
	    (kv = realloc(sec->kv, (sec->nkv + 1) * sizeof(*kv))) == NULL) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	sec->kv = kv;
	for (unsigned i = 0; i < sec->nkv; i++)
		if (same_key(kv[i].key, key) && !(route == 2 && strcmp(key, "server") == 0)) {
			snprintf(why, cap, "key '%s' given twice for [%s] (line %d; a section is "
			    "declared once)", key, section, kv[i].line);
			return -1;
		}
	kv[sec->nkv] = (struct lg_kv){ strdup(key), strdup(value), line };
	for (char *c = kv[sec->nkv].key; c != NULL && *c; c++)
		if (*c == '-')
			*c = '_'; /* a file key may use '-' or '_' (README): kinds read '_' */
	if (kv[sec->nkv].key == NULL || kv[sec->nkv].value == NULL) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	sec->nkv++;
	return 1;
}

static int
fail_kv(char *err, size_t cap, const char *file, const struct lg_kv *kv, const char *why)
{
	snprintf(err, cap, "%s:%d: key '%s' = '%.*s%s': %s", file, kv->line, kv->key,
	    LG_CLIP(kv->value), why);
	return -1;
}

/* Moves the section's keys not in `own` (nor, for a route, a coalescing key) into conf (the
 * module's or kind's own keys). */
static int
split_conf(struct section *sec, const char *const *own, int route, struct lagless_conf *conf)
{
	struct lg_kv *rest = calloc(sec->nkv + 1, sizeof(*rest));
	unsigned n = 0;

	if (rest == NULL)
		return -1;
	for (unsigned i = 0; i < sec->nkv; i++) {
		int mine = 0;

		for (const char *const *o = own; *o; o++)
			mine |= strcmp(sec->kv[i].key, *o) == 0;
		mine |= route && lg_policy_is_route_key(sec->kv[i].key);
		if (!mine)
			rest[n++] = sec->kv[i];
	}
	*conf = (struct lagless_conf){ rest, n };
	return 0;
}

static int
load_module(struct lg_registry *r, const char *file, struct section *sec, char *err,
    size_t cap)
{
	static const char *const own[] = { "path", NULL };
	const struct lg_kv *path = NULL;
	struct lagless_conf conf;
	const struct lagless_module *desc;
	void *handle;
	uint64_t content;
	char why[512];

	for (unsigned i = 0; i < sec->nkv; i++)
		if (strcmp(sec->kv[i].key, "path") == 0)
			path = &sec->kv[i];
	if (path == NULL) {
		snprintf(err, cap, "%s:%d: module %s: no 'path' key (the .so file)", file, sec->line,
		    sec->name);
		return -1;
	}
	if (split_conf(sec, own, 0, &conf) == -1)
		return fail_kv(err, cap, file, path, "out of memory");
	if (lg_modules_open(path->value, &handle, &desc, &content, why, sizeof(why)) == -1) {
		free((void *)conf.kv); /* not the registry's yet */
		return fail_kv(err, cap, file, path, why);
	}
	/* From here the registry's row holds conf (even when the module is then refused). */
	if (lg_registry_add_module(r, desc, path->value, handle, &conf, why, sizeof(why)) == -1)
		return fail_kv(err, cap, file, path, why);
	r->modules[r->nmodules - 1].content = content;
	if (strcmp(desc->name, sec->name) != 0) {
		snprintf(why, sizeof(why), "the module calls itself '%s', so its section must be "
		    "[module %s], not [module %s]", desc->name, desc->name, sec->name);
		return fail_kv(err, cap, file, path, why);
	}
	return 0;
}

/* "content-type, x-user" into rt->fields (lower case). */
static int
parse_fields(const char *v, struct lg_route_def *rt)
{
	while (*v) {
		size_t n = strcspn(v, ", \t");

		if (n) {
			if (rt->nfields == LAGLESS_MAX_FIELDS || n >= LG_NAME_MAX)
				return -1;
			for (size_t i = 0; i < n; i++) {
				char ch = v[i];

				if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
					return -1;
				rt->fields[rt->nfields][i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
			}
			rt->nfields++;
		}
		v += n;
		v += strspn(v, ", \t");
	}
	return 0;
}

/* The route keys the host reads itself, one setter each (as master/optset.c for the
 * server's): 0 taken, -1 bad with *why. A route's numbers, sizes and booleans are the one
 * grammar of common/value.h; *why may point at msg (the master reads on one thread). */
struct route_in {
	const struct lg_registry *r;
	struct lg_route_def *rt;
	const struct lg_config *cfg;
	int *off;
};

static char msg[160];

static int
key_methods(const struct route_in *in, const char *v, const char **why)
{
	*why = "expected a list of request methods such as GET, POST, OPTIONS (upper case)";
	return (in->rt->methods = lg_registry_methods(v)) ? 0 : -1;
}

/* Both in one [route]: the later key is refused (the handler was dropped in silence). */
#define KIND_OR_HANDLER "a route runs a kind (in a pool or on the loop), answers with a loop " \
	"handler or proxies to an upstream: kind =, handler = and upstream = exclude each other"

static int
key_kind(const struct route_in *in, const char *v, const char **why)
{
	const struct lg_kind *kind = lg_registry_find(in->r, v);

	if (in->rt->handler[0] || in->rt->upstream) {
		*why = KIND_OR_HANDLER;
		return -1;
	}
	*why = "unknown kind (lagless -t lists the routes; a module's kinds are module.kind)";
	if (kind == NULL)
		return -1;
	in->rt->kind = kind->id;
	return 0;
}

static int
key_handler(const struct route_in *in, const char *v, const char **why)
{
	static const char *const handlers[] = { "ping", "health", "ready", "metrics", "status",
	    NULL };

	if (in->rt->kind || in->rt->upstream) {
		*why = KIND_OR_HANDLER;
		return -1;
	}
	*why = "expected ping, health, ready, metrics or status";
	for (const char *const *h = handlers; *h; h++)
		if (strcmp(v, *h) == 0) {
			snprintf(in->rt->handler, sizeof(in->rt->handler), "%s", v);
			return 0;
		}
	return -1;
}

static int
key_upstream(const struct route_in *in, const char *v, const char **why)
{
	int i = lg_registry_find_upstream(in->r, v);

	*why = in->rt->kind || in->rt->handler[0] ? KIND_OR_HANDLER : "unknown upstream "
	    "(declare it with an [upstream NAME] section)";
	if (in->rt->kind || in->rt->handler[0] || i < 0)
		return -1;
	in->rt->upstream = (uint32_t)i + 1;
	return 0;
}

static int
key_where(const struct route_in *in, const char *v, const char **why)
{
	*why = "expected pool or loop";
	if (strcmp(v, "pool") && strcmp(v, "loop"))
		return -1;
	in->rt->where = strcmp(v, "loop") == 0 ? LAGLESS_WHERE_LOOP : LAGLESS_WHERE_POOL;
	return 0;
}

static int
key_deadline(const struct route_in *in, const char *v, const char **why)
{
	*why = msg;
	return lg_value_duration_ms(v, 1, 86400000, &in->rt->deadline_ms, msg, sizeof(msg));
}

static int
key_max_body(const struct route_in *in, const char *v, const char **why)
{
	*why = msg; /* at most the server's max-body */
	return lg_value_size(v, 0, in->cfg->http.max_body, &in->rt->max_body, msg, sizeof(msg));
}

static int
key_fields(const struct route_in *in, const char *v, const char **why)
{
	*why = "expected at most 16 header field names, ',' separated";
	return parse_fields(v, in->rt);
}

static int
key_ctype(const struct route_in *in, const char *v, const char **why)
{
	*why = "expected a media type of visible ASCII, under 128 bytes";
	if (strlen(v) >= sizeof(in->rt->ctype) || v[strspn(v, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~/;= \"")] != '\0')
		return -1;
	snprintf(in->rt->ctype, sizeof(in->rt->ctype), "%s", v);
	return 0;
}

static int
key_pool(const struct route_in *in, const char *v, const char **why)
{
	*why = "unknown pool (declare it with a [pool NAME] section)";
	for (int i = 0; i < in->cfg->jobs.npools; i++)
		if (strcmp(in->cfg->jobs.pools[i].name, v) == 0) {
			in->rt->pool = (uint32_t)i;
			in->rt->pool_named = 1;
			return 0;
		}
	return -1;
}

static int
key_off(const struct route_in *in, const char *v, const char **why)
{
	*why = msg;
	return lg_value_bool(v, in->off, msg, sizeof(msg));
}

static int
key_buffering(const struct route_in *in, const char *v, const char **why)
{
	*why = msg;
	return lg_value_bool(v, &in->rt->request_buffering, msg, sizeof(msg));
}

static int
key_bulkhead(const struct route_in *in, const char *v, const char **why, uint32_t *to,
    uint64_t lo)
{
	uint64_t x;

	*why = msg;
	if (lg_value_uint(v, lo, 65535, &x, msg, sizeof(msg)) == -1)
		return -1;
	*to = (uint32_t)x;
	return 0;
}

static int
key_max_conns(const struct route_in *in, const char *v, const char **why)
{
	return key_bulkhead(in, v, why, &in->rt->max_conns, 1);
}

static int
key_queue(const struct route_in *in, const char *v, const char **why)
{
	return key_bulkhead(in, v, why, &in->rt->queue, 0);
}

/* retry_on = none, or a space or comma list of connect-failure, 502 and 503 (HAProxy's
 * retry-on; worker/upstream/: what sends an idempotent request once to another server). */
static int
key_retry_on(const struct route_in *in, const char *v, const char **why)
{
	char buf[128], *save = NULL;
	uint32_t bits = 0;

	*why = "expected none, or a list of connect-failure, 502 and 503";
	if (strlen(v) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *t = strtok_r(buf, " ,\t", &save); t; t = strtok_r(NULL, " ,\t", &save)) {
		if (strcmp(t, "connect-failure") == 0)
			bits |= LG_RETRY_CONNECT;
		else if (strcmp(t, "502") == 0)
			bits |= LG_RETRY_502;
		else if (strcmp(t, "503") == 0)
			bits |= LG_RETRY_503;
		else if (strcmp(t, "none") != 0 || strcmp(v, "none") != 0)
			return -1;
	}
	in->rt->retry_on = bits;
	return 0;
}

static const struct {
	const char *key;
	int (*set)(const struct route_in *in, const char *v, const char **why);
} route_keys[] = {
	{ "methods", key_methods }, { "kind", key_kind }, { "handler", key_handler },
	{ "where", key_where }, { "deadline_ms", key_deadline }, { "max_body", key_max_body },
	{ "fields", key_fields }, { "content_type", key_ctype }, { "pool", key_pool },
	{ "off", key_off }, { "upstream", key_upstream },
	{ "request_buffering", key_buffering }, { "max_conns", key_max_conns },
	{ "queue", key_queue }, { "retry_on", key_retry_on },
};

/* One route key the host reads itself. Returns 1 (taken), 0 (a kind key), -1 (bad: why). */
static int
route_key(const struct lg_registry *r, const struct lg_kv *kv, struct lg_route_def *rt,
    const struct lg_config *cfg, int *off, const char **why)
{
	const struct route_in in = { r, rt, cfg, off };

	for (size_t i = 0; i < sizeof(route_keys) / sizeof(route_keys[0]); i++)
		if (strcmp(kv->key, route_keys[i].key) == 0)
			return route_keys[i].set(&in, kv->value, why) == 0 ? 1 : -1;
	return 0;
}

/* A route section's definition before its keys: the path (a trailing '*' makes it a prefix),
 * where it was declared, and the server-wide deadline and body limit. */
static void
route_init(struct lg_route_def *rt, const char *file, const struct section *sec,
    const struct lg_config *cfg)
{
	size_t plen = strlen(sec->name);

	memset(rt, 0, sizeof(*rt));
	rt->prefix = sec->name[plen - 1] == '*';
	snprintf(rt->path, sizeof(rt->path), "%.*s", (int)(plen - (size_t)rt->prefix), sec->name);
	snprintf(rt->file, sizeof(rt->file), "%s", file);
	rt->line = sec->line;
	rt->where = LAGLESS_WHERE_POOL;
	rt->deadline_ms = cfg->jobs.deadline_ms;
	rt->max_body = cfg->http.max_body;
	rt->retry_on = LG_RETRY_CONNECT; /* HAProxy's default: nothing was sent */
	lg_policy_init(&rt->coal, rt->path);
}

/* off = yes: removes the default route rt->path. Returns 0, or -1 with err (cap bytes) when rt
 * names no default route. */
static int
route_off(struct lg_registry *r, const char *file, const struct section *sec,
    const struct lg_route_def *rt, char *err, size_t cap)
{
	/* Nothing else can be removed: a mistyped path would otherwise remove nothing in
	 * silence. */
	if (rt->prefix || !lg_registry_is_default(rt->path))
		for (unsigned i = 0; i < sec->nkv; i++)
			if (strcmp(sec->kv[i].key, "off") == 0)
				return fail_kv(err, cap, file, &sec->kv[i], "off = yes removes a "
				    "default route, and this is none (lagless -t lists them)");
	lg_registry_remove_route(r, rt->path);
	return 0;
}

/* Refuses a key of sec that would do nothing: any beside off = yes (off), and a kind's keys on
 * a loop handler route (rt->kind 0). Returns 0, or -1 with err naming the key's line. */
static int
idle_key(const char *file, const struct section *sec, const struct lg_route_def *rt, int off,
    char *err, size_t cap)
{
	static const char *const kinds_own[] = { "where", "deadline_ms", "pool", "fields",
	    "content_type", NULL };

	for (unsigned i = 0; i < sec->nkv; i++) {
		if (off && strcmp(sec->kv[i].key, "off") != 0)
			return fail_kv(err, cap, file, &sec->kv[i], "off = yes removes the route: "
			    "its other keys would do nothing");
		if (!rt->upstream && strcmp(sec->kv[i].key, "request_buffering") == 0)
			return fail_kv(err, cap, file, &sec->kv[i], "request_buffering is an "
			    "upstream route's (a kind's body is always received whole)");
		if (!rt->upstream && (strcmp(sec->kv[i].key, "max_conns") == 0 ||
		    strcmp(sec->kv[i].key, "queue") == 0))
			return fail_kv(err, cap, file, &sec->kv[i], "max_conns and queue are an "
			    "upstream route's bulkhead (a kind's jobs are bounded by its pool)");
		if (!rt->upstream && strcmp(sec->kv[i].key, "retry_on") == 0)
			return fail_kv(err, cap, file, &sec->kv[i], "retry_on is an upstream "
			    "route's");
		for (const char *const *k = kinds_own; !off && rt->kind == 0 && *k; k++)
			if (strcmp(sec->kv[i].key, *k) == 0 && !(rt->upstream && k == kinds_own + 1))
				return fail_kv(err, cap, file, &sec->kv[i], "a loop handler route runs "
				    "no job (where, deadline_ms, pool, fields and content_type are a "
				    "kind's)");
	}
	return 0;
}

/* An upstream route's bulkhead (max_conns, queue) within its upstream's bounds: queue needs
 * max_conns and defaults to it. Returns 0, or -1 with err naming the key's line. */
static int
check_bulkhead(const struct lg_registry *r, const char *file, const struct section *sec,
    struct lg_route_def *rt, char *err, size_t cap)
{
	const struct lg_upstream_def *u;
	const struct lg_kv *mc = NULL, *q = NULL;

	for (unsigned i = 0; i < sec->nkv; i++) {
		if (strcmp(sec->kv[i].key, "max_conns") == 0)
			mc = &sec->kv[i];
		if (strcmp(sec->kv[i].key, "queue") == 0)
			q = &sec->kv[i];
	}
	if (!rt->upstream || (mc == NULL && q == NULL))
		return 0;
	u = &r->upstreams[rt->upstream - 1];
	if (mc == NULL)
		return fail_kv(err, cap, file, q, "a route's queue needs its max_conns (the "
		    "bulkhead's requests in flight)");
	if (rt->max_conns > u->max_conns) {
		snprintf(msg, sizeof(msg), "a route's max_conns is its share of upstream %s's (%u)",
		    u->name, u->max_conns);
		return fail_kv(err, cap, file, mc, msg);
	}
	if (q == NULL)
		rt->queue = rt->max_conns < u->queue ? rt->max_conns : u->queue;
	return 0;
}

/* An upstream route's rule (docs/CACHE.md "Proxied routes"): its key holds the whole query
 * string (the app's parameters are not declared) and no body (only GET and HEAD coalesce), so
 * key_query and key_body_max would do nothing and are refused. scope = cluster shares its stored
 * answers through Redis as a kind's (worker/flight/coalesce_up.c). Returns 0, or -1 with err. */
static int
upstream_rule(const char *file, const struct section *sec, struct lg_route_def *rt, char *err,
    size_t cap)
{
	for (unsigned i = 0; i < sec->nkv; i++) {
		if (strcmp(sec->kv[i].key, "key_query") == 0)
			return fail_kv(err, cap, file, &sec->kv[i], "an upstream route's key holds "
			    "the whole query string already (the app's parameters are not declared)");
		if (strcmp(sec->kv[i].key, "key_body_max") == 0)
			return fail_kv(err, cap, file, &sec->kv[i], "an upstream route coalesces GET "
			    "and HEAD only, which have no body to key");
	}
	rt->coal.whole_query = 1;
	if (!rt->coal.path_share_set) /* any query string a client sends is a key */
		rt->coal.path_share = LG_POLICY_PATH_SHARE_UP;
	return 0;
}

static int
add_route(struct lg_registry *r, const char *file, struct section *sec,
    const struct lg_config *cfg, char *err, size_t cap)
{
	static const char *const own[] = { "methods", "kind", "handler", "where", "deadline_ms",
	    "max_body", "fields", "content_type", "off", "pool", "upstream", "request_buffering",
	    "max_conns", "queue", "retry_on", NULL };
	struct lg_route_def rt;
	int off = 0;
	const struct lg_kv *coal = NULL; /* its first coalescing key */
	char why[400];

	route_init(&rt, file, sec, cfg);
	for (unsigned i = 0; i < sec->nkv; i++) {
		const char *w = "bad value";
		int taken = route_key(r, &sec->kv[i], &rt, cfg, &off, &w);

		if (taken == 0 && (taken = lg_policy_route_key(&rt.coal, sec->kv[i].key,
		    sec->kv[i].value, &w)) == 1 && coal == NULL)
			coal = &sec->kv[i];
		if (taken == -1)
			return fail_kv(err, cap, file, &sec->kv[i], w);
	}
	if (idle_key(file, sec, &rt, off, err, cap) == -1 ||
	    check_bulkhead(r, file, sec, &rt, err, cap) == -1)
		return -1;
	rt.has_coal = coal != NULL;
	rt.coal_line = coal ? coal->line : 0;
	if (coal != NULL && rt.upstream != 0 && upstream_rule(file, sec, &rt, err, cap) == -1)
		return -1;
	if (coal != NULL && rt.upstream == 0 && (rt.kind == 0 || rt.where == LAGLESS_WHERE_LOOP))
		return fail_kv(err, cap, file, coal, rt.kind == 0 ? "a loop handler does not "
		    "coalesce (only a route that runs a kind or proxies to an upstream does)" :
		    "a where = loop route does not coalesce (its job runs at once on the loop that "
		    "read it)");
	if (off)
		return route_off(r, file, sec, &rt, err, cap);
	if (rt.methods == 0)
		rt.methods = rt.upstream ? LG_M_UPSTREAM_DEFAULT : rt.kind ? LG_M_POST :
		    LG_M_GET | LG_M_HEAD;
	for (unsigned i = 0; rt.upstream && (rt.methods & LG_HTTP_METHOD_BIT(HTTP_CONNECT)) &&
	    i < sec->nkv; i++)
		if (strcmp(sec->kv[i].key, "methods") == 0) /* the request would reach the app
		                                              * as nothing (http/fwd.h) */
			return fail_kv(err, cap, file, &sec->kv[i], "CONNECT asks for a tunnel, "
			    "which an upstream route does not offer (RFC 9110 section 9.3.6)");
	if (split_conf(sec, own, 1, &rt.conf) == -1) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (rt.kind == 0 && rt.handler[0] == '\0' && rt.upstream == 0) {
		free((void *)rt.conf.kv);
		snprintf(err, cap, "%s:%d: route %s: needs kind =, handler = or upstream =", file,
		    sec->line, sec->name);
		return -1;
	}
	if (rt.kind == 0 && rt.conf.n > 0) {
		snprintf(err, cap, "%s:%d: key '%s': unknown key for a handler or upstream route", file,
		    rt.conf.kv[0].line, rt.conf.kv[0].key);
		free((void *)rt.conf.kv);
		return -1;
	}
	if (lg_registry_add_route(r, &rt, why, sizeof(why)) == -1) {
		free((void *)rt.conf.kv);
		snprintf(err, cap, "%s:%d: %s", file, sec->line, why);
		return -1;
	}
	return 0;
}

/* A pool's `routes` list (paths, space or comma separated) puts those routes in the pool. Every
 * path must be a route that runs a kind, named by one list ([pool default]'s too) and not for
 * another pool than its own pool = says: each would otherwise be decided in silence. */
static int
pool_routes(struct lg_registry *r, const struct lg_config *cfg, char *err, size_t cap)
{
	/* by[i]: 1 + the pool whose list named route i first, 0 none yet */
	int *by = calloc(r->nroutes ? r->nroutes : 1, sizeof(*by));

	if (by == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	for (int p = 0; p < cfg->jobs.npools; p++) {
		const char *v = cfg->jobs.pools[p].routes;

		for (v += strspn(v, ", \t"); *v != '\0'; v += strspn(v, ", \t")) {
			size_t n = strcspn(v, ", \t");
			uint32_t i;
			int bad = 1;

			for (i = 0; i < r->nroutes; i++)
				if (r->routes[i].kind != 0 && strlen(r->routes[i].path) == n &&
				    memcmp(r->routes[i].path, v, n) == 0)
					break;
			if (i == r->nroutes)
				snprintf(err, cap, "[pool %s] routes: '%.*s' is not a route that runs a "
				    "kind", cfg->jobs.pools[p].name, (int)n, v);
			else if (by[i] != 0 && by[i] != p + 1)
				snprintf(err, cap, "[pool %s] routes: '%.*s' is in [pool %s]'s routes too "
				    "(a route runs in one pool)", cfg->jobs.pools[p].name, (int)n, v,
				    cfg->jobs.pools[by[i] - 1].name);
			else if (r->routes[i].pool_named && r->routes[i].pool != (uint32_t)p)
				snprintf(err, cap, "[pool %s] routes: '%.*s' says pool = %s in its [route] "
				    "section (a route runs in one pool)", cfg->jobs.pools[p].name, (int)n, v,
				    cfg->jobs.pools[r->routes[i].pool].name);
			else
				bad = 0;
			if (bad) {
				free(by);
				return -1;
			}
			by[i] = p + 1;
			r->routes[i].pool = (uint32_t)p;
			v += n;
		}
	}
	free(by);
	return 0;
}

/* Gives the --coalesce rules (a flag, LAGLESS_COALESCE or the [lagless] coalesce key; checked
 * when read) to the routes they name: the rule's path is the route's (a prefix route's without
 * its '*'). A rule naming no route that runs a kind, or a route with coalescing keys of its own,
 * is refused: one route has one rule, from one place. where = loop routes do not coalesce and
 * keep no rule (docs/CACHE.md). */
static int
coalesce_rules(struct lg_registry *r, const struct lg_config *cfg, char *err, size_t cap)
{
	struct lg_policies ps;

	if (lg_policy_parse(cfg->flights.coalesce, &ps, err, cap) == -1)
		return -1;
	for (unsigned p = 0; p < ps.n; p++) {
		const char *path = ps.p[p].path;
		size_t n = strlen(path) - (path[strlen(path) - 1] == '*');
		int found = 0;

		for (uint32_t i = 0; i < r->nroutes; i++) {
			struct lg_route_def *d = &r->routes[i];

			if (d->kind == 0 || strlen(d->path) != n || memcmp(d->path, path, n) != 0)
				continue;
			found = 1;
			if (d->has_coal) {
				snprintf(err, cap, "coalesce rule %s: route %s has coalescing keys of its "
				    "own (%s:%d); give them in one place", path, d->path, d->file,
				    d->coal_line);
				return -1;
			}
			if (d->where == LAGLESS_WHERE_LOOP)
				continue;
			d->coal = ps.p[p];
			d->has_coal = 1;
		}
		if (!found) {
			snprintf(err, cap, "coalesce rule %s: no route of that path runs a kind "
			    "(lagless -t lists the routes)", path);
			return -1;
		}
	}
	return 0;
}

_Static_assert(LG_POLICY_KEY_NAMES >= LG_POLICY_NAMES + LAGLESS_MAX_FIELDS,
    "a rule's key holds its own names and every field of its route");

/* Where route d's rule came from, for an error: its section's first coalescing key, or the
 * --coalesce rule. */
static void
rule_origin(const struct lg_route_def *d, char *buf, size_t cap)
{
	if (d->coal_line > 0)
		snprintf(buf, cap, "%s:%d: route %s", d->file, d->coal_line, d->path);
	else
		snprintf(buf, cap, "coalesce rule %s", d->path);
}

/* Adds the comma list v (query parameters, or header fields when header) to p's key. */
static int
add_names(struct lg_policy *p, int header, const char *v)
{
	while (*v) {
		size_t n = strcspn(v, ",");

		if (n > 0 && lg_policy_add_name(p, header, v, n) == -1)
			return -1;
		v += n + (v[n] == ',');
	}
	return 0;
}

/* Checks route d's rule against its kind and completes its key (docs/CACHE.md). Only a kind
 * that declares its answer a function of the request (LAGLESS_KIND_CACHEABLE) may share one
 * run or a cached answer: sharing /hash gave two users one salt. The key takes every query
 * parameter the kind reads (its registry row; a loaded module's kinds cannot say theirs yet, so
 * its rule must list them) and every header field the route hands the kind, besides the
 * rule's own names: a parameter left out gave /compress?codec=gzip a zstd answer. */
static int
rule_key(const struct lg_registry *r, struct lg_route_def *d, char *err, size_t cap)
{
	const struct lg_kind *k = lg_registry_kind(r, d->kind);
	char where[2 * LG_PATH_MAX + 48];

	if (k == NULL)
		return 0;
	rule_origin(d, where, sizeof(where));
	if (!(k->desc.flags & LAGLESS_KIND_CACHEABLE)) {
		snprintf(err, cap, "%s: kind %s does not declare its answers cacheable "
		    "(LAGLESS_KIND_CACHEABLE): one request's answer may not be given to another "
		    "(a salted hash, a per-request value), so it cannot coalesce or be cached",
		    where, k->name);
		return -1;
	}
	if (k->query == NULL && !d->coal.query_set) {
		snprintf(err, cap, "%s: kind %s is a module's that does not declare its query "
		    "parameters (module ABI 1.1 query_params), so lagless cannot know them: name "
		    "every one it reads in the rule (key_query = a, b, or query=a,b; empty when it "
		    "reads none)", where, k->name);
		return -1;
	}
	int bad = k->query != NULL && add_names(&d->coal, 0, k->query) == -1;
	for (unsigned i = 0; !bad && i < d->nfields; i++)
		bad = lg_policy_add_name(&d->coal, 1, d->fields[i], strlen(d->fields[i])) == -1;
	if (bad) {
		snprintf(err, cap, "%s: the key of kind %s's parameters and the route's fields has "
		    "more than %d names", where, k->name, LG_POLICY_KEY_NAMES);
		return -1;
	}
	return 0;
}

static int
rule_keys(struct lg_registry *r, char *err, size_t cap)
{
	for (uint32_t i = 0; i < r->nroutes; i++)
		if (r->routes[i].has_coal && rule_key(r, &r->routes[i], err, cap) == -1)
			return -1;
	return 0;
}

/* A placeholder that keeps default route `path` from being added (build drops it after). */
static int
hold_off(struct lg_registry *r, const char *path, char *err, size_t cap)
{
	struct lg_route_def gone;

	for (uint32_t i = 0; i < r->nroutes; i++)
		if (strcmp(r->routes[i].path, path) == 0)
			return 0; /* declared: served as declared */
	memset(&gone, 0, sizeof(gone));
	snprintf(gone.path, sizeof(gone.path), "%s", path);
	snprintf(gone.handler, sizeof(gone.handler), "off");
	return lg_registry_add_route(r, &gone, err, cap);
}

/* The built-in kinds' default routes, which demo_routes = no leaves out: demonstrations,
 * and costly for anyone to call (a /hash is 19 MiB and 40 ms of CPU per request). */
static const char *const demo_paths[] = { "/heavy", "/compress", "/decompress", "/hash",
	"/verify" };

static int
build(struct lg_registry *r, struct lg_site_src *s, struct lg_config *cfg, char *err,
    size_t cap)
{
	for (unsigned i = 0; s && i < s->nsecs; i++)
		if (!s->secs[i].route && load_module(r, s->secs[i].file, &s->secs[i], err, cap) == -1)
			return -1;
	for (unsigned i = 0; s && i < s->nsecs; i++)
		if (s->secs[i].route == 2 && lg_site_upstream(r, s->secs[i].file, s->secs[i].name,
		    s->secs[i].line, s->secs[i].kv, s->secs[i].nkv, cfg->master.apps, err, cap) == -1)
			return -1;
	if (lg_site_up_check_apps(r, cfg->master.apps, err, cap) == -1)
		return -1;
	for (unsigned i = 0; s && i < s->nsecs; i++)
		if (s->secs[i].route == 1 && add_route(r, s->secs[i].file, &s->secs[i], cfg, err,
		    cap) == -1)
			return -1;
	/* A default route removed with off = yes stays removed: hold its path while the
	 * defaults are added, then drop the placeholder. */
	for (unsigned i = 0; s && i < s->nsecs; i++)
		for (unsigned j = 0; s->secs[i].route == 1 && j < s->secs[i].nkv; j++) {
			int off = 0;

			if (strcmp(s->secs[i].kv[j].key, "off") == 0 &&
			    lg_value_bool(s->secs[i].kv[j].value, &off, NULL, 0) == 0 && off &&
			    hold_off(r, s->secs[i].name, err, cap) == -1)
				return -1;
		}
	for (size_t i = 0; !cfg->demo_routes && i < sizeof(demo_paths) / sizeof(demo_paths[0]); i++)
		if (hold_off(r, demo_paths[i], err, cap) == -1)
			return -1;
	if (lg_registry_default_routes(r, cfg->jobs.deadline_ms, cfg->http.max_body, cfg->inline_heavy,
	    err, cap) == -1)
		return -1;
	for (uint32_t i = 0; i < r->nroutes;)
		if (strcmp(r->routes[i].handler, "off") == 0)
			memmove(&r->routes[i], &r->routes[i + 1],
			    (--r->nroutes - i) * sizeof(*r->routes));
		else
			i++;
	if (coalesce_rules(r, cfg, err, cap) == -1 || rule_keys(r, err, cap) == -1)
		return -1;
	return pool_routes(r, cfg, err, cap);
}

int
lg_site_build(struct lg_site_src *s, struct lg_config *cfg, char *err, size_t cap)
{
	struct lg_registry *r = calloc(1, sizeof(*r));

	cfg->reg = NULL;
	if (r == NULL) {
		snprintf(err, cap, "out of memory");
		lg_site_free(s);
		return -1;
	}
	if (lg_registry_init(r, err, cap) == -1 || build(r, s, cfg, err, cap) == -1) {
		r->src = s;
		r->src_free = site_free;
		lg_registry_free(r);
		return -1;
	}
	r->src = s;
	r->src_free = site_free;
	cfg->reg = r;
	return 0;
}
