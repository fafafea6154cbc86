#include "shm/arena.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "shm/zone.h"

static int
round_page(uint64_t n, uint64_t *out)
{
	if (n > UINT64_MAX - (LG_PAGE - 1))
		return -1;
	*out = (n + LG_PAGE - 1) & ~(uint64_t)(LG_PAGE - 1);
	return 0;
}

/* Computes the layout into a->hdr-like fields; -1 on overflow. */
static int
plan(struct lg_arena *a, struct lg_arena_hdr *h)
{
	uint64_t slots_bytes, region, total;

	if (round_page(a->in_cap, &h->in_cap) || round_page(a->out_cap, &h->out_cap))
		return -1;
	h->master_off = LG_PAGE;
	h->procs_off = h->master_off + LG_PAGE;
	h->slots_off = h->procs_off + (uint64_t)a->nprocs * LG_PROC_PAGE;
	if (round_page((uint64_t)a->nslots * sizeof(struct lg_slot), &slots_bytes))
		return -1;
	h->stats_off = h->slots_off + slots_bytes;
	if (round_page((uint64_t)a->stat_routes * sizeof(struct lg_route_stats) +
	    (uint64_t)a->stat_kinds * sizeof(struct lg_kind_stats), &h->stats_stride))
		return -1;
	h->stat_routes = a->stat_routes;
	h->stat_kinds = a->stat_kinds;
	h->jobs_off = h->stats_off + h->stats_stride * a->nprocs;
	if (round_page((uint64_t)a->nslots * sizeof(uint64_t), &slots_bytes))
		return -1;
	h->regions_off = h->jobs_off + slots_bytes;
	region = h->in_cap + h->out_cap + LG_PAGE; /* a guard page after each output region */
	if (region < h->in_cap || region > (UINT64_MAX - h->regions_off) / a->nslots)
		return -1;
	total = h->regions_off + region * a->nslots;
	h->total_size = total;
	return 0;
}

int
lg_arena_size(uint32_t nslots, uint32_t nprocs, uint64_t in_cap, uint64_t out_cap,
    uint32_t nroutes, uint32_t nkinds, uint64_t *size)
{
	struct lg_arena a = { .nslots = nslots, .nprocs = nprocs, .in_cap = in_cap,
	    .out_cap = out_cap, .stat_routes = nroutes, .stat_kinds = nkinds };
	struct lg_arena_hdr h = { 0 };

	*size = UINT64_MAX;
	if (nslots == 0) {
		errno = EINVAL;
		return -1;
	}
	if (nroutes > 1u << 20 || nkinds > 1u << 20 || plan(&a, &h) == -1)
		return errno = EOVERFLOW, -1;
	*size = h.total_size;
	return h.total_size > LG_ARENA_MAX_SIZE ? (errno = EOVERFLOW, -1) : 0;
}

int
lg_arena_create(struct lg_arena *a, uint32_t nslots, uint32_t nprocs, uint64_t in_cap,
    uint64_t out_cap)
{
	return lg_arena_create_sized(a, nslots, nprocs, in_cap, out_cap, LG_STATS_ROUTES,
	    LG_STATS_KINDS);
}

