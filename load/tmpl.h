/* Per-request templates of a route's path and query, so a cached or coalescing route can be
 * loaded with many keys or a chosen hit ratio:
 *
 *   {seq}      the request's number on this route: 0, 1, 2, ... (every request a new key)
 *   {rand:N}   a uniform integer in [0, N): N distinct keys (N at most 10^12)
 *   {hit:R}    "0" with probability R (0..1), else a number never drawn before: a cache
 *              keyed on it answers about R of the requests once the hot key is stored
 *   {key}      the next line of the route's keys=@FILE, in order, from the first again after
 *              the last
 *   {run}      a number fixed for this lagless-load process and new for the next: a key that
 *              is cold at the start of every run (a cache stampede)
 *   {{         a literal {
 *
 * Draws come from a seeded generator: the same --seed, the same sequence. */
#ifndef LL_LOAD_TMPL_H
#define LL_LOAD_TMPL_H

#include <stddef.h>
#include <stdint.h>

#define LL_TMPL_PARTS 32

enum ll_tmpl_kind { LL_TP_LIT, LL_TP_SEQ, LL_TP_RAND, LL_TP_HIT, LL_TP_KEY, LL_TP_RUN };

struct ll_tmpl_part {
	enum ll_tmpl_kind kind;
	const char *lit;             /* LL_TP_LIT: into the template's copy */
	size_t len;
	double arg;                  /* N of {rand:N}, R of {hit:R} */
};

struct ll_tmpl {
	char *text;                  /* the template's copy, owned */
	unsigned nparts;
	struct ll_tmpl_part parts[LL_TMPL_PARTS];
	char **keys;                 /* lines of keys=@FILE, owned */
	size_t nkeys, next_key;
	uint64_t seq, misses, rng, run;
	int value_part;              /* the first {seq}, {rand:N} or {key} part, -1 without one */
	double value;                /* its value in the last expansion (a number; NaN for a {key}
	                              * that is not one): what a warning sets latency against */
};

/* The placeholder of part k as written ("{seq}", "{rand:100}", "{key}") into buf (len bytes).
 * Returns buf. */
const char *ll_tmpl_part_name(const struct ll_tmpl *t, unsigned k, char *buf, size_t len);

/* 1 when path holds a placeholder (a '{'). */
int ll_tmpl_has(const char *path);

/* Parses path into t (zeroed first; ll_tmpl_free releases it). seed starts the draws, run is
 * the {run} value. Returns 0, or -1 with a message in err (unknown placeholder, N or R out of
 * range, unclosed '{', too many parts, out of memory). */
int ll_tmpl_parse(struct ll_tmpl *t, const char *path, uint64_t seed, uint64_t run, char *err,
                  size_t errlen);

/* Reads the keys of {key}, one a line (blank lines skipped, CR LF or LF) from file. A key may
 * not hold a space or a control byte (it goes into the request line as it is). Returns 0, or
 * -1 with a message in err. */
int ll_tmpl_keys(struct ll_tmpl *t, const char *file, char *err, size_t errlen);

/* The next request's path into out (NUL-terminated, cap bytes), and t->value. Returns its
 * length, or -1 with errno ENOSPC when it does not fit, EINVAL when {key} has no keys. */
long ll_tmpl_expand(struct ll_tmpl *t, char *out, size_t cap);

void ll_tmpl_free(struct ll_tmpl *t);

#endif
