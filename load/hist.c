/* Log-bucketed histogram: layout and rounding in load/hist.h. */
#include "load/hist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

unsigned
ll_hist_index(uint64_t v)
{
	unsigned e;

	if (v < LL_HIST_EXACT)
		return (unsigned)v;
	if (v >> LL_HIST_TOP_EXP)
		return LL_HIST_BUCKETS - 1;
	e = 63u - (unsigned)__builtin_clzll(v);          /* 11 .. 35 */
	return LL_HIST_EXACT + (e - 11) * LL_HIST_HALF +
	       (unsigned)((v >> (e - 10)) - LL_HIST_HALF);
}

uint64_t
ll_hist_lowest(unsigned i)
{
	unsigned e, sub;

	if (i < LL_HIST_EXACT)
		return i;
	e = 11 + (i - LL_HIST_EXACT) / LL_HIST_HALF;
	sub = LL_HIST_HALF + (i - LL_HIST_EXACT) % LL_HIST_HALF;
	return (uint64_t)sub << (e - 10);
}

uint64_t
ll_hist_highest(unsigned i)
{
	unsigned e;

	if (i < LL_HIST_EXACT)
		return i;
	e = 11 + (i - LL_HIST_EXACT) / LL_HIST_HALF;
	return ll_hist_lowest(i) + ((uint64_t)1 << (e - 10)) - 1;
}

int
ll_hist_init(struct ll_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->counts = calloc(LL_HIST_BUCKETS, sizeof(*h->counts));
	if (h->counts == NULL) {
		errno = ENOMEM;
		return -1;
	}
	h->min = UINT64_MAX;
	return 0;
}

void
ll_hist_free(struct ll_hist *h)
{
	free(h->counts);
	memset(h, 0, sizeof(*h));
}

void
ll_hist_reset(struct ll_hist *h)
{
	memset(h->counts, 0, LL_HIST_BUCKETS * sizeof(*h->counts));
	h->total = 0;
	h->sum = 0;
	h->min = UINT64_MAX;
	h->max = 0;
}

void
ll_hist_record(struct ll_hist *h, uint64_t v)
{
	h->counts[ll_hist_index(v)]++;
	h->total++;
	h->sum += (double)v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void
ll_hist_merge(struct ll_hist *dst, const struct ll_hist *src)
{
	unsigned i;

	if (src->total == 0)
		return;
	for (i = 0; i < LL_HIST_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
	dst->total += src->total;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t
ll_hist_value_at(const struct ll_hist *h, double pct)
{
	uint64_t rank, seen = 0, v;
	unsigned i;

	if (h->total == 0)
		return 0;
	if (pct <= 0)
		return h->min;
	if (pct >= 100)
		return h->max;
	/* nearest rank: ceil(pct/100 * total), at least 1 */
	rank = (uint64_t)((pct / 100.0) * (double)h->total);
	if ((double)rank < (pct / 100.0) * (double)h->total)
		rank++;
	if (rank == 0)
		rank = 1;
	for (i = 0; i < LL_HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= rank)
			break;
	}
	if (i >= LL_HIST_BUCKETS - 1)
		return h->max;   /* the top bucket also holds everything above 2^36 ns */
	v = ll_hist_highest(i);
	return v > h->max ? h->max : v;
}

double
ll_hist_mean(const struct ll_hist *h)
{
	return h->total ? h->sum / (double)h->total : 0;
}
