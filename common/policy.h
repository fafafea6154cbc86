/* Coalescing and caching policy of offloaded routes (single-flight + TTL cache, shm/flight.h and
 * shm/cache.h), parsed from one configuration string so that `lagless -t` checks it in the
 * master and every loop worker reads the same table.
 *
 * Grammar: rules separated by ';', each a route path followed by space-separated settings:
 *
 *   /heavy coalesce=on ttl=5000 stale=2000 negative-ttl=1000 query=iterations headers=accept
 *
 *   coalesce=on|off      one job per key for concurrent requests (default on)
 *   ttl=MS               keep a successful answer this long (0 = no cache, only coalescing)
 *   stale=MS             after the TTL, answer the old value this long while one background
 *                        job refreshes it (stale-while-revalidate)
 *   negative-ttl=MS      keep a kind-level error answer (400/500) this long; 502/503/504 never
 *   query=a,b            query parameters that are part of the key (others are ignored)
 *   headers=a,b          request headers that are part of the key
 *   credentials=bypass|key  requests with Authorization, Proxy-Authorization or Cookie: never
 *                        coalesced or cached (bypass, the default), or coalesced/cached with
 *                        those values in the key
 *   body-max=BYTES       largest request body hashed into the key (K/M suffixes; default
 *                        LG_POLICY_BODY_MAX); a longer body runs its own job, uncached
 *   scope=local|cluster  cluster: one job per key across every replica sharing --redis
 *                        (worker/flight/cluster.c); local (the default): this server only
 *   path-share=PCT       percent (0..100) of the cache's entries the answers of one path (its
 *                        query variants together) may hold; 0 = no bound (the default; an
 *                        upstream route's is LG_POLICY_PATH_SHARE_UP). Past it, a new key's
 *                        answer is served but not stored (shm/cache.h tags)
 *
 * The key is always the method (HEAD as GET) and the path, then the listed parameters and
 * headers in the order listed, to which the route adds every query parameter its kind reads and
 * every header field it hands the kind (master/site.c); a request with a body, or of a method other than GET and HEAD,
 * adds its Content-Type and Content-Encoding and a seeded 128-bit hash of its body
 * (worker/flight/coalesce_key.c). */
#ifndef LG_COMMON_POLICY_H
#define LG_COMMON_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define LG_POLICY_MAX    8   /* rules */
#define LG_POLICY_NAMES  8   /* query parameters or headers a rule may list */
#define LG_POLICY_NAME   32  /* bytes per name, NUL included */
/* Names the key may hold: the rule's own, and what the route adds (master/site.c): the query
 * parameters its kind reads and the header fields the route hands the kind (at most 16). */
#define LG_POLICY_KEY_NAMES (LG_POLICY_NAMES + 16)
/* Bodies up to this many bytes are hashed into the key by default: XXH3 hashes a MiB in about
 * 0.1 ms on one core, the loop's budget for one callback (docs/CACHE.md). */
#define LG_POLICY_BODY_MAX     (1ull << 20)
#define LG_POLICY_BODY_MAX_MAX (64ull << 20) /* the largest body-max a rule may set */

struct lg_policy {
	char path[64];
	int coalesce;
	uint64_t ttl_ms, stale_ms, negative_ttl_ms;
	unsigned nquery, nheaders;
	char query[LG_POLICY_KEY_NAMES][LG_POLICY_NAME];
	char headers[LG_POLICY_KEY_NAMES][LG_POLICY_NAME];  /* lower case */
	int query_set;          /* the rule named its query parameters (query=, key_query) */
	int credentials_in_key;
	uint64_t body_max;      /* bytes of body hashed into the key, at most */
	int cluster;            /* scope=cluster: shared across replicas through --redis */
	int whole_query;        /* an upstream route's: the key holds the whole query string
	                         * (an app's parameters are not declared), never a body */
	unsigned path_share;    /* percent of the cache's entries one path's answers may hold
	                         * (0: no bound; worker/flight/coalesce_answer.c lg_coal_tag) */
	int path_share_set;     /* given (else an upstream route's default applies) */
};

/* The default path_share of an upstream route: its keys hold any query string a client sends,
 * so one path's random queries could otherwise fill the whole cache. A kind route's keys hold
 * only its declared parameters: no bound by default. */
#define LG_POLICY_PATH_SHARE_UP 25u

struct lg_policies {
	unsigned n;
	struct lg_policy p[LG_POLICY_MAX];
};

/* The same settings as keys of a [route /path] section (master/site.c), one table for both
 * spellings (common/policy.c):
 *
 *   coalesce = on|off   ttl_ms = MS   stale_ms = MS   negative_ttl_ms = MS
 *   key_query = a, b    key_headers = a, b   credentials = bypass|key   key_body_max = BYTES
 *   scope = local|cluster   path_share = PCT
 *
 * A route with any of them has a rule; the others keep their defaults. */

/* A rule with every default (coalescing on, no cache, body-max LG_POLICY_BODY_MAX) for path
 * (copied, cut to fit: informational once the rule is a route's). */
void lg_policy_init(struct lg_policy *p, const char *path);

/* Whether key is one of the route-section keys above. */
int lg_policy_is_route_key(const char *key);

/* Applies route-section key = value to p. Returns 1 (taken), 0 (not a coalescing key), or -1
 * with *why saying what was expected (a static string). Spaces and tabs in value are ignored
 * ("a, b" is "a,b"). */
int lg_policy_route_key(struct lg_policy *p, const char *key, const char *value,
    const char **why);

/* Parses spec (NUL-terminated; "" gives no rule) into *out. Returns 0, or -1 with a message in
 * err (errcap bytes) naming the rule and setting at fault. */
int lg_policy_parse(const char *spec, struct lg_policies *out, char *err, size_t errcap);

/* Adds name (len bytes) to p's query parameters (header 0) or header fields (header 1,
 * lower-cased) unless it is there already: what the route adds to its rule's key. Returns 0, or
 * -1 when the name is empty, too long (LG_POLICY_NAME) or the list is full
 * (LG_POLICY_KEY_NAMES). */
int lg_policy_add_name(struct lg_policy *p, int header, const char *name, size_t len);

/* What p's key is made of, for lagless -t, into buf (cap bytes, cut to fit, NUL-terminated):
 * "method, path, query a,b, headers c, ..." as worker/flight/coalesce_key.c builds it. */
void lg_policy_describe(const struct lg_policy *p, char *buf, size_t cap);

/* The rule for path (len bytes), or NULL. */
const struct lg_policy *lg_policy_find(const struct lg_policies *ps, const char *path,
    size_t len);

#endif
