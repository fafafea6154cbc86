/* Query strings: finding one parameter of a raw (not percent-decoded) query. */
#ifndef LG_COMMON_QUERY_H
#define LG_COMMON_QUERY_H

#include <stddef.h>

/* Finds name=value among the '&'-separated pairs of the raw query q (qlen bytes, the part of
 * the request-target after '?'; RFC 3986 section 3.4). q may be NULL when qlen is 0. Returns
 * the value (not NUL-terminated, pointing into q) and its length in *len, or NULL when name is
 * absent. A pair without '=' never matches. No allocation. */
const char *lg_query_param(const char *q, size_t qlen, const char *name, size_t *len);

#endif
