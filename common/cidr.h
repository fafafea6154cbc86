/* Address ranges for trusted proxies: "10.0.0.0/8 192.168.1.7 ::1 fd00::/8", blank or comma
 * separated (RFC 4632 prefix notation; an address without /N is one address). */
#ifndef LG_COMMON_CIDR_H
#define LG_COMMON_CIDR_H

#include <stddef.h>
#include <stdint.h>

#define LG_CIDR_MAX 16

struct lg_cidr {
	int family;              /* AF_INET or AF_INET6 */
	uint8_t addr[16];        /* network byte order; 4 bytes used for AF_INET */
	unsigned bits;           /* prefix length */
};

/* Parses list into out (at most LG_CIDR_MAX ranges). Returns how many, or -1 with errno
 * EINVAL for a malformed entry or E2BIG for too many. "" gives 0. */
int lg_cidr_parse(const char *list, struct lg_cidr *out);

/* 1 when the address (family AF_INET or AF_INET6, bytes in network order) is in one of the n
 * ranges, else 0. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) matches IPv4 ranges. */
int lg_cidr_match(const struct lg_cidr *ranges, int n, int family, const void *addr);

#endif
