#include "common/cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
parse_one(const char *s, size_t n, struct lg_cidr *c)
{
	char buf[64], *slash, *end;
	unsigned long bits;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if ((slash = strchr(buf, '/')) != NULL)
		*slash++ = '\0';
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, buf, c->addr) == 1)
		c->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, c->addr) == 1)
		c->family = AF_INET6;
	else
		return -1;
	c->bits = c->family == AF_INET ? 32 : 128;
	if (slash != NULL) {
		errno = 0;
		bits = strtoul(slash, &end, 10);
		if (errno || end == slash || *end || bits > c->bits)
			return -1;
		c->bits = (unsigned)bits;
	}
	return 0;
}

int
lg_cidr_parse(const char *list, struct lg_cidr *out)
{
	int n = 0;

	for (list += strspn(list, " ,\t"); *list; list += strspn(list, " ,\t")) {
		size_t len = strcspn(list, " ,\t");

		if (n == LG_CIDR_MAX) {
			errno = E2BIG;
			return -1;
		}
		if (parse_one(list, len, &out[n++]) == -1) {
			errno = EINVAL;
			return -1;
		}
		list += len;
	}
	return n;
}

static int
prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return 0;
	return rest == 0 || ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

int
lg_cidr_match(const struct lg_cidr *ranges, int n, int family, const void *addr)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const uint8_t *a = addr;

	if (family == AF_INET6 && memcmp(a, mapped, sizeof(mapped)) == 0) {
		family = AF_INET;
		a += 12;
	}
	for (int i = 0; i < n; i++)
		if (ranges[i].family == family && prefix_equal(ranges[i].addr, a, ranges[i].bits))
			return 1;
	return 0;
}
