#include "shm/upeject.h"

#include <stdio.h>

#define OUT(w)      ((uint32_t)((w) & 0xffu))
#define RETURNED(w) ((uint32_t)(((w) >> 8) & 0xffu))
#define SEQ(w)      ((w) >> 16)
#define EJWORD(seq, ret, out) ((uint64_t)(seq) << 16 | (uint64_t)(ret) << 8 | (uint64_t)(out))
#define FAIL1 ((uint64_t)1 << 32) /* one failure in a row, in struct lg_upsrv fs */

void
lg_upadm_setup(struct lg_upadm *a, uint32_t nservers, const char *const *addrs,
    uint32_t eject_after, uint64_t eject_ms, uint32_t eject_max_percent,
    uint32_t retry_budget_percent, uint32_t retry_budget_min)
{
	if (nservers > LG_UPADM_SERVERS)
		nservers = LG_UPADM_SERVERS;
	a->nservers = nservers;
	a->eject_after = eject_after;
	a->eject_ms = eject_ms ? eject_ms : 1;
	/* the share, rounded down, and always one server left in the rotation */
	a->eject_max = nservers * (eject_max_percent > 100 ? 100 : eject_max_percent) / 100;
	if (nservers > 0 && a->eject_max >= nservers)
		a->eject_max = nservers - 1;
	a->retry_pct = retry_budget_percent;
	a->retry_min = retry_budget_min;
	for (uint32_t i = 0; i < nservers; i++)
		snprintf(a->srv[i].addr, sizeof(a->srv[i].addr), "%s", addrs ? addrs[i] : "");
}

/* Ejected now: out and not yet returned. */
static uint32_t
ejected(uint64_t w)
{
	return OUT(w) & ~RETURNED(w);
}

uint32_t
lg_upadm_ejected(const struct lg_upadm *a)
{
	return ejected(atomic_load(&((struct lg_upadm *)a)->ejword));
}

void
lg_upadm_srv_ok(struct lg_upadm *a, uint32_t si)
{
	struct lg_upsrv *s = &a->srv[si];
	uint32_t bit = 1u << si;
	uint64_t w;

	if (si >= LG_UPADM_SERVERS)
		return;
	if (atomic_load_explicit(&s->fs, memory_order_relaxed) >> 32 != 0)
		atomic_fetch_and(&s->fs, 0xffffffffu); /* its failures in a row cleared */
	w = atomic_load(&a->ejword);
	while ((OUT(w) & bit) && (RETURNED(w) & bit)) { /* on probation: back for good */
		if (atomic_compare_exchange_weak(&a->ejword, &w, EJWORD(SEQ(w), RETURNED(w) & ~bit,
		    OUT(w) & ~bit))) {
			atomic_store(&s->times, 0);
			return;
		}
	}
	if (!(OUT(w) & bit) && atomic_load_explicit(&s->times, memory_order_relaxed) != 0)
		atomic_store(&s->times, 0);
}

/* Whether server si, fs its word and w the ejection word, must not be given another request
 * unforced: on probation with one in flight (its next failure ejects it again), or on a run of
 * failures that the requests in flight to it could carry to eject_after. A run that reached
 * eject_after without an ejection (the share of ejected servers is out) restricts nothing:
 * such a server stays in the rotation, as the share says. */
static int
held_back(const struct lg_upadm *a, uint32_t si, uint64_t fs, uint64_t w)
{
	uint32_t fails = (uint32_t)(fs >> 32), sent = (uint32_t)fs;

	if ((OUT(w) & (1u << si)) && fails == 0)
		return sent >= 1;
	return fails > 0 && fails < a->eject_after && fails + sent >= a->eject_after;
}

int
lg_upadm_srv_take(struct lg_upadm *a, uint32_t si, uint32_t loop, int force)
{
	struct lg_upsrv *s;
	uint64_t fs, w;

	if (a->eject_after == 0 || si >= a->nservers || loop >= LG_UPADM_LOOPS)
		return 1; /* nothing counted: lg_upadm_srv_put counts nothing back either */
	s = &a->srv[si];
	w = atomic_load_explicit(&a->ejword, memory_order_relaxed);
	fs = atomic_load_explicit(&s->fs, memory_order_relaxed);
	do {
		if (!force && held_back(a, si, fs, w))
			return 0;
	} while (!atomic_compare_exchange_weak(&s->fs, &fs, fs + 1));
	atomic_fetch_add_explicit(&a->sent[loop][si], 1, memory_order_relaxed);
	return 1;
}

