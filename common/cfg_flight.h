/* The flight room's settings (struct lg_config's flights member): single-flight and the
 * result cache (common/policy.h, shm/flight.h, shm/cache.h), and the cluster scope's shared
 * store (its cluster member: redis/redis.c, worker/flight/cluster.c). Filled by the master
 * (master/opttab.c). Types only. */
#ifndef LG_COMMON_CFG_FLIGHT_H
#define LG_COMMON_CFG_FLIGHT_H

#include <stdint.h>

struct lg_flight_cfg {
	char coalesce[2048];       /* per-route rules; "" = no route coalesces */
	uint64_t cache_bytes;      /* shared-memory cache budget */
	uint64_t cache_max_entry;  /* largest answer stored */
	int cache_jitter_pct;      /* TTL jitter, percent */
};

struct lg_cluster_cfg {
	char redis[256];           /* "unix:/path" or "IP:PORT" of Redis; "" = none (all local) */
	uint64_t redis_budget_ms;  /* connect, and each command: past it the breaker opens */
	uint64_t redis_breaker_ms; /* how long an open breaker keeps every key local */
	uint64_t redis_lease_ms;   /* a leader's lease, at most the route's deadline */
	char redis_prefix[64];     /* of every Redis key and channel */
	uint64_t cluster_max_value; /* largest answer stored in Redis, bytes */
};

#endif
