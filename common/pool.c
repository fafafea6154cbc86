#include "common/pool.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#if LG_POOL_POISONS
#include <stdint.h>
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size)   ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

/* Maps a block of size bytes (whole pages); NULL when none can be had. mmap rather than malloc:
 * a ~36 KiB block is below glibc's mmap threshold, and freed heap chunks between live ones
 * never go back to the kernel. Under ASan the block is aligned to, and mapped in multiples of,
 * the application span one shadow page describes (8 pages), so its shadow is whole pages of
 * its own that unmap_block can give back: poisoning writes them, unpoisoning only zeroes
 * them, and they would stay resident after the block has gone (4 KiB per connection ever
 * served, which the idle-connection memory test sees). */
static void *
map_block(size_t size)
{
#if LG_POOL_POISONS
	size_t scale, offset, span = (size_t)sysconf(_SC_PAGESIZE);

	__asan_get_shadow_mapping(&scale, &offset);
	span <<= scale;
	size = (size + span - 1) / span * span;
	char *m = mmap(NULL, size + span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	char *b = (char *)(((uintptr_t)m + span - 1) & ~(uintptr_t)(span - 1));
	if (b > m)
		munmap(m, (size_t)(b - m));
	if (b + size < m + size + span)
		munmap(b + size, (size_t)(m + size + span - (b + size)));
	return b;
#else
	void *b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return b == MAP_FAILED ? NULL : b;
#endif
}

/* Unmaps block b of size bytes from map_block; under ASan it is unpoisoned first (a later
 * mapping at this address starts clean) and its shadow pages are given back, as ASan does for
 * its own mappings. */
static void
unmap_block(void *b, size_t size)
{
#if LG_POOL_POISONS
	size_t scale, offset, span = (size_t)sysconf(_SC_PAGESIZE);

	__asan_get_shadow_mapping(&scale, &offset);
	span <<= scale;
	size = (size + span - 1) / span * span;
	ASAN_UNPOISON_MEMORY_REGION(b, size);
	madvise((void *)(((uintptr_t)b >> scale) + offset), size >> scale, MADV_DONTNEED);
#endif
	munmap(b, size);
}

void
lg_pool_init(struct lg_pool *p, size_t size, unsigned keep)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (size < sizeof(void *))
		size = sizeof(void *);
	p->size = (size + page - 1) / page * page;
	p->free = NULL;
	p->len = p->low = 0;
	p->keep = keep;
	p->mapped = 0;
}

void *
lg_pool_get(struct lg_pool *p)
{
	void *b = p->free;

	if (b != NULL) {
		ASAN_UNPOISON_MEMORY_REGION(b, p->size);
		p->free = *(void **)b;
		if (--p->len < p->low)
			p->low = p->len;
		return b;
	}
	if ((b = map_block(p->size)) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	p->mapped++;
	return b;
}

void
lg_pool_put(struct lg_pool *p, void *b)
{
	*(void **)b = p->free;
	p->free = b;
	p->len++;
	ASAN_POISON_MEMORY_REGION(b, p->size); /* the link too: c->w is a connection's first word */
}

unsigned
lg_pool_trim(struct lg_pool *p)
{
	unsigned n = 0;

	while (p->low > 0 && p->len > p->keep) {
		void *b = p->free;

		ASAN_UNPOISON_MEMORY_REGION(b, sizeof(void *));
		p->free = *(void **)b;
		p->len--;
		p->low--;
		unmap_block(b, p->size);
		p->mapped--;
		n++;
	}
	p->low = p->len;
	return n;
}
