#include "worker/fairshare.h"

#include <sys/socket.h>

#include "common/clock.h"
#include "shm/share.h"
#include "shm/slot.h"

#define CUT_GRACE_NS 1000000000ull /* an upload held this long shows a rate it may be cut for */

uint32_t
lg_fair_tag(const struct lg_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(c->fd, (struct sockaddr *)&ss, &len) == -1)
		return 0;
	return lg_share_tag((struct sockaddr *)&ss, len);
}

int
lg_fair_over_share(const struct lg_conn *c, uint32_t tag)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_jobslots js = lg_jobslots_of(a, c->job.pool);
	uint32_t first, n, limit;

	if (tag == 0)
		return 0;
	lg_slot_pool_range(a, c->job.pool, &first, &n);
	limit = (uint32_t)((uint64_t)n * (uint64_t)c->w->env->cfg->transit_share_pct / 100);
	if (limit < lg_jobslot_open(&js, a))
		limit = lg_jobslot_open(&js, a);
	/* Penalties come only from cuts, which --evict-upload-rate 0 turns off. */
	if ((limit >= n || lg_share_held(a, first, n, tag) < limit) &&
	    (c->w->env->cfg->evict_upload_rate == 0 ||
	    !lg_share_penalized(a, first, n, tag, lg_now_ns())))
		return 0;
	atomic_fetch_add(&c->w->env->page->rejected_client, 1);
	return 1;
}

int
lg_fair_refuse_transit(const struct lg_conn *c)
{
	struct lg_arena *a = c->w->env->arena;
	uint32_t first, n;

	lg_slot_pool_range(a, c->job.pool, &first, &n);
	lg_share_ask_cut(a, first, n, lg_now_ns(), c->w->env->cfg->evict_upload_rate,
	    CUT_GRACE_NS);
	atomic_fetch_add(&c->w->env->page->rejected_transit, 1);
	return -1;
}

void
lg_fair_tick(struct lg_worker *w)
{
	struct lg_arena *a = w->env->arena;
	uint64_t rate = w->env->cfg->evict_upload_rate, now = lg_now_ns();
	struct lg_conn *c, *next;

	for (c = w->conns; c != NULL && rate > 0; c = next) {
		next = c->next; /* c may close below */
		if (!lg_job_holds_slot(&c->job) || lg_flight_parked(&c->flight))
			continue;
		struct lg_slot *s = &a->slots[c->job.slot];
		uint64_t word = atomic_load(&s->word), start = atomic_load(&s->up_start_ns);

		if (lg_slot_gen(word) != c->job.gen || !lg_share_cut_asked(s, word))
			continue;
		/* Asked from another loop's racy scan: cut only what this loop's own counts show
		 * slow, held long enough, and still uploading. */
		if (now < start + CUT_GRACE_NS ||
		    (double)c->job.body_got * 1e9 >= (double)rate * (double)(now - start))
			continue;
		uint32_t tag = atomic_load(&s->client);
		if (lg_conn_cut_upload(c, (double)(now - start) / 1e9)) /* c may be gone */
			lg_share_note_cut(s, tag, now + LG_SHARE_PENALTY_NS);
	}
}
