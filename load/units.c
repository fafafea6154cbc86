/* Durations, rates and sizes as load-testers write them (load/units.h). */
#include "load/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct unit {
	const char *name;
	double seconds;
} time_units[] = {
	/* longest first where one name starts another ("ms" before "m") */
	{ "ns", 1e-9 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 }, { "m", 60 }, { "h", 3600 },
};

/* The unit at the start of s: its length and its seconds, or 0 when none. */
static size_t
time_unit(const char *s, double *sec)
{
	size_t i, n;

	for (i = 0; i < sizeof(time_units) / sizeof(time_units[0]); i++) {
		n = strlen(time_units[i].name);
		if (strncmp(s, time_units[i].name, n) == 0 && !isalpha((unsigned char)s[n])) {
			*sec = time_units[i].seconds;
			return n;
		}
	}
	return 0;
}

/* A non-negative decimal number, with an exponent if any ("1e-300"): no sign, space, "inf",
 * "nan" or hex that strtod alone would take. */
static int
plain_number(const char *s, char **end, double *v)
{
	const char *p;

	if (!isdigit((unsigned char)*s) && !(*s == '.' && isdigit((unsigned char)s[1])))
		return -1;
	errno = 0;
	*v = strtod(s, end);
	if (errno != 0 || *end == s || !isfinite(*v) || *v < 0)
		return -1;
	for (p = s; p < *end; p++)
		if (!isdigit((unsigned char)*p) && strchr(".eE+-", *p) == NULL)
			return -1;   /* "0x10" */
	return 0;
}

int
ll_units_duration(const char *s, double default_unit_s, double *seconds)
{
	double total = 0, v, u;
	char *end;
	size_t n;
	int parts = 0;

	if (s == NULL || *s == '\0')
		goto bad;
	while (*s != '\0') {
		if (plain_number(s, &end, &v) == -1)
			goto bad;
		if (*end == '\0' && parts == 0) {
			*seconds = v * default_unit_s;
			return 0;
		}
		if ((n = time_unit(end, &u)) == 0)
			goto bad;
		total += v * u;
		s = end + n;
		parts++;
	}
	*seconds = total;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

int
ll_units_rate(const char *s, double *per_s)
{
	double n, period = 1;
	char *end;

	if (s == NULL || plain_number(s, &end, &n) == -1)
		goto bad;
	if (*end == '/') {
		const char *p = end + 1;
		double u;
		size_t k;

		/* a bare unit is one of it: "30/m" is "30/1m" */
		if ((k = time_unit(p, &u)) > 0 && p[k] == '\0')
			period = u;
		else if (ll_units_duration(p, 1, &period) == -1 || !isalpha((unsigned char)
		         p[strlen(p) - 1]))
			goto bad;
	} else if (*end != '\0') {
		goto bad;
	}
	if (!(period > 0))
		goto bad;
	*per_s = n / period;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

int
ll_units_size(const char *s, uint64_t max, uint64_t *bytes)
{
	static const struct { const char *name; unsigned shift; } sfx[] = {
		{ "", 0 }, { "k", 10 }, { "kb", 10 }, { "kib", 10 }, { "m", 20 }, { "mb", 20 },
		{ "mib", 20 }, { "g", 30 }, { "gb", 30 }, { "gib", 30 },
	};
	unsigned long long v;
	char *end;
	size_t i;

	if (s == NULL || !isdigit((unsigned char)*s))
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		goto range;
	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
		if (strcasecmp(end, sfx[i].name) == 0)
			break;
	if (i == sizeof(sfx) / sizeof(sfx[0]))
		goto bad;
	if (v > (max >> sfx[i].shift))
		goto range;
	*bytes = (uint64_t)v << sfx[i].shift;
	return 0;
bad:
	errno = EINVAL;
	return -1;
range:
	errno = ERANGE;
	return -1;
}
