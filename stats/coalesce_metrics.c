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

int
lg_coal_render_metrics(struct lg_buf *b, const struct lg_cache *ca)
{
	uint64_t saved = 0;

	if (ca == NULL || ca->hdr == NULL)
		return 0;
	counter(b, ca, CTR(hits), "lagless_cache_hits_total", "Answers served fresh from the cache.");
	counter(b, ca, CTR(misses), "lagless_cache_misses_total",
	    "Requests of cached or coalescing routes not answered from the cache.");
	counter(b, ca, CTR(stale), "lagless_cache_stale_total",
	    "Stale answers served while a background job refreshed them.");
	counter(b, ca, CTR(coalesced), "lagless_coalesced_waiters_total",
	    "Requests parked on another request's job instead of starting their own.");
	counter(b, ca, CTR(jobs), "lagless_coalesce_jobs_total",
	    "Jobs started by routes with a coalesce rule (misses, refreshes and requests run alone).");
	counter(b, ca, CTR(stored), "lagless_cache_stores_total", "Answers written to the cache.");
	counter(b, ca, CTR(evictions), "lagless_cache_evictions_total",
	    "Live cache entries replaced by newer ones (LRU within a set).");
	counter(b, ca, CTR(too_large), "lagless_cache_too_large_total",
	    "Answers over --cache-max-entry, not stored (other loops' waiters ran their own job).");
	counter(b, ca, CTR(busy), "lagless_coalesce_busy_total",
	    "Requests run alone because another key held their single-flight bucket.");
	counter(b, ca, CTR(refreshes), "lagless_cache_refreshes_total",
	    "Background refreshes started by stale answers.");
	counter(b, ca, CTR(cancelled), "lagless_coalesce_cancelled_total",
	    "Coalesced jobs cancelled because every waiter left.");
	counter(b, ca, CTR(body_alone), "lagless_coalesce_body_too_large_total",
	    "Requests run alone because their body was over the rule's body-max.");
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
	return lg_buf_printf(b, "# HELP lagless_cache_capacity_bytes The --cache-bytes budget.\n"
	    "# TYPE lagless_cache_capacity_bytes gauge\nlagless_cache_capacity_bytes %" PRIu64 "\n",
	    ca->hdr->bytes);
}
