/* The arena's shape and the memory budget it leaves, from a configuration and its sizing
 * (master/shape.h): what -t, start-up, a reload and the once-a-second memory watch decide
 * before (or without) creating a generation. Calls nothing of master/gen.c or memwatch.c. */
#include "master/shape.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "kinds/host.h"
#include "kinds/registry.h"
#include "shm/arena.h"
#include "shm/upstream.h"

uint32_t
lg_gen_transit_buffers(const struct lg_config *cfg, uint32_t njobs)
{
	uint64_t n = cfg->jobs.transit_buffers > 0 ? (uint64_t)cfg->jobs.transit_buffers : 4ull * njobs;

	/* Never fewer than the job slots: every job's input and output live in a buffer. */
	if (n < njobs)
		n = njobs;
	return n > 1000000 ? 1000000 : (uint32_t)n;
}

void
lg_pool_max(const struct lg_sizing *sz, uint32_t p, int *compute, int *queue)
{
	int hand = sz->pool_compute_max[p] < sz->pool_compute[p] ||
	    sz->pool_queue_max[p] < sz->pool_queue[p];

	*compute = hand ? sz->pool_compute[p] : sz->pool_compute_max[p];
	*queue = hand ? sz->pool_queue[p] : sz->pool_queue_max[p];
}

void
lg_arena_shape(const struct lg_config *cfg, const struct lg_sizing *sz, struct lg_arena_shape *s)
{
	uint32_t npools = sz->npools >= 1 ? (uint32_t)sz->npools : 1;
	int c, q;

	memset(s, 0, sizeof(*s));
	s->nprocs = (uint32_t)sz->loop_workers;
	for (uint32_t p = 0; p < npools; p++) {
		lg_pool_max(sz, p, &c, &q);
		s->nprocs += (uint32_t)c;
		s->nslots += lg_gen_transit_buffers(cfg, (uint32_t)(c + q));
	}
	/* Input: the request view, then up to max_body bytes of body. Output: the answer's
	 * metadata page, then up to max_output bytes (by default what any built-in kind may
	 * answer for a max_body input: zstd's and deflate's bound are below 1/256 + 128 KiB). */
	s->in_cap = cfg->http.max_body + LG_VIEW_BOUND(cfg->http.max_head);
	s->out_cap = LG_OUT_META + (cfg->jobs.max_output ? cfg->jobs.max_output :
	    cfg->http.max_body + cfg->http.max_body / 256 + (128u << 10));
	/* Statistics rows sized from the configuration: every route and "none", every kind. */
	s->nroutes = cfg->reg->nroutes + 1;
	s->nkinds = cfg->reg->nkinds;
}

/* The arena and the cache are memfds sized with ftruncate(2), which a file size limit under
 * their size answers with SIGXFSZ (setrlimit(2), RLIMIT_FSIZE): the server died at start with
 * no message. Returns 0, or -1 naming the limit in err. */
