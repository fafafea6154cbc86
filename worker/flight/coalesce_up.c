/* Single-flight and the result cache for upstream routes' GETs (worker/flight/coalesce.h,
 * docs/CACHE.md "Proxied routes"): the same flight table, cache, wake messages and X-Cache as
 * a kind's, with the app's answer in place of a job's. The owner of a key's flight is a
 * proxied request: its exchange (worker/upstream/) copies the app's answer here as it reads it
 * (the router wires the tee), and at its end RFC 9111 (http/cachectl.h) decides whether the
 * flight's waiters get it and whether it is stored.
 *
 * A stored answer's value: struct upval, the app's end-to-end field lines (hop-by-hop and
 * framing fields, Date, Server, Age and X-Cache left out: lagless writes its own), its body.
 *
 * A key of a rule with scope = cluster (and a TTL: only a stored answer is shared across
 * replicas) asks Redis first (worker/flight/cluster.h): the leader proxies one of its requests
 * as above and publishes the value when RFC 9111 lets it be stored; the other replicas answer
 * from that value (hit), or go to the app themselves when the leader gives its lease back
 * without one (an answer not stored: private, no-store, Set-Cookie, 5xx, ...). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/policy.h"
#include "http/cachectl.h"
#include "shm/cache.h"
#include "shm/flight.h"
#include "shm/stats.h"
#include "worker/flight/cluster.h"
#include "worker/flight/coalesce.h"
#include "worker/flight/coalesce_int.h"
#include "worker/job/job.h"
#include "worker/observe.h"

#define UPVAL_MAGIC 0x4c475550u  /* "LGUP" */
/* Hit-for-miss marks and answers shared but not stored live under the key's hash changed by
 * these (no lookup of the key finds them; they never replace its answer). */
#define HFM_HASH   0x85ebca6b2f1d4e3bull
#define SHARE_HASH 0xc2b2ae3d27d4eb4full
#define SHARE_TTL_MS 5000u       /* long enough for the other loops' waiters to read it */
#define HFM_MS 5000u             /* a key's bypass after an unshareable answer, without ttl_ms */
/* The app's fields an answer may carry and still be shared: the response head is written
 * into the connection's 8 KiB output queue behind batched answers (worker/core/conn.h). */
#define UP_FIELDS_MAX 1536u

#define UPVAL_NO_STALE 1u      /* upval.flags: never served stale (struct lg_cc_decision) */
/* Field lines of a value read back from Redis, at most: as many as an app's head may have
 * (worker/upstream's LG_UP_FIELDS). */
#define UP_FIELDS_LINES 128u

struct upval {
	uint32_t magic, flen, age, flags;
};

/* Owner flight's copy of the app's answer. */
struct lg_upflight {
	char *buf;                    /* struct upval, fields, body */
	size_t len, cap, max;
	int over;                     /* past max or the fields bound: not shared */
	int creds;                    /* the owner's request carried credentials (RFC 9111 3.5) */
	struct lg_cc_decision dec;
};

static int
ieq(const char *a, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(a, lit, n) == 0;
}

static int
grow(struct lg_upflight *u, size_t more)
{
	if (u->over || u->len + more > u->max) {
		u->over = 1;
		return -1;
	}
	if (u->len + more > u->cap) {
		size_t cap = u->cap ? u->cap : 4096;
		char *b;

		while (cap < u->len + more)
			cap *= 2;
		if (cap > u->max)
			cap = u->max;
		if ((b = realloc(u->buf, cap)) == NULL) {
			u->over = 1;
			return -1;
		}
		u->buf = b;
		u->cap = cap;
	}
	return 0;
}

static void
append(struct lg_upflight *u, const void *p, size_t n)
{
	if (grow(u, n) == 0) {
		memcpy(u->buf + u->len, p, n);
		u->len += n;
	}
}

