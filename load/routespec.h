/* Command-line pieces of lagless-load: a route as PATH=RATE[,option...] and the target URL.
 *
 * PATH starts with '/' and may carry a query; the rate follows the last '=' before the first
 * ',' (so a query may contain '=' but not ','; write %2C). Options: method=M (letters in
 * either case, sent upper-case), body=@FILE (the file's bytes), body=random:SIZE (SIZE bytes,
 * K/KB/M/MB/G suffixes, powers of 1024, at most 1G, from the seed), header=Name: value (or
 * H=Name: value; repeatable), capacity=RPS (this route's capacity, no calibration), heavy (its
 * 503s and throughput are judged; implied by an Nx rate), cheap (judged against its idle
 * p99), poisson, constant. */
#ifndef LL_LOAD_ROUTESPEC_H
#define LL_LOAD_ROUTESPEC_H

#include <stddef.h>
#include <stdint.h>

#include "load/engine.h"

/* Parses arg into rt (zeroed first): path, method, rate, arrival (default arrival unless an
 * option says otherwise), heavy, and the body, read or generated now. rt->path and rt->body are
 * malloc'd and owned by rt (ll_routespec_free). Returns 0, or -1 with a message in err. */
int ll_routespec_parse(const char *arg, enum ll_arrival arrival, uint64_t seed,
                       struct ll_route *rt, char *err, size_t errlen);

void ll_routespec_free(struct ll_route *rt);

/* Parses a size: digits with an optional K, KB, KiB, M, MB, MiB, G, GB or GiB (powers of
 * 1024, either case), at most 1G. Returns 0 or -1. */
int ll_routespec_size(const char *s, uint64_t *out);

/* Splits "http://HOST[:PORT][/...]" (HOST a name, an IPv4 address or [IPv6]) into host
 * (brackets removed), port (default "80") and the Host header value (as written). Returns 0,
 * or -1 when it is not such a URL (https is not supported). */
int ll_routespec_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen,
                     char *hosthdr, size_t hdrlen);

/* Appends "Name: value\r\n" to the malloc'd header list *list (NULL: empty; the caller frees
 * it) from h written as "Name: value" (curl -H). Returns 0, or -1 with a message in err (no
 * colon, a name that is not a token, CR or LF in the value, out of memory). */
int ll_routespec_header(char **list, const char *h, char *err, size_t errlen);

/* The path of "http://HOST[:PORT]/PREFIX" into prefix without trailing slashes ("" for none):
 * every route's path is sent after it. Returns 0, or -1 when it is not an http URL, carries a
 * query or fragment, or does not fit len. */
int ll_routespec_url_prefix(const char *url, char *prefix, size_t len);

/* Puts prefix ("/api", or "" for none) before rt->path (malloc'd, owned by rt). Returns 0 or -1
 * (ENOMEM). */
int ll_routespec_prefix(struct ll_route *rt, const char *prefix);

#endif
