#include "shm/share.h"

#include <netinet/in.h>
#include <string.h>

#include "shm/slot.h"

static uint32_t
fnv1a(uint32_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

uint32_t
lg_share_tag(const struct sockaddr *sa, socklen_t len)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	unsigned char fam;
	const unsigned char *p;
	size_t n;

	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		fam = 4;
		p = (const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		n = 4;
	} else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		p = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
		if (memcmp(p, mapped, sizeof(mapped)) == 0) {
			fam = 4;
			p += 12;
			n = 4;
		} else {
			fam = 6;
			n = 8; /* the /64 prefix */
		}
	} else {
		return 0;
	}
	uint32_t h = fnv1a(fnv1a(2166136261u, &fam, 1), p, n);
	return h ? h : 1;
}

/* A slot that holds a transit buffer for someone. */
static int
held(uint64_t word)
{
	enum lg_slot_state st = lg_slot_state(word);

	return st != LG_SLOT_FREE && st != LG_SLOT_RECLAIMING;
}

uint32_t
lg_share_held(const struct lg_arena *a, uint32_t first, uint32_t n, uint32_t tag)
{
	uint32_t count = 0;

	for (uint32_t i = first; tag != 0 && i < first + n && i < a->nslots; i++) {
		const struct lg_slot *s = &a->slots[i];

		if (held(atomic_load(&s->word)) && atomic_load(&s->client) == tag)
			count++;
	}
	return count;
}

int
lg_share_penalized(const struct lg_arena *a, uint32_t first, uint32_t n, uint32_t tag,
    uint64_t now_ns)
{
	for (uint32_t i = first; tag != 0 && i < first + n && i < a->nslots; i++) {
		const struct lg_slot *s = &a->slots[i];

		if (atomic_load(&s->cut_client) == tag && atomic_load(&s->cut_until_ns) > now_ns)
			return 1;
	}
	return 0;
}

int
lg_share_ask_cut(struct lg_arena *a, uint32_t first, uint32_t n, uint64_t now_ns,
    uint64_t min_rate, uint64_t grace_ns)
{
	int best = -1;
	double best_rate = 0;
	uint64_t best_held = 0;
	uint32_t best_gen = 0;

	for (uint32_t i = first; min_rate > 0 && i < first + n && i < a->nslots; i++) {
		struct lg_slot *s = &a->slots[i];
		uint64_t word = atomic_load(&s->word), start = atomic_load(&s->up_start_ns);

		if (lg_slot_state(word) != LG_SLOT_CLAIMED || start == 0 || start > now_ns ||
		    now_ns - start < grace_ns || atomic_load(&s->cut_gen) == lg_slot_gen(word))
			continue;
		uint64_t hold = now_ns - start;
		double rate = (double)atomic_load(&s->up_bytes) * 1e9 / (double)hold;

		if (rate >= (double)min_rate)
			continue;
		if (best < 0 || rate < best_rate || (rate == best_rate && hold > best_held)) {
			best = (int)i;
			best_rate = rate;
			best_held = hold;
			best_gen = lg_slot_gen(word);
		}
	}
	if (best >= 0)
		atomic_store(&a->slots[best].cut_gen, best_gen);
	return best;
}

int
lg_share_cut_asked(struct lg_slot *s, uint64_t word)
{
	uint32_t gen = atomic_load(&s->cut_gen);

	if (gen == 0)
		return 0;
	atomic_store(&s->cut_gen, 0);
	return gen == lg_slot_gen(word) && lg_slot_state(word) == LG_SLOT_CLAIMED;
}

void
lg_share_note_cut(struct lg_slot *s, uint32_t tag, uint64_t until_ns)
{
	atomic_store(&s->cut_until_ns, until_ns);
	atomic_store(&s->cut_client, tag);
}

void
lg_share_claimed(struct lg_slot *s, uint32_t tag, uint64_t now_ns)
{
	atomic_store(&s->up_bytes, 0);
	atomic_store(&s->up_start_ns, now_ns);
	atomic_store(&s->client, tag);
}
