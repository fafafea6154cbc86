/* Query strings: finding one parameter of a raw (not percent-decoded) query, and decoding
 * a value. */
#ifndef LG_COMMON_QUERY_H
#define LG_COMMON_QUERY_H

#include <stddef.h>

/* Finds name=value among the '&'-separated pairs of the raw query q (qlen bytes, the part of
 * the request-target after '?'; RFC 3986 section 3.4). q may be NULL when qlen is 0. Returns
 * the value (not NUL-terminated, pointing into q) and its length in *len, or NULL when name is
 * absent. A pair without '=' never matches. No allocation. */
const char *lg_query_param(const char *q, size_t qlen, const char *name, size_t *len);

/* The value of hex digit c (0-15), or -1 when c is none (RFC 3986 section 2.1 HEXDIG, also
 * for chunk sizes, RFC 9112 section 7.1). Inline: the framing check calls it per byte. */
static inline int
lg_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes the len bytes of v into out (cap bytes; RFC 3986 section 2.1: "%" HEXDIG
 * HEXDIG is that octet; '+' stays '+', it means a space only in HTML forms). Returns the decoded
 * length, or -1 when a '%' is not followed by two hex digits or the result needs more than cap
 * bytes. out is not NUL-terminated. */
long lg_query_decode(const char *v, size_t len, char *out, size_t cap);

#endif
