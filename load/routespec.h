/* Command-line pieces of lagless-load: a route as PATH=RATE[,option...] and the target URL.
 *
 * PATH starts with '/' and may carry a query; the rate follows the last '=' before the first
 * ',' (so a query may contain '=' but not ','; write %2C). Options: method=M (letters, e.g.
 * POST), body=@FILE (the file's bytes), body=random:SIZE (SIZE bytes, K/M/G suffixes, at most
 * 1G, from the seed), heavy (its 503s and throughput are judged; implied by an Nx rate),
 * cheap (judged against its idle p99), poisson, constant. */
#ifndef LG_LOAD_ROUTESPEC_H
#define LG_LOAD_ROUTESPEC_H

#include <stddef.h>
#include <stdint.h>

#include "load/engine.h"

/* Parses arg into rt (zeroed first): path, method, rate, arrival (default arrival unless an
 * option says otherwise), heavy, and the body, read or generated now. rt->path and rt->body are
 * malloc'd and owned by rt (lg_routespec_free). Returns 0, or -1 with a message in err. */
int lg_routespec_parse(const char *arg, enum lg_arrival arrival, uint64_t seed,
                       struct lg_route *rt, char *err, size_t errlen);

void lg_routespec_free(struct lg_route *rt);

/* Parses a size: digits with an optional K, M or G (powers of 1024). Returns 0 or -1. */
int lg_routespec_size(const char *s, uint64_t *out);

/* Splits "http://HOST[:PORT][/...]" (HOST a name, an IPv4 address or [IPv6]) into host
 * (brackets removed), port (default "80") and the Host header value (as written). Returns 0,
 * or -1 when it is not such a URL (https is not supported). */
int lg_routespec_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen,
                     char *hosthdr, size_t hdrlen);

#endif
