/* The shared-memory arena: one memfd_create(2) file holding the proc pages, the job-slot table
 * and one input and one output region per slot (layout in shm/layout.h).
 *
 * memfd rather than /dev/shm: container runtimes cap /dev/shm at 64 MiB, memfd pages are
 * charged to the memory cgroup instead, and the file has no name that can leak. The file is
 * sparse: a region costs memory only for the pages a request touched, and the master punches
 * the pages of large finished jobs back out (fallocate(2) FALLOC_FL_PUNCH_HOLE). */
#ifndef LG_SHM_ARENA_H
#define LG_SHM_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "shm/layout.h"

/* Admission of one pool: a table of job-slot tokens in the arena, at most cap of them valid at
 * once (C running + Q queued). A token names the transit buffer (slot) whose job it admits;
 * it is valid while that slot, at that generation, is QUEUED, RUNNING or ABANDONED, so a job
 * gives its token back by ending, and a process killed at any instruction leaks none
 * (shm/slot.h, lg_jobslot_take). An object, so a second pool is a second instance. */
struct lg_jobslots {
	_Atomic uint64_t *tok;      /* cap words: (slot + 1) << 32 | generation, 0 when never used */
	uint32_t cap;
	_Atomic uint32_t *limit;    /* the pool's slot_limit (job slots open now), or NULL */
};

struct lg_arena {
	int fd;                     /* the memfd; -1 when not created */
	unsigned char *base;        /* MAP_SHARED mapping of the whole file */
	uint64_t size;              /* bytes */
	uint32_t nslots;
	uint32_t nprocs;
	uint64_t in_cap;            /* bytes per input region */
	uint64_t out_cap;           /* bytes per output region */
	uint32_t stat_routes;       /* route rows per process in the stats area */
	uint32_t stat_kinds;        /* kind rows per process */
	struct lg_arena_hdr *hdr;
	struct lg_master_page *master; /* written by the master only */
	struct lg_proc_page *procs; /* nprocs pages */
	struct lg_slot *slots;      /* nslots entries: the transit buffers */
	struct lg_jobslots jobs;    /* the default pool's admission; cap = nslots until set */
	uint64_t keep;              /* bytes at the start of each input region kept backed (the
	                             * request view, lg_arena_keep); 0 until set */
};

/* Creates and maps the arena: nslots transit buffers (>= 1; each a job state word, an input
 * and an output region) and as many job-slot tokens (a->jobs.cap = nslots; lower it with
 * lg_arena_set_job_slots before forking), one master page, nprocs proc pages, input regions of at
 * least in_cap bytes and output regions of at least out_cap bytes (both rounded up to 4 KiB).
 * Slots start FREE with generation 0; proc pages start with pid 0 and job LG_NO_JOB; every
 * counter and the master page start at zero.
 * Returns 0, or -1 with errno from memfd_create/ftruncate/mmap (ENOMEM, EMFILE, EFBIG) or
 * EOVERFLOW when the sizes overflow 64 bits or exceed LG_ARENA_MAX_SIZE. On failure nothing is
 * left open. */
int lg_arena_create(struct lg_arena *a, uint32_t nslots, uint32_t nprocs, uint64_t in_cap,
    uint64_t out_cap);

/* The largest arena lg_arena_create maps, in bytes (16 TiB): up to four generations' arenas are
 * mapped at once in the master, and they must fit its user address space (128 TiB with 4-level
 * page tables on x86-64 and arm64) with room to spare; mmap fails with ENOMEM beyond it. */
#define LG_ARENA_MAX_SIZE (1ull << 44)

/* The size in bytes the arena of lg_arena_create_sized(nslots, nprocs, in_cap, out_cap, nroutes,
 * nkinds) would have (the same layout computation, nothing created) in *size. Returns 0, or -1
 * with errno EOVERFLOW when the sizes overflow 64 bits (*size UINT64_MAX) or exceed
 * LG_ARENA_MAX_SIZE (*size the size), EINVAL when nslots is 0. */
int lg_arena_size(uint32_t nslots, uint32_t nprocs, uint64_t in_cap, uint64_t out_cap,
    uint32_t nroutes, uint32_t nkinds, uint64_t *size);

/* lg_arena_create with the stats area sized for nroutes route rows and nkinds kind rows per
 * process (lg_arena_create: LG_STATS_ROUTES and LG_STATS_KINDS); each at most 2^20. */
int lg_arena_create_sized(struct lg_arena *a, uint32_t nslots, uint32_t nprocs, uint64_t in_cap,
    uint64_t out_cap, uint32_t nroutes, uint32_t nkinds);

/* Route row `row` (< stat_routes) / kind row `kind` (< stat_kinds) of proc page `proc`'s block
 * in the stats area; written only by the process holding that page. */
static inline struct lg_route_stats *
lg_arena_route_stats(const struct lg_arena *a, uint32_t proc, uint32_t row)
{
	return (struct lg_route_stats *)(void *)(a->base + a->hdr->stats_off +
	    (uint64_t)proc * a->hdr->stats_stride) + row;
}

