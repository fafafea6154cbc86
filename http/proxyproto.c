/* The PROXY protocol header parser (http/proxyproto.h; haproxy doc/proxy-protocol.txt). */
#include "http/proxyproto.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

/* spec 2.2: the twelve bytes that begin a version 2 header (no valid HTTP or v1 line starts
 * with them: CR LF CR LF NUL) */
static const uint8_t v2_sig[12] = {
	0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a
};
static const char v1_sig[] = "PROXY ";
#define V1_SIG_LEN (sizeof(v1_sig) - 1)

/* Whether the n bytes at p are the first n of sig (sig_len bytes), n < sig_len or not. */
static int
prefix_of(const uint8_t *p, size_t n, const void *sig, size_t sig_len)
{
	return memcmp(p, sig, n < sig_len ? n : sig_len) == 0;
}

/* One space-ended field of a v1 line at *at (before end, the CR): its bytes into out (cap),
 * *at moved past the space, or past the field when last (no space then). 0, or -1. */
static int
v1_field(const char **at, const char *end, char *out, size_t cap, int last)
{
	const char *p = *at, *stop = p;

	while (stop < end && *stop != ' ')
		stop++;
	if (stop == p || (size_t)(stop - p) >= cap || (last ? stop != end : stop == end))
		return -1;
	memcpy(out, p, (size_t)(stop - p));
	out[stop - p] = '\0';
	*at = last ? stop : stop + 1;
	return 0;
}

/* A v1 port: 1-5 decimal digits, no leading zero but "0" itself, at most 65535. */
static int
v1_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 5 || (s[0] == '0' && n > 1))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

/* The fields after "PROXY " up to the CR at end (spec 2.1): "TCP4 src dst sport dport",
 * "TCP6 ...", or "UNKNOWN" with anything after it. */
static int
v1_fields(const char *at, const char *end, struct lg_proxy_addr *out)
{
	char proto[8], src[46], dst[46], sport[8], dport[8];

	if (end - at >= 7 && memcmp(at, "UNKNOWN", 7) == 0 && (end - at == 7 || at[7] == ' ')) {
		out->family = 0;
		return 0;
	}
	if (v1_field(&at, end, proto, sizeof(proto), 0) == -1)
		return -1;
	if (strcmp(proto, "TCP4") == 0)
		out->family = AF_INET;
	else if (strcmp(proto, "TCP6") == 0)
		out->family = AF_INET6;
	else
		return -1;
	if (v1_field(&at, end, src, sizeof(src), 0) == -1 ||
	    v1_field(&at, end, dst, sizeof(dst), 0) == -1 ||
	    v1_field(&at, end, sport, sizeof(sport), 0) == -1 ||
	    v1_field(&at, end, dport, sizeof(dport), 1) == -1)
		return -1;
	if (inet_pton(out->family, src, out->src) != 1 ||
	    inet_pton(out->family, dst, out->dst) != 1 ||
	    v1_port(sport, &out->src_port) == -1 || v1_port(dport, &out->dst_port) == -1)
		return -1;
	return 0;
}

/* Version 1 (spec 2.1): one line of printable US-ASCII ending in CRLF, 107 bytes at most. */
static ssize_t
parse_v1(const uint8_t *p, size_t len, struct lg_proxy_addr *out)
{
	size_t n = len < LG_PROXY_V1_MAX - 1 ? len : LG_PROXY_V1_MAX - 1; /* where the CR may be */

	for (size_t i = V1_SIG_LEN; i < n; i++) {
		if (p[i] == '\r') {
			if (i + 1 == len)
				return LG_PROXY_PARTIAL;
			if (p[i + 1] != '\n')
				return LG_PROXY_BAD;
			memset(out, 0, sizeof(*out));
			out->version = 1;
			if (v1_fields((const char *)p + V1_SIG_LEN, (const char *)p + i, out) == -1)
				return LG_PROXY_BAD;
			return (ssize_t)(i + 2);
		}
		if (p[i] < 0x20 || p[i] > 0x7e)
			return LG_PROXY_BAD;
	}
	/* no CR among the first 106 bytes: longer than the longest line */
	return len >= LG_PROXY_V1_MAX - 1 ? LG_PROXY_BAD : LG_PROXY_PARTIAL;
}

