#include "http/method.h"

#include <string.h>

#define LG_METHOD_STR(num, name, string) [num] = #string,
static const char *const tokens[] = { LG_HTTP_METHOD_MAP(LG_METHOD_STR) };
#undef LG_METHOD_STR

int
lg_http_method_find(const char *m, size_t len)
{
	/* 34 short tokens, once per request: the first byte and the length rule out nearly all */
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++)
		if (tokens[i][0] == m[0] && strlen(tokens[i]) == len && memcmp(tokens[i], m, len) == 0)
			return (int)i;
	return -1;
}

const char *
lg_http_method_str(unsigned m)
{
	return m < sizeof(tokens) / sizeof(tokens[0]) ? tokens[m] : "<unknown>";
}