void
lg_coal_up_head(void *fl, int status, const char *head, const struct lg_resp_field *f,
    unsigned n)
{
	struct lg_lflight *lf = fl;
	struct lg_upflight *u = lf->up;
	const struct lg_policy *p = lf->pol;
	struct lg_cc_rule rule = { .ttl_ms = p->ttl_ms, .negative_ttl_ms = p->negative_ttl_ms,
	    .key_headers = p->headers, .nkey_headers = p->nheaders, .credentials = u->creds };
	struct upval v = { .magic = UPVAL_MAGIC };

	lg_cc_decide(status, head, f, n, &rule, &u->dec);
	v.flags = u->dec.no_stale ? UPVAL_NO_STALE : 0;
	append(u, &v, sizeof(v));
	for (unsigned i = 0; i < n; i++) {
		const char *nm = head + f[i].name.off;
		size_t nl = f[i].name.len;

		if (ieq(nm, nl, "age")) { /* RFC 9111 5.1: kept apart, added to the time here */
			uint64_t a = 0;

			for (uint32_t k = 0; k < f[i].value.len && a < LG_CC_DELTA_MAX; k++)
				a = a * 10 + (uint64_t)(head[f[i].value.off + k] - '0');
			if (!u->over)
				((struct upval *)(void *)u->buf)->age = (uint32_t)(a < LG_CC_DELTA_MAX ?
				    a : LG_CC_DELTA_MAX);
			continue;
		}
		if ((f[i].flags & (LG_RESP_F_HOP | LG_RESP_F_FRAMING)) || ieq(nm, nl, "date") ||
		    ieq(nm, nl, "server") || ieq(nm, nl, "x-cache"))
			continue;
		append(u, head + f[i].line.off, f[i].line.len);
	}
	if (!u->over && u->len - sizeof(v) > UP_FIELDS_MAX)
		u->over = 1;
	if (!u->over)
		((struct upval *)(void *)u->buf)->flen = (uint32_t)(u->len - sizeof(v));
}

void
lg_coal_up_data(void *fl, const char *p, size_t n)
{
	struct lg_lflight *lf = fl;

	append(lf->up, p, n);
}

/* Splits value b (a struct upval, fields, body) in place: the fields, with an Age line of the
 * app's age plus age_s, into out (cap bytes, NUL-terminated), the body moved to b's start.
 * Returns 0, or -1 when b is not such a value. */
static int
split(struct lg_body *b, uint64_t age_s, char *out, size_t cap)
{
	struct upval v;

	if (b->len < sizeof(v))
		return -1;
	memcpy(&v, b->data, sizeof(v));
	if (v.magic != UPVAL_MAGIC || v.flen > UP_FIELDS_MAX || v.flen > b->len - sizeof(v) ||
	    cap < v.flen + 32)
		return -1;
	memcpy(out, b->data + sizeof(v), v.flen);
	snprintf(out + v.flen, cap - v.flen, "Age: %" PRIu64 "\r\n", (uint64_t)v.age + age_s);
	b->len -= sizeof(v) + v.flen;
	memmove(b->data, b->data + sizeof(v) + v.flen, b->len);
	return 0;
}

int
lg_coal_up_answer(struct lg_conn *c, int status, const char *label, const char *fields,
    struct lg_body *b)
{
	char extra[UP_FIELDS_MAX + 128];

	snprintf(extra, sizeof(extra), "X-Cache: %s\r\n%s%s", label, b ? fields : "",
	    !b && status == 503 ? LG_CONN_RETRY_AFTER : "");
	if (b == NULL) /* lagless's own answer: the app could not be asked or failed to answer */
		return lg_conn_error(c, status, 0, extra);
	return lg_conn_respond_shared(c, status, NULL, extra, b);
}

/* Stores the answer of u (its status) under hash for ttl_ms, then for the route's stale window
 * when stale; 0 with *m, or -1. */
static int
store(struct lg_lflight *f, struct lg_upflight *u, uint64_t hash, int status, uint64_t ttl_ms,
    int stale, struct lg_cache_meta *m)
{
	struct lg_worker *w = f->w;
	size_t klen;
	uint64_t h;
	const char *key = lg_coal_flight_key(f, &klen, &h);
	struct lg_cache_item it = {
		.hash = hash, .key = key, .key_len = klen, .status = (uint32_t)status, .ctype = "",
		.val = u->buf, .val_len = u->len, .ttl_ns = ttl_ms * LG_NS_PER_MS,
		.jitter_pct = (unsigned)w->env->cfg->flights.cache_jitter_pct,
	};

	/* RFC 5861: the route's stale window, unless the app forbids serving it stale (RFC
	 * 9111 5.2.2.2, 5.2.2.8, 5.2.2.10), and for a stored answer only */
	if (stale && !u->dec.no_stale)
		it.stale_ns = f->pol->stale_ms * LG_NS_PER_MS;

	return lg_coal_store_item(f, &it, m);
}

