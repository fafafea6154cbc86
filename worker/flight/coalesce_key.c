/* The single-flight and cache key of a request (worker/flight/coalesce.h, common/policy.h). */
#include <string.h>
#include <xxhash.h>

#include "common/policy.h"
#include "shm/arena.h"
#include "shm/flight.h"
#include "worker/flight/coalesce.h"
#include "worker/job/job.h"

/* Appends len bytes; -1 once the key would be too long (such a request runs alone). */
static int
put(char *key, size_t *len, const void *p, size_t n)
{
	if (n > LG_FLIGHT_KEY_MAX - *len)
		return -1;
	memcpy(key + *len, p, n);
	*len += n;
	return 0;
}

static int
put_header(char *key, size_t *len, const struct lg_http_req *r, const char *name)
{
	size_t vlen;
	const char *v = lg_http_field_get(r, name, &vlen);

	if (v == NULL)
		return put(key, len, "!", 1) || put(key, len, name, strlen(name)) ||
		    put(key, len, "\n", 1);
	return put(key, len, name, strlen(name)) || put(key, len, ":", 1) ||
	    put(key, len, v, vlen) || put(key, len, "\n", 1);
}

int
lg_coal_has_body(const struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;

	return r->chunked || (r->content_length != LG_HTTP_NO_LENGTH && r->content_length > 0);
}

/* What a body means to the kind besides its bytes (its media type and coding), then its length
 * and a 128-bit XXH3 of its bytes in the transit buffer, seeded with the cache's random seed:
 * two bodies share a key only when their lengths and hashes are equal, and with a secret seed
 * a client cannot search for a colliding pair offline. The hash reads the body once, at most
 * the rule's body-max bytes (longer: -1, the request runs alone). */
static int
put_body(const struct lg_conn *c, char *key, size_t *len)
{
	const struct lg_http_req *r = &c->http.req;
	uint64_t n = 0;
	const unsigned char *body;
	const void *p = "";
	unsigned char tag[1 + 8 + 16];

	if (put_header(key, len, r, "content-type") || put_header(key, len, r, "content-encoding"))
		return -1;
	if (lg_coal_has_body(c)) {
		if (lg_job_body(c, &body, &n) == -1 || n > LG_FLIGHT(c)->pol->body_max)
			return -1;
		p = body;
	}
	XXH128_hash_t h = XXH3_128bits_withSeed(p, (size_t)n, c->w->env->cache->hdr->key_seed);
	tag[0] = '#';
	memcpy(tag + 1, &n, 8);
	memcpy(tag + 9, &h.low64, 8);
	memcpy(tag + 17, &h.high64, 8);
	return put(key, len, tag, sizeof(tag));
}

int
lg_coal_key(const struct lg_conn *c, char *key, size_t *len)
{
	const struct lg_http_req *r = &c->http.req;
	const struct lg_policy *p = LG_FLIGHT(c)->pol;

	*len = 0;
	size_t vl;

	/* A field not kept (more than LG_HTTP_KEPT, or past their buffer, when every field is
	 * kept: http/http.h) could be a credential or a listed header: such a request never
	 * shares. With the keep set, such a field refuses the request (431) instead. */
	if (r->kept_short)
		return -1;
	/* Credentials (RFC 9110 section 11.6.2 and 11.7.1, RFC 6265): one user's answer. */
	if (!p->credentials_in_key && (lg_http_field_get(r, "authorization", &vl) != NULL ||
	    lg_http_field_get(r, "proxy-authorization", &vl) != NULL ||
	    lg_http_field_get(r, "cookie", &vl) != NULL))
		return -1;
	int get = r->method == HTTP_GET || r->method == HTTP_HEAD;
	const char *m = get ? "GET" : http_method_str(r->method);

	if (put(key, len, m, strlen(m)) || put(key, len, " ", 1) ||
	    put(key, len, r->path, r->path_len) || put(key, len, "?", 1))
		return -1;
	/* An upstream route's: the app's parameters are not declared, so all of them, as sent
	 * (?a=1&b=2 and ?b=2&a=1 are two keys: the app may read them in order) */
	if (p->whole_query && r->query != NULL && put(key, len, r->query, r->query_len))
		return -1;
	for (unsigned i = 0; i < p->nquery; i++) {
		const char *v = lg_http_query_param(r, p->query[i], &vl);

		if ((v == NULL && put(key, len, "!", 1)) ||
		    put(key, len, p->query[i], strlen(p->query[i])) ||
		    (v != NULL && (put(key, len, "=", 1) || put(key, len, v, vl))) ||
		    put(key, len, "&", 1))
			return -1;
	}
	if (put(key, len, "\n", 1))
		return -1;
	for (unsigned i = 0; i < p->nheaders; i++)
		if (put_header(key, len, r, p->headers[i]))
			return -1;
	if (p->credentials_in_key && (put_header(key, len, r, "authorization") ||
	    put_header(key, len, r, "proxy-authorization") || put_header(key, len, r, "cookie")))
		return -1;
	if ((!get || lg_coal_has_body(c)) && put_body(c, key, len) == -1)
		return -1;
	return 0;
}
