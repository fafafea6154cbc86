#include "worker/job/fairshare.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/share.h"
#include "shm/slot.h"
#include "worker/core/client.h"

#define CUT_GRACE_NS 1000000000ull /* an upload held this long shows a rate it may be cut for */

/* Offloaded requests in a row of one loop from one peer address, no proxy naming another
 * client, before the per-client rules are said to be counting a proxy (warn_one_address). */
#define ONE_ADDRESS_RUN 1000

/* The per-client rules count whatever address reaches them: a server that sees every request
 * from one address (a proxy not in --trusted-proxies, a NAT) gives all its clients one share
 * and locks them all out at one cut (issue 39: 18 slow uploads through HAProxy made every
 * heavy request a 503 client_share with half the buffers free). Said once per loop, when
 * an untrusted peer forwards X-Forwarded-For or when ONE_ADDRESS_RUN requests in a row came
 * from one peer. named: lg_client_addr's answer; tag that address's. */
static void
warn_one_address(const struct lg_conn *c, const struct sockaddr_storage *ss, int named,
    uint32_t tag)
{
	static int warned;
	static uint32_t run_tag, run;
	const struct lg_config *cfg = c->w->env->cfg;
	size_t n;
	int xff;

	if (warned || named != 0 || (cfg->jobs.transit_share_pct >= 100 && cfg->jobs.evict_upload_rate == 0))
		return;
	run = tag == run_tag ? run + 1 : 1;
	run_tag = tag;
	xff = lg_http_field_get(&c->http.req, "x-forwarded-for", &n) != NULL;
	if (!xff && run < ONE_ADDRESS_RUN)
		return;
	char text[INET6_ADDRSTRLEN] = "-";
	const void *ip = ss->ss_family == AF_INET ?
	    (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
	    (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (ss->ss_family == AF_INET || ss->ss_family == AF_INET6)
		inet_ntop(ss->ss_family, ip, text, sizeof(text));
	log_warn("%s %s: the per-client rules (--transit-share-pct %d, the 5 s lock-out after "
	    "an upload cut) count every client behind it as one; behind a proxy, list it in "
	    "--trusted-proxies (its X-Forwarded-For or PROXY protocol header then names the client)",
	    xff ? "requests carrying X-Forwarded-For come from a peer not in --trusted-proxies," :
	    "every one of 1000 offloaded requests in a row came from one address,", text,
	    cfg->jobs.transit_share_pct);
	warned = 1;
}

uint32_t
lg_fair_tag(const struct lg_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int named = lg_client_addr(c, &ss, &len);
	uint32_t tag;

	if (named == -1)
		return 0;
	tag = lg_share_tag((struct sockaddr *)&ss, len);
	if (tag != 0)
		warn_one_address(c, &ss, named, tag);
	return tag;
}

int
lg_fair_over_share(const struct lg_conn *c, uint32_t tag)
{
	struct lg_arena *a = c->w->env->arena;
	struct lg_jobslots js = lg_jobslots_of(a, LG_JOB(c)->job.pool);
	uint32_t first, n, limit;

	if (tag == 0)
		return 0;
	lg_slot_pool_range(a, LG_JOB(c)->job.pool, &first, &n);
	limit = (uint32_t)((uint64_t)n * (uint64_t)c->w->env->cfg->jobs.transit_share_pct / 100);
	if (limit < lg_jobslot_open(&js, a))
		limit = lg_jobslot_open(&js, a);
	/* Penalties come only from cuts, which --evict-upload-rate 0 turns off. */
	if ((limit >= n || lg_share_held(a, first, n, tag) < limit) &&
	    (c->w->env->cfg->jobs.evict_upload_rate == 0 ||
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

	lg_slot_pool_range(a, LG_JOB(c)->job.pool, &first, &n);
	lg_share_ask_cut(a, first, n, lg_now_ns(), c->w->env->cfg->jobs.evict_upload_rate,
	    CUT_GRACE_NS);
	atomic_fetch_add(&c->w->env->page->rejected_transit, 1);
	return -1;
}

void
lg_fair_tick(struct lg_worker *w)
{
	struct lg_arena *a = w->env->arena;
	uint64_t rate = w->env->cfg->jobs.evict_upload_rate, now = lg_now_ns();
	struct lg_conn *c, *next;

	for (c = w->conns; c != NULL && rate > 0; c = next) {
		next = c->next; /* c may close below */
		if (!lg_job_holds_slot(LG_JOB(c)) || lg_conn_parked(c))
			continue;
		struct lg_slot *s = &a->slots[LG_JOB(c)->slot];
		uint64_t word = atomic_load(&s->word), start = atomic_load(&s->up_start_ns);

		if (lg_slot_gen(word) != LG_JOB(c)->gen || !lg_share_cut_asked(s, word))
			continue;
		/* Asked from another loop's racy scan: cut only what this loop's own counts show
		 * slow, held long enough, and still uploading. */
		if (now < start + CUT_GRACE_NS ||
		    (double)LG_JOB(c)->body_got * 1e9 >= (double)rate * (double)(now - start))
			continue;
		uint32_t tag = atomic_load(&s->client);
		if (lg_conn_cut_upload(c, (double)(now - start) / 1e9)) /* c may be gone */
			lg_share_note_cut(s, tag, now + LG_SHARE_PENALTY_NS);
	}
}
