/* lagless-load's JSON writer: yajl's generator (yajl_gen.h, Debian libyajl-dev) streaming
 * to a FILE, with the first failure kept. JSON text is RFC 8259: yajl places the commas and
 * colons, escapes strings (section 7) and refuses a document that is not well formed.
 *
 * Every call takes the key of the value it writes inside an object, or NULL inside an
 * array or at the top. Once a call has failed, every later one does nothing, so a writer
 * checks once, at ll_jw_finish. Numbers go through yajl_gen_number as printf(3) formats
 * them ("%.6g", "%.4f", ...: the precision is the report's, not yajl_gen_double's "%.20g");
 * a value that is not finite is written null (JSON has no NaN or infinity). */
#ifndef LL_LOAD_JW_H
#define LL_LOAD_JW_H

#include <stdint.h>
#include <stdio.h>

#include <yajl/yajl_gen.h>

struct ll_jw {
	yajl_gen g;
	FILE *f;
	unsigned depth;      /* objects and arrays open */
	int any;             /* a value was written */
	yajl_gen_status st;  /* the first failure, yajl_gen_status_ok while none */
	const char *where;   /* the key (or "value") of the call that failed; static or the caller's */
};

/* Starts a compact document written to f as it is generated. Returns 0, or -1 with errno
 * ENOMEM. */
int ll_jw_start(struct ll_jw *w, FILE *f);

/* Ends the document with a newline and frees the generator, whatever happened. Returns 0,
 * or -1 with a message in err (len bytes at most, NUL-terminated): the first yajl_gen
 * failure and the key it came at, a document left open or empty, or errno's text when writing f
 * failed. */
int ll_jw_finish(struct ll_jw *w, char *err, size_t len);

/* { and [ under key, and their ends. */
void ll_jw_map(struct ll_jw *w, const char *key);
void ll_jw_arr(struct ll_jw *w, const char *key);
void ll_jw_end_map(struct ll_jw *w);
void ll_jw_end_arr(struct ll_jw *w);

/* A string (NUL-terminated, copied and escaped by yajl), true/false, null. */
void ll_jw_str(struct ll_jw *w, const char *key, const char *s);
void ll_jw_bool(struct ll_jw *w, const char *key, int b);
void ll_jw_null(struct ll_jw *w, const char *key);

/* A verdict's state: true when v > 0, false when v == 0, null when v < 0 (not applicable). */
void ll_jw_tri(struct ll_jw *w, const char *key, int v);

/* An unsigned integer, in decimal. */
void ll_jw_u64(struct ll_jw *w, const char *key, uint64_t v);

/* v as fmt prints it (one double conversion whose every output is a JSON number: %g, %f,
 * %e with a precision), or null when v is NaN or infinite. A result over 63 bytes fails
 * as yajl_gen_invalid_number. */
void ll_jw_num(struct ll_jw *w, const char *key, const char *fmt, double v);

/* v as "%.6g", the report's usual precision (six significant digits), or null. */
void ll_jw_g6(struct ll_jw *w, const char *key, double v);

#endif
