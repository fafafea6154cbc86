#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
lg_buf_init(struct lg_buf *b, char *p, size_t cap)
{
	b->p = p;
	b->cap = cap;
	b->len = 0;
	b->overflow = 0;
	p[0] = '\0';
}

int
lg_buf_printf(struct lg_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->overflow)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->cap - b->len) {
		b->p[b->len] = '\0';
		b->overflow = 1;
		return -1;
	}
	b->len += (size_t)n;
	return 0;
}

size_t
lg_utf8_seq(const unsigned char *s, size_t len, unsigned *cp)
{
	unsigned c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2, c &= 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf, c &= 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf, c &= 0x07;
	else
		return 0;
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	*cp = c;
	return n;
}

/* \uXXXX of the 16-bit unit u at o. */
static void
put_u16(char *o, unsigned u)
{
	static const char hex[] = "0123456789abcdef";

	o[0] = '\\';
	o[1] = 'u';
	for (int k = 0; k < 4; k++)
		o[2 + k] = hex[(u >> (12 - 4 * k)) & 15];
}

size_t
lg_json_escape(char **at, const char *end, const char *s, size_t len, unsigned flags)
{
	const unsigned char *u = (const unsigned char *)s;
	char *o = *at;
	size_t i = 0;

	while (i < len) {
		unsigned ch = u[i], cp;
		size_t n;

		if (ch == '"' || ch == '\\') {
			if (end - o < 2)
				break;
			*o++ = '\\';
			*o++ = (char)ch;
			i++;
		} else if (ch < 0x20 || ch == 0x7f) {
			if (end - o < 6)
				break;
			put_u16(o, ch);
			o += 6;
			i++;
		} else if (ch > 0x7f && (flags & LG_JSON_ASCII)) {
			/* A well-formed UTF-8 sequence is its code point (a surrogate pair past
			 * U+FFFF, RFC 8259 section 7); any other byte the Latin-1 character of
			 * its value, so nothing is lost and the line stays ASCII. */
			n = lg_utf8_seq(u + i, len - i, &cp);
			if (n == 0)
				n = 1, cp = ch;
			if (end - o < (cp > 0xffff ? 12 : 6))
				break;
			if (cp > 0xffff) {
				put_u16(o, 0xd800 + ((cp - 0x10000) >> 10));
				put_u16(o + 6, 0xdc00 + ((cp - 0x10000) & 0x3ff));
				o += 12;
			} else {
				put_u16(o, cp);
				o += 6;
			}
			i += n;
		} else {
			if (o == end)
				break;
			*o++ = (char)ch;
			i++;
		}
	}
	*at = o;
	return i;
}

int
lg_buf_json_chars(struct lg_buf *b, const char *s, size_t len)
{
	char *at = b->p + b->len;

	if (b->overflow)
		return -1;
	if (lg_json_escape(&at, b->p + b->cap - 1, s, len, 0) < len) {
		b->p[b->len] = '\0'; /* undone, as an lg_buf_printf that does not fit */
		b->overflow = 1;
		return -1;
	}
	b->len = (size_t)(at - b->p);
	b->p[b->len] = '\0';
	return 0;
}

size_t
lg_fmt_u64(char *out, uint64_t v)
{
	char d[LG_FMT_U64_MAX];
	size_t n = 0;

	do {
		d[sizeof(d) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	memcpy(out, d + sizeof(d) - n, n);
	return n;
}