static int
check_fsize(uint64_t arena, uint64_t cache, char *err, size_t errlen)
{
	struct rlimit rl;
	uint64_t need = arena > cache ? arena : cache;

	if (getrlimit(RLIMIT_FSIZE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY ||
	    (uint64_t)rl.rlim_cur >= need)
		return 0;
	snprintf(err, errlen, "the file size limit (RLIMIT_FSIZE, ulimit -f) is %llu bytes, below "
	    "the %llu bytes of the shared-memory %s (a memfd sized with ftruncate): raise it "
	    "(ulimit -f unlimited; LimitFSIZE=infinity in a systemd unit) or lower max_body, "
	    "max_output, transit_buffers or cache_bytes", (unsigned long long)rl.rlim_cur,
	    (unsigned long long)need, arena >= cache ? "arena" : "cache");
	return -1;
}

uint32_t
lg_flight_entries(uint32_t nslots)
{
	return 16 * nslots < 1024 ? 1024 : 16 * nslots;
}

uint64_t
lg_up_memory(const struct lg_registry *reg, int loops)
{
	uint64_t n = 0;

	for (uint32_t i = 0; reg != NULL && i < reg->nupstreams; i++) {
		const struct lg_upstream_def *u = &reg->upstreams[i];
		uint64_t xchg = (uint64_t)u->max_conns + u->queue;
		uint64_t kept = (uint64_t)(loops > 0 ? loops : 1) * u->nservers * u->keepalive;

		n += xchg * LG_UP_XCHG_BYTES + (kept + u->max_conns) * LG_UP_CONN_BYTES;
	}
	/* A route bulkhead's waiters hold their exchanges outside the upstream's queue. */
	for (uint32_t k = 0; reg != NULL && k < reg->nroutes; k++)
		if (reg->routes[k].upstream && reg->routes[k].max_conns)
			n += (uint64_t)reg->routes[k].queue * LG_UP_XCHG_BYTES;
	return n;
}

void
lg_gen_decide_memory(const struct lg_config *cfg, struct lg_sizing *sz)
{
	struct lg_arena_shape s;
	uint64_t fixed = 0, keep = LG_VIEW_BOUND(cfg->http.max_head);
	int caching = 0, cmax = 0;

	lg_arena_shape(cfg, sz, &s);
	/* Everything but the regions (header, pages, stats, tokens; plus one guard page per
	 * slot, never backed: a few KiB of slack), the request views kept backed, the flights. */
	if (lg_arena_size(s.nslots, s.nprocs, 0, 0, s.nroutes, s.nkinds, &fixed) == -1)
		fixed = 0;
	keep = (keep + LG_PAGE - 1) & ~(uint64_t)(LG_PAGE - 1);
	fixed += (uint64_t)s.nslots * keep + (uint64_t)lg_flight_entries(s.nslots) * 512u;
	for (uint32_t i = 0; cfg->reg != NULL && i < cfg->reg->nroutes; i++) {
		const struct lg_policy *p = &cfg->reg->routes[i].coal;

		caching |= p->ttl_ms || p->stale_ms || p->negative_ttl_ms;
	}
	for (int p = 0; p < (sz->npools >= 1 ? sz->npools : 1); p++)
		cmax += sz->pool_compute_max[p] > sz->pool_compute[p] ? sz->pool_compute_max[p] :
		    sz->pool_compute[p];
	lg_memsize_decide(&sz->mem, cfg, sz->loop_workers, cmax, fixed, caching,
	    lg_up_memory(cfg->reg, sz->loop_workers));
}

int
lg_gen_check_arena(const struct lg_config *cfg, const struct lg_sizing *sz, char *err,
    size_t errlen)
{
	struct lg_arena_shape s;
	uint64_t size;

	lg_arena_shape(cfg, sz, &s);
	if (lg_arena_size(s.nslots, s.nprocs, s.in_cap, s.out_cap, s.nroutes, s.nkinds,
	    &size) == 0)
		return check_fsize(size, cfg->flights.cache_bytes, err, errlen);
	snprintf(err, errlen, "the shared-memory arena this configuration implies (%u transit "
	    "buffers of %llu MiB in + %llu MiB out: max_body %llu, max_output %llu, "
	    "compute_workers %d, queue %d, transit_buffers %d) is %s%llu GiB, over the %llu GiB "
	    "that can be mapped; lower max_body, max_output or the number of transit buffers",
	    s.nslots, (unsigned long long)(s.in_cap >> 20), (unsigned long long)(s.out_cap >> 20),
	    (unsigned long long)cfg->http.max_body, (unsigned long long)cfg->jobs.max_output,
	    sz->compute_workers, sz->queue_capacity, cfg->jobs.transit_buffers,
	    size == UINT64_MAX ? "more than " : "", (unsigned long long)(size >> 30),
	    (unsigned long long)(LG_ARENA_MAX_SIZE >> 30));
	return -1;
}

