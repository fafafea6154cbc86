/* A bounded text buffer for renderers (/metrics, /status): appends never grow it, they set a
 * sticky overflow flag instead, so one scrape costs one allocation of a size fixed in advance. */
#ifndef LG_COMMON_BUF_H
#define LG_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

struct lg_buf {
	char *p;          /* caller-owned storage of cap bytes */
	size_t len;       /* bytes written, always < cap (a NUL follows) */
	size_t cap;
	int overflow;     /* an append did not fit; the content is cut at the last whole append */
};

/* Starts an empty buffer over caller-owned storage p of cap >= 1 bytes. */
void lg_buf_init(struct lg_buf *b, char *p, size_t cap);

/* Appends printf-formatted text (vsnprintf(3)). An append that does not fit in full is undone
 * and sets b->overflow; later appends are then ignored. Returns 0, or -1 on overflow. */
int lg_buf_printf(struct lg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends s as the body of a JSON string (RFC 8259 section 7: quote, backslash and control
 * characters escaped, lg_json_escape without flags), without the surrounding quotes. An
 * append that does not fit in full is undone and sets b->overflow. Returns 0, or -1 on
 * overflow. */
int lg_buf_json_chars(struct lg_buf *b, const char *s, size_t len);

/* The length (2 to 4) of the well-formed UTF-8 sequence at s[0..len) (RFC 3629 section 4: no
 * overlong form, no surrogate, nothing past U+10FFFF) and its code point in *cp; 0 when s does
 * not start with one (an ASCII byte included). */
size_t lg_utf8_seq(const unsigned char *s, size_t len, unsigned *cp);

/* Writes s (len bytes) escaped as the inside of a JSON string (RFC 8259 section 7) at *at,
 * before end, and moves *at past it: '"' and '\\' get a backslash, the other bytes below
 * 0x20 and 0x7f become \u00XX. With LG_JSON_ASCII a log line stays ASCII whatever a client
 * sent: a well-formed UTF-8 sequence (RFC 3629) becomes the \uXXXX of its code point (a
 * surrogate pair past U+FFFF), any other byte above 0x7f the \u00XX of its value (its Latin-1
 * reading); without it every byte above 0x7f passes as it is. Never splits an escape or a
 * sequence: stops where the next one's form does not fit. Returns how many input bytes were
 * written; no terminator. The one escaper of the project (renderers, access log). */
#define LG_JSON_ASCII 1u
size_t lg_json_escape(char **at, const char *end, const char *s, size_t len, unsigned flags);

/* Writes the decimal digits of v to out, which has room for LG_FMT_U64_MAX bytes, without a
 * terminator; returns how many. For hot paths (a response head per request) where snprintf's
 * format interpretation costs more than the copy. */
#define LG_FMT_U64_MAX 20
size_t lg_fmt_u64(char *out, uint64_t v);

#endif
