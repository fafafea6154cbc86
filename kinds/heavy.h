/* The reference CPU job behind /heavy, and the JSON answer it gives. */
#ifndef LG_KINDS_HEAVY_H
#define LG_KINDS_HEAVY_H

#include <stddef.h>
#include <stdint.h>

#define LG_HEAVY_DEFAULT_N 60000000ull
#define LG_HEAVY_MAX_N     1000000000000ull /* 10^12: beyond any sane deadline */
#define LG_HEAVY_JSON_MAX  160u             /* longest answer of lg_heavy_json, with '\n' */

/* The reference CPU job of the published Node.js and Python comparisons:
 * x = 0; for i in 0..n-1: x = (x + i*7) % 1000003. Pure function of n; about 1 ns per
 * iteration here. n <= LG_HEAVY_MAX_N keeps i*7 far from overflowing 64 bits. */
uint64_t lg_heavy_loop(uint64_t n);

/* Writes {"iterations":n,"result":x,"queue_ms":q,"run_ms":r}\n into out (cap bytes; times in
 * nanoseconds, printed as milliseconds with 3 decimals). Returns the length, or 0 when it does
 * not fit cap. */
size_t lg_heavy_json(char *out, size_t cap, uint64_t n, uint64_t x, uint64_t queue_ns,
    uint64_t run_ns);

#endif