/* The key of owner flight f is not shared for a while: its next requests go to the app each
 * (Varnish's hit-for-miss), for the route's TTL or HFM_MS. */
static void
mark_hfm(struct lg_lflight *f)
{
	size_t klen;
	uint64_t hash;
	const char *key = lg_coal_flight_key(f, &klen, &hash);
	struct lg_cache_item it = {
		.hash = hash ^ HFM_HASH, .key = key, .key_len = klen, .status = 0, .ctype = "",
		.val = "", .val_len = 0,
		.ttl_ns = (f->pol->ttl_ms ? f->pol->ttl_ms : HFM_MS) * LG_NS_PER_MS,
	};
	struct lg_cache_meta m;

	lg_coal_tag(f, &it); /* its marks count in its path's share too */
	(void)lg_cache_store(f->w->env->cache, &it, lg_now_ns(), (int32_t)getpid(),
	    f->w->env->index, &m);
}

/* Every waiter of owner flight f, here and on the other loops, goes to the app itself. */
static void
all_alone(struct lg_lflight *f, int alone)
{
	if (f->gated) /* a refresh that stored nothing: its key's gate backs off */
		lg_cache_refresh_end(f->w->env->cache, f->stale_idx, f->stale_seq, lg_now_ns(), 1);
	lg_coal_broadcast(f->w, &f->ref, lg_flight_complete(f->w->env->flights, &f->ref),
	    alone ? 200 : WAKE_RETRY, NULL, 0, 0); /* a 2xx without an entry: WAKE_ALONE */
	lg_coal_retry_all(f, alone);
}

void
lg_coal_up_free(struct lg_upflight *u)
{
	free(u->buf);
	free(u);
}

/* The whole answer (status) of owner flight f is shareable: stored (for its TTL, or briefly for
 * the other loops' waiters), and f's own waiters answered from one copy of it. */
static void
share(struct lg_lflight *f, struct lg_upflight *u, int status)
{
	size_t klen;
	uint64_t hash;
	struct lg_cache_meta m;
	char fields[UP_FIELDS_MAX + 32];
	int kept = 0;

	(void)lg_coal_flight_key(f, &klen, &hash);
	/* A refresh's 404 or 410 never replaces the good answer it refreshes (RFC 5861 4) */
	if ((u->dec.flags & LG_CC_STORE) && !(f->background && status >= 400)) {
		kept = store(f, u, hash, status, u->dec.ttl_ms, 1, &m) == 0;
		/* the cluster key's leader: the other replicas' requests get it too (a follower
		 * answering from it is not the leader: nothing sent) */
		lg_cluster_store(f, status, "", u->buf, u->len, u->dec.ttl_ms);
	}
	if (!kept && lg_coal_others_wait(f))
		kept = store(f, u, hash ^ SHARE_HASH, status, SHARE_TTL_MS, 0, &m) == 0;
	struct lg_body *b = lg_body_new(u->len);

	if (b != NULL) {
		memcpy(b->data, u->buf, u->len);
		if (split(b, 0, fields, sizeof(fields)) == -1) {
			lg_body_unref(b);
			b = NULL;
		}
	}
	if (b == NULL) { /* out of memory here: everyone asks again */
		all_alone(f, 0);
		return;
	}
	/* Not kept: the other loops' waiters go to the app each (WAKE_ALONE, or WAKE_RETRY for
	 * a failure: lg_coal_end_flight). */
	lg_coal_end_flight(f, status, kept ? &m : NULL, fields, b, 0, 0);
	lg_body_unref(b);
}

void
lg_coal_up_end(void *fl, int status, int mine)
{
	struct lg_lflight *f = fl;
	struct lg_upflight *u = f->up;

	f->up = NULL; /* the exchange is done with it: f ends here */
	if (status == 0 && mine == 0)
		all_alone(f, 0);        /* no answer (the owner left early, a cut answer) */
	else if (status == 0)           /* 502, 503, 504 of lagless's: to every waiter at once */
		lg_coal_end_flight(f, mine, NULL, NULL, NULL, 0, 0);
	else if (!(u->dec.flags & LG_CC_SHARE)) {
		log_debug("proxied answer %d not shared (%s): its waiters go to the app", status,
		    u->dec.why);
		if (u->dec.flags & LG_CC_HFM)
			mark_hfm(f);
		all_alone(f, 1);
	} else if (u->over)
		all_alone(f, 1);        /* larger than the cache's entries: not held for them */
	else
		share(f, u, status);
	lg_coal_up_free(u);
}

