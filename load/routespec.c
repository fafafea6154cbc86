/* Route and URL arguments of lagless-load (load/routespec.h). */
#include "load/routespec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "load/err.h"
#include "load/units.h"

int
ll_routespec_size(const char *s, uint64_t *out)
{
	return ll_units_size(s, 1ull << 30, out);
}

static int
read_file(const char *path, struct ll_route *rt, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (f == NULL)
		return ll_fail(err, errlen, "body=@%s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    n > (1l << 30)) {
		fclose(f);
		return ll_fail(err, errlen, "body=@%s: not a regular file of at most 1G", path);
	}
	rt->body = malloc(n ? (size_t)n : 1);
	if (rt->body == NULL || fread(rt->body, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		return ll_fail(err, errlen, "body=@%s: cannot read", path);
	}
	fclose(f);
	rt->body_len = (size_t)n;
	return 0;
}

static int
random_body(const char *size, uint64_t seed, struct ll_route *rt, char *err, size_t errlen)
{
	uint64_t n, x = seed, i;

	if (ll_routespec_size(size, &n) == -1)
		return ll_fail(err, errlen, "body=random:%s: a size in bytes like 4096, 64K, 64KB or 1M"
		            " (at most 1G)",
		            size);
	rt->body = malloc(n ? n : 1);
	if (rt->body == NULL)
		return ll_fail(err, errlen, "body=random:%s: out of memory", size);
	for (i = 0; i < n; i++) {
		/* splitmix64, one byte per step: incompressible, reproducible from the seed */
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		rt->body[i] = (char)(z ^ (z >> 31));
	}
	rt->body_len = n;
	return 0;
}

int
ll_routespec_header(char **list, const char *h, char *err, size_t errlen)
{
	const char *colon = strchr(h, ':'), *v;
	size_t n, old = *list ? strlen(*list) : 0;
	char *nl;

	/* field-name = token (RFC 9110 section 5.1); no CR or LF in the value (section 5.5) */
	if (colon == NULL || colon == h ||
	    strspn(h, "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
	              "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != (size_t)(colon - h))
		return ll_fail(err, errlen, "header '%s': Name: value, the name a token (RFC 9110 5.1)",
		            h);
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	if (strpbrk(v, "\r\n") != NULL)
		return ll_fail(err, errlen, "header '%s': no CR or LF in the value", h);
	n = (size_t)(colon - h) + 2 + strlen(v) + 2;
	if ((nl = realloc(*list, old + n + 1)) == NULL)
		return ll_fail(err, errlen, "header '%s': out of memory", h);
	snprintf(nl + old, n + 1, "%.*s: %s\r\n", (int)(colon - h), h, v);
	*list = nl;
	return 0;
}

static int
option(const char *o, uint64_t seed, struct ll_route *rt, char *err, size_t errlen)
{
	size_t i;

	if (strcmp(o, "heavy") == 0)
		rt->heavy = 1;
	else if (strcmp(o, "cheap") == 0)
		rt->heavy = 0;
	else if (strcmp(o, "poisson") == 0)
		rt->arrival = LL_ARRIVAL_POISSON;
	else if (strcmp(o, "constant") == 0)
		rt->arrival = LL_ARRIVAL_CONSTANT;
	else if (strncmp(o, "method=", 7) == 0) {
		for (i = 7; o[i] && i - 7 < sizeof(rt->method_buf) - 1; i++) {
			if (!isalpha((unsigned char)o[i]))
				break;
			rt->method_buf[i - 7] = (char)toupper((unsigned char)o[i]);
		}
		if (o[i] != '\0' || i == 7)
			return ll_fail(err, errlen, "method=%s: letters, at most %zu (e.g. POST or post)",
			            o + 7, sizeof(rt->method_buf) - 1);
		rt->method_buf[i - 7] = '\0';
		rt->method = rt->method_buf;
	} else if (strncmp(o, "header=", 7) == 0 || strncmp(o, "H=", 2) == 0) {
		return ll_routespec_header(&rt->headers, o + (o[0] == 'H' ? 2 : 7), err, errlen);
	} else if (strncmp(o, "capacity=", 9) == 0) {
		char *end;

		errno = 0;
		rt->capacity_given = strtod(o + 9, &end);
		if (errno != 0 || end == o + 9 || *end != '\0' || !(rt->capacity_given >= 0.001 &&
		    rt->capacity_given <= 1e7))
			return ll_fail(err, errlen, "capacity=%s: requests per second in [0.001, 1e7]",
			            o + 9);
	} else if (strncmp(o, "keys=@", 6) == 0) {
		if (rt->tmpl == NULL)
			return ll_fail(err, errlen, "keys=@%s: the path has no {key} to put them in",
			            o + 6);
		return ll_tmpl_keys(rt->tmpl, o + 6, err, errlen);
	} else if (strncmp(o, "body=@", 6) == 0) {
		return read_file(o + 6, rt, err, errlen);
	} else if (strncmp(o, "body=random:", 12) == 0) {
		return random_body(o + 12, seed, rt, err, errlen);
	} else {
		return ll_fail(err, errlen, "unknown route option '%s'", o);
	}
	return 0;
}

int
ll_routespec_parse(const char *arg, enum ll_arrival arrival, uint64_t seed,
                   struct ll_route *rt, char *err, size_t errlen)
{
	char *copy = strdup(arg), *opts, *eq, *o, *save = NULL;
	int cheap = 0;

	memset(rt, 0, sizeof(*rt));
	rt->method = "GET";
	rt->arrival = arrival;
	if (copy == NULL)
		return ll_fail(err, errlen, "out of memory");
	rt->spec = copy;
	opts = strchr(copy, ',');
	if (opts != NULL)
		*opts++ = '\0';
	eq = strrchr(copy, '=');
	if (copy[0] != '/' || eq == NULL)
		return ll_fail(err, errlen, "--rate %s: PATH=RATE with PATH starting with /", arg);
	*eq = '\0';
	if (ll_sched_parse_rate(eq + 1, &rt->rate) == -1)
		return ll_fail(err, errlen, "--rate %s: the rate is N, N/s, N/1s, N/m or N/500ms "
		            "(requests per period, at most 1e7 per second) or Nx (times the capacity,"
		            " at most 1000)", arg);
	rt->heavy = rt->rate.relative;
	if (ll_tmpl_has(copy)) {
		if ((rt->tmpl = malloc(sizeof(*rt->tmpl))) == NULL)
			return ll_fail(err, errlen, "out of memory");
		if (ll_tmpl_parse(rt->tmpl, copy, seed ^ 0x5deece66dull, 0, err, errlen) == -1)
			return -1;
	}
	for (o = opts ? strtok_r(opts, ",", &save) : NULL; o; o = strtok_r(NULL, ",", &save)) {
		if (strcmp(o, "cheap") == 0)
			cheap = 1;
		if (option(o, seed, rt, err, errlen) == -1)
			return -1;
	}
	if (cheap && rt->rate.relative)
		return ll_fail(err, errlen, "--rate %s: an Nx route is heavy by definition", arg);
	if (rt->tmpl != NULL && rt->tmpl->nkeys == 0) {
		unsigned i;

		for (i = 0; i < rt->tmpl->nparts; i++)
			if (rt->tmpl->parts[i].kind == LL_TP_KEY)
				return ll_fail(err, errlen, "--rate %s: {key} needs keys=@FILE", arg);
	}
	rt->path = copy;
	return 0;
}

void
ll_routespec_free(struct ll_route *rt)
{
	free(rt->spec);
	free(rt->body);
	free(rt->headers);
	free(rt->prefixed);
	if (rt->tmpl != NULL)
		ll_tmpl_free(rt->tmpl);
	free(rt->tmpl);
	rt->tmpl = NULL;
	rt->spec = rt->path = rt->body = rt->headers = rt->prefixed = NULL;
}

int
ll_routespec_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen,
                 char *hosthdr, size_t hdrlen)
{
	const char *p, *end, *h, *he, *pt = NULL;
	size_t n;

	if (strncmp(url, "http://", 7) != 0)
		return -1;
	p = url + 7;
	end = p + strcspn(p, "/?#");
	if (end == p || (size_t)(end - p) >= hdrlen)
		return -1;
	memcpy(hosthdr, p, (size_t)(end - p));
	hosthdr[end - p] = '\0';
	if (*p == '[') {
		h = p + 1;
		he = memchr(p, ']', (size_t)(end - p));
		if (he == NULL || (he + 1 < end && he[1] != ':'))
			return -1;
		if (he + 1 < end)
			pt = he + 2;
	} else {
		h = p;
		he = memchr(p, ':', (size_t)(end - p));
		if (he == NULL)
			he = end;
		else
			pt = he + 1;
	}
	n = (size_t)(he - h);
	if (n == 0 || n >= hostlen)
		return -1;
	memcpy(host, h, n);
	host[n] = '\0';
	if (pt == NULL)
		pt = "80", end = pt + 2;
	n = (size_t)(end - pt);
	if (n == 0 || n >= portlen || strspn(pt, "0123456789") < n)
		return -1;
	memcpy(port, pt, n);
	port[n] = '\0';
	return 0;
}

int
ll_routespec_url_prefix(const char *url, char *prefix, size_t len)
{
	const char *p, *q;
	size_t n;

	if (strncmp(url, "http://", 7) != 0)
		return -1;
	p = url + 7 + strcspn(url + 7, "/?#");
	if (*p == '?' || *p == '#' || strpbrk(p, "?#") != NULL)
		return -1;
	/* "/api/" and "/api" are the same prefix: a route path starts with its own '/' */
	for (q = p + strlen(p); q > p && q[-1] == '/'; q--)
		;
	n = (size_t)(q - p);
	if (n >= len)
		return -1;
	memcpy(prefix, p, n);
	prefix[n] = '\0';
	return 0;
}

int
ll_routespec_prefix(struct ll_route *rt, const char *prefix)
{
	if (*prefix == '\0')
		return 0;
	if (asprintf(&rt->prefixed, "%s%s", prefix, rt->path) < 0) {
		rt->prefixed = NULL;
		return -1;
	}
	rt->path = rt->prefixed;
	if (rt->tmpl != NULL) {
		/* the template's literal parts point into its own copy: re-parse with the prefix,
		 * keeping its keys and draws */
		struct ll_tmpl t;
		char err[256];

		if (ll_tmpl_parse(&t, rt->path, rt->tmpl->rng, rt->tmpl->run, err, sizeof(err)) == -1) {
			ll_tmpl_free(&t);
			return -1;
		}
		t.keys = rt->tmpl->keys, t.nkeys = rt->tmpl->nkeys;
		rt->tmpl->keys = NULL, rt->tmpl->nkeys = 0;
		ll_tmpl_free(rt->tmpl);
		*rt->tmpl = t;
	}
	return 0;
}
