#include "common/policy.h"
#include "common/value.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits a comma list into names[]; lower-cases them when lower. */
static int
names(const char *v, char out[][LG_POLICY_NAME], unsigned *n, int lower)
{
	*n = 0;
	while (*v) {
		const char *comma = strchr(v, ',');
		size_t len = comma ? (size_t)(comma - v) : strlen(v);

		if (len == 0 || len >= LG_POLICY_NAME || *n == LG_POLICY_NAMES)
			return -1;
		for (size_t i = 0; i < len; i++) {
			unsigned char ch = (unsigned char)v[i];
			if (ch <= ' ' || ch == '=' || ch == '&' || ch == ';')
				return -1;
			out[*n][i] = lower ? (char)tolower(ch) : (char)ch;
		}
		out[*n][len] = '\0';
		(*n)++;
		v += len + (comma != NULL);
	}
	return 0;
}

/* The one grammar (common/value.h): durations in ms up to a year, sizes with K/M/G. */
static int
ms(const char *v, uint64_t *out)
{
	return lg_value_duration_ms(v, 0, 86400000ull * 365, out, NULL, 0);
}

static int
bytes(const char *v, uint64_t *out)
{
	return lg_value_size(v, 0, LG_POLICY_BODY_MAX_MAX, out, NULL, 0);
}

static int
onoff(const char *v, int *out)
{
	return lg_value_bool(v, out, NULL, 0);
}

static int
set_coalesce(struct lg_policy *p, const char *v)
{
	return onoff(v, &p->coalesce);
}

static int
set_ttl(struct lg_policy *p, const char *v)
{
	return ms(v, &p->ttl_ms);
}

static int
set_stale(struct lg_policy *p, const char *v)
{
	return ms(v, &p->stale_ms);
}

static int
set_negative(struct lg_policy *p, const char *v)
{
	return ms(v, &p->negative_ttl_ms);
}

static int
set_query(struct lg_policy *p, const char *v)
{
	p->query_set = 1;
	return names(v, p->query, &p->nquery, 0);
}

static int
set_headers(struct lg_policy *p, const char *v)
{
	return names(v, p->headers, &p->nheaders, 1);
}

static int
set_credentials(struct lg_policy *p, const char *v)
{
	if (strcmp(v, "bypass") != 0 && strcmp(v, "key") != 0)
		return -1;
	p->credentials_in_key = strcmp(v, "key") == 0;
	return 0;
}

/* scope=local|cluster: a cluster key is shared across replicas through Redis (--redis,
 * worker/flight/cluster.c, docs/CACHE.md "Across replicas"); without --redis it is local. */
static int
set_scope(struct lg_policy *p, const char *v)
{
	if (strcmp(v, "local") != 0 && strcmp(v, "cluster") != 0)
		return -1;
	p->cluster = strcmp(v, "cluster") == 0;
	return 0;
}

/* path-share=PCT: a whole percent, 0 to 100. */
static int
set_path_share(struct lg_policy *p, const char *v)
{
	uint64_t pct;

	if (lg_value_uint(v, 0, 100, &pct, NULL, 0) == -1)
		return -1;
	p->path_share = (unsigned)pct;
	p->path_share_set = 1;
	return 0;
}

static int
set_body_max(struct lg_policy *p, const char *v)
{
	return bytes(v, &p->body_max);
}

/* Every setting of a rule, once: its word in a --coalesce rule, its key in a [route] section
 * (the route keys' underscore style, the unit in the name as deadline_ms has it), what a
 * bad value should have been. */
static const struct setting {
	const char *word, *key;
	int (*set)(struct lg_policy *p, const char *v);
	const char *expect;
} settings[] = {
	{ "coalesce", "coalesce", set_coalesce, "expected yes, no, true, false, on, off, 1 or 0" },
	{ "ttl", "ttl_ms", set_ttl, "expected a whole number of milliseconds" },
	{ "stale", "stale_ms", set_stale, "expected a whole number of milliseconds" },
	{ "negative-ttl", "negative_ttl_ms", set_negative,
	    "expected a whole number of milliseconds" },
	{ "query", "key_query", set_query, "expected at most 8 query parameter names, ',' "
	    "separated, each under 32 bytes" },
	{ "headers", "key_headers", set_headers, "expected at most 8 header names, ',' "
	    "separated, each under 32 bytes" },
	{ "credentials", "credentials", set_credentials, "expected bypass or key" },
	{ "body-max", "key_body_max", set_body_max, "expected bytes (K, M or G suffix), at most 64M" },
	{ "scope", "scope", set_scope, "expected local or cluster" },
	{ "path-share", "path_share", set_path_share,
	    "expected a whole percent of the cache's entries, 0 (no bound) to 100" },
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* One "word=value" of a rule applied to p: the index of its setting, or -1 (no '=', an
 * unknown word, a bad value). */
static int
setting(struct lg_policy *p, char *kv)
{
	char *eq = strchr(kv, '=');

	if (eq == NULL)
		return -1;
	*eq = '\0';
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(kv, settings[i].word) == 0)
			return settings[i].set(p, eq + 1) == 0 ? (int)i : -1;
	return -1;
}

void
lg_policy_init(struct lg_policy *p, const char *path)
{
	memset(p, 0, sizeof(*p));
	p->coalesce = 1;
	p->body_max = LG_POLICY_BODY_MAX;
	snprintf(p->path, sizeof(p->path), "%s", path);
}

int
lg_policy_is_route_key(const char *key)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(key, settings[i].key) == 0)
			return 1;
	return 0;
}

