#include "kinds/params.h"

#include <stdio.h>
#include <string.h>

#include "common/query.h"
#include "common/value.h"

#define QVAL_MAX 256 /* bytes of a decoded query argument the check reads */

/* The value of one parameter, whatever its type. */
union pval {
	uint64_t u;
	int i;
	const char *s;
};

static uint64_t
upper(const struct lagless_param *p)
{
	return p->max ? p->max : UINT64_MAX;
}

static int
parse_enum(const struct lagless_param *p, const char *s, union pval *v, char *err, size_t cap)
{
	size_t len = 0;

	for (int i = 0; p->choices && p->choices[i]; i++)
		if (strcmp(p->choices[i], s) == 0) {
			v->i = i;
			return 0;
		}
	len = (size_t)snprintf(err, cap, "%s: expected one of", p->name);
	for (int i = 0; p->choices && p->choices[i] && len < cap; i++)
		len += (size_t)snprintf(err + len, cap - len, "%s %s", i ? "," : "", p->choices[i]);
	return -1;
}

/* s (NUL-terminated) as parameter p into *v. Returns 0, or -1 with "name: reason". */
static int
parse_one(const struct lagless_param *p, const char *s, union pval *v, char *err, size_t cap)
{
	char why[160] = "";
	int rc = -1;
	size_t len;

	switch (p->type) {
	case LAGLESS_PARAM_UINT:
		rc = lg_value_uint(s, p->min, upper(p), &v->u, why, sizeof(why));
		break;
	case LAGLESS_PARAM_SIZE:
		rc = lg_value_size(s, p->min, upper(p), &v->u, why, sizeof(why));
		break;
	case LAGLESS_PARAM_BOOL:
		rc = lg_value_bool(s, &v->i, why, sizeof(why));
		break;
	case LAGLESS_PARAM_STRING:
		len = strlen(s);
		rc = len >= p->min && len <= upper(p) ? 0 : -1;
		if (rc == 0)
			v->s = s;
		else
			snprintf(why, sizeof(why), "expected %llu to %llu bytes",
			    (unsigned long long)p->min, (unsigned long long)upper(p));
		break;
	case LAGLESS_PARAM_ENUM:
		return parse_enum(p, s, v, err, cap);
	default:
		snprintf(why, sizeof(why), "unknown parameter type %u", p->type);
	}
	if (rc == -1)
		snprintf(err, cap, "%s: %s", p->name, why);
	return rc;
}

int
lg_params_name_ok(const char *s, size_t max)
{
	size_t n = 0;

	if (s == NULL || *s == '\0')
		return 0;
	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' ||
		    s[n] == '-'))
			return 0;
	return n < max;
}

/* Bytes the value of p takes in a route struct. */
static size_t
width(const struct lagless_param *p)
{
	switch (p->type) {
	case LAGLESS_PARAM_UINT:
	case LAGLESS_PARAM_SIZE:
		return sizeof(uint64_t);
	case LAGLESS_PARAM_STRING:
		return sizeof(const char *);
	default:
		return sizeof(int);
	}
}

static int
valid_one(const struct lagless_param *p, const struct lagless_param *all, uint32_t i,
    int route, uint32_t route_size, char *err, size_t cap)
{
	union pval v;

	if (!lg_params_name_ok(p->name, 64)) {
		snprintf(err, cap, "parameter %u has no valid name ([a-z0-9_-]+)", i);
		return -1;
	}
	for (uint32_t j = 0; j < i; j++)
		if (strcmp(all[j].name, p->name) == 0) {
			snprintf(err, cap, "parameter %s is declared twice", p->name);
			return -1;
		}
	if (p->type < LAGLESS_PARAM_UINT || p->type > LAGLESS_PARAM_ENUM ||
	    (p->max != 0 && p->min > p->max) ||
	    (p->type == LAGLESS_PARAM_ENUM && (p->choices == NULL || p->choices[0] == NULL))) {
		snprintf(err, cap, "parameter %s: unknown type %u, min over max, or an enum "
		    "without choices", p->name, p->type);
		return -1;
	}
	if (route && (p->offset > route_size || width(p) > route_size - p->offset ||
	    p->offset % width(p) != 0)) {
		snprintf(err, cap, "parameter %s: offset %u does not hold its value in a %u-byte "
		    "route struct", p->name, p->offset, route_size);
		return -1;
	}
	if (p->def != NULL && parse_one(p, p->def, &v, err, cap) == -1)
		return -1; /* its own default is not of its grammar or range */
	return 0;
}

