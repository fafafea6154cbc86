/* The request line (RFC 9112 sections 2.2, 3): checked once whole, with an early verdict on a
 * line that can no longer become one (http/frame.h lg_frame_request_line). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/query.h"
#include "http/authority.h"
#include "http/frame_rules.h"
#include "http/method.h"

/* Where the request-target that starts at b[t] ends: its SP, or end. */
static size_t
target_end(const unsigned char *b, size_t t, size_t end)
{
	while (t < end && b[t] != ' ')
		t++;
	return t;
}

/* Checks a request-target: its characters and pct-encoding (RFC 3986 section 2.1), then its
 * length. Returns 0 or -1 (f->status set). A target of target characters only, no '%', within
 * the limit (nearly every one) is judged in one table scan. */
static int
check_target(struct lg_frame *f, const unsigned char *t, size_t len, int whole)
{
	size_t n = 0;

	while (n < len && lg_ch(t[n], LG_CH_TARGET) && t[n] != '%')
		n++;
	if (n == len && len > 0 && len <= f->lim->max_target)
		return 0;
	/* Characters are judged only up to one past the limit, so a long target gets 414 however
	 * its bytes are split across reads. */
	size_t scan = len < f->lim->max_target + 1 ? len : f->lim->max_target + 1;

	if (scan < len)
		whole = 0;
	for (size_t i = 0; i < scan; i++) {
		if (!lg_ch(t[i], LG_CH_TARGET))
			return fail(f, 400, "character not allowed in the request-target");
		if (t[i] == '%' && ((i + 1 < scan && lg_hexval(t[i + 1]) < 0) ||
		    (i + 2 < scan && lg_hexval(t[i + 2]) < 0) || (whole && i + 2 >= len)))
			return fail(f, 400, "bad pct-encoding in the request-target");
	}
	if (len > f->lim->max_target)
		return fail(f, 414, "request-target over the limit");
	if (whole && len == 0)
		return fail(f, 400, "empty request-target");
	return 0;
}

/* The target forms served (RFC 9112 section 3.2): origin-form; absolute-form with an http or
 * https scheme, an authority without userinfo (RFC 9110 section 4.2.4 calls it an error) and a
 * path that may be empty (RFC 9110 section 4.2.3: it means "/"); asterisk-form for OPTIONS
 * (section 3.2.4). Authority-form (CONNECT) is not. Returns 0 or -1. */
static int
check_target_form(struct lg_frame *f, const unsigned char *t, size_t len, int options)
{
	size_t i;

	if (t[0] == '/')
		return 0;
	if (len == 1 && t[0] == '*') {
		if (!options)
			return fail(f, 400, "asterisk-form target with a method other than OPTIONS");
		f->asterisk = 1;
		return 0;
	}
	if (len > 7 && strncasecmp((const char *)t, "http://", 7) == 0)
		i = 7;
	else if (len > 8 && strncasecmp((const char *)t, "https://", 8) == 0)
		i = 8;
	else
		return fail(f, 400, "request-target is neither origin-form nor absolute-form");
	size_t start = i;
	while (i < len && t[i] != '/' && t[i] != '?') {
		unsigned char c = t[i++];

		if (!lg_authority_char(c))
			return fail(f, 400, "invalid authority in an absolute-form target");
	}
	if (i == start)
		return fail(f, 400, "absolute-form target without authority");
	/* the authority is read as Host is (RFC 9112 section 3.2.2: it replaces Host) */
	if (!lg_host_syntax_ok((const char *)t + start, i - start))
		return fail(f, 400, "invalid authority in an absolute-form target");
	return 0;
}

/* The longest method token accepted (the longest known one is 16 bytes, BASELINE-CONTROL). */
#define METHOD_MAX 32

/* A request line with no LF yet, grown past any valid length: name the first rule it breaks. */
static long
rl_too_long(struct lg_frame *f, const unsigned char *b, size_t len, size_t p)
{
	size_t m = p;

	while (m < len && lg_ch(b[m], LG_CH_TCHAR))
		m++;
	if (m == p || m >= len || b[m] != ' ' || m - p > METHOD_MAX)
		return fail(f, 400, "malformed method");
	size_t t = m + 1, e = t;
	while (e < len && b[e] != ' ')
		e++;
	if (check_target(f, b + t, e - t, 0) == -1)
		return -1;
	return fail(f, 400, "request line too long");
}

/* A request line with no LF yet: can its first bytes still start one? A method is 1*tchar
 * then SP (RFC 9110 section 9.1, RFC 9112 section 3), so a first byte that is no tchar (a TLS
 * ClientHello starts 0x16, SSH "SSH-" is fine until its CR), or a token longer than any
 * method, is answered 400 now instead of after the head timeout. The same rules as the
 * complete-line check below, so both agree on every input. Returns 0 or -1 (f->status set). */
static long
rl_cannot_be_http(struct lg_frame *f, const unsigned char *b, size_t len, size_t p)
{
	size_t m = p;

	while (m < len && m - p <= METHOD_MAX && lg_ch(b[m], LG_CH_TCHAR))
		m++;
	if (m - p > METHOD_MAX)
		return fail(f, 400, "malformed method");
	if (m == len)
		return 0; /* the method may go on */
	if (m == p && b[m] == '\r' && m + 1 == len)
		return 0; /* an empty line's LF may follow (RFC 9112 section 2.2) */
	if (m == p || b[m] != ' ')
		return fail(f, 400, "malformed method");
	return 0;
}

