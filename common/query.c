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
