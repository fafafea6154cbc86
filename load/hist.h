/* A log-bucketed latency histogram in the manner of HdrHistogram (Gil Tene): every value from
 * 1 ns to 2^36 ns (68.7 s) is kept to 3 significant digits in a fixed table of counters.
 *
 * Values below 2048 ns are counted exactly. Above, each power of two [2^e, 2^(e+1)) is split in
 * 1024 equal sub-buckets, so a bucket is at most 1/1024 of its lowest value wide: the relative
 * error of any reported value is below 0.1 % (HdrHistogram with 3 significant digits uses the
 * same 2048-entry sub-bucket layout). Larger values are counted in the top bucket and the
 * exact maximum is kept beside it. Recording is O(1) with no allocation. */
#ifndef LL_LOAD_HIST_H
#define LL_LOAD_HIST_H

#include <stdint.h>

#define LL_HIST_EXACT   2048u                      /* values below are counted exactly */
#define LL_HIST_HALF    1024u                      /* sub-buckets per power of two above */
#define LL_HIST_TOP_EXP 36                         /* 2^36 ns = 68.7 s, beyond 60 s */
#define LL_HIST_BUCKETS (LL_HIST_EXACT + (LL_HIST_TOP_EXP - 11) * LL_HIST_HALF)

struct ll_hist {
	uint64_t *counts;     /* LL_HIST_BUCKETS counters, owned */
	uint64_t total;       /* values recorded */
	double sum;           /* of the values in ns, for the mean (exact to 2^53) */
	uint64_t min, max;    /* exact; min is UINT64_MAX while empty */
};

/* Allocates the counters (about 220 KiB) of an empty histogram. Returns 0, or -1 with errno
 * ENOMEM. Free with ll_hist_free. */
int ll_hist_init(struct ll_hist *h);

/* Frees the counters; h may then be initialised again. Safe on a zeroed struct. */
void ll_hist_free(struct ll_hist *h);

/* Empties h, keeping its storage. */
void ll_hist_reset(struct ll_hist *h);

/* Counts one value v in nanoseconds (0 counts as 0; above 2^36 ns in the top bucket). */
void ll_hist_record(struct ll_hist *h, uint64_t v);

/* Adds every count of src to dst (both initialised). */
void ll_hist_merge(struct ll_hist *dst, const struct ll_hist *src);

/* The value at percentile pct (0..100) in ns by nearest rank: the smallest recorded value v such
 * that at least pct % of the values are <= v, reported as the highest value its bucket holds
 * (never an underestimate; HdrHistogram's highestEquivalentValue) and at most the exact max.
 * pct 100 is the exact max, pct 0 the exact min. Returns 0 on an empty histogram. */
uint64_t ll_hist_value_at(const struct ll_hist *h, double pct);

/* Mean of the recorded values in ns, 0 when empty. */
double ll_hist_mean(const struct ll_hist *h);

/* Bucket arithmetic, exported for the tests: the index of v, and the lowest and highest values
 * of bucket i. */
unsigned ll_hist_index(uint64_t v);
uint64_t ll_hist_lowest(unsigned i);
uint64_t ll_hist_highest(unsigned i);

#endif