int
lg_arena_create_sized(struct lg_arena *a, uint32_t nslots, uint32_t nprocs, uint64_t in_cap,
    uint64_t out_cap, uint32_t nroutes, uint32_t nkinds)
{
	struct lg_arena_hdr h = { .magic = LG_ARENA_MAGIC, .version = LG_ARENA_VERSION };
	int saved;

	memset(a, 0, sizeof(*a));
	a->fd = -1;
	if (nslots == 0) {
		errno = EINVAL;
		return -1;
	}
	a->nslots = h.nslots = nslots;
	a->nprocs = h.nprocs = nprocs;
	a->in_cap = in_cap;
	a->out_cap = out_cap;
	a->stat_routes = nroutes;
	a->stat_kinds = nkinds;
	if (nroutes > 1u << 20 || nkinds > 1u << 20 || plan(a, &h) == -1 ||
	    h.total_size > LG_ARENA_MAX_SIZE) {
		errno = EOVERFLOW;
		return -1;
	}
	/* Sparse: regions are backed when used (lg_arena_reserve, lg_arena_keep: shm/arena.h). */
	if (lg_zone_map("lagless-arena", h.total_size, 0, &a->fd, &a->base) == -1)
		return -1;
	a->size = h.total_size;
	a->in_cap = h.in_cap;
	a->out_cap = h.out_cap;
	a->hdr = (struct lg_arena_hdr *)a->base;
	*a->hdr = h;
	a->master = (struct lg_master_page *)(a->base + h.master_off);
	a->procs = (struct lg_proc_page *)(a->base + h.procs_off);
	a->slots = (struct lg_slot *)(a->base + h.slots_off);
	a->jobs.tok = (_Atomic uint64_t *)(a->base + h.jobs_off);
	a->jobs.cap = nslots;
	/* Guard pages (PROT_NONE, never backed) after every output region, in this mapping and
	 * so in every process forked from it: a kind that writes past its output region faults
	 * there (its process dies, the client gets 502) instead of reaching the next slot. */
	for (uint32_t i = 0; i < nslots; i++)
		if (mprotect(lg_arena_out(a, i) + a->out_cap, LG_PAGE, PROT_NONE) == -1)
			goto fail_mapped;
	/* The file is zero-filled, so slots are FREE/gen 0 already; only non-zero defaults remain. */
	for (uint32_t i = 0; i < nprocs; i++)
		atomic_store(&a->procs[i].job, LG_NO_JOB);
	/* No memory bound until the master publishes one (lg_gen_decide_memory). */
	atomic_store(&a->master->mem_limit, UINT64_MAX);
	atomic_store(&a->master->shm_budget, UINT64_MAX);
	return 0;
fail_mapped:
	saved = errno;
	lg_zone_unmap(a->base, a->size, a->fd);
	a->base = NULL;
	a->fd = -1;
	errno = saved;
	return -1;
}

void
lg_arena_set_job_slots(struct lg_arena *a, uint32_t n)
{
	a->jobs.cap = n < 1 ? 1 : n > a->nslots ? a->nslots : n;
}

void
lg_arena_destroy(struct lg_arena *a)
{
	/* base, not fd, says whether there is an arena: a zeroed struct has fd 0, which is
	 * stdin (or whatever the process opened first), not ours to close. */
	if (a->base == NULL)
		return;
	lg_zone_unmap(a->base, a->size, a->fd);
	a->base = NULL;
	a->fd = -1;
}

uint64_t
lg_arena_in_off(const struct lg_arena *a, uint32_t i)
{
	return a->hdr->regions_off + (uint64_t)i * (a->in_cap + a->out_cap + LG_PAGE);
}

uint64_t
lg_arena_out_off(const struct lg_arena *a, uint32_t i)
{
	return lg_arena_in_off(a, i) + a->in_cap;
}

unsigned char *
lg_arena_in(const struct lg_arena *a, uint32_t i)
{
	return a->base + lg_arena_in_off(a, i);
}

unsigned char *
lg_arena_out(const struct lg_arena *a, uint32_t i)
{
	return a->base + lg_arena_out_off(a, i);
}