/* The TLVs of a v2 header (spec 2.2.1): type, 16-bit length, value, each within the n bytes
 * at p. Their meaning is not needed here: skipped. */
static int
v2_tlvs(const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t vlen;

		if (n < 3)
			return -1;
		vlen = (size_t)p[1] << 8 | p[2];
		if (vlen > n - 3)
			return -1;
		p += 3 + vlen;
		n -= 3 + vlen;
	}
	return 0;
}

/* Version 2 (spec 2.2), the whole header of 16 + alen bytes at p: the command, the family and
 * transport, the addresses, the TLVs. */
static int
v2_body(const uint8_t *p, size_t alen, struct lg_proxy_addr *out)
{
	uint8_t cmd = p[12] & 0x0f, fam = p[13] >> 4, proto = p[13] & 0x0f;
	const uint8_t *a = p + 16;
	size_t need, asz;

	if (p[12] >> 4 != 0x2 || cmd > 0x1)
		return -1;            /* another version, or an unassigned command: drop */
	memset(out, 0, sizeof(*out));
	out->version = 2;
	if (cmd == 0x0)
		return 0;             /* LOCAL: the real endpoints; the block is discarded whole */
	if (fam > 0x3 || proto > 0x2)
		return -1;
	need = fam == 0x1 ? 12 : fam == 0x2 ? 36 : fam == 0x3 ? 216 : 0;
	if (alen < need)
		return -1;
	if (v2_tlvs(a + need, alen - need) == -1)
		return -1;
	if ((fam != 0x1 && fam != 0x2) || proto != 0x1)
		return 0;             /* UNSPEC, UNIX or datagram: the peer's own address */
	out->family = fam == 0x1 ? AF_INET : AF_INET6;
	asz = fam == 0x1 ? 4 : 16;
	memcpy(out->src, a, asz);
	memcpy(out->dst, a + asz, asz);
	out->src_port = (uint16_t)(a[2 * asz] << 8 | a[2 * asz + 1]);
	out->dst_port = (uint16_t)(a[2 * asz + 2] << 8 | a[2 * asz + 3]);
	return 0;
}

static ssize_t
parse_v2(const uint8_t *p, size_t len, struct lg_proxy_addr *out)
{
	size_t alen;

	if (len < 16) {
		/* the version and command byte can be judged as soon as it is in */
		return len > 12 && (p[12] >> 4 != 0x2 || (p[12] & 0x0f) > 0x1) ? LG_PROXY_BAD :
		    LG_PROXY_PARTIAL;
	}
	alen = (size_t)p[14] << 8 | p[15];
	if (alen > LG_PROXY_V2_MAX_LEN)
		return LG_PROXY_BAD;
	if (len < 16 + alen) {
		/* what is in must still be able to end well */
		return p[12] >> 4 != 0x2 || (p[12] & 0x0f) > 0x1 ? LG_PROXY_BAD : LG_PROXY_PARTIAL;
	}
	if (v2_body(p, alen, out) == -1)
		return LG_PROXY_BAD;
	return (ssize_t)(16 + alen);
}

ssize_t
lg_proxy_parse(const void *buf, size_t len, struct lg_proxy_addr *out)
{
	const uint8_t *p = buf;

	if (len == 0)
		return LG_PROXY_PARTIAL;
	if (p[0] == v2_sig[0]) {
		if (!prefix_of(p, len, v2_sig, sizeof(v2_sig)))
			return LG_PROXY_BAD;
		return len < sizeof(v2_sig) ? LG_PROXY_PARTIAL : parse_v2(p, len, out);
	}
	if (!prefix_of(p, len, v1_sig, V1_SIG_LEN))
		return LG_PROXY_BAD;
	return len <= V1_SIG_LEN ? LG_PROXY_PARTIAL : parse_v1(p, len, out);
}
