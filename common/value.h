#ifndef LG_VALUE_H
#define LG_VALUE_H

/* The one grammar of configuration values: flags, environment, the file's keys, the
 * coalescing rules, route keys and the modules' conf_uint all parse through here, so a value
 * means the same wherever it is written (docs/OPERATIONS.md "Values", lagless(8)).
 *
 *   whole number  decimal digits only: no sign, no blank, no 0x; above 2^64-1 is refused
 *   size          a whole number of bytes, optionally followed by one binary suffix
 *                 k/K (2^10), m/M (2^20) or g/G (2^30); "64M", "16k"; the product must fit
 *   duration      a whole number of milliseconds (the key's name carries the unit: *_ms)
 *   boolean       yes, no, true, false, on, off, 1, 0, in any case
 *
 * Modelled on nginx's ngx_parse_size()/ngx_parse_time() (src/core/ngx_parse.c). Every
 * function takes a NUL-terminated string, checks it against [min, max] (inclusive), stores
 * the value in *out only on success and returns 0; otherwise it returns -1 with errno EINVAL
 * (not of the grammar) or ERANGE (outside [min, max], or overflow) and writes a reason that
 * says what was expected ("expected a whole number from 1 to 100") into err (cap bytes,
 * always NUL-terminated; err may be NULL when cap is 0). No function logs or allocates. */

#include <stddef.h>
#include <stdint.h>

int lg_value_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err,
    size_t cap);
int lg_value_size(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err,
    size_t cap);
int lg_value_duration_ms(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err,
    size_t cap);
/* *out = 1 for yes/true/on/1, 0 for no/false/off/0. */
int lg_value_bool(const char *s, int *out, char *err, size_t cap);

#endif