/* The request line at b[p..len) that is not the plain one, judged by the rules in their order:
 * the CR rule, then (once the LF is here) method, target, target form and version. Returns the
 * index of its LF when it passes them; 0 when more bytes are needed (f->rl_scanned advanced),
 * or 0 with f->status set when a rule failed. */
static size_t
line_rules(struct lg_frame *f, const unsigned char *b, size_t len, size_t p)
{
	size_t limit = f->lim->max_target + 64;
	const unsigned char *lf;

	if (f->rl_scanned < p)
		f->rl_scanned = p;
	lf = len > f->rl_scanned ? memchr(b + f->rl_scanned, '\n', len - f->rl_scanned) : NULL;
	/* A CR may only end the line, just before its LF (RFC 9112 section 2.2): one followed by
	 * any other byte settles it as soon as that byte is here, before any LF, not at the head
	 * timeout. Checked first, and only within the first `limit` bytes (past them the line is
	 * too long already), so the verdict is the same however the bytes were split into reads. */
	size_t upto = lf != NULL ? (size_t)(lf - b) : len; /* a CR at upto - 1 may end the line */

	if (upto > p + 1 && memchr(b + p, '\r', upto - 1 - p < limit ? upto - 1 - p : limit) != NULL) {
		fail(f, 400, "CR not followed by LF");
		return 0;
	}
	if (lf == NULL) {
		f->rl_scanned = len;
		if (len - p > limit)
			rl_too_long(f, b, len, p);
		else
			rl_cannot_be_http(f, b, len, p);
		return 0;
	}
	size_t end = (size_t)(lf - b), m = p;

	while (m < end && lg_ch(b[m], LG_CH_TCHAR))
		m++;
	if (m == p || b[m] != ' ' || m - p > METHOD_MAX) {
		fail(f, 400, "malformed method");
		return 0;
	}
	size_t t = m + 1, e = target_end(b, t, end);

	if (check_target(f, b + t, e - t, 1) == -1 || check_target_form(f, b + t, e - t,
	    m - p == 7 && memcmp(b + p, "OPTIONS", 7) == 0) == -1)
		return 0;
	/* " HTTP/" DIGIT "." DIGIT CR LF, exactly (RFC 9112 section 2.3) */
	if (end < e + 1 + 8 + 1 || end != e + 10 || b[end - 1] != '\r' ||
	    memcmp(b + e, " HTTP/", 6) != 0 || b[e + 6] < '0' || b[e + 6] > '9' ||
	    b[e + 7] != '.' || b[e + 8] < '0' || b[e + 8] > '9') {
		fail(f, 400, "malformed HTTP-version or line end");
		return 0;
	}
	if (b[e + 6] != '1' || b[e + 8] > '1') {
		fail(f, 505, "HTTP version other than 1.0 or 1.1");
		return 0;
	}
	return end;
}

long
lg_frame_request_line(struct lg_frame *f, const char *buf, size_t len)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t p = 0;

	/* RFC 9112 section 2.2: empty lines before the request line are ignored (CRLF only). */
	while (p + 1 < len && b[p] == '\r' && b[p + 1] == '\n')
		p += 2;
	if (p >= f->lim->max_head) /* they are bytes of the head as far as the limit goes */
		return fail(f, 431, "empty lines before the request line over the head limit");
	if (p < len && b[p] == '\n')
		return fail(f, 400, "bare LF");
	/* Known before the line is whole or valid, so a refusal of a HEAD has no body either. */
	f->head_method = len - p >= 5 && b[p] == 'H' && memcmp(b + p, "HEAD ", 5) == 0;
	/* The common line, a method, SP, a target of target bytes without '%' within the limit,
	 * " HTTP/1.0" or " HTTP/1.1" and CRLF, is read in one pass, without a search for its LF:
	 * none of its bytes before the CR is a CR or an LF (no tchar, no target byte is one), so
	 * it is the line the rules below would take, and they would find nothing to refuse in it
	 * before the method's. Any other line is judged by the rules, in their order. */
	size_t m = p, e = 0, end;

	while (m < len && lg_ch(b[m], LG_CH_TCHAR))
		m++;
	if (m > p && m - p <= METHOD_MAX && m < len && b[m] == ' ') {
		e = m + 1;
		while (e + 4 <= len && lg_ch4(b + e, LG_CH_TPLAIN))
			e += 4;
		while (e < len && lg_ch(b[e], LG_CH_TPLAIN))
			e++;
	}
	end = e + 10; /* the LF of a plain line */
	if (e > m + 1 && e - (m + 1) <= f->lim->max_target && end < len &&
	    memcmp(b + e, " HTTP/1.", 8) == 0 && (b[e + 8] == '0' || b[e + 8] == '1') &&
	    b[e + 9] == '\r' && b[end] == '\n') {
		if (check_target_form(f, b + m + 1, e - (m + 1),
		    m - p == 7 && memcmp(b + p, "OPTIONS", 7) == 0) == -1)
			return -1;
	} else if ((end = line_rules(f, b, len, p)) == 0) {
		return f->status ? -1 : 0;
	} else {
		e = end - 10; /* m is the method's end as line_rules found it: the first non-tchar */
	}
	size_t t = m + 1;

	if ((f->method = lg_http_method_find((const char *)b + p, m - p)) < 0)
		return fail(f, 501, "method not implemented");
	if (end + 1 > f->lim->max_head)
		return fail(f, 431, "head over the limit");
	f->method_len = m - p;
	f->target_off = t;
	f->target_len = e - t;
	f->minor = (unsigned)(b[e + 8] - '0');
	f->head_bytes = end + 1;
	f->state = S_LINE;
	return (long)(end + 1);
}

