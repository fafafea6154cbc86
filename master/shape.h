/* The arena a configuration implies and the memory budget that leaves (master/ only), apart
 * from the generation that maps it (master/gen.c) so the memory watch (master/memwatch.c),
 * -t, start-up and a reload decide them without calling into either: one shape, whoever asks.
 * Reads the configuration, its registry and the sizing; maps nothing. */
#ifndef LG_MASTER_SHAPE_H
#define LG_MASTER_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "sizing/sizing.h"

/* The arena a configuration implies: transit buffers, processes, region sizes (bytes), stats
 * rows. */
struct lg_arena_shape {
	uint32_t nslots, nprocs, nroutes, nkinds;
	uint64_t in_cap, out_cap;
};

/* Pool p's process and queue maxima into *compute and *queue; a sizing filled by hand may
 * leave the maxima below the current values, which then are the maxima. */
void lg_pool_max(const struct lg_sizing *sz, uint32_t p, int *compute, int *queue);

/* The shape of the arena lg_gen_create maps for cfg sized by sz into *s: every pool at its
 * maximum of processes and queue (a live resize never remaps). cfg->reg must be set. */
void lg_arena_shape(const struct lg_config *cfg, const struct lg_sizing *sz,
    struct lg_arena_shape *s);

/* Flight buckets for n transit buffers: many more than jobs that can be in flight, so two
 * keys rarely share one (shm/flight.h: the table is direct-mapped); 512 bytes each. */
uint32_t lg_flight_entries(uint32_t nslots);

/* Transit buffers of a generation with njobs job slots (C + Q): --transit-buffers, or 4 x
 * njobs when it is 0; never fewer than njobs. */
uint32_t lg_gen_transit_buffers(const struct lg_config *cfg, uint32_t njobs);

/* The most the loop workers' proxying may hold in private memory (bytes), for `loops` loop
 * workers: per upstream of reg, an exchange for each request in flight or queued (max_conns +
 * queue, for the whole server) and a connection for each kept one (keepalive per loop and
 * server) or busy one (max_conns), at shm/upstream.h's LG_UP_XCHG_BYTES and LG_UP_CONN_BYTES;
 * and an exchange for each place of a route bulkhead's queue (its waiters are outside the
 * upstream's queue).
 * Not counted: an exchange whose answer came whole and gave its place back holds its buffers
 * until the client took the last piece. 0 for no upstream. */
uint64_t lg_up_memory(const struct lg_registry *reg, int loops);

/* Decides sz->mem (sizing/memsize.h) for cfg: the budget of transit bytes backed at once,
 * given the shared memory the arena cfg and sz imply keeps backed whatever the load (its
 * pages, the request views, the flight table), the cache when a route caches and what
 * proxying may hold (lg_up_memory). Call after lg_sizing_decide. */
void lg_gen_decide_memory(const struct lg_config *cfg, struct lg_sizing *sz);

/* Whether the arena lg_gen_create would map for cfg sized by sz fits (lg_arena_size, the same
 * shape lg_gen_create uses). Returns 0, or -1 with a message naming the settings that decide
 * the size in err (errlen bytes); for -t and start-up (issue 10 item 5: fail naming the
 * settings, not ENOMEM later). */
int lg_gen_check_arena(const struct lg_config *cfg, const struct lg_sizing *sz, char *err,
    size_t errlen);

#endif
