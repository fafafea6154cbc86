#include "common/value.h"

#include <errno.h>
#include <stdio.h>
#include <strings.h>

/* Decimal digits of s[0..len) into *out; -1 for an empty string, another character or
 * overflow of 64 bits (errno EINVAL or ERANGE). */
static int
digits(const char *s, size_t len, uint64_t *out)
{
	uint64_t x = 0;

	if (len == 0) {
		errno = EINVAL;
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			errno = EINVAL;
			return -1;
		}
		if (x > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10) {
			errno = ERANGE;
			return -1;
		}
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*out = x;
	return 0;
}

static int
fail(int e, char *err, size_t cap, const char *what, uint64_t min, uint64_t max,
    const char *tail)
{
	if (cap > 0)
		snprintf(err, cap, "expected %s from %llu to %llu%s", what, (unsigned long long)min,
		    (unsigned long long)max, tail);
	errno = e;
	return -1;
}

/* A whole number with the suffix multiplier mul, checked against [min, max]. */
static int
number(const char *s, size_t len, uint64_t mul, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t x;

	if (digits(s, len, &x) == -1)
		return -1;
	if (x > UINT64_MAX / mul || x * mul < min || x * mul > max) {
		errno = ERANGE;
		return -1;
	}
	*out = x * mul;
	return 0;
}

/* A whole number s (no suffix) in [min, max], refused as `what`: lg_value_uint and
 * lg_value_duration_ms. */
static int
whole(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t cap,
    const char *what)
{
	size_t len = 0;

	while (s[len] != '\0')
		len++;
	if (number(s, len, 1, min, max, out) == 0)
		return 0;
	return fail(errno, err, cap, what, min, max, "");
}

int
lg_value_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t cap)
{
	return whole(s, min, max, out, err, cap, "a whole number");
}

int
lg_value_duration_ms(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err,
    size_t cap)
{
	return whole(s, min, max, out, err, cap, "a whole number of milliseconds");
}

int
lg_value_size(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t cap)
{
	static const struct { char c; unsigned shift; } suffixes[] = {
		{ 'k', 10 }, { 'K', 10 }, { 'm', 20 }, { 'M', 20 }, { 'g', 30 }, { 'G', 30 },
	};
	size_t len = 0;
	uint64_t mul = 1;

	while (s[len] != '\0')
		len++;
	for (size_t i = 0; len > 1 && i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (s[len - 1] == suffixes[i].c) {
			mul = 1ull << suffixes[i].shift;
			len--;
			break;
		}
	if (number(s, len, mul, min, max, out) == 0)
		return 0;
	return fail(errno, err, cap, "a whole number of bytes", min, max,
	    ", with an optional K, M or G suffix (binary: 1K = 1024)");
}

int
lg_value_bool(const char *s, int *out, char *err, size_t cap)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
			*out = strcasecmp(s, yes[i]) == 0;
			return 0;
		}
	}
	if (cap > 0)
		snprintf(err, cap, "expected yes, no, true, false, on, off, 1 or 0");
	errno = EINVAL;
	return -1;
}
