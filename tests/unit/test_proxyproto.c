/* Unit tests for http/proxyproto.c: PROXY protocol versions 1 and 2 (haproxy
 * doc/proxy-protocol.txt), each header also fed split at every byte: every proper prefix of a
 * good header is partial, and a bad one is never taken. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "http/proxyproto.h"

static const uint8_t sig[12] = {
	0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a
};

/* Feeds buf[0..n) by every prefix length: each proper prefix must be partial, the whole must
 * give n (the header ends there: trailing client bytes are appended by the callers). */
static void
good_at_every_split(const void *buf, size_t n, size_t header_len, struct lg_proxy_addr *out)
{
	for (size_t k = 0; k < header_len; k++) {
		struct lg_proxy_addr a;

		assert_int_equal(lg_proxy_parse(buf, k, &a), LG_PROXY_PARTIAL);
	}
	for (size_t k = header_len; k <= n; k++)
		assert_int_equal(lg_proxy_parse(buf, k, out), (ssize_t)header_len);
}

/* A bad header: some prefix is refused, none is ever taken, and once refused every longer
 * prefix is too. */
static void
bad_at_every_split(const void *buf, size_t n)
{
	int refused = 0;

	for (size_t k = 1; k <= n; k++) {
		struct lg_proxy_addr a;
		ssize_t r = lg_proxy_parse(buf, k, &a);

		assert_true(r == LG_PROXY_PARTIAL || r == LG_PROXY_BAD);
		if (refused)
			assert_int_equal(r, LG_PROXY_BAD);
		refused |= r == LG_PROXY_BAD;
	}
	assert_true(refused);
}

static void
bad_str(const char *s)
{
	bad_at_every_split(s, strlen(s));
}

static void
test_v1_tcp4(void **state)
{
	const char *s = "PROXY TCP4 203.0.113.9 192.0.2.1 56324 443\r\nGET / HTTP/1.1\r\n";
	size_t hl = strlen("PROXY TCP4 203.0.113.9 192.0.2.1 56324 443\r\n");
	struct lg_proxy_addr a;
	uint8_t want[4];

	good_at_every_split(s, strlen(s), hl, &a);
	assert_int_equal(a.version, 1);
	assert_int_equal(a.family, AF_INET);
	inet_pton(AF_INET, "203.0.113.9", want);
	assert_memory_equal(a.src, want, 4);
	inet_pton(AF_INET, "192.0.2.1", want);
	assert_memory_equal(a.dst, want, 4);
	assert_int_equal(a.src_port, 56324);
	assert_int_equal(a.dst_port, 443);
}

static void
test_v1_tcp6(void **state)
{
	const char *s = "PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
	struct lg_proxy_addr a;
	uint8_t want[16];

	good_at_every_split(s, strlen(s), strlen(s), &a);
	assert_int_equal(a.family, AF_INET6);
	inet_pton(AF_INET6, "2001:db8::1", want);
	assert_memory_equal(a.src, want, 16);
	assert_int_equal(a.src_port, 65535);
	assert_int_equal(a.dst_port, 0);
}

static void
test_v1_unknown_is_the_peer(void **state)
{
	const char *plain = "PROXY UNKNOWN\r\n";
	const char *more = "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n";
	struct lg_proxy_addr a;

	good_at_every_split(plain, strlen(plain), strlen(plain), &a);
	assert_int_equal(a.family, 0);
	good_at_every_split(more, strlen(more), strlen(more), &a);
	assert_int_equal(a.family, 0);
}

static void
test_v1_longest_line(void **state)
{
	/* spec 2.1: the worst case is 107 bytes with the CRLF (UNKNOWN, full IPv6 addresses) */
	const char *worst = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	char over[200];
	struct lg_proxy_addr a;

	assert_int_equal(strlen(worst), LG_PROXY_V1_MAX);
	good_at_every_split(worst, strlen(worst), strlen(worst), &a);
	/* UNKNOWN padded to 108 bytes: one too many */
	memset(over, 'x', sizeof(over));
	memcpy(over, "PROXY UNKNOWN ", 14);
	memcpy(over + 106, "\r\n", 2);
	bad_at_every_split(over, 108);
	/* no CR at all */
	bad_at_every_split(over, sizeof(over));
}

