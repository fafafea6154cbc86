/* Answers of the result cache, loop side (worker/flight/coalesce_int.h): the answers a coalescing
 * route's requests get from the cache or from a shared job, and the store of a job's answer. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/policy.h"
#include "shm/cache.h"
#include "shm/flight.h"
#include "shm/stats.h"
#include "worker/flight/coalesce_int.h"
#include "worker/observe.h"
#include "worker/job/offload.h"

/* 503 for a request that found no job slot or no memory, saying how the cache took it. */
int
lg_coal_refuse(struct lg_conn *c, const char *label)
{
	char extra[64];

	snprintf(extra, sizeof(extra), "X-Cache: %s\r\n" LG_CONN_RETRY_AFTER, label);
	return lg_conn_error(c, 503, 0, extra);
}

/* Answers c with a failed flight's status and b, the kind's message (c takes a reference), or
 * the reason phrase when b is NULL: every waiter of the flight, on every loop, is answered so
 * (lg_conn_error's body and closing rule, the timing and X-Cache of a shared answer). */
int
lg_coal_answer_failed(struct lg_conn *c, int status, const char *label, struct lg_body *b)
{
	char extra[160], text[64];

	snprintf(extra, sizeof(extra), "X-Cache: %s\r\nX-Queue-Ms: %.3f\r\nX-Run-Ms: %.3f\r\n%s",
	    label, (double)c->obs.queue_ns / 1e6, (double)c->obs.run_ns / 1e6,
	    status == 503 ? LG_CONN_RETRY_AFTER : "");
	c->close_after |= status == 502;
	if (b != NULL)
		return lg_conn_respond_shared(c, status, "text/plain", extra, b);
	snprintf(text, sizeof(text), "%s\n", lg_http_reason(status));
	return lg_conn_respond(c, status, "text/plain", extra, text, strlen(text));
}

/* Answers c with body b, shared with the other connections answered from it (c takes a
 * reference); 503 when b is NULL (it could not be allocated). */
int
lg_coal_answer(struct lg_conn *c, int status, const char *ctype, const char *label,
    uint64_t age_s, int with_age, struct lg_body *b)
{
	char extra[160];
	int n;

	if (b == NULL)
		return lg_coal_refuse(c, label);
	n = snprintf(extra, sizeof(extra), "X-Cache: %s\r\n", label);
	if (with_age)
		snprintf(extra + n, sizeof(extra) - (size_t)n, "Age: %" PRIu64 "\r\n", age_s);
	else if (c->obs.queue_ns || c->obs.run_ns)
		snprintf(extra + n, sizeof(extra) - (size_t)n, "X-Queue-Ms: %.3f\r\nX-Run-Ms: %.3f\r\n",
		    (double)c->obs.queue_ns / 1e6, (double)c->obs.run_ns / 1e6);
	return lg_conn_respond_shared(c, status, ctype[0] ? ctype : NULL, extra, b);
}

/* A shared body holding a copy of cache entry m's value; NULL when out of memory or when the
 * entry changed under the copy. */
struct lg_body *
lg_coal_cached_body(struct lg_worker *w, const struct lg_cache_meta *m)
{
	struct lg_body *b = lg_body_new(m->val_len);

	if (b != NULL && lg_cache_copy(w->env->cache, m, b->data, m->val_len) == -1) {
		lg_body_unref(b);
		return NULL;
	}
	return b;
}

/* Answers c from cache entry m (a hit or a stale answer) with b, a copy of its value (the
 * reference passes to this call), counting it in counter first: the answer may close c (a failed
 * write, a closing or draining connection), and after that c is not touched. Returns as
 * lg_conn_respond. */
int
lg_coal_answer_cached(struct lg_conn *c, const struct lg_cache_meta *m, struct lg_body *b,
    const char *label, _Atomic uint64_t *counter)
{
	uint64_t now = lg_now_ns();
	int rc;

	lg_obs_route_hit(c);
	lg_stats_add(counter, 1);
	lg_obs_job_times(&c->obs, 0, 0);
	if (lg_job_held(c))
		lg_offload_release(c); /* its transit buffer held the body hashed into the key */
	rc = lg_coal_answer(c, (int)m->status, m->ctype, label, (now - m->stored_ns) / 1000000000u,
	    1, b);
	lg_body_unref(b);
	return rc;
}

/* Stores an answer for f's key; returns 0 with *m, or -1 (not shareable through the cache). */
int
lg_coal_store(struct lg_lflight *f, const char *key, size_t klen, uint64_t hash, int status,
    const char *ctype, const void *body, size_t len, uint64_t ttl_ms, struct lg_cache_meta *m)
{
	struct lg_worker *w = f->w;
	struct lg_cache_item it = {
		.hash = hash, .key = key, .key_len = klen, .status = (uint32_t)status,
		.ctype = ctype, .val = body, .val_len = len, .ttl_ns = ttl_ms * LG_NS_PER_MS,
		.stale_ns = OK(status) ? f->pol->stale_ms * LG_NS_PER_MS : 0,
		.jitter_pct = (unsigned)w->env->cfg->flights.cache_jitter_pct,
	};

	return lg_coal_store_item(f, &it, m);
}

void
lg_coal_tag(const struct lg_lflight *f, struct lg_cache_item *it)
{
	const struct lg_cache_hdr *h = f->w->env->cache->hdr;
	const char *k = it->key, *end = k + it->key_len, *p = memchr(k, ' ', it->key_len), *q;
	uint64_t x;

	it->tag = it->tag_max = 0;
	if (f->pol->path_share == 0 || p == NULL)
		return;
	p++;
	q = memchr(p, '?', (size_t)(end - p)); /* lg_coal_key: "METHOD path?..." */
	x = lg_flight_hash(LG_FLIGHT_HASH_INIT, f->pol->path, strlen(f->pol->path) + 1);
	x = lg_flight_hash(x, p, (size_t)((q ? q : end) - p));
	it->tag = (uint32_t)(x ^ (x >> 32));
	it->tag += it->tag == 0; /* 0 is untagged */
	it->tag_max = (uint32_t)((uint64_t)h->nentries * f->pol->path_share / 100);
	it->tag_max += it->tag_max == 0;
}

int
lg_coal_store_item(struct lg_lflight *f, const struct lg_cache_item *item,
    struct lg_cache_meta *m)
{
	struct lg_worker *w = f->w;
	struct lg_cache_item it = *item;

	lg_coal_tag(f, &it);
	if (lg_cache_store(w->env->cache, &it, lg_now_ns(), (int32_t)getpid(), w->env->index,
	    m) == -1) {
		if (errno == E2BIG)
			lg_stats_add(&w->coal->ctr->too_large, 1);
		else if (errno == EDQUOT) /* its path holds its share: served, not stored */
			lg_stats_add(&w->coal->ctr->refused, 1);
		return -1;
	}
	lg_stats_add(&w->coal->ctr->stored, 1);
	return 0;
}
