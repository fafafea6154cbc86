/* The header fields a loop worker's requests keep (http/http.h struct lg_http_keep): the ones
 * the server reads itself and the ones its routes list. */
#ifndef LG_WORKER_KEPTFIELDS_H
#define LG_WORKER_KEPTFIELDS_H

#include "http/http.h"

struct lg_registry;

/* Builds the set for the routes of reg (NULL: none) into k: X-Forwarded-For, X-Request-Id, User-Agent (the
 * access log, worker/core/access.c), Authorization, Proxy-Authorization, Cookie, Content-Type and
 * Content-Encoding (the coalescing key, worker/flight/coalesce_key.c), every route's `fields =` and
 * its coalescing key's headers. Returns 0, or -1 when the names do not fit k
 * (LG_HTTP_KEEP_NAMES): the caller then keeps every field, as before the set existed. */
int lg_keptfields_build(struct lg_http_keep *k, const struct lg_registry *reg);

#endif
