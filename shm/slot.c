#include "shm/slot.h"

#include <errno.h>
#include <string.h>

enum lg_slot_state
lg_slot_state(uint64_t word)
{
	return (enum lg_slot_state)(word & 0xffu);
}

uint32_t
lg_slot_owner(uint64_t word)
{
	return (uint32_t)((word >> 8) & 0xffffffu);
}

uint32_t
lg_slot_gen(uint64_t word)
{
	return (uint32_t)(word >> 32);
}

static uint64_t
with_state(uint64_t word, enum lg_slot_state st)
{
	return (word & ~(uint64_t)0xff) | (uint32_t)st;
}

/* The part of the slot table pool p owns, and how much of it takes claims now: the master
 * narrows the open part when the CPU budget shrinks (a slot beyond it that is still busy
 * finishes normally) and widens it when the budget grows. Without pool pages (an arena made
 * by hand, the unit tests) the whole table is one pool. */
static void
pool_range(const struct lg_arena *a, uint32_t p, uint32_t *first, uint32_t *n, uint32_t *open)
{
	const struct lg_pool_page *pp;
	uint32_t lim;

	if (a->master == NULL || p >= a->master->npools) {
		*first = 0;
		*n = *open = a->nslots;
		return;
	}
	pp = &a->master->pools[p];
	*first = pp->first_slot < a->nslots ? pp->first_slot : a->nslots;
	*n = pp->nslots <= a->nslots - *first ? pp->nslots : a->nslots - *first;
	lim = atomic_load(&pp->slot_limit);
	*open = lim == 0 || lim > *n ? *n : lim;
}

int
lg_slot_claim(struct lg_arena *a, uint32_t owner, uint32_t *gen)
{
	return lg_slot_claim_pool(a, 0, owner, gen);
}

int
lg_slot_claim_pool(struct lg_arena *a, uint32_t pool, uint32_t owner, uint32_t *gen)
{
	static uint32_t hint;
	uint32_t first, nall, open;

	pool_range(a, pool, &first, &nall, &open);
	/* Transit buffers: every slot of the pool's part takes claims; the open part
	 * (slot_limit) bounds its job slots, not its buffers. */
	(void)open;
	for (uint32_t n = 0; n < nall; n++) {
		uint32_t i = first + (hint + n) % nall;
		struct lg_slot *s = &a->slots[i];
		uint64_t w = atomic_load(&s->word);

		if (lg_slot_state(w) != LG_SLOT_FREE)
			continue;
		uint32_t g = lg_slot_gen(w) + 1;
		if (!atomic_compare_exchange_strong(&s->word, &w,
		    lg_slot_word(g, owner, LG_SLOT_CLAIMED)))
			continue;
		/* The slot is ours; these fields are published by the later QUEUED transition. */
		atomic_store(&s->runner_pid, 0);
		s->status = LG_JOB_OK;
		s->out_len = 0;
		s->start_ns = s->end_ns = 0;
		memset(&s->job, 0, sizeof(s->job));
		hint = i + 1;
		*gen = g;
		return (int)i;
	}
	errno = EAGAIN;
	return -1;
}

int
lg_slot_move(struct lg_slot *s, uint32_t gen, enum lg_slot_state from, enum lg_slot_state to)
{
	uint64_t w = atomic_load(&s->word);

	do {
		if (lg_slot_gen(w) != gen) {
			errno = ESTALE;
			return -1;
		}
		if (lg_slot_state(w) != from) {
			errno = EBUSY;
			return -1;
		}
	} while (!atomic_compare_exchange_weak(&s->word, &w, with_state(w, to)));
	return 0;
}

int
lg_slot_release(struct lg_slot *s, uint32_t gen)
{
	uint64_t w = atomic_load(&s->word);

	for (;;) {
		enum lg_slot_state st = lg_slot_state(w), to;

		if (lg_slot_gen(w) != gen || st == LG_SLOT_FREE || st == LG_SLOT_ABANDONED ||
		    st == LG_SLOT_RECLAIMING) {
			errno = ESTALE;
			return -1;
		}
		to = st == LG_SLOT_RUNNING ? LG_SLOT_ABANDONED : LG_SLOT_FREE;
		/* On failure w is reloaded and the loop re-decides: a compute process may have
		 * moved RUNNING -> DONE in between. */
		if (atomic_compare_exchange_weak(&s->word, &w, with_state(w, to)))
			return (int)to;
	}
}

