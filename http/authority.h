/* The authority grammar: what a Host field value and an absolute-form target's authority may
 * hold (RFC 9112 sections 3.2 and 3.2.2, RFC 3986 section 3.2). Pure functions over bytes, no
 * state; http/frame.c checks every request with them. */
#ifndef LG_HTTP_AUTHORITY_H
#define LG_HTTP_AUTHORITY_H

#include <stddef.h>

#include "http/chars.h"

/* 1 when c may appear in an absolute-form target's authority: unreserved, sub-delims, ':',
 * '%', '[' and ']' (RFC 3986 section 3.2); else 0. */
static inline int
lg_authority_char(unsigned char c)
{
	return lg_ch(c, LG_CH_AUTH);
}

/* 1 when c may appear in a Host value: no delimiter that would end or change an authority
 * ('/', '?', '#', '@', '\\', quotes, braces...), no obs-text; else 0. */
static inline int
lg_host_char(unsigned char c)
{
	return lg_ch(c, LG_CH_HOST);
}

/* 1 when v (len bytes, not NUL-terminated) is a valid uri-host [ ":" port ]: a bracketed
 * IPv6address or IPvFuture, or a reg-name / IPv4address without ':', brackets or white
 * space whose '%' starts a pct-encoding ("%" HEXDIG HEXDIG); port = *DIGIT (RFC 3986 sections 3.2.2-3.2.3).
 * The characters are judged by lg_host_char / lg_authority_char first; an empty value is
 * valid (a Host for a target without an authority). Else 0. */
int lg_host_syntax_ok(const char *v, size_t len);

#endif