static void
test_v1_malformed(void **state)
{
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n");         /* LF without CR */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX");        /* CR without LF */
	bad_str("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n");      /* two spaces */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n");      /* trailing space */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n");         /* a field missing */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n");     /* one too many */
	bad_str("PROXY TCP4 ::1 ::1 1 2\r\n");               /* family mismatch */
	bad_str("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n");
	bad_str("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n");         /* not an address */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n");   /* port out of range */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n");      /* leading zero */
	bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n");
	bad_str("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n");       /* unknown protocol */
	bad_str("PROXY UNKNOWNX\r\n");
	bad_str("PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n");      /* a control byte */
	bad_str("PROXY \r\n");
	bad_str("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n");       /* the signature is case-sensitive */
	bad_str("PROXYTCP4 1.2.3.4 5.6.7.8 1 2\r\n");
	bad_str("GET / HTTP/1.1\r\n\r\n");                   /* no header at all */
	bad_str("\r\n\r\nGET /");                            /* neither signature */
}

/* A v2 header: ver_cmd, fam, then the payload of plen bytes, into out; returns its length. */
static size_t
v2(uint8_t *out, uint8_t ver_cmd, uint8_t fam, const void *payload, size_t plen)
{
	memcpy(out, sig, 12);
	out[12] = ver_cmd;
	out[13] = fam;
	out[14] = (uint8_t)(plen >> 8);
	out[15] = (uint8_t)plen;
	if (plen > 0)
		memcpy(out + 16, payload, plen);
	return 16 + plen;
}

static void
test_v2_tcp4_with_tlvs(void **state)
{
	uint8_t p[12 + 3 + 5 + 3 + 0 + 4], buf[128];
	struct lg_proxy_addr a;
	size_t n;

	inet_pton(AF_INET, "198.51.100.7", p);
	inet_pton(AF_INET, "127.0.0.1", p + 4);
	p[8] = 0xdb; p[9] = 0x04;                  /* 56068 */
	p[10] = 0x1f; p[11] = 0x90;                /* 8080 */
	memcpy(p + 12, "\x02\x00\x05host1", 8);   /* PP2_TYPE_AUTHORITY */
	memcpy(p + 20, "\x04\x00\x00", 3);        /* PP2_TYPE_NOOP, empty */
	memcpy(p + 23, "\x04\x00\x01\x00", 4);    /* a NOOP of one byte */
	n = v2(buf, 0x21, 0x11, p, sizeof(p));
	memcpy(buf + n, "GET /", 5);
	good_at_every_split(buf, n + 5, n, &a);
	assert_int_equal(a.version, 2);
	assert_int_equal(a.family, AF_INET);
	assert_memory_equal(a.src, p, 4);
	assert_int_equal(a.src_port, 56068);
	assert_int_equal(a.dst_port, 8080);
}

static void
test_v2_tcp6(void **state)
{
	uint8_t p[36], buf[64];
	struct lg_proxy_addr a;
	size_t n;

	memset(p, 0, sizeof(p));
	inet_pton(AF_INET6, "2001:db8::42", p);
	inet_pton(AF_INET6, "::1", p + 16);
	p[32] = 0x01; p[33] = 0x02;
	n = v2(buf, 0x21, 0x21, p, sizeof(p));
	good_at_every_split(buf, n, n, &a);
	assert_int_equal(a.family, AF_INET6);
	assert_memory_equal(a.src, p, 16);
	assert_int_equal(a.src_port, 0x0102);
}