void
lg_upadm_srv_put(struct lg_upadm *a, uint32_t si, uint32_t loop)
{
	if (a->eject_after == 0 || si >= a->nservers || loop >= LG_UPADM_LOOPS)
		return;
	atomic_fetch_sub(&a->srv[si].fs, 1);
	atomic_fetch_sub_explicit(&a->sent[loop][si], 1, memory_order_relaxed);
}

void
lg_upadm_srv_reclaim(struct lg_upadm *a, uint32_t loop)
{
	for (uint32_t si = 0; loop < LG_UPADM_LOOPS && si < LG_UPADM_SERVERS; si++) {
		uint32_t n = atomic_exchange(&a->sent[loop][si], 0);

		if (n > 0)
			atomic_fetch_sub(&a->srv[si].fs, n);
	}
}

/* The back-off of a server ejected for the times-th time in a row, in ms. */
static uint64_t
backoff(const struct lg_upadm *a, uint32_t times)
{
	return a->eject_ms * (times < LG_UPEJ_CAP ? times : LG_UPEJ_CAP);
}

uint64_t
lg_upadm_srv_fail(struct lg_upadm *a, uint32_t si, uint64_t now_ms)
{
	struct lg_upsrv *s;
	uint32_t bit = 1u << si, times;
	uint64_t w, ms;

	if (a->eject_after == 0 || si >= a->nservers)
		return 0;
	s = &a->srv[si];
	w = atomic_load(&a->ejword);
	if (ejected(w) & bit)
		return 0; /* a late failure of a request sent before it went out */
	/* on probation, one failure is enough */
	if ((atomic_fetch_add(&s->fs, FAIL1) >> 32) + 1 < a->eject_after && !(OUT(w) & bit))
		return 0;
	times = atomic_load(&s->times) + 1;
	ms = backoff(a, times);
	for (;;) {
		uint32_t out = ejected(w);

		if (out & bit)
			return 0; /* another process ejected it meanwhile */
		if ((uint32_t)__builtin_popcount(out) >= a->eject_max)
			return 0; /* the share is out: it stays in (its failures go on counting) */
		/* its back-off end first: the word says only after this that it is out */
		atomic_store(&s->until_ms, now_ms + ms);
		if (atomic_compare_exchange_weak(&a->ejword, &w, EJWORD(SEQ(w) + 1,
		    RETURNED(w) & ~bit, OUT(w) | bit)))
			break;
	}
	atomic_store(&s->times, times < 255 ? times : 255);
	atomic_fetch_and(&s->fs, 0xffffffffu);
	atomic_fetch_add(&s->ejections, 1);
	return ms;
}

uint32_t
lg_upadm_eject_sweep(struct lg_upadm *a, uint64_t now_ms)
{
	uint64_t w = atomic_load(&a->ejword);

	for (;;) {
		uint32_t due = 0, out = ejected(w);

		for (uint32_t i = 0; out != 0 && i < a->nservers; i++)
			if ((out & (1u << i)) && atomic_load(&a->srv[i].until_ms) <= now_ms)
				due |= 1u << i;
		if (due == 0)
			return 0;
		if (atomic_compare_exchange_weak(&a->ejword, &w, EJWORD(SEQ(w), RETURNED(w) | due,
		    OUT(w))))
			return due;
	}
}

int
lg_upadm_retry_claim(struct lg_upadm *a, uint32_t loop)
{
	uint32_t r = atomic_load(&a->retrying), inflight, queued, allowed;

	lg_upadm_counts(a, &inflight, &queued);
	allowed = (uint32_t)((uint64_t)inflight * a->retry_pct / 100);
	if (allowed < a->retry_min)
		allowed = a->retry_min;
	do {
		if (r >= allowed) {
			atomic_fetch_add(&a->retry_refused, 1);
			return 0;
		}
	} while (!atomic_compare_exchange_weak(&a->retrying, &r, r + 1));
	if (loop < LG_UPADM_LOOPS)
		atomic_fetch_add(&a->retry_held[loop], 1);
	return 1;
}

void
lg_upadm_retry_done(struct lg_upadm *a, uint32_t loop)
{
	uint32_t r = atomic_load(&a->retrying);

	while (r > 0 && !atomic_compare_exchange_weak(&a->retrying, &r, r - 1))
		;
	if (loop < LG_UPADM_LOOPS && atomic_load(&a->retry_held[loop]) > 0)
		atomic_fetch_sub(&a->retry_held[loop], 1);
}