int
lg_slot_start(struct lg_slot *s, uint32_t gen, int32_t pid, uint64_t now_ns)
{
	if (lg_slot_move(s, gen, LG_SLOT_QUEUED, LG_SLOT_RUNNING) == -1)
		return -1;
	atomic_store(&s->runner_pid, pid);
	s->start_ns = now_ns;
	return 0;
}

int
lg_slot_job_read(const struct lg_arena *a, uint32_t slot, uint32_t gen, uint32_t nloops,
    struct lg_job *j, uint32_t *owner)
{
	const struct lg_slot *s;
	uint64_t w;
	enum lg_slot_state st;

	if (slot >= a->nslots) {
		errno = ERANGE;
		return -1;
	}
	s = &a->slots[slot];
	w = atomic_load(&s->word);
	st = lg_slot_state(w);
	if (lg_slot_gen(w) != gen || (st != LG_SLOT_RUNNING && st != LG_SLOT_ABANDONED)) {
		errno = ESTALE;
		return -1;
	}
	*j = s->job;
	*owner = lg_slot_owner(w);
	if (*owner >= nloops || j->body_off > a->in_cap || j->in_len > a->in_cap - j->body_off ||
	    (j->args_off != 0 && (j->args_off > j->body_off ||
	    j->args_len > j->body_off - j->args_off))) {
		errno = ERANGE;
		return -1;
	}
	return 0;
}

int
lg_slot_finish(struct lg_slot *s, uint32_t gen, enum lg_job_status st, uint64_t now_ns)
{
	uint64_t w = atomic_load(&s->word);

	for (;;) {
		enum lg_slot_state cur = lg_slot_state(w), to;

		if (lg_slot_gen(w) != gen || (cur != LG_SLOT_RUNNING && cur != LG_SLOT_ABANDONED)) {
			errno = ESTALE;
			return -1;
		}
		if (cur == LG_SLOT_RUNNING) {
			/* Read by the owner only after it sees DONE/FAILED; harmless if the CAS
			 * fails because the owner abandoned the slot meanwhile. */
			s->status = st;
			s->end_ns = now_ns;
		}
		to = cur == LG_SLOT_ABANDONED ? LG_SLOT_FREE :
		    st == LG_JOB_OK ? LG_SLOT_DONE : LG_SLOT_FAILED;
		if (atomic_compare_exchange_weak(&s->word, &w, with_state(w, to)))
			return to == LG_SLOT_FREE ? 0 : 1;
	}
}

int
lg_slot_reclaim_owner(struct lg_arena *a, uint32_t owner)
{
	int n = 0;

	for (uint32_t i = 0; i < a->nslots; i++) {
		uint64_t w = atomic_load(&a->slots[i].word);

		if (lg_slot_owner(w) == owner && lg_slot_release(&a->slots[i], lg_slot_gen(w)) != -1)
			n++;
	}
	return n;
}

static int
budget_tight(const struct lg_arena *a)
{
	uint64_t budget = atomic_load(&a->master->shm_budget);

	return budget != UINT64_MAX &&
	    atomic_load(&a->master->shm_charged) > budget / 2;
}

int
lg_slot_trim(struct lg_arena *a, uint32_t i, uint64_t min_bytes)
{
	struct lg_slot *s = &a->slots[i];
	uint64_t w = atomic_load(&s->word);
	uint32_t g = lg_slot_gen(w);
	uint64_t seen = ((uint64_t)g << 1) | 1;
	int rc, saved;

	if (lg_slot_state(w) != LG_SLOT_FREE || (s->touched < min_bytes &&
	    atomic_load(&s->charged) == 0)) {
		s->trim_seen = 0;
		return 0;
	}
	/* Freed since the last pass: note it, punch next time if still unclaimed. Unless the
	 * memory budget is half spent and the slot holds a charge: then its pages go now (claims
	 * that are refused keep bumping the generation of the first free slots, which would
	 * otherwise keep their charge forever, and a claim skips a RECLAIMING slot). */
	if (s->trim_seen != seen && !(atomic_load(&s->charged) > 0 && budget_tight(a))) {
		s->trim_seen = seen;
		return 0;
	}
	if (lg_slot_move(s, g, LG_SLOT_FREE, LG_SLOT_RECLAIMING) == -1)
		return 0;
	rc = lg_arena_release_pages(a, i);
	saved = errno;
	s->touched = 0;
	if (rc == 0)
		lg_arena_uncharge(a, i); /* the pages are gone: so is their charge */
	lg_slot_move(s, g, LG_SLOT_RECLAIMING, LG_SLOT_FREE);
	errno = saved;
	return rc == 0 ? 1 : -1;
}

