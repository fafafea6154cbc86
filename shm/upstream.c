#include "shm/upstream.h"

#include <errno.h>
#include <sys/mman.h>

#include "shm/codel.h"
#include "shm/stats.h"
#include "shm/upeject.h"

#define INFLIGHT(w) ((uint32_t)((w) & 0xffffffffu))
#define QUEUED(w)   ((uint32_t)((w) >> 32))
#define WORD(i, q)  ((uint64_t)(q) << 32 | (uint64_t)(i))

int
lg_upshm_create(struct lg_upshm *u, uint32_t nups, uint32_t nbulk,
    const uint32_t *max_conns, const uint32_t *queue)
{
	uint32_t n = nups + nbulk;

	u->adm = NULL;
	u->n = n;
	u->nups = nups;
	u->size = (size_t)n * sizeof(*u->adm);
	if (n == 0)
		return 0;
	void *p = mmap(NULL, u->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	u->adm = p; /* zero-filled by the kernel */
	for (uint32_t i = 0; i < n; i++) {
		u->adm[i].max_conns = max_conns[i] ? max_conns[i] : 1;
		u->adm[i].queue = queue[i];
	}
	return 0;
}

void
lg_upshm_destroy(struct lg_upshm *u)
{
	if (u->adm != NULL)
		munmap(u->adm, u->size);
	u->adm = NULL;
	u->n = 0;
	u->nups = 0;
}

int
lg_upadm_claim(struct lg_upadm *a, uint32_t loop)
{
	uint64_t w = atomic_load(&a->word), nw;
	int r;

	do {
		uint32_t i = INFLIGHT(w), q = QUEUED(w);

		if (q == 0 && i < a->max_conns) {
			nw = WORD(i + 1, q);
			r = LG_UPADM_GO;
		} else if (q < a->queue) {
			nw = WORD(i, q + 1);
			r = LG_UPADM_WAIT;
		} else {
			return LG_UPADM_FULL;
		}
	} while (!atomic_compare_exchange_weak(&a->word, &w, nw));
	atomic_fetch_add(r == LG_UPADM_GO ? &a->held[loop] : &a->waiting[loop], 1);
	return r;
}

int
lg_upadm_take(struct lg_upadm *a, uint32_t loop)
{
	uint64_t w = atomic_load(&a->word);

	do {
		if (INFLIGHT(w) >= a->max_conns || QUEUED(w) == 0)
			return 0;
	} while (!atomic_compare_exchange_weak(&a->word, &w, WORD(INFLIGHT(w) + 1,
	    QUEUED(w) - 1)));
	atomic_fetch_sub(&a->waiting[loop], 1);
	atomic_fetch_add(&a->held[loop], 1);
	return 1;
}

void
lg_upadm_unqueue(struct lg_upadm *a, uint32_t loop)
{
	uint64_t w = atomic_load(&a->word);

	do {
		if (QUEUED(w) == 0)
			return;
	} while (!atomic_compare_exchange_weak(&a->word, &w, WORD(INFLIGHT(w), QUEUED(w) - 1)));
	atomic_fetch_sub(&a->waiting[loop], 1);
}

uint32_t
lg_upadm_release(struct lg_upadm *a, uint32_t loop)
{
	uint64_t w = atomic_load(&a->word);

	do {
		if (INFLIGHT(w) == 0)
			return QUEUED(w);
	} while (!atomic_compare_exchange_weak(&a->word, &w, WORD(INFLIGHT(w) - 1, QUEUED(w))));
	atomic_fetch_sub(&a->held[loop], 1);
	return QUEUED(w);
}

uint64_t
lg_upadm_queued_floor(void *arg, uint64_t now_ns)
{
	struct lg_upadm *a = arg;
	uint64_t last = atomic_load(&a->last_enqueue_ns);

	return QUEUED(atomic_load(&a->word)) == 0 || last >= now_ns ? 0 : now_ns - last;
}

void
lg_upadm_counts(const struct lg_upadm *a, uint32_t *inflight, uint32_t *queued)
{
	uint64_t w = atomic_load(&((struct lg_upadm *)a)->word);

	*inflight = INFLIGHT(w);
	*queued = QUEUED(w);
}

double
lg_upshm_load(const struct lg_upshm *u)
{
	double max = 0;

	for (uint32_t i = 0; u != NULL && i < u->nups; i++) {
		uint32_t in, q, n = u->adm[i].nservers;
		uint32_t out = (uint32_t)__builtin_popcount(lg_upadm_ejected(&u->adm[i]));
		double l;

		lg_upadm_counts(&u->adm[i], &in, &q);
		l = (double)(in + q) / (double)u->adm[i].max_conns;
		if (out > 0 && out < n) /* ejected servers take their share of the capacity */
			l = l * n / (double)(n - out);
		/* Shedding (CoDel's standing queue): saturated whatever the queue's length now. */
		if (lg_codel_overloaded(&u->adm[i].codel) && l < LG_UP_SHED_LOAD)
			l = LG_UP_SHED_LOAD;
		if (l > max)
			max = l;
	}
	return max > 4 ? 4 : max;
}

uint32_t
lg_upadm_client_count(const struct lg_upadm *a, uint32_t tag)
{
	struct lg_upadm *m = (struct lg_upadm *)a;
	uint32_t used = atomic_load(&m->clients_used), n = 0;

	for (uint32_t i = 0; i < used && i < LG_UP_CLIENTS; i++)
		n += (uint32_t)atomic_load_explicit(&m->client[i], memory_order_relaxed) == tag;
	return n;
}

uint32_t
lg_upadm_client_add(struct lg_upadm *a, uint32_t loop, uint32_t tag)
{
	uint64_t v = (uint64_t)(loop + 1) << 32 | tag;

	for (uint32_t i = 0; i < LG_UP_CLIENTS; i++) {
		uint64_t free_entry = 0;

		if (atomic_load_explicit(&a->client[i], memory_order_relaxed) != 0 ||
		    !atomic_compare_exchange_strong(&a->client[i], &free_entry, v))
			continue;
		uint32_t used = atomic_load(&a->clients_used);
		while (used < i + 1 && !atomic_compare_exchange_weak(&a->clients_used, &used, i + 1))
			;
		return i + 1;
	}
	return 0;
}

void
lg_upadm_client_del(struct lg_upadm *a, uint32_t ref)
{
	if (ref >= 1 && ref <= LG_UP_CLIENTS)
		atomic_store(&a->client[ref - 1], 0);
}

uint32_t
lg_upadm_reclaim(struct lg_upadm *a, uint32_t loop)
{
	uint32_t h = atomic_exchange(&a->held[loop], 0), q = atomic_exchange(&a->waiting[loop], 0);
	uint32_t rt = atomic_exchange(&a->retry_held[loop], 0);
	uint64_t w = atomic_load(&a->word);

	for (uint32_t i = 0; i < LG_UP_CLIENTS; i++)
		if (atomic_load(&a->client[i]) >> 32 == (uint64_t)loop + 1)
			atomic_store(&a->client[i], 0);
	for (uint32_t r = atomic_load(&a->retrying); rt > 0 &&
	    !atomic_compare_exchange_weak(&a->retrying, &r, r > rt ? r - rt : 0);)
		;
	atomic_store(&a->idle[loop], 0);
	atomic_store(&a->busy[loop], 0);
	atomic_store(&a->tunnels[loop], 0);
	lg_upadm_srv_reclaim(a, loop);
	if (h == 0 && q == 0)
		return 0;
	for (;;) {
		uint32_t i = INFLIGHT(w), qq = QUEUED(w);
		uint64_t nw = WORD(i > h ? i - h : 0, qq > q ? qq - q : 0);

		if (atomic_compare_exchange_weak(&a->word, &w, nw))
			break;
	}
	return h + q;
}

void
lg_upadm_observe(struct lg_hist *h, uint64_t ns)
{
	unsigned i = 0;

	while (i < LG_STATS_BOUNDS && ns > lg_stats_time_bounds[i])
		i++;
	atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

const char *
lg_up_reason_str(enum lg_up_reason r)
{
	static const char *const names[LG_UPR_COUNT] = { "full", "queue_timeout", "connect",
	    "connect_timeout", "reset", "invalid", "first_byte_timeout", "deadline",
	    "truncated", "client_gone", "shed", "client_limit" };

	return (unsigned)r < LG_UPR_COUNT ? names[r] : "unknown";
}
