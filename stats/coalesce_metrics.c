/* The single-flight and cache families of /metrics (stats/coalesce_metrics.h). */
#include "stats/coalesce_metrics.h"

#include <inttypes.h>
#include <stddef.h>

/* One counter family summed over the loop rows. */
static void
counter(struct lg_buf *b, const struct lg_cache *ca, size_t off, const char *name,
    const char *help)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < ca->hdr->nloops; i++)
		sum += atomic_load_explicit((_Atomic uint64_t *)((char *)&ca->ctr[i] + off),
		    memory_order_relaxed);
	lg_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name,
	    name, sum);
}

#define CTR(f) offsetof(struct lg_cache_counters, f)

/* The counter families, each summed over the loop rows, in /metrics order. */
static const struct family {
	size_t off;
	const char *name, *help;
} families[] = {
	{ CTR(hits), "lagless_cache_hits_total",
	  "Answers served fresh from the cache." },
	{ CTR(misses), "lagless_cache_misses_total",
	  "Requests of cached or coalescing routes not answered from the cache." },
	{ CTR(stale), "lagless_cache_stale_total",
	  "Stale answers served while a background job refreshed them." },
	{ CTR(coalesced), "lagless_coalesced_waiters_total",
	  "Requests parked on another request's job instead of starting their own." },
	{ CTR(jobs), "lagless_coalesce_jobs_total",
	  "Jobs started by routes with a coalesce rule (misses, refreshes and requests run alone)." },
	{ CTR(stored), "lagless_cache_stores_total",
	  "Answers written to the cache." },
	{ CTR(evictions), "lagless_cache_evictions_total",
	  "Live cache entries replaced by newer ones (LRU within a set)." },
	{ CTR(too_large), "lagless_cache_too_large_total",
	  "Answers over --cache-max-entry, not stored (other loops' waiters ran their own job)." },
	{ CTR(busy), "lagless_coalesce_busy_total",
	  "Requests run alone because other keys filled their single-flight set." },
	{ CTR(refreshes), "lagless_cache_refreshes_total",
	  "Background refreshes started by stale answers." },
	{ CTR(cancelled), "lagless_coalesce_cancelled_total",
	  "Coalesced jobs cancelled because every waiter left." },
	{ CTR(body_alone), "lagless_coalesce_body_too_large_total",
	  "Requests run alone because their body was over the rule's body-max." },
	{ CTR(refused), "lagless_cache_refused_total",
	  "Answers served but not stored: their path held its path_share of the cache." },
};

int
lg_coal_render_metrics(struct lg_buf *b, const struct lg_cache *ca)
{
	uint64_t saved = 0;

	if (ca == NULL || ca->hdr == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		counter(b, ca, families[i].off, families[i].name, families[i].help);
	for (uint32_t i = 0; i < ca->hdr->nloops; i++)
		saved += atomic_load(&ca->ctr[i].hits) + atomic_load(&ca->ctr[i].stale) +
		    atomic_load(&ca->ctr[i].coalesced);
	lg_buf_printf(b, "# HELP lagless_jobs_saved_total Requests answered without a job of "
	    "their own (hits, stale answers, coalesced waiters).\n# TYPE lagless_jobs_saved_total "
	    "counter\nlagless_jobs_saved_total %" PRIu64 "\n", saved);
	lg_buf_printf(b, "# HELP lagless_cache_entries Entries in the cache (at the master's last "
	    "sweep, once a second).\n# TYPE lagless_cache_entries gauge\nlagless_cache_entries %"
	    PRIu64 "\n", atomic_load(&ca->hdr->entries));
	lg_buf_printf(b, "# HELP lagless_cache_bytes Key and answer bytes in the cache (last "
	    "sweep).\n# TYPE lagless_cache_bytes gauge\nlagless_cache_bytes %" PRIu64 "\n",
	    atomic_load(&ca->hdr->bytes_used));
	lg_buf_printf(b, "# HELP lagless_cache_capacity_entries Entries the cache holds at most "
	    "(a rule's path_share is a percent of them).\n# TYPE lagless_cache_capacity_entries "
	    "gauge\nlagless_cache_capacity_entries %" PRIu32 "\n", ca->hdr->nentries);
	return lg_buf_printf(b, "# HELP lagless_cache_capacity_bytes The --cache-bytes budget.\n"
	    "# TYPE lagless_cache_capacity_bytes gauge\nlagless_cache_capacity_bytes %" PRIu64 "\n",
	    ca->hdr->bytes);
}