void
lg_coal_up_wake(struct lg_lflight *f, const struct lg_msg_wake *m)
{
	struct lg_worker *w = f->w;
	struct lg_cache_meta meta;
	struct lg_body *b;
	char fields[UP_FIELDS_MAX + 32];

	if (m->http_status == WAKE_RETRY || m->http_status == WAKE_ALONE) {
		lg_coal_retry_all(f, m->http_status == WAKE_ALONE);
		return;
	}
	if (m->cache_word == 0) { /* lagless's own failure: no body */
		lg_coal_end_flight(f, (int)m->http_status, NULL, NULL, NULL, 0, 0);
		return;
	}
	if (lg_cache_meta_of(w->env->cache, m->cache_idx, m->cache_word, &meta) == -1 ||
	    (b = lg_coal_cached_body(w, &meta)) == NULL) {
		lg_coal_retry_all(f, 0); /* evicted already: ask again (a hit, or a fresh flight) */
		return;
	}
	if (split(b, 0, fields, sizeof(fields)) == -1) {
		lg_body_unref(b);
		lg_coal_retry_all(f, 0);
		return;
	}
	lg_coal_end_flight(f, (int)meta.status, NULL, fields, b, 0, 0);
	lg_body_unref(b);
}

/* Answers c from cache entry m (fresh), counted first. Returns 0, -1 (closed), or 1 when the
 * entry changed under the copy (nothing answered). */
static int
hit(struct lg_conn *c, const struct lg_cache_meta *m, const char *label,
    _Atomic uint64_t *counter)
{
	char fields[UP_FIELDS_MAX + 32];
	uint64_t now = lg_now_ns();
	struct lg_body *b = lg_coal_cached_body(c->w, m);
	int rc;

	if (b == NULL || split(b, (now - m->stored_ns) / 1000000000u, fields, sizeof(fields))) {
		lg_body_unref(b);
		return 1;
	}
	lg_stats_add(counter, 1);
	lg_obs_job_times(&c->obs, 0, 0);
	rc = lg_coal_up_answer(c, (int)m->status, label, fields, b);
	lg_body_unref(b);
	return rc;
}

/* c goes to the app by itself: X-Cache bypass. */
static int
alone(struct lg_conn *c)
{
	lg_stats_add(&c->w->coal->ctr->jobs, 1);
	LG_FLIGHT(c)->coal_alone = 1;
	return c->w->coal->proxy(c, NULL, "X-Cache: bypass\r\n");
}

/* Whether c's request carries credentials (RFC 9110 11.6.2, 11.7.1; RFC 6265). */
static int
has_credentials(const struct lg_conn *c)
{
	size_t vl;

	return lg_http_field_get(&c->http.req, "authorization", &vl) != NULL ||
	    lg_http_field_get(&c->http.req, "proxy-authorization", &vl) != NULL ||
	    lg_http_field_get(&c->http.req, "cookie", &vl) != NULL;
}

/* Whether c's request would get an answer that only it may have, so it never becomes a key's
 * flight: a HEAD's has no body for the GETs joining it (RFC 9110 9.3.2); a conditional or a
 * range request may get a 304 or a 206 (RFC 9110 13.1, 14.2) that answers only its own
 * validators or range. (Joining a flight, or a hit, they get the whole 200: RFC 9110 13.2.1
 * and 14.2 let a cache answer so.) */
static int
own_unfit(const struct lg_conn *c)
{
	static const char *const cond[] = { "if-none-match", "if-modified-since", "if-match",
	    "if-unmodified-since", "if-range", "range" };
	size_t vl;

	if (c->http.req.method == HTTP_HEAD)
		return 1;
	for (size_t i = 0; i < sizeof(cond) / sizeof(cond[0]); i++)
		if (lg_http_field_get(&c->http.req, cond[i], &vl) != NULL)
			return 1;
	return 0;
}

