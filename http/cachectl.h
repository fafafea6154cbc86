/* What a proxy in front of an app may do with one of its answers under HTTP caching (RFC 9111,
 * RFC 9110): hand it to the requests that joined its flight (collapsed requests, RFC 9111
 * section 4, last paragraph), store it, and for how long. A pure module: the caller gives the
 * answer's status and its header fields (http/resp.h's index) and the route's rule; nothing is
 * allocated, no clock is read, nothing outside http/ is known.
 *
 * lagless's choices where RFC 9111 lets a cache choose (docs/CACHE.md "Proxied routes"):
 *
 * - `private`, `no-store`, `no-cache` (qualified forms `private="f"` and `no-cache="f"`
 *   included: lagless never strips fields from an answer) and `Set-Cookie` make an answer
 *   neither stored nor shared: each waiter of its flight goes to the app itself, and the key
 *   bypasses coalescing for a while (hit-for-miss: LG_CC_HFM). `no-cache` is not stored for
 *   revalidation: lagless does not revalidate.
 * - `Vary: *`, or a Vary naming a field that is not in the key, makes it not shared (the key
 *   does not grow: the route's `key_headers` say what the key holds).
 * - Stored statuses: 200, 203, 204, 300, 301 under the route's ttl_ms; 404 and 410 under its
 *   negative_ttl_ms; nothing else (5xx never). Freshness: s-maxage over max-age (RFC 9111
 *   5.2.2.10), which shorten the route's TTL and never lengthen it, minus the app's Age (RFC
 *   9111 4.2.3). `Expires` is not read: an answer with Expires and no max-age/s-maxage is
 *   taken as already stale (RFC 9111 5.3 asks a cache to take an Expires it cannot read as in
 *   the past; lagless reads none).
 * - Conflicting duplicates (two max-age values that differ), an argument that is not
 *   delta-seconds (max-age=-1, max-age=1.5), an Age that is not delta-seconds, or a
 *   Cache-Control that is not the list grammar (an unclosed quoted-string) make the answer
 *   stale (RFC 9111 4.2.1: "considered stale"): not stored, not shared.
 * - Failures (any status the rule neither stores nor refuses above: 5xx, 4xx other than 404 and
 *   410) are shared with the flight's waiters, as a kind's failures are: the waiters all asked
 *   while the app was failing this very request, and are all told at once. */
#ifndef LG_HTTP_CACHECTL_H
#define LG_HTTP_CACHECTL_H

#include <stddef.h>
#include <stdint.h>

#include "http/resp.h"

/* delta-seconds past this are this (RFC 9111 section 1.2.2: 2^31). */
#define LG_CC_DELTA_MAX 2147483648ull

/* The Cache-Control directives of a response that matter to a shared cache (RFC 9111 5.2.2),
 * gathered over every Cache-Control field line (a list, RFC 9110 5.3). Seconds, or -1 when
 * absent. */
struct lg_cc {
	int priv, no_store, no_cache, public_, must_revalidate, proxy_revalidate;
	int64_t max_age, s_maxage, swr, sie; /* stale-while-revalidate, stale-if-error (RFC 5861) */
	int invalid;      /* bad grammar, a bad argument, or conflicting duplicates */
};

/* Parses one Cache-Control field value v[0..len) into *cc, adding to what earlier lines gave
 * (call lg_cc_clear first). Directive names are case-insensitive tokens, arguments token or
 * quoted-string (RFC 9111 5.2; commas and escapes inside quotes are not separators), unknown
 * directives ignored (RFC 9111 5.2.3). Never fails: what is wrong sets cc->invalid. */
void lg_cc_parse(struct lg_cc *cc, const char *v, size_t len);

/* Every directive absent. */
void lg_cc_clear(struct lg_cc *cc);

/* The route's rule as far as the decision needs it. */
struct lg_cc_rule {
	uint64_t ttl_ms;           /* 200, 203, 204, 300, 301 kept at most this long (0: not) */
	uint64_t negative_ttl_ms;  /* 404, 410 kept at most this long (0: not) */
	const char (*key_headers)[32]; /* lower-case header names the key holds (borrowed) */
	unsigned nkey_headers;
	int credentials;           /* the request carried Authorization, Proxy-Authorization or
	                            * Cookie (and the rule keys them: credentials = key) */
};

enum {
	LG_CC_SHARE = 1,   /* the flight's waiters may be given this answer */
	LG_CC_STORE = 2,   /* it may be stored, for ttl_ms */
	LG_CC_HFM = 4,     /* later requests of the key go to the app alone for a while */
};

struct lg_cc_decision {
	unsigned flags;    /* LG_CC_* */
	uint64_t ttl_ms;   /* LG_CC_STORE: freshness left, above 0 */
	uint64_t swr_ms, sie_ms; /* the answer's own stale-while-revalidate / stale-if-error, or
	                          * UINT64_MAX when it sets none (the route's stale_ms applies) */
	int no_stale;      /* must-revalidate, proxy-revalidate or s-maxage: never served stale
	                    * (RFC 9111 5.2.2.2, 5.2.2.8, 5.2.2.10) */
	const char *why;   /* what decided, a static string ("private", "set-cookie", ...) */
};

/* Decides for the answer whose status is status and whose head is head with the field index
 * f[0..n) (as http/resp.h filled it), under rule r. Fills *d; returns d->flags. */
unsigned lg_cc_decide(int status, const char *head, const struct lg_resp_field *f, unsigned n,
    const struct lg_cc_rule *r, struct lg_cc_decision *d);

/* Whether p[0..n), field lines read back from a store another process wrote (Redis: a
 * replica's answer, docs/CACHE.md "Proxied routes"), is what a stored answer holds and may be
 * written into a response head as it is: whole lines `token ":" field-value CRLF` (RFC 9110
 * 5.1, 5.5; no bare CR, LF or NUL, no obs-fold), none of them a field lagless writes itself
 * or a proxy does not forward (Content-Length, Transfer-Encoding, Connection, Keep-Alive,
 * Proxy-Connection, TE, Upgrade, Date, Server, Age, X-Cache: what worker/flight/coalesce_up.c
 * leaves out of what it stores). 1 or 0. */
int lg_cc_fields_ok(const char *p, size_t n);

#endif
