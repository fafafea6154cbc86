#include "http/method.h"

#include <string.h>

#define LG_METHOD_STR(num, name, string) [num] = #string,
static const char *const tokens[] = { LG_HTTP_METHOD_MAP(LG_METHOD_STR) };
#undef LG_METHOD_STR
#define LG_METHOD_LEN(num, name, string) [num] = sizeof(#string) - 1,
static const unsigned char lens[] = { LG_HTTP_METHOD_MAP(LG_METHOD_LEN) };
#undef LG_METHOD_LEN

int
lg_http_method_find(const char *m, size_t len)
{
	if (len == 3 && memcmp(m, "GET", 3) == 0) /* most requests */
		return HTTP_GET;
	/* 34 short tokens: the first byte and the length rule out nearly all */
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++)
		if (tokens[i][0] == m[0] && lens[i] == len && memcmp(tokens[i], m, len) == 0)
			return (int)i;
	return -1;
}

const char *
lg_http_method_str(unsigned m)
{
	return m < sizeof(tokens) / sizeof(tokens[0]) ? tokens[m] : "<unknown>";
}
