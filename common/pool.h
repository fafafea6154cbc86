/* A pool of equal-sized blocks for one process (a loop worker's connection buffers): blocks are
 * mapped when the pool is empty, kept when given back, and unmapped by lg_pool_trim once they
 * went unused for a whole trim period, so a burst's memory goes back to the kernel soon after
 * the burst while steady traffic never maps or unmaps (the low-water-mark decay of jemalloc's
 * dirty-page purging and Go's scavenger, simplified). Not thread-safe: one owner. */
#ifndef LG_COMMON_POOL_H
#define LG_COMMON_POOL_H

#include <stddef.h>

/* Under AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang has the feature test) a block
 * is poisoned from lg_pool_put until lg_pool_get hands it out again, so any read or write of a
 * given-back block (a connection used after its close) is reported as use-after-poison, as
 * malloc'd memory would be after free (compiler-rt's asan_interface.h, "manual poisoning").
 * LG_POOL_POISONS tells which build this is. */
#if defined(__SANITIZE_ADDRESS__)
#define LG_POOL_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LG_POOL_POISONS 1
#endif
#endif
#ifndef LG_POOL_POISONS
#define LG_POOL_POISONS 0
#endif

struct lg_pool {
	size_t size;      /* bytes of each block, a multiple of the page size */
	void *free;       /* given-back blocks, linked through their first word */
	unsigned len;     /* blocks in the free list */
	unsigned low;     /* the fewest free blocks since the last trim */
	unsigned keep;    /* blocks a trim always leaves */
	unsigned long mapped; /* blocks mapped in all (in use + free), for tests and metrics */
};

/* Sets p up for blocks of at least size bytes (rounded up to whole pages); keep is how many free
 * blocks a trim leaves mapped. Maps nothing yet. */
void lg_pool_init(struct lg_pool *p, size_t size, unsigned keep);

/* A block of p->size bytes: a given-back one (contents as left, pages still resident) or a new
 * zero-filled mapping. Returns NULL with errno ENOMEM when none can be mapped. The caller owns
 * it until lg_pool_put. */
void *lg_pool_get(struct lg_pool *p);

/* Gives block b (from lg_pool_get on p) back to p; b must not be touched afterwards (the ASan
 * build poisons it). */
void lg_pool_put(struct lg_pool *p, void *b);

/* Unmaps the free blocks that were not needed since the last trim (the low-water mark of the free
 * list), leaving at least p->keep. Call it periodically (the loop's 100 ms tick). Returns the
 * number of blocks unmapped. */
unsigned lg_pool_trim(struct lg_pool *p);

#endif
