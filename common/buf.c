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
lg_json_escape(char **at, const char *end, const char *s, size_t len, unsigned flags)
{
	static const char hex[] = "0123456789abcdef";
	char *o = *at;
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\') {
			if (end - o < 2)
				break;
			*o++ = '\\';
			*o++ = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f || (ch > 0x7f && (flags & LG_JSON_ASCII))) {
			if (end - o < 6)
				break;
			memcpy(o, "\\u00", 4);
			o[4] = hex[ch >> 4];
			o[5] = hex[ch & 15];
			o += 6;
		} else {
			if (o == end)
				break;
			*o++ = (char)ch;
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
