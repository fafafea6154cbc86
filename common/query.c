#include "common/query.h"

#include <string.h>

const char *
lg_query_param(const char *q, size_t qlen, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	const char *p = q, *end;

	if (q == NULL)
		return NULL; /* NULL + 0 would be undefined behaviour (C11 6.5.6) */
	end = q + qlen;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;

		if ((size_t)(stop - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
			*len = (size_t)(stop - p) - nl - 1;
			return p + nl + 1;
		}
		p = amp ? amp + 1 : end;
	}
	return NULL;
}

long
lg_query_decode(const char *v, size_t len, char *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = v[i];

		if (c == '%') {
			int hi = i + 2 < len ? lg_hexval((unsigned char)v[i + 1]) : -1;
			int lo = hi >= 0 ? lg_hexval((unsigned char)v[i + 2]) : -1;

			if (lo < 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (n == cap)
			return -1;
		out[n++] = c;
	}
	return (long)n;
}
