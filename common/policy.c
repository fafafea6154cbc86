#include "common/policy.h"

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

static int
ms(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end || x > 86400000ull * 365)
		return -1;
	*out = x;
	return 0;
}

/* BYTES with an optional K or M suffix, at most LG_POLICY_BODY_MAX_MAX. */
static int
bytes(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;
	uint64_t mul = 1;

	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (*end == 'k' || *end == 'K')
		mul = 1u << 10, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1u << 20, end++;
	if (errno || *end || x > LG_POLICY_BODY_MAX_MAX / mul)
		return -1;
	*out = x * mul;
	return 0;
}

static int
onoff(const char *v, int *out)
{
	if (strcmp(v, "on") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "1") == 0)
		*out = 1;
	else if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0 || strcmp(v, "0") == 0)
		*out = 0;
	else
		return -1;
	return 0;
}

static int
setting(struct lg_policy *p, char *kv)
{
	char *eq = strchr(kv, '=');

	if (eq == NULL)
		return -1;
	*eq = '\0';
	const char *k = kv, *v = eq + 1;
	if (strcmp(k, "coalesce") == 0)
		return onoff(v, &p->coalesce);
	if (strcmp(k, "ttl") == 0)
		return ms(v, &p->ttl_ms);
	if (strcmp(k, "stale") == 0)
		return ms(v, &p->stale_ms);
	if (strcmp(k, "negative-ttl") == 0)
		return ms(v, &p->negative_ttl_ms);
	if (strcmp(k, "query") == 0)
		return names(v, p->query, &p->nquery, 0);
	if (strcmp(k, "headers") == 0)
		return names(v, p->headers, &p->nheaders, 1);
	if (strcmp(k, "body-max") == 0)
		return bytes(v, &p->body_max);
	if (strcmp(k, "credentials") == 0) {
		if (strcmp(v, "bypass") == 0)
			p->credentials_in_key = 0;
		else if (strcmp(v, "key") == 0)
			p->credentials_in_key = 1;
		else
			return -1;
		return 0;
	}
	return -1;
}

/* One rule "PATH k=v ..." (modified in place). */
static int
rule(struct lg_policy *p, char *s, char *err, size_t errcap)
{
	char *save = NULL, *tok = strtok_r(s, " \t", &save);

	memset(p, 0, sizeof(*p));
	p->coalesce = 1;
	p->body_max = LG_POLICY_BODY_MAX;
	if (tok == NULL || tok[0] != '/' || strlen(tok) >= sizeof(p->path)) {
		snprintf(err, errcap, "rule \"%s\": must start with a route path", tok ? tok : "");
		return -1;
	}
	strcpy(p->path, tok);
	while ((tok = strtok_r(NULL, " \t", &save)) != NULL) {
		char copy[128];

		snprintf(copy, sizeof(copy), "%s", tok);
		if (setting(p, tok) == -1) {
			snprintf(err, errcap, "rule %s: bad setting \"%s\"", p->path, copy);
			return -1;
		}
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

const struct lg_policy *
lg_policy_find(const struct lg_policies *ps, const char *path, size_t len)
{
	for (unsigned i = 0; i < ps->n; i++)
		if (strlen(ps->p[i].path) == len && memcmp(ps->p[i].path, path, len) == 0)
			return &ps->p[i];
	return NULL;
}