uint64_t
lg_slot_queued_floor(void *pool, uint64_t now_ns)
{
	const struct lg_slot_pool *sp = pool;
	const struct lg_arena *a = sp->arena;
	uint32_t first, n, open;
	uint64_t newest = 0;

	pool_range(a, sp->pool, &first, &n, &open);
	for (uint32_t i = first; i < first + n; i++) {
		const struct lg_slot *s = &a->slots[i];

		if (lg_slot_state(atomic_load(&s->word)) == LG_SLOT_QUEUED &&
		    s->job.enqueue_ns > newest)
			newest = s->job.enqueue_ns;
	}
	return newest != 0 && now_ns > newest ? now_ns - newest : 0;
}

void
lg_slot_census_pool(const struct lg_arena *a, uint32_t pool, uint32_t counts[LG_SLOT_STATES])
{
	uint32_t first, n, open;

	for (int k = 0; k < LG_SLOT_STATES; k++)
		counts[k] = 0;
	pool_range(a, pool, &first, &n, &open);
	for (uint32_t i = first; i < first + n; i++)
		counts[lg_slot_state(atomic_load(&a->slots[i].word)) % LG_SLOT_STATES]++;
}

/* Whether token value t admits a job that has not ended. */
static int
token_valid(const struct lg_arena *a, uint64_t t)
{
	uint32_t i = (uint32_t)(t >> 32), gen = (uint32_t)t;
	uint64_t w;
	enum lg_slot_state st;

	if (i == 0 || i > a->nslots)
		return 0;
	w = atomic_load(&a->slots[i - 1].word);
	st = lg_slot_state(w);
	return lg_slot_gen(w) == gen &&
	    (st == LG_SLOT_QUEUED || st == LG_SLOT_RUNNING || st == LG_SLOT_ABANDONED);
}

uint32_t
lg_jobslot_open(const struct lg_jobslots *js, const struct lg_arena *a)
{
	uint32_t lim = js->limit != NULL ? atomic_load(js->limit) : 0;

	(void)a;
	return lim == 0 || lim > js->cap ? js->cap : lim;
}

struct lg_jobslots
lg_jobslots_of(const struct lg_arena *a, uint32_t pool)
{
	struct lg_jobslots js = a->jobs;
	uint32_t first, n, open;

	if (a->master == NULL || pool >= a->master->npools)
		return js;
	pool_range(a, pool, &first, &n, &open);
	js.tok = a->jobs.tok + first;
	js.cap = n;
	js.limit = &a->master->pools[pool].slot_limit;
	return js;
}

int
lg_jobslot_take(struct lg_jobslots *js, const struct lg_arena *a, uint32_t i, uint32_t gen)
{
	uint64_t mine = ((uint64_t)(i + 1) << 32) | gen;
	uint32_t open = lg_jobslot_open(js, a);

	/* Tokens above the open ones may still be valid (admitted before a resize narrowed the
	 * limit): admission counts them, and takes only from below the limit. */
	if (lg_jobslot_in_use(js, a) >= open) {
		errno = EAGAIN;
		return -1;
	}
	for (uint32_t k = 0; k < open; k++) {
		uint64_t t = atomic_load(&js->tok[k]);

		/* An invalid token stays invalid (generations only grow, and a slot never goes
		 * back to QUEUED at the same generation), so replacing it cannot lose a job. */
		if (!token_valid(a, t) && atomic_compare_exchange_strong(&js->tok[k], &t, mine))
			return 0;
	}
	errno = EAGAIN;
	return -1;
}

uint32_t
lg_jobslot_in_use(const struct lg_jobslots *js, const struct lg_arena *a)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < js->cap; k++)
		n += token_valid(a, atomic_load(&js->tok[k]));
	return n;
}

void
lg_slot_census(const struct lg_arena *a, uint32_t counts[LG_SLOT_STATES])
{
	uint32_t np = a->master != NULL && a->master->npools > 0 ? a->master->npools : 1, one[LG_SLOT_STATES];

	for (int k = 0; k < LG_SLOT_STATES; k++)
		counts[k] = 0;
	for (uint32_t p = 0; p < np; p++) {
		lg_slot_census_pool(a, p, one);
		for (int k = 0; k < LG_SLOT_STATES; k++)
			counts[k] += one[k];
	}
}

void
lg_slot_pool_range(const struct lg_arena *a, uint32_t pool, uint32_t *first, uint32_t *n)
{
	uint32_t open;

	pool_range(a, pool, first, n, &open);
}