static inline struct lg_kind_stats *
lg_arena_kind_stats(const struct lg_arena *a, uint32_t proc, uint32_t kind)
{
	return (struct lg_kind_stats *)(void *)(a->base + a->hdr->stats_off +
	    (uint64_t)proc * a->hdr->stats_stride +
	    (uint64_t)a->stat_routes * sizeof(struct lg_route_stats)) + kind;
}

/* The index of proc page p of a. */
static inline uint32_t
lg_arena_proc_index(const struct lg_arena *a, const struct lg_proc_page *p)
{
	return (uint32_t)(p - a->procs);
}

/* Bounds admission to n job slots (1 <= n <= nslots; clamped). Master only, before forking. */
void lg_arena_set_job_slots(struct lg_arena *a, uint32_t n);

/* Unmaps and closes; safe on a zeroed or already destroyed arena. */
void lg_arena_destroy(struct lg_arena *a);

/* Byte offsets from the arena base of slot i's regions (i < nslots): the values carried in the
 * job header and checked against the layout by the receiver. */
uint64_t lg_arena_in_off(const struct lg_arena *a, uint32_t i);
uint64_t lg_arena_out_off(const struct lg_arena *a, uint32_t i);

/* Pointers to slot i's input / output region (in_cap / out_cap bytes); the arena owns them. */
unsigned char *lg_arena_in(const struct lg_arena *a, uint32_t i);
unsigned char *lg_arena_out(const struct lg_arena *a, uint32_t i);

/* Backs len bytes of the arena from byte offset off (page-aligned; len is rounded up to whole
 * pages) with real memory now, with fallocate(2) mode 0 on the memfd, so that writing there
 * later cannot fault. A tmpfs/shmem page that cannot be allocated on a fault is SIGBUS (size
 * limit, ENOSPC) or a memory-cgroup OOM; here it is an error the caller can answer (503).
 * Pages already backed cost nothing. Returns 0, or -1 with errno ENOMEM (memory cgroup limit),
 * ENOSPC (filesystem full), EINVAL (range outside the arena) or EINTR after retries. On failure
 * the kernel gives back the pages this call allocated (shmem_fallocate). */
int lg_arena_reserve(struct lg_arena *a, uint64_t off, uint64_t len);

/* Maps every input region read-only in this process (a compute process: it only reads
 * request bodies, so a kind writing into one faults instead of changing another job's input).
 * Returns 0 or -1 with errno from mprotect(2). */
int lg_arena_protect_inputs(struct lg_arena *a);

/* Backs the first len bytes (rounded up to pages) of every slot's input region now and keeps
 * them backed: lg_arena_release_pages leaves them. A loop worker writes each request's view
 * there when it claims a slot (kinds/host.h), so it never has to call fallocate(2) for it,
 * which can wait in memory reclaim or behind another process's fallocate of the same memfd
 * (i_rwsem; 100-220 ms were measured under a memory limit). Costs nslots * len bytes. Call in
 * the master before forking. Returns 0, or -1 with errno from fallocate(2) (EINVAL when len
 * exceeds in_cap). */
int lg_arena_keep(struct lg_arena *a, uint64_t len);

/* The memory budget (issue 18): bytes of the regions that may be backed at once, so the memfd
 * never grows past what the memory limit leaves for it (its pages are not freed by killing
 * any process: the master holds the file). Before backing, a slot's user charges what it will
 * back: lg_arena_charge_in for the input region's first upto bytes (beyond the kept request
 * view), lg_arena_charge_out for the output region's. A slot reused before its pages were
 * punched pays only for what it backs beyond them. Returns 0, or -1 with errno ENOMEM when the
 * charge would take the master page's shm_charged past shm_budget (UINT64_MAX, as
 * lg_arena_create leaves it: no bound, the charge is only counted; 0: nothing beyond the kept
 * view may be backed), EINVAL for upto past the region. The caller answers 503. Order:
 * the global counter first (one compare-and-swap), then the slot's fields; a process killed
 * between the two leaves the counter high until the master recounts (lg_arena_recount). */
int lg_arena_charge_in(struct lg_arena *a, uint32_t i, uint64_t upto);
int lg_arena_charge_out(struct lg_arena *a, uint32_t i, uint64_t upto);

/* Both at once, all or nothing: the input region's first in_upto bytes and the output
 * region's first out_upto. A refused job then holds no charge for the part that fitted. */
int lg_arena_charge(struct lg_arena *a, uint32_t i, uint64_t in_upto, uint64_t out_upto);

/* Gives slot i's charge back (its pages were just punched: lg_arena_release_pages). Master
 * only, while the slot is RECLAIMING. */
void lg_arena_uncharge(struct lg_arena *a, uint32_t i);

/* Sets shm_charged to the sum of the slots' charges (the master, after a process died: a
 * charge it made but had not yet recorded in its slot is returned). A charge another process
 * is making at that instant may be missed until its slot is punched. */
void lg_arena_recount(struct lg_arena *a);

/* Gives slot i's region pages back to the kernel (hole punch), so a finished 64 MiB job stops
 * costing 64 MiB; the first a->keep bytes of the input region stay. Call only while the slot is
 * RECLAIMING (nobody else touches it). Returns 0 or -1 with errno from fallocate(2). */
int lg_arena_release_pages(struct lg_arena *a, uint32_t i);

#endif