int
lg_params_valid(const struct lagless_param *p, uint32_t n, int route, uint32_t route_size,
    char *err, size_t cap)
{
	for (uint32_t i = 0; i < n; i++)
		if (valid_one(&p[i], p, i, route, route_size, err, cap) == -1)
			return -1;
	return 0;
}

static void
store(const struct lagless_param *p, const union pval *v, unsigned char *dst)
{
	if (p->type == LAGLESS_PARAM_UINT || p->type == LAGLESS_PARAM_SIZE)
		memcpy(dst + p->offset, &v->u, sizeof(v->u));
	else if (p->type == LAGLESS_PARAM_STRING)
		memcpy(dst + p->offset, &v->s, sizeof(v->s));
	else
		memcpy(dst + p->offset, &v->i, sizeof(v->i));
}

static int
declared(const struct lagless_param *p, uint32_t n, const char *key)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(p[i].name, key) == 0)
			return 1;
	return 0;
}

int
lg_params_parse_route(const struct lagless_param *p, uint32_t n,
    const struct lagless_conf *conf, void *dst, size_t size, int *line, char *err, size_t cap)
{
	unsigned nkv = conf ? conf->n : 0;

	*line = 0;
	memset(dst, 0, size);
	for (unsigned k = 0; k < nkv; k++)
		if (!declared(p, n, conf->kv[k].key)) {
			char names[512];

			*line = conf->kv[k].line;
			if (lg_params_names(p, n, names, sizeof(names)) == -1)
				snprintf(names, sizeof(names), "...");
			snprintf(err, cap, "%s: unknown key for this kind (it takes: %s)",
			    conf->kv[k].key, n ? names : "none");
			return -1;
		}
	for (uint32_t i = 0; i < n; i++) {
		union pval v = { 0 };
		const char *s = NULL;

		for (unsigned k = 0; k < nkv && s == NULL; k++)
			if (strcmp(conf->kv[k].key, p[i].name) == 0) {
				s = conf->kv[k].value;
				*line = conf->kv[k].line;
			}
		if (s == NULL)
			s = p[i].def; /* checked by lg_params_valid */
		if (s != NULL && parse_one(&p[i], s, &v, err, cap) == -1)
			return -1;
		*line = 0;
		store(&p[i], &v, dst);
	}
	return 0;
}

/* The decoded value of argument p of raw query q into strs + *used (NUL-terminated); NULL when
 * absent. *bad is set to the fault class (LG_QFAULT_*) of an argument that does not decode,
 * is longer than QVAL_MAX - 1 bytes decoded (a STRING of no maximum excepted), or holds a NUL. */
static const char *
query_value(const struct lagless_param *p, const char *q, size_t qlen, char *strs,
    size_t strcap, size_t *used, uint32_t *bad)
{
	size_t len;
	long dl;
	const char *raw = lg_query_param(q, qlen, p->name, &len);
	char *buf = strs + *used;
	int unbounded = p->type == LAGLESS_PARAM_STRING && p->max == 0;

	*bad = 0;
	if (raw == NULL)
		return NULL;
	if (*used >= strcap || (dl = lg_query_decode(raw, len, buf, strcap - *used - 1)) < 0 ||
	    (!unbounded && dl > QVAL_MAX - 1)) {
		*bad = LG_QFAULT_DECODE;
		return NULL;
	}
	if (memchr(buf, '\0', (size_t)dl) != NULL) {
		*bad = LG_QFAULT_NUL;
		return NULL;
	}
	buf[dl] = '\0';
	*used += (size_t)dl + 1;
	return buf;
}