/* Owner flight f of c's key, of a rule with scope = cluster and a TTL (a rule that stores
 * nothing has nothing to share across replicas: its keys stay local), asks Redis with c parked
 * on it (Redis ready). Returns 0, or -1 (nothing sent, nothing changed: proxied here). */
static int
cluster_ask(struct lg_conn *c, struct lg_lflight *f)
{
	const struct lg_policy *p = f->pol;

	if (!p->cluster || (p->ttl_ms == 0 && p->negative_ttl_ms == 0) ||
	    !lg_cluster_ready(c->w))
		return -1;
	f->asking = 1;
	f->deadline_ms = lg_job_deadline_ms(c);
	if (lg_cluster_begin(f, LG_CLUSTER_NO_KIND, lg_job_route(c), f->deadline_ms) == -1) {
		f->asking = 0;
		return -1;
	}
	lg_coal_park(c, f, "miss");
	return 0;
}

void
lg_coal_up_cluster_run(struct lg_lflight *f)
{
	struct lg_worker *w = f->w;
	struct lg_conn *c = NULL;
	int rc;

	f->asking = 0;
	/* the earliest request parked (the list's last: the owner's, labelled miss) that may make
	 * the key's answer (not a HEAD or conditional request that joined it) */
	for (struct lg_conn *p = f->waiters; p != NULL; p = LG_FLIGHT(p)->fl_next)
		if (!own_unfit(p))
			c = p;
	if (c == NULL) { /* nobody here left to send: everyone asks again, the lease given back */
		lg_coal_up_free(f->up);
		f->up = NULL;
		all_alone(f, 0);
		return;
	}
	lg_coal_unpark(c);
	f->up->creds = has_credentials(c);
	lg_stats_add(&w->coal->ctr->jobs, 1);
	lg_obs_unit_begin(w, c);
	rc = w->coal->proxy(c, f, "X-Cache: miss\r\n");
	lg_obs_unit_end(w);
	if (rc == 0)
		lg_conn_resume(c);
}

/* Whether fields (flen bytes: whole lines, lg_cc_fields_ok) and status, read from Redis for
 * owner flight f's key, make an answer this replica would store: parsed as a head
 * (http/resp.h) and decided again under f's rule (RFC 9111, http/cachectl.h), so that a value
 * another writer put there cannot bring a Set-Cookie, private or foreign Vary answer to
 * another client. */
static int
storable(const struct lg_lflight *f, int status, const char *fields, size_t flen)
{
	static const struct lg_resp_limits lim = { .max_head = UP_FIELDS_MAX + 64,
	    .max_fields = UP_FIELDS_LINES };
	const struct lg_policy *p = f->pol;
	struct lg_cc_rule rule = { .ttl_ms = p->ttl_ms, .negative_ttl_ms = p->negative_ttl_ms,
	    .key_headers = p->headers, .nkey_headers = p->nheaders };
	struct lg_resp_field idx[UP_FIELDS_LINES];
	struct lg_resp resp;
	struct lg_cc_decision d;
	char head[UP_FIELDS_MAX + 64];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %03d X\r\n", status);

	if (n < 0 || flen > UP_FIELDS_MAX || status < 100 || status > 999)
		return 0;
	memcpy(head + n, fields, flen);
	memcpy(head + n + flen, "\r\n", 2);
	lg_resp_init(&resp, &lim, idx);
	lg_resp_start(&resp, 1); /* no body whatever its fields say: only the head is read */
	if (lg_resp_head(&resp, head, (size_t)n + flen + 2) != (long)((size_t)n + flen + 2))
		return 0;
	return (lg_cc_decide(resp.status, head, idx, resp.nfields, &rule, &d) & LG_CC_STORE) != 0;
}

