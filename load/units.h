/* Values as load-testers type them (wrk, hey, vegeta, k6): durations with a unit ("10s",
 * "500ms", "1m", "1m30s"; a bare number is in the caller's default unit), rates as vegeta
 * writes them ("500", "500/s", "500/1s", "30/m", "100/500ms"), sizes with K, KB, KiB, M, MB,
 * MiB, G, GB, GiB (every one a power of 1024, as ab and wrk read them). */
#ifndef LL_LOAD_UNITS_H
#define LL_LOAD_UNITS_H

#include <stdint.h>

/* Parses a duration: one or more NUMBER UNIT pairs (units ns, us, ms, s, m, h; "1m30s"), or a
 * bare number taken in default_unit_s seconds (1 for seconds, 1e-3 for milliseconds). The
 * result is in seconds. Returns 0, or -1 with errno EINVAL (empty, an unknown unit, trailing
 * text, negative, not finite). */
int ll_units_duration(const char *s, double default_unit_s, double *seconds);

/* Parses a rate per second from "N", "N/s", "N/1s", "N/m", "N/2m", "N/500ms" (N requests per
 * that period; a bare unit means one of it). Returns 0 with *per_s = N / period, or -1 with
 * errno EINVAL (a period of 0, a bad number or unit). No range check: the caller's. */
int ll_units_rate(const char *s, double *per_s);

/* Parses a size in bytes: digits with an optional suffix above (case-insensitive). Returns 0,
 * or -1 with errno EINVAL (no digits, unknown suffix) or ERANGE (above max). */
int ll_units_size(const char *s, uint64_t max, uint64_t *bytes);

#endif
