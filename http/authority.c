/* The authority grammar of a Host value and of an absolute-form target (RFC 9112 section 3.2,
 * RFC 3986 section 3.2), apart from the framing state machine that uses it (http/frame.c). */
#include "http/authority.h"

#include <arpa/inet.h>
#include <string.h>

#include "common/query.h"

/* The inside of an IP-literal's brackets (RFC 3986 section 3.2.2): an IPv6address, or an
 * IPvFuture, "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ) (lg_host_char has judged
 * those characters). Returns 1 when valid. */
static int
ip_literal_ok(const char *v, size_t len)
{
	char text[INET6_ADDRSTRLEN + 1];
	unsigned char bin[16];
	size_t i = 1;

	if (len > 0 && (v[0] == 'v' || v[0] == 'V')) {
		while (i < len && lg_hexval((unsigned char)v[i]) >= 0)
			i++;
		return i > 1 && i < len && v[i] == '.' && i + 1 < len &&
		    memchr(v + i + 1, '%', len - i - 1) == NULL;
	}
	if (len == 0 || len >= sizeof(text))
		return 0;
	memcpy(text, v, len);
	text[len] = '\0';
	return inet_pton(AF_INET6, text, bin) == 1;
}

/* The syntax of a whole Host value or of an absolute-form target's authority (RFC 9112
 * sections 3.2 and 3.2.2: uri-host [ ":" port ]; RFC 3986 sections 3.2.2-3.2.3: an IP-literal
 * is bracketed and holds an IPv6 address or an IPvFuture, a reg-name or IPv4 address has no
 * ':' or bracket and its '%' starts a pct-encoding, "%" HEXDIG HEXDIG; port = *DIGIT).
 * lg_host_char / lg_authority_char have refused the other delimiters byte by byte; white
 * space outside brackets is refused here. An empty value is valid for Host (a target without
 * an authority). Returns 1 when valid. */
int
lg_host_syntax_ok(const char *v, size_t len)
{
	size_t i = 0;

	if (len > 0 && v[0] == '[') {
		const char *close = memchr(v, ']', len);

		if (close == NULL || !ip_literal_ok(v + 1, (size_t)(close - v) - 1))
			return 0;
		i = (size_t)(close - v) + 1;
	} else {
		while (i < len && v[i] != ':') {
			while (i < len && lg_ch((unsigned char)v[i], LG_CH_REGNAME))
				i++;
			if (i == len || v[i] == ':')
				break;
			if (v[i] != '%' || i + 2 >= len || lg_hexval((unsigned char)v[i + 1]) < 0 ||
			    lg_hexval((unsigned char)v[i + 2]) < 0)
				return 0; /* a bracket, white space, or a '%' that starts no pct-encoding */
			i += 3;
		}
	}
	if (i == len)
		return 1;
	if (v[i] != ':')
		return 0;
	for (i++; i < len; i++)
		if (v[i] < '0' || v[i] > '9')
			return 0;
	return 1;
}