int
lg_coal_up_cluster_hit(struct lg_lflight *f, int status, const void *body, size_t len,
    uint64_t age_ms, uint64_t ttl_ms)
{
	struct lg_upflight *u;
	struct upval v;

	if (len < sizeof(v))
		return -1;
	memcpy(&v, body, sizeof(v));
	if (v.magic != UPVAL_MAGIC || v.flen > UP_FIELDS_MAX || v.flen > len - sizeof(v) ||
	    ttl_ms == 0 || !lg_cc_fields_ok((const char *)body + sizeof(v), v.flen) ||
	    !storable(f, status, (const char *)body + sizeof(v), v.flen) ||
	    (u = calloc(1, sizeof(*u))) == NULL)
		return -1;
	u->max = len;
	append(u, body, len);
	if (u->over) { /* out of memory: asked here, f->up as it was */
		lg_coal_up_free(u);
		return -1;
	}
	/* RFC 9111 5.1: its age in the other replica's cache counts */
	v.age = (uint32_t)((uint64_t)v.age + age_ms / 1000u < LG_CC_DELTA_MAX ?
	    (uint64_t)v.age + age_ms / 1000u : LG_CC_DELTA_MAX);
	memcpy(u->buf, &v, sizeof(v));
	u->dec.flags = LG_CC_SHARE | LG_CC_STORE;
	u->dec.ttl_ms = ttl_ms;
	u->dec.no_stale = (v.flags & UPVAL_NO_STALE) != 0;
	lg_coal_up_free(f->up); /* never sent */
	f->up = NULL;
	f->asking = 0;
	for (struct lg_conn *c = f->waiters; c != NULL; c = LG_FLIGHT(c)->fl_next)
		LG_FLIGHT(c)->fl_label = "hit"; /* as a local hit says */
	share(f, u, status);
	lg_coal_up_free(u);
	return 0;
}

/* No flight for the key: c's request becomes it (the router proxies it, its exchange copying
 * the answer here), after one more look at the cache (another flight may have just filled
 * it). */
static int
own(struct lg_conn *c, const char *key, size_t len, uint64_t hash)
{
	struct lg_worker *w = c->w;
	struct lg_flight_ref ref;
	struct lg_cache_meta m;
	struct lg_lflight *f;
	struct lg_upflight *u;
	int rc = lg_flight_create(w->env->flights, hash, key, len, w->env->index, UINT32_MAX, 0,
	    lg_now_ns(), &ref);

	if (rc == LG_FLIGHT_BUSY) {
		lg_stats_add(&w->coal->ctr->busy, 1);
		return alone(c);
	}
	if (rc == LG_FLIGHT_JOINED)
		return lg_coal_join_local(c, &ref);
	if ((LG_FLIGHT(c)->pol->ttl_ms || LG_FLIGHT(c)->pol->negative_ttl_ms) &&
	    lg_cache_lookup(w->env->cache, hash, key, len, lg_now_ns(), &m) == LG_CACHE_FRESH) {
		lg_coal_broadcast(w, &ref, lg_flight_complete(w->env->flights, &ref), (int)m.status,
		    &m, 0, 0);
		if ((rc = hit(c, &m, "hit", &w->coal->ctr->hits)) != 1)
			return rc;
		return alone(c);
	}
	if ((u = calloc(1, sizeof(*u))) == NULL ||
	    (f = lg_coal_add_flight(w, &ref, LG_FLIGHT(c)->pol)) == NULL) {
		free(u);
		lg_coal_broadcast(w, &ref, lg_flight_complete(w->env->flights, &ref), WAKE_RETRY,
		    NULL, 0, 0);
		return lg_coal_refuse(c, "miss");
	}
	u->max = w->env->cfg->flights.cache_max_entry;
	u->creds = has_credentials(c);
	f->owner = 1;
	f->up = u;
	if (cluster_ask(c, f) == 0)
		return 0; /* parked while Redis is asked */
	lg_stats_add(&w->coal->ctr->jobs, 1);
	return w->coal->proxy(c, f, "X-Cache: miss\r\n");
}

/* A stale answer (entry st) of c's key is about to be sent to c: one background refresh for
 * the key unless a flight for it is under way, the entry's gate is shut (a refresh runs, or a
 * failed one backs off: RFC 5861 4, the stale answer is served through its window
 * meanwhile), or this loop drains. It is c's request sent once more, for the flight alone
 * (the router's refresh). Never answers c. */
