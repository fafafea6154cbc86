/* The single-flight and cache key of a request (worker/coalesce.h, common/policy.h). */
#include <string.h>

#include "common/policy.h"
#include "shm/flight.h"
#include "worker/coalesce.h"

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
lg_coal_key(const struct lg_conn *c, char *key, size_t *len)
{
	const struct lg_http_req *r = &c->http.req;
	const struct lg_policy *p = c->pol;

	*len = 0;
	size_t vl;

	/* A field not kept (more than LG_HTTP_KEPT, or past their buffer) could be a credential
	 * or a listed header: such a request never shares. */
	if (r->nkept < r->nfields)
		return -1;
	if (!p->credentials_in_key && (lg_http_field_get(r, "authorization", &vl) != NULL ||
	    lg_http_field_get(r, "cookie", &vl) != NULL))
		return -1;
	if (put(key, len, "GET ", 4) || put(key, len, r->path, r->path_len) ||
	    put(key, len, "?", 1))
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
	    put_header(key, len, r, "cookie")))
		return -1;
	return 0;
}
