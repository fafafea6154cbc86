#ifndef LAGLESS_LOAD_ERR_H
#define LAGLESS_LOAD_ERR_H

#include <stdarg.h>
#include <stdio.h>

/* Formats an error message (printf(3) fmt and arguments) into err, len bytes at most,
 * NUL-terminated and cut to fit; the caller owns err. Returns -1, so that a parser can
 * `return ll_fail(err, len, ...)`. The one error writer of load/'s parsers. */
static inline int __attribute__((format(printf, 3, 4)))
ll_fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

#endif