static void
refresh(struct lg_conn *c, const struct lg_cache_meta *st, const char *key, size_t len,
    uint64_t hash)
{
	struct lg_worker *w = c->w;
	struct lg_flight_ref ref;
	struct lg_lflight *f = NULL;
	struct lg_upflight *u = NULL;
	int rc;

	if (!LG_FLIGHT(c)->pol->coalesce || w->draining || w->coal->refresh == NULL ||
	    own_unfit(c) || lg_flight_peek(w->env->flights, hash, key, len) ||
	    !lg_cache_refresh_take(w->env->cache, st, lg_now_ns(),
	    (lg_job_deadline_ms(c) + 1000u) * LG_NS_PER_MS))
		return;
	rc = lg_flight_create(w->env->flights, hash, key, len, w->env->index, UINT32_MAX, 0,
	    lg_now_ns(), &ref);
	if (rc != LG_FLIGHT_CREATED) {
		lg_cache_refresh_end(w->env->cache, st->idx, st->seq, lg_now_ns(), 0);
		if (rc == LG_FLIGHT_JOINED) /* appeared since the peek: nobody to park here */
			(void)lg_flight_leave(w->env->flights, &ref, w->env->index);
		return;
	}
	if ((u = calloc(1, sizeof(*u))) != NULL &&
	    (f = lg_coal_add_flight(w, &ref, LG_FLIGHT(c)->pol)) != NULL) {
		u->max = w->env->cfg->flights.cache_max_entry;
		u->creds = has_credentials(c);
		f->owner = f->background = f->gated = 1;
		f->stale_idx = st->idx;
		f->stale_seq = st->seq;
		f->up = u;
		if (w->coal->refresh(c, f) == 0) {
			lg_stats_add(&w->coal->ctr->refreshes, 1);
			return;
		}
		f->up = NULL;
	}
	free(u);
	/* One that could not go (no place, or no kept connection to write it on at once) backs
	 * off as a failed one: not a connect to the app per stale request. */
	lg_cache_refresh_end(w->env->cache, st->idx, st->seq, lg_now_ns(), f != NULL);
	if (f != NULL) {
		f->gated = 0;
		all_alone(f, 0); /* anyone who joined meanwhile asks again */
	} else {
		lg_coal_broadcast(w, &ref, lg_flight_complete(w->env->flights, &ref), WAKE_RETRY,
		    NULL, 0, 0);
	}
}

int
lg_coal_up_dispatch(struct lg_conn *c, int (*proxy)(struct lg_conn *c, void *fl,
    const char *extra), int (*refresh_fn)(struct lg_conn *c, void *fl))
{
	struct lg_worker *w = c->w;
	struct lg_coal *k = w->coal;
	const struct lg_policy *p = LG_FLIGHT(c)->pol;
	char key[LG_FLIGHT_KEY_MAX];
	size_t len;
	uint64_t hash;
	struct lg_cache_meta m;
	struct lg_flight_ref ref;
	int rc;

	if (proxy != NULL)
		k->proxy = proxy;
	if (refresh_fn != NULL)
		k->refresh = refresh_fn;
	if (LG_FLIGHT(c)->coal_alone || lg_coal_key(c, key, &len) == -1)
		return alone(c);
	hash = lg_flight_hash(LG_FLIGHT_HASH_INIT, key, len);
	/* hit-for-miss: an answer of this key could not be shared a moment ago */
	if (lg_cache_lookup(w->env->cache, hash ^ HFM_HASH, key, len, lg_now_ns(), &m) ==
	    LG_CACHE_FRESH)
		return alone(c);
	switch (p->ttl_ms || p->negative_ttl_ms ? lg_cache_lookup(w->env->cache, hash, key, len,
	    lg_now_ns(), &m) : LG_CACHE_MISS) {
	case LG_CACHE_FRESH:
		if ((rc = hit(c, &m, "hit", &k->ctr->hits)) != 1)
			return rc;
		break; /* changed under the copy: as a miss */
	case LG_CACHE_STALE:
		/* RFC 5861 3: the stale answer now, one refresh for the key across the loops
		 * (started first: answering may close c) */
		refresh(c, &m, key, len, hash);
		if ((rc = hit(c, &m, "stale", &k->ctr->stale)) != 1)
			return rc;
		break;
	default:
		break;
	}
	lg_stats_add(&k->ctr->misses, 1);
	if (!p->coalesce)
		return alone(c);
	switch (lg_flight_join(w->env->flights, hash, key, len, w->env->index, &ref)) {
	case LG_FLIGHT_JOINED:
		return lg_coal_join_local(c, &ref);
	case LG_FLIGHT_BUSY:
		lg_stats_add(&k->ctr->busy, 1);
		return alone(c);
	default:
		if (own_unfit(c))
			return alone(c);
		return own(c, key, len, hash);
	}
}