int
lg_arena_reserve(struct lg_arena *a, uint64_t off, uint64_t len)
{
	uint64_t end;

	if (len == 0)
		return 0;
	if (round_page(len, &len) == -1 || off % LG_PAGE != 0 || off > a->size ||
	    len > a->size - off) {
		errno = EINVAL;
		return -1;
	}
	end = off + len;
	/* shmem_fallocate stops with EINTR when a signal is pending; what it allocated before
	 * stays, so a retry continues cheaply. */
	for (int tries = 0; tries < 8; tries++) {
		if (fallocate(a->fd, 0, (off_t)off, (off_t)(end - off)) == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
	return -1;
}

int
lg_arena_protect_inputs(struct lg_arena *a)
{
	for (uint32_t i = 0; i < a->nslots; i++)
		if (mprotect(lg_arena_in(a, i), a->in_cap, PROT_READ) == -1)
			return -1;
	return 0;
}

int
lg_arena_keep(struct lg_arena *a, uint64_t len)
{
	if (round_page(len, &len) == -1 || len > a->in_cap) {
		errno = EINVAL;
		return -1;
	}
	for (uint32_t i = 0; i < a->nslots; i++)
		if (lg_arena_reserve(a, lg_arena_in_off(a, i), len) == -1)
			return -1;
	a->keep = len;
	return 0;
}

int
lg_arena_release_pages(struct lg_arena *a, uint32_t i)
{
	return fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)(lg_arena_in_off(a, i) + a->keep), (off_t)(a->in_cap - a->keep + a->out_cap));
}

/* Adds n bytes to shm_charged unless that passes the budget. */
static int
charge(struct lg_master_page *mp, uint64_t n)
{
	uint64_t budget = atomic_load(&mp->shm_budget), cur = atomic_load(&mp->shm_charged);

	do {
		if (budget != UINT64_MAX && (cur > budget || n > budget - cur)) {
			errno = ENOMEM;
			return -1;
		}
	} while (!atomic_compare_exchange_weak(&mp->shm_charged, &cur, cur + n));
	return 0;
}

/* Bytes slot i must be charged to hold region bytes [0, upto) (page-rounded) when *have (at
 * least floor) are paid; -1 (EINVAL) past cap. */
static int
owed(uint64_t upto, uint64_t cap, uint64_t floor, uint64_t have, uint64_t *extent,
    uint64_t *delta)
{
	uint64_t paid = have > floor ? have : floor;

	if (upto > cap || round_page(upto, extent) == -1) {
		errno = EINVAL;
		return -1;
	}
	*delta = *extent > paid ? *extent - paid : 0;
	return 0;
}

int
lg_arena_charge(struct lg_arena *a, uint32_t i, uint64_t in_upto, uint64_t out_upto)
{
	struct lg_slot *s;
	uint64_t in_ext, out_ext, din, dout;

	if (i >= a->nslots)
		return errno = EINVAL, -1;
	s = &a->slots[i];
	if (owed(in_upto, a->in_cap, a->keep, s->in_charged, &in_ext, &din) == -1 ||
	    owed(out_upto, a->out_cap, 0, s->out_charged, &out_ext, &dout) == -1)
		return -1;
	if (din + dout == 0)
		return 0;
	if (charge(a->master, din + dout) == -1)
		return -1;
	if (din > 0)
		s->in_charged = in_ext;
	if (dout > 0)
		s->out_charged = out_ext;
	atomic_fetch_add(&s->charged, din + dout);
	return 0;
}

int
lg_arena_charge_in(struct lg_arena *a, uint32_t i, uint64_t upto)
{
	return lg_arena_charge(a, i, upto, 0);
}

int
lg_arena_charge_out(struct lg_arena *a, uint32_t i, uint64_t upto)
{
	return lg_arena_charge(a, i, 0, upto);
}

void
lg_arena_uncharge(struct lg_arena *a, uint32_t i)
{
	struct lg_slot *s = &a->slots[i];
	uint64_t n = atomic_exchange(&s->charged, 0), cur = atomic_load(&a->master->shm_charged);

	s->in_charged = s->out_charged = 0;
	while (!atomic_compare_exchange_weak(&a->master->shm_charged, &cur, cur > n ? cur - n : 0))
		;
}

void
lg_arena_recount(struct lg_arena *a)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < a->nslots; i++)
		sum += atomic_load(&a->slots[i].charged);
	atomic_store(&a->master->shm_charged, sum);
}
