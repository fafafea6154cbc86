/* The cluster scope's families of /metrics (stats/cluster_metrics.h). */
#include "stats/cluster_metrics.h"

#include <inttypes.h>
#include <stddef.h>

static uint64_t
sum(const struct lg_cache *ca, size_t off)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < ca->hdr->nloops; i++)
		n += atomic_load_explicit((_Atomic uint64_t *)((char *)&ca->ctr[i].cl + off),
		    memory_order_relaxed);
	return n;
}

#define CL(f) offsetof(struct lg_cluster_counters, f)

static const struct family {
	size_t off;
	const char *name, *type, *help;
} families[] = {
	{ CL(hits), "lagless_cluster_hits_total", "counter",
	    "Cluster-scoped requests answered from the value in Redis." },
	{ CL(misses), "lagless_cluster_misses_total", "counter",
	    "Cluster-scoped keys Redis had no value for (a lease was tried)." },
	{ CL(won), "lagless_cluster_leases_won_total", "counter",
	    "Leases taken on a cold key: this replica ran the job." },
	{ CL(lost), "lagless_cluster_leases_lost_total", "counter",
	    "Leases held by another replica: this one followed." },
	{ CL(taken_over), "lagless_cluster_leases_taken_over_total", "counter",
	    "Leases taken after waiting on another replica's (a dead or failed leader)." },
	{ CL(waits), "lagless_cluster_follower_waits_total", "counter",
	    "Keys parked waiting for another replica's job (one per key per loop worker)." },
	{ CL(stored), "lagless_cluster_stores_total", "counter",
	    "Values stored in Redis by the token-checked script." },
	{ CL(refused), "lagless_cluster_stores_refused_total", "counter",
	    "Late stores refused because the lease had passed to another replica (fencing)." },
	{ CL(local), "lagless_cluster_local_total", "counter",
	    "Cluster-scoped keys computed locally (breaker open, Redis error, waits used up)." },
	{ CL(too_large), "lagless_cluster_too_large_total", "counter",
	    "Answers over --cluster-max-value, not stored in Redis." },
	{ CL(bad_values), "lagless_cluster_bad_values_total", "counter",
	    "Values or leases read from Redis that failed the checks (served as a miss)." },
	{ CL(key_errors), "lagless_cluster_key_errors_total", "counter",
	    "Error replies for one key (a foreign value's type, ...): that key's miss, no trip." },
	{ CL(trips), "lagless_cluster_breaker_trips_total", "counter",
	    "Times the Redis breaker opened (error, lost connection, over budget)." },
	{ CL(open), "lagless_cluster_breaker_open", "gauge",
	    "Loop workers whose Redis breaker is open (keys local)." },
	{ CL(up), "lagless_cluster_redis_up", "gauge",
	    "Loop workers with both Redis connections ready." },
};

int
lg_cluster_render_metrics(struct lg_buf *b, const struct lg_cache *ca)
{
	static const uint64_t bounds[] = LG_CLUSTER_RTT_BOUNDS_US;
	uint64_t cum = 0;
	const char *h = "lagless_cluster_redis_rtt_seconds";

	if (ca == NULL || ca->hdr == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		lg_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", families[i].name,
		    families[i].help, families[i].name, families[i].type, families[i].name,
		    sum(ca, families[i].off));
	lg_buf_printf(b, "# HELP %s Redis command round trips.\n# TYPE %s histogram\n", h, h);
	for (unsigned i = 0; i < LG_CLUSTER_RTT_BUCKETS; i++) {
		cum += sum(ca, CL(rtt) + i * sizeof(uint64_t));
		if (i + 1 < LG_CLUSTER_RTT_BUCKETS)
			lg_buf_printf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", h,
			    (double)bounds[i] / 1e6, cum);
		else
			lg_buf_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", h, cum);
	}
	lg_buf_printf(b, "%s_sum %.6f\n", h, (double)sum(ca, CL(rtt_sum_us)) / 1e6);
	return lg_buf_printf(b, "%s_count %" PRIu64 "\n", h, sum(ca, CL(rtt_count)));
}
