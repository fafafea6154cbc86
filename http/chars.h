/* The character classes of the request grammar, one table lookup per byte (RFC 9110, RFC 9112,
 * RFC 3986): every byte of every head is judged by one of them, so each is a bit in a 256-entry
 * table computed at compile time rather than a comparison chain or a switch per call. */
#ifndef LG_HTTP_CHARS_H
#define LG_HTTP_CHARS_H

#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum {
	LG_CH_TCHAR = 1,   /* tchar: a token's byte (RFC 9110 section 5.6.2) */
	LG_CH_VALUE = 2,   /* field-vchar / SP / HTAB, obs-text allowed (RFC 9110 section 5.5) */
	LG_CH_TARGET = 4,  /* a request-target byte: RFC 3986 section 2 (unreserved, sub-delims,
	                    * gen-delims but '#', '%'), '[' ']' included for an authority */
	LG_CH_HOST = 8,    /* a Host value byte: no delimiter that ends or changes an authority,
	                    * no obs-text (RFC 3986 section 3.2.2) */
	LG_CH_AUTH = 16,   /* an absolute-form authority byte: unreserved, sub-delims, ':', '%',
	                    * '[' ']' (RFC 3986 section 3.2) */
	LG_CH_REGNAME = 32, /* a Host byte that may stand in a reg-name or IPv4address as it is:
	                     * LG_CH_HOST but ':' '[' ']' '%' SP HTAB (RFC 3986 section 3.2.2) */
	LG_CH_DIGIT = 64,   /* DIGIT (RFC 5234 appendix B.1): a port's bytes */
	LG_CH_TPLAIN = 128, /* LG_CH_TARGET but '%': a target byte judged on its own */
};

/* The classes of each byte value: lg_http_chars[c] & LG_CH_*. Read-only, defined in
 * http/chars.c. */
extern const uint8_t lg_http_chars[256];

static inline int
lg_ch(unsigned char c, unsigned cls)
{
	return (lg_http_chars[c] & cls) != 0;
}

/* Whether the four bytes at p are all of class cls: one test for four table entries, where a
 * byte loop makes four. */
static inline int
lg_ch4(const unsigned char *p, unsigned cls)
{
	return (lg_http_chars[p[0]] & lg_http_chars[p[1]] & lg_http_chars[p[2]] &
	    lg_http_chars[p[3]] & cls) != 0;
}

/* The end of the run of LG_CH_VALUE bytes b[j..stop): the index of the first byte in it that is
 * not field-vchar, SP or HTAB (RFC 9110 section 5.5: a CTL but HTAB, or DEL; CR ends a value
 * that way), or stop. Reads b[j..stop) only. With SSE2 (every x86-64) 16 bytes are judged at a
 * time: a value byte is one that is not <= 0x1f unless HTAB, and not 0x7f, the table's own
 * definition of the class (http/chars.c CH_VALUE); the table finishes the tail. */
static inline size_t
lg_value_end(const unsigned char *b, size_t j, size_t stop)
{
#if defined(__SSE2__)
	const __m128i low = _mm_set1_epi8(0x1f), tab = _mm_set1_epi8('\t');
	const __m128i del = _mm_set1_epi8(0x7f);

	while (j + 16 <= stop) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + j));
		__m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, low), v); /* v <= 0x1f */
		__m128i bad = _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(v, tab), ctl),
		    _mm_cmpeq_epi8(v, del));
		unsigned m = (unsigned)_mm_movemask_epi8(bad);

		if (m != 0)
			return j + (size_t)__builtin_ctz(m);
		j += 16;
	}
#endif
	while (j + 4 <= stop && lg_ch4(b + j, LG_CH_VALUE))
		j += 4;
	while (j < stop && lg_ch(b[j], LG_CH_VALUE))
		j++;
	return j;
}

#endif
