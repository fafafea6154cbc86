/* The strings of the relay's messages (relay.h), written by one side and read by the other. */
#include "relay.h"

#include <string.h>

int
lg_pyr_put(unsigned char *buf, size_t cap, size_t *used, const void *s, size_t n)
{
	uint32_t n32 = (uint32_t)n;

	if (n > UINT32_MAX || *used > cap || cap - *used < sizeof(n32) + n + 1)
		return -1;
	memcpy(buf + *used, &n32, sizeof(n32));
	if (n > 0)
		memcpy(buf + *used + sizeof(n32), s, n);
	buf[*used + sizeof(n32) + n] = '\0';
	*used += sizeof(n32) + n + 1;
	return 0;
}

int
lg_pyr_get(const unsigned char *buf, size_t len, size_t *at, const char **s, size_t *n)
{
	uint32_t n32;

	if (*at > len || len - *at < sizeof(n32))
		return -1;
	memcpy(&n32, buf + *at, sizeof(n32));
	if (len - *at - sizeof(n32) < (size_t)n32 + 1 || buf[*at + sizeof(n32) + n32] != '\0')
		return -1;
	*s = (const char *)buf + *at + sizeof(n32);
	*n = n32;
	*at += sizeof(n32) + n32 + 1;
	return 0;
}
