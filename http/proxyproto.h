/* The PROXY protocol header (versions 1 and 2) a load balancer sends before the client's bytes,
 * naming the client it accepted (haproxy doc/proxy-protocol.txt, "The PROXY protocol", 2020/03/05
 * revision). A pure parser over a byte buffer: no socket, no worker state, no allocation. The
 * listener side (which listeners expect it, from which peers) is worker/core/client.c's. */
#ifndef LG_HTTP_PROXYPROTO_H
#define LG_HTTP_PROXYPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest header taken: a version 1 line is at most 107 bytes with its CRLF (spec 2.1); a
 * version 2 header is its 16 fixed bytes plus at most LG_PROXY_V2_MAX_LEN of addresses and
 * TLVs (the spec allows 65535; 536 bytes is what it says a receiver should take whole, and
 * HAProxy's own TLVs - unique id, ALPN, authority, SSL - stay well within this). */
#define LG_PROXY_V1_MAX     107
#define LG_PROXY_V2_MAX_LEN 2048
#define LG_PROXY_MAX        (16 + LG_PROXY_V2_MAX_LEN)

#define LG_PROXY_PARTIAL (-2)  /* every byte so far is a valid beginning: read more */
#define LG_PROXY_BAD     (-1)  /* not a valid header, or longer than LG_PROXY_MAX: close */

/* What a header says. family 0 means "the connection's own peer": a version 2 LOCAL command
 * (a health check of the proxy itself), a version 1 UNKNOWN line, or a version 2 address
 * family other than TCP over IPv4/IPv6 (UNSPEC, UNIX, or a datagram transport). */
struct lg_proxy_addr {
	int family;              /* AF_INET, AF_INET6, or 0 (above) */
	uint8_t src[16];         /* the client, network order; 4 bytes used for AF_INET */
	uint8_t dst[16];         /* the address the client connected to */
	uint16_t src_port;       /* host order */
	uint16_t dst_port;
	int version;             /* 1 or 2 */
};

/* Parses the PROXY header at the start of buf (len bytes: what was read so far; the caller
 * keeps reading into the same buffer and calls again with the longer len). Returns the
 * header's length in bytes (> 0; buf[that..len) is the client's own data) with *out filled,
 * LG_PROXY_PARTIAL when every byte so far could begin a valid header and it is not complete,
 * or LG_PROXY_BAD when buf cannot begin one: neither signature, a version 1 line that is not
 * "PROXY TCP4|TCP6|UNKNOWN ..." with one space between numeric addresses and decimal ports
 * (spec 2.1), a version 2 header of another version or command, a length past
 * LG_PROXY_V2_MAX_LEN, addresses longer than the length, or TLVs that run past it (spec 2.2,
 * 2.2.x: TLVs are skipped, not interpreted). A result once LG_PROXY_BAD stays so for any
 * longer buffer with the same beginning. The caller owns buf and out; nothing is kept. */
ssize_t lg_proxy_parse(const void *buf, size_t len, struct lg_proxy_addr *out);

#endif
