/* Request path normalization (http/path.h): RFC 3986 section 6.2.2, in place, one pass. */
#include "http/path.h"

#include <string.h>

#include "common/query.h"

static int
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '.' || c == '_' || c == '~';
}

/* Whether p[0..len) may need a change: a '%', or a '/' followed by '.' or '/'. Most paths have
 * neither ("/ping", "/api/v1/items"), and are left as they are after this one scan. */
static int
may_change(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '%')
			return 1;
		if (p[i] == '/' && i + 1 < len && (p[i + 1] == '.' || p[i + 1] == '/'))
			return 1;
	}
	return 0;
}

/* Copies the segment that starts at p[*i] (up to the next literal '/' or n) to p[*o],
 * pct-decoding unreserved characters (step 1). Returns 0, or -1 with *why set. */
static int
copy_segment(char *p, size_t n, size_t *i, size_t *o, const char **why)
{
	static const char hex[] = "0123456789ABCDEF";

	while (*i < n && p[*i] != '/') {
		if (p[*i] != '%') {
			p[(*o)++] = p[(*i)++];
			continue;
		}
		/* The request-line rules let only "%" HEXDIG HEXDIG through; checked again all the
		 * same, since a wrong one would index hex[] out of bounds. */
		int hi = *i + 2 < n ? lg_hexval((unsigned char)p[*i + 1]) : -1;
		int lo = hi >= 0 ? lg_hexval((unsigned char)p[*i + 2]) : -1;
		if (lo < 0) {
			*why = "bad pct-encoding in the path";
			return -1;
		}
		int v = hi << 4 | lo;
		*i += 3;
		if (v == '/' || v == 0) {
			*why = v ? "an encoded '/' (%2F) in the path" : "an encoded NUL (%00) in the path";
			return -1;
		}
		if (unreserved((unsigned char)v)) {
			p[(*o)++] = (char)v;
		} else {
			p[(*o)++] = '%';
			p[(*o)++] = hex[v >> 4];
			p[(*o)++] = hex[v & 15];
		}
	}
	return 0;
}

int
lg_path_normalize(char *p, size_t *len, int keep_slashes, const char **why)
{
	size_t n = *len, i = 0, o = 0;

	if (!may_change(p, n))
		return 0;
	/* Invariant: p[0..o) is the output so far, "" or "/seg/seg..." (o <= i always: a
	 * decoded byte is shorter than its encoding, a dropped segment shorter still). */
	while (i < n) {
		size_t slash = o, s0;

		i++; /* the '/' at p[i] */
		if (!keep_slashes)
			while (i < n && p[i] == '/')
				i++;
		p[o++] = '/';
		s0 = o;
		if (copy_segment(p, n, &i, &o, why) == -1)
			return -1;
		if (o - s0 == 1 && p[s0] == '.') {
			o = slash;                /* "/." goes */
		} else if (o - s0 == 2 && p[s0] == '.' && p[s0 + 1] == '.') {
			if (slash == 0) {
				*why = "the path climbs above the root (\"..\")";
				return -1;
			}
			o = slash;                /* "/.." goes, with the segment before it */
			while (p[o - 1] != '/')
				o--;
			o--;
		} else {
			continue;
		}
		if (i == n)                       /* a last "." or "..": the path ends in '/' */
			p[o++] = '/';
	}
	*len = o;
	return 0;
}
