/* RFC 9111 decisions for a proxied answer: http/cachectl.h says what and why. */
#include "http/cachectl.h"

#include <string.h>

#include "http/chars.h"

void
lg_cc_clear(struct lg_cc *cc)
{
	memset(cc, 0, sizeof(*cc));
	cc->max_age = cc->s_maxage = cc->swr = cc->sie = -1;
}

static int
ieq(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);

	if (alen != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)a[i];

		if (c >= 'A' && c <= 'Z')
			c += 32;
		if (c != (unsigned char)lit[i])
			return 0;
	}
	return 1;
}

/* delta-seconds = 1*DIGIT (RFC 9111 section 1.2.2), saturated at 2^31; -1 when not that. */
static int64_t
delta(const char *s, size_t len)
{
	uint64_t v = 0;

	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v < LG_CC_DELTA_MAX)
			v = v * 10 + (uint64_t)(s[i] - '0');
	}
	return (int64_t)(v > LG_CC_DELTA_MAX ? LG_CC_DELTA_MAX : v);
}

/* A delta-seconds directive: the argument (token, or quoted-string without escapes) into *slot;
 * a second occurrence with another value, or a bad argument, makes the answer stale (RFC 9111
 * section 4.2.1). */
static void
set_delta(struct lg_cc *cc, int64_t *slot, const char *arg, size_t alen, int has_arg)
{
	int64_t v = has_arg ? delta(arg, alen) : -1;

	if (v < 0 || (*slot >= 0 && *slot != v)) {
		cc->invalid = 1;
		return;
	}
	*slot = v;
}

static void
directive(struct lg_cc *cc, const char *n, size_t nlen, const char *a, size_t alen, int has_arg)
{
	/* RFC 9111 5.2.2: the response directives a shared cache obeys; 5.2.3: others ignored.
	 * The qualified forms of private and no-cache (5.2.2.4, 5.2.2.7) count as unqualified. */
	if (ieq(n, nlen, "private"))
		cc->priv = 1;
	else if (ieq(n, nlen, "no-store"))
		cc->no_store = 1;
	else if (ieq(n, nlen, "no-cache"))
		cc->no_cache = 1;
	else if (ieq(n, nlen, "public"))
		cc->public_ = 1;
	else if (ieq(n, nlen, "must-revalidate"))
		cc->must_revalidate = 1;
	else if (ieq(n, nlen, "proxy-revalidate"))
		cc->proxy_revalidate = 1;
	else if (ieq(n, nlen, "max-age"))
		set_delta(cc, &cc->max_age, a, alen, has_arg);
	else if (ieq(n, nlen, "s-maxage"))
		set_delta(cc, &cc->s_maxage, a, alen, has_arg);
	else if (ieq(n, nlen, "stale-while-revalidate"))
		set_delta(cc, &cc->swr, a, alen, has_arg);
	else if (ieq(n, nlen, "stale-if-error"))
		set_delta(cc, &cc->sie, a, alen, has_arg);
}

/* The quoted-string at v[i] (v[i] is DQUOTE, RFC 9110 5.6.4): returns the index past its
 * closing DQUOTE, or len + 1 when it is not closed; its content is v[i+1..end-1), escapes
 * left in (a delta-seconds argument with one is refused as not DIGITs). */
static size_t
quoted(const char *v, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (v[i] == '\\') {
			i++;
			continue;
		}
		if (v[i] == '"')
			return i + 1;
	}
	return len + 1;
}

static size_t
ows(const char *v, size_t len, size_t i)
{
	while (i < len && (v[i] == ' ' || v[i] == '\t'))
		i++;
	return i;
}

