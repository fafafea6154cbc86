#include "common/pool.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#if LG_POOL_POISONS
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size)   ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

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
	/* mmap rather than malloc: a ~36 KiB block is below glibc's mmap threshold, and freed
	 * heap chunks between live ones never go back to the kernel. */
	b = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED) {
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

		/* unpoisoned before it goes: a later mapping at this address starts clean */
		ASAN_UNPOISON_MEMORY_REGION(b, p->size);
		p->free = *(void **)b;
		p->len--;
		p->low--;
		munmap(b, p->size);
		p->mapped--;
		n++;
	}
	p->low = p->len;
	return n;
}