int
lg_params_parse_query(const struct lagless_param *p, uint32_t n, const char *q,
    size_t qlen, void *dst, size_t size, char *strs, size_t strcap, uint32_t *fault)
{
	size_t used = 0;
	char why[8];

	*fault = 0;
	if (dst != NULL)
		memset(dst, 0, size);
	for (uint32_t i = 0; i < n; i++) {
		union pval v = { 0 };
		uint32_t bad;
		const char *s;

		if (dst == NULL && p[i].type == LAGLESS_PARAM_STRING && p[i].max == 0)
			continue; /* nothing to check, nothing to store */
		s = query_value(&p[i], q, qlen, strs, strcap, &used, &bad);
		if (bad) {
			*fault = i << 2 | bad;
			return -1;
		}
		if (s == NULL && dst == NULL)
			continue;
		if (s == NULL)
			s = p[i].def; /* checked by lg_params_valid */
		if (s != NULL && parse_one(&p[i], s, &v, why, sizeof(why)) == -1) {
			*fault = i << 2 | LG_QFAULT_RULE;
			return -1;
		}
		if (dst != NULL)
			store(&p[i], &v, dst);
	}
	return 0;
}

void
lg_params_query_why(const struct lagless_param *p, uint32_t n, uint32_t fault, char *err,
    size_t cap)
{
	uint32_t i = fault >> 2;
	union pval v;

	if (cap == 0)
		return;
	if (i >= n || (fault & 3) == 0) {
		snprintf(err, cap, "bad query argument");
		return;
	}
	if ((fault & 3) == LG_QFAULT_DECODE)
		snprintf(err, cap, "%s: not a valid or too long argument", p[i].name);
	else if ((fault & 3) == LG_QFAULT_NUL)
		snprintf(err, cap, "%s: contains a NUL byte", p[i].name);
	else if (p[i].type == LAGLESS_PARAM_STRING)
		snprintf(err, cap, "%s: expected %llu to %llu bytes", p[i].name,
		    (unsigned long long)p[i].min, (unsigned long long)upper(&p[i]));
	else if (parse_one(&p[i], "", &v, err, cap) == 0)
		snprintf(err, cap, "%s: refused", p[i].name); /* an enum with a choice "" */
}

static void
pack_one(const struct lagless_param *p, unsigned char *args, const char *strs, size_t len,
    int pack, int *bad)
{
	const char *s;
	uintptr_t off;

	memcpy(&s, args + p->offset, sizeof(s));
	if (pack) {
		off = s != NULL && s >= strs && s < strs + len ? (uintptr_t)(s - strs) + 1 : 0;
		memcpy(args + p->offset, &off, sizeof(off));
		return;
	}
	memcpy(&off, args + p->offset, sizeof(off));
	s = NULL;
	if (off != 0 && (off > len || memchr(strs + off - 1, '\0', len - (off - 1)) == NULL))
		*bad = 1;
	else if (off != 0)
		s = strs + off - 1;
	memcpy(args + p->offset, &s, sizeof(s));
}

int
lg_params_query_pack(const struct lagless_param *p, uint32_t n, void *args, const char *strs,
    size_t len, int pack)
{
	int bad = 0;

	for (uint32_t i = 0; i < n; i++)
		if (p[i].type == LAGLESS_PARAM_STRING)
			pack_one(&p[i], args, strs, len, pack, &bad);
	return bad ? -1 : 0;
}

int
lg_params_names(const struct lagless_param *p, uint32_t n, char *buf, size_t cap)
{
	size_t len = 0;

	if (cap == 0)
		return -1;
	buf[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		int w = snprintf(buf + len, cap - len, "%s%s", i ? "," : "", p[i].name);

		if (w < 0 || (size_t)w >= cap - len)
			return -1;
		len += (size_t)w;
	}
	return 0;
}