int
lg_policy_route_key(struct lg_policy *p, const char *key, const char *value, const char **why)
{
	char v[512];

	for (size_t i = 0; i < NSETTINGS; i++) {
		if (strcmp(key, settings[i].key) != 0)
			continue;
		*why = settings[i].expect;
		/* a list may be written "a, b" in a file */
		size_t n = 0;
		for (const char *s = value; *s && n < sizeof(v) - 1; s++)
			if (*s != ' ' && *s != '\t')
				v[n++] = *s;
		v[n] = '\0';
		return strlen(value) < sizeof(v) && settings[i].set(p, v) == 0 ? 1 : -1;
	}
	return 0;
}

/* One rule "PATH k=v ..." (modified in place). */
static int
rule(struct lg_policy *p, char *s, char *err, size_t errcap)
{
	char *save = NULL, *tok = strtok_r(s, " \t", &save);
	unsigned seen = 0; /* bit i: settings[i] given */

	if (tok == NULL || tok[0] != '/' || strlen(tok) >= sizeof(p->path)) {
		snprintf(err, errcap, "rule \"%s\": must start with a route path", tok ? tok : "");
		return -1;
	}
	lg_policy_init(p, tok);
	while ((tok = strtok_r(NULL, " \t", &save)) != NULL) {
		char copy[128];
		int i;

		snprintf(copy, sizeof(copy), "%s", tok);
		if ((i = setting(p, tok)) == -1) {
			snprintf(err, errcap, "rule %s: bad setting \"%s\"", p->path, copy);
			return -1;
		}
		if (seen & (1u << i)) { /* as a file key: given once, never the last one winning */
			snprintf(err, errcap, "rule %s: \"%s\" given twice", p->path, tok);
			return -1;
		}
		seen |= 1u << i;
	}
	return 0;
}

int
lg_policy_parse(const char *spec, struct lg_policies *out, char *err, size_t errcap)
{
	char buf[2048], *save = NULL, *r;

	memset(out, 0, sizeof(*out));
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, errcap, "coalesce rules longer than %zu bytes", sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, spec);
	for (r = strtok_r(buf, ";", &save); r != NULL; r = strtok_r(NULL, ";", &save)) {
		if (strspn(r, " \t\n") == strlen(r))
			continue;
		if (out->n == LG_POLICY_MAX) {
			snprintf(err, errcap, "more than %d coalesce rules", LG_POLICY_MAX);
			return -1;
		}
		if (rule(&out->p[out->n], r, err, errcap) == -1)
			return -1;
		if (lg_policy_find(out, out->p[out->n].path, strlen(out->p[out->n].path))) {
			snprintf(err, errcap, "rule %s given twice", out->p[out->n].path);
			return -1;
		}
		out->n++;
	}
	return 0;
}

int
lg_policy_add_name(struct lg_policy *p, int header, const char *name, size_t len)
{
	char (*list)[LG_POLICY_NAME] = header ? p->headers : p->query;
	unsigned *n = header ? &p->nheaders : &p->nquery;
	char v[LG_POLICY_NAME];

	if (len == 0 || len >= LG_POLICY_NAME)
		return -1;
	for (size_t i = 0; i < len; i++)
		v[i] = header ? (char)tolower((unsigned char)name[i]) : name[i];
	v[len] = '\0';
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(list[i], v) == 0)
			return 0;
	if (*n == LG_POLICY_KEY_NAMES)
		return -1;
	memcpy(list[(*n)++], v, len + 1);
	return 0;
}

/* Appends "sep" and the n names of list to buf (len bytes used of cap). */
static void
describe_list(char *buf, size_t cap, size_t *len, const char *what,
    const char (*list)[LG_POLICY_NAME], unsigned n)
{
	for (unsigned i = 0; i < n && *len < cap; i++) {
		int k = snprintf(buf + *len, cap - *len, "%s%s", i ? "," : what, list[i]);

		*len = k < 0 ? cap : *len + (size_t)k;
	}
}

void
lg_policy_describe(const struct lg_policy *p, char *buf, size_t cap)
{
	size_t len = 0;
	int k;

	if (cap == 0)
		return;
	buf[0] = '\0';
	k = snprintf(buf, cap, "method (HEAD as GET), path%s",
	    p->whole_query ? ", the whole query string" : "");
	len = k < 0 ? cap : (size_t)k;
	describe_list(buf, cap, &len, ", query ", p->query, p->nquery);
	describe_list(buf, cap, &len, ", headers ", p->headers, p->nheaders);
	if (p->whole_query && len < cap) /* an upstream route: GET and HEAD only */
		snprintf(buf + len, cap - len, "%s; other methods: not coalesced",
		    p->credentials_in_key ? ", authorization, proxy-authorization, cookie" :
		    "; authorization, proxy-authorization or cookie: bypass");
	else if (len < cap)
		snprintf(buf + len, cap - len, "%s; with a body or another method than GET: "
		    "content-type, content-encoding, body (up to %llu bytes, longer: bypass)",
		    p->credentials_in_key ? ", authorization, proxy-authorization, cookie" :
		    "; authorization, proxy-authorization or cookie: bypass",
		    (unsigned long long)p->body_max);
}

const struct lg_policy *
lg_policy_find(const struct lg_policies *ps, const char *path, size_t len)
{
	for (unsigned i = 0; i < ps->n; i++)
		if (strlen(ps->p[i].path) == len && memcmp(ps->p[i].path, path, len) == 0)
			return &ps->p[i];
	return NULL;
}