void
lg_cc_parse(struct lg_cc *cc, const char *v, size_t len)
{
	size_t i = 0;

	/* #cache-directive, cache-directive = token [ "=" ( token / quoted-string ) ]
	 * (RFC 9111 5.2, list rules RFC 9110 5.6.1: empty elements allowed) */
	while (i < len) {
		i = ows(v, len, i);
		if (i < len && v[i] == ',') {
			i++;
			continue;
		}
		if (i >= len)
			break;
		size_t n0 = i;

		while (i < len && lg_ch((unsigned char)v[i], LG_CH_TCHAR))
			i++;
		size_t nlen = i - n0, a0 = i, alen = 0;
		int has_arg = 0;

		if (nlen == 0) {
			cc->invalid = 1;
			return;
		}
		if (i < len && v[i] == '=') {
			has_arg = 1;
			i++;
			if (i < len && v[i] == '"') {
				size_t end = quoted(v, len, i);

				if (end > len) {
					cc->invalid = 1;
					return;
				}
				a0 = i + 1;
				alen = end - 1 - a0;
				i = end;
			} else {
				a0 = i;
				while (i < len && lg_ch((unsigned char)v[i], LG_CH_TCHAR))
					i++;
				alen = i - a0;
			}
		}
		i = ows(v, len, i);
		if (i < len && v[i] != ',') {
			cc->invalid = 1;
			return;
		}
		directive(cc, v + n0, nlen, v + a0, alen, has_arg);
	}
}

/* Whether the Vary value v[0..len) names only fields the key holds: "*" never does (RFC 9110
 * 12.5.5); a field outside the key could select another answer for a request of the same key
 * (RFC 9111 4.1). */
static int
vary_in_key(const char *v, size_t len, const struct lg_cc_rule *r)
{
	size_t i = 0;

	while (i < len) {
		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t n0 = i;

		while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
			i++;
		if (i == n0)
			break;
		int found = 0;

		for (unsigned k = 0; k < r->nkey_headers && !found; k++)
			found = ieq(v + n0, i - n0, r->key_headers[k]);
		if (!found)
			return 0;
	}
	return 1;
}

/* What the head says, gathered over its lines. */
struct facts {
	struct lg_cc cc;
	int set_cookie, vary_out, expires, bad_age, age_seen;
	int64_t age;
};

static void
gather(struct facts *fa, const char *head, const struct lg_resp_field *f, unsigned n,
    const struct lg_cc_rule *r)
{
	memset(fa, 0, sizeof(*fa));
	lg_cc_clear(&fa->cc);
	for (unsigned i = 0; i < n; i++) {
		const char *nm = head + f[i].name.off, *v = head + f[i].value.off;
		size_t nl = f[i].name.len, vl = f[i].value.len;

		if (ieq(nm, nl, "cache-control"))
			lg_cc_parse(&fa->cc, v, vl);
		else if (ieq(nm, nl, "set-cookie"))
			fa->set_cookie = 1;
		else if (ieq(nm, nl, "vary") && !vary_in_key(v, vl, r))
			fa->vary_out = 1;
		else if (ieq(nm, nl, "expires"))
			fa->expires = 1;
		else if (ieq(nm, nl, "age")) {
			int64_t a = delta(v, vl);

			/* RFC 9111 5.1: Age is delta-seconds; a second, other value is a conflict */
			if (a < 0 || (fa->age_seen && a != fa->age))
				fa->bad_age = 1;
			fa->age = a;
			fa->age_seen = 1;
		}
	}
}

static unsigned
verdict(struct lg_cc_decision *d, unsigned flags, const char *why)
{
	d->flags = flags;
	d->why = why;
	return flags;
}

/* RFC 9110 15.1 / RFC 9111 4.2.2: the statuses a cache may keep without explicit freshness,
 * narrowed to lagless's list; 404 and 410 are errors, kept under negative_ttl_ms. */
static int
stored_status(int status, const struct lg_cc_rule *r, uint64_t *limit)
{
	switch (status) {
	case 200: case 203: case 204: case 300: case 301:
		*limit = r->ttl_ms;
		return 1;
	case 404: case 410:
		*limit = r->negative_ttl_ms;
		return 1;
	default:
		return 0;
	}
}

