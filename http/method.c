#include "http/method.h"

#include <string.h>

#define LG_METHOD_STR(num, name, string) [num] = #string,
static const char *const tokens[] = { LG_HTTP_METHOD_MAP(LG_METHOD_STR) };
#undef LG_METHOD_STR
#define LG_METHOD_LEN(num, name, string) [num] = sizeof(#string) - 1,
static const unsigned char lens[] = { LG_HTTP_METHOD_MAP(LG_METHOD_LEN) };
#undef LG_METHOD_LEN

/* lg_http_method_find's search, shared with lg_http_methods_parse so that the request line's
 * call stays the function's only one (the link-time optimizer then inlines it there: 17
 * instructions a request, bench/bench_instr.py). */
static inline int
find(const char *m, size_t len)
{
	if (len == 3 && memcmp(m, "GET", 3) == 0) /* most requests */
		return HTTP_GET;
	/* 34 short tokens: the first byte and the length rule out nearly all */
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++)
		if (tokens[i][0] == m[0] && lens[i] == len && memcmp(tokens[i], m, len) == 0)
			return (int)i;
	return -1;
}

int
lg_http_method_find(const char *m, size_t len)
{
	return find(m, len);
}

const char *
lg_http_method_str(unsigned m)
{
	return m < sizeof(tokens) / sizeof(tokens[0]) ? tokens[m] : "<unknown>";
}

uint64_t
lg_http_methods_parse(const char *list)
{
	uint64_t set = 0;
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ", \t");

		if (n > 0) {
			int m = find(p, n);

			if (m < 0)
				return 0;
			set |= LG_HTTP_METHOD_BIT(m);
		}
		p += n;
		p += strspn(p, ", \t");
	}
	return set;
}

/* The order of an Allow list: these first, then the rest by number. */
static const unsigned char first[] = { HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_DELETE,
	HTTP_PATCH };
#define NFIRST (sizeof(first) / sizeof(first[0]))

size_t
lg_http_methods_str(uint64_t set, char *buf, size_t cap)
{
	size_t len = 0;
	uint64_t done = 0;

	if (cap == 0)
		return 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < NFIRST + LG_HTTP_NMETHODS; i++) {
		unsigned m = i < NFIRST ? first[i] : i - NFIRST;
		size_t n = lens[m], sep = len ? 2 : 0;

		if (!(set & LG_HTTP_METHOD_BIT(m)) || (done & LG_HTTP_METHOD_BIT(m)))
			continue;
		done |= LG_HTTP_METHOD_BIT(m);
		if (sep + n >= cap - len)
			break; /* does not fit whole, with the NUL */
		memcpy(buf + len, ", ", sep);
		memcpy(buf + len + sep, tokens[m], n + 1);
		len += sep + n;
	}
	return len;
}