static void
test_v2_local_and_unspec_are_the_peer(void **state)
{
	uint8_t buf[64], junk[7] = { 1, 2, 3, 4, 5, 6, 7 }, unix_addr[216];
	struct lg_proxy_addr a;
	uint8_t big[300];
	size_t n;

	/* LOCAL (a proxy's own health check): the block is discarded, whatever its family */
	n = v2(buf, 0x20, 0x00, NULL, 0);
	good_at_every_split(buf, n, n, &a);
	assert_int_equal(a.family, 0);
	n = v2(buf, 0x20, 0x11, junk, sizeof(junk));
	good_at_every_split(buf, n, n, &a);
	assert_int_equal(a.family, 0);
	/* PROXY over UNSPEC: the real endpoints */
	n = v2(buf, 0x21, 0x00, NULL, 0);
	good_at_every_split(buf, n, n, &a);
	assert_int_equal(a.family, 0);
	/* PROXY over UNIX streams: no IP address to take */
	memset(unix_addr, 0, sizeof(unix_addr));
	n = v2(big, 0x21, 0x31, unix_addr, sizeof(unix_addr));
	good_at_every_split(big, n, n, &a);
	assert_int_equal(a.family, 0);
}

static void
test_v2_refused(void **state)
{
	uint8_t buf[LG_PROXY_MAX + 64], p[16] = { 0 };
	size_t n;

	/* a bad signature, at each of its bytes */
	for (size_t i = 0; i < 12; i++) {
		n = v2(buf, 0x21, 0x11, p, 12);
		buf[i] ^= 0x40;
		bad_at_every_split(buf, n);
	}
	bad_at_every_split(buf, v2(buf, 0x11, 0x11, p, 12));  /* version 1 in a v2 header */
	bad_at_every_split(buf, v2(buf, 0x31, 0x11, p, 12));  /* version 3 */
	bad_at_every_split(buf, v2(buf, 0x22, 0x11, p, 12));  /* command 2 */
	bad_at_every_split(buf, v2(buf, 0x21, 0x41, p, 12));  /* family 4 */
	bad_at_every_split(buf, v2(buf, 0x21, 0x13, p, 12));  /* transport 3 */
	bad_at_every_split(buf, v2(buf, 0x21, 0x11, p, 11));  /* IPv4 addresses cut */
	bad_at_every_split(buf, v2(buf, 0x21, 0x21, p, 16));  /* IPv6 addresses cut */
	/* a TLV running past the length */
	memcpy(p + 12, "\x02\x00\x05h", 4);
	bad_at_every_split(buf, v2(buf, 0x21, 0x11, p, 16));
	/* a TLV header cut */
	bad_at_every_split(buf, v2(buf, 0x21, 0x11, p, 14));
	/* oversized: a length past LG_PROXY_V2_MAX_LEN is refused from its 16th byte on */
	memset(buf, 0, sizeof(buf));
	n = v2(buf, 0x21, 0x11, p, 12);
	buf[14] = (uint8_t)((LG_PROXY_V2_MAX_LEN + 1) >> 8);
	buf[15] = (uint8_t)(LG_PROXY_V2_MAX_LEN + 1);
	assert_int_equal(lg_proxy_parse(buf, 15, &(struct lg_proxy_addr){ 0 }), LG_PROXY_PARTIAL);
	assert_int_equal(lg_proxy_parse(buf, 16, &(struct lg_proxy_addr){ 0 }), LG_PROXY_BAD);
	bad_at_every_split(buf, 16 + LG_PROXY_V2_MAX_LEN + 1);
	/* the longest taken */
	buf[14] = (uint8_t)(LG_PROXY_V2_MAX_LEN >> 8);
	buf[15] = (uint8_t)LG_PROXY_V2_MAX_LEN;
	buf[12] = 0x20;
	assert_int_equal(lg_proxy_parse(buf, LG_PROXY_MAX, &(struct lg_proxy_addr){ 0 }),
	    LG_PROXY_MAX);
	(void)n;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_tcp4),
		cmocka_unit_test(test_v1_tcp6),
		cmocka_unit_test(test_v1_unknown_is_the_peer),
		cmocka_unit_test(test_v1_longest_line),
		cmocka_unit_test(test_v1_malformed),
		cmocka_unit_test(test_v2_tcp4_with_tlvs),
		cmocka_unit_test(test_v2_tcp6),
		cmocka_unit_test(test_v2_local_and_unspec_are_the_peer),
		cmocka_unit_test(test_v2_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