unsigned
lg_cc_decide(int status, const char *head, const struct lg_resp_field *f, unsigned n,
    const struct lg_cc_rule *r, struct lg_cc_decision *d)
{
	struct facts fa;
	uint64_t limit = 0;

	gather(&fa, head, f, n, r);
	d->ttl_ms = 0;
	d->swr_ms = fa.cc.swr >= 0 ? (uint64_t)fa.cc.swr * 1000 : UINT64_MAX;
	d->sie_ms = fa.cc.sie >= 0 ? (uint64_t)fa.cc.sie * 1000 : UINT64_MAX;
	d->no_stale = fa.cc.must_revalidate || fa.cc.proxy_revalidate || fa.cc.s_maxage >= 0;
	/* RFC 9111 3 and 5.2.2.3/5.2.2.5/5.2.2.7: a shared cache stores none of these, and RFC
	 * 9111 4 lets it collapse requests only onto an answer it may reuse for them */
	if (fa.cc.no_store)
		return verdict(d, LG_CC_HFM, "no-store");
	if (fa.cc.priv)
		return verdict(d, LG_CC_HFM, "private");
	if (fa.cc.no_cache) /* 5.2.2.4: not reused without validation; lagless does not validate */
		return verdict(d, LG_CC_HFM, "no-cache");
	if (fa.set_cookie) /* RFC 6265 section 8 / RFC 9111 7.3: one user's state */
		return verdict(d, LG_CC_HFM, "set-cookie");
	if (fa.vary_out) /* RFC 9111 4.1 */
		return verdict(d, LG_CC_HFM, "vary");
	/* RFC 9111 3.5: an answer to a request with credentials, only with public, s-maxage or
	 * must-revalidate */
	if (r->credentials && !fa.cc.public_ && fa.cc.s_maxage < 0 && !fa.cc.must_revalidate)
		return verdict(d, LG_CC_HFM, "credentials");
	if (!stored_status(status, r, &limit)) /* failures: every waiter told at once */
		return verdict(d, LG_CC_SHARE, status >= 500 ? "server error" : "status");
	if (fa.cc.invalid || fa.bad_age) /* RFC 9111 4.2.1: "considered stale" */
		return verdict(d, LG_CC_HFM, "invalid");
	/* RFC 9111 4.2.1: s-maxage, else max-age, else Expires (5.3: not read, so stale) */
	int64_t life = fa.cc.s_maxage >= 0 ? fa.cc.s_maxage : fa.cc.max_age;

	if (life < 0 && fa.expires)
		return verdict(d, LG_CC_HFM, "expires");
	if (life >= 0 && life <= fa.age) /* 4.2: fresh only while lifetime > current age */
		return verdict(d, LG_CC_HFM, "stale");
	uint64_t age_ms = (uint64_t)fa.age * 1000, ttl = limit;

	if (life >= 0 && (uint64_t)life * 1000 < ttl)
		ttl = (uint64_t)life * 1000;
	if (ttl <= age_ms)
		return verdict(d, LG_CC_SHARE, limit ? "age" : "route ttl 0");
	d->ttl_ms = ttl - age_ms;
	return verdict(d, LG_CC_SHARE | LG_CC_STORE, life >= 0 ? "max-age" : "route ttl");
}

/* The fields a stored answer never holds (lg_cc_fields_ok). */
static int
foreign_field(const char *name, size_t len)
{
	static const char *const no[] = { "content-length", "transfer-encoding", "connection",
	    "keep-alive", "proxy-connection", "te", "upgrade", "date", "server", "age",
	    "x-cache" };

	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (ieq(name, len, no[i]))
			return 1;
	return 0;
}

int
lg_cc_fields_ok(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t name = i;

		while (i < n && lg_ch((unsigned char)p[i], LG_CH_TCHAR))
			i++;
		if (i == name || i >= n || p[i] != ':' || foreign_field(p + name, i - name))
			return 0;
		i++;
		while (i < n && lg_ch((unsigned char)p[i], LG_CH_VALUE)) /* no CR, LF, NUL */
			i++;
		if (i + 1 >= n || p[i] != '\r' || p[i + 1] != '\n')
			return 0;
		i += 2;
	}
	return 1;
}
