/* The cluster scope's protocol on Redis (worker/flight/cluster.h; docs/CACHE.md "Across replicas"). */
#include "worker/flight/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <msgpack.h>
#include <xxhash.h>

#include "common/clock.h"
#include "common/cfg_flight.h"
#include "common/log.h"
#include "common/version.h"
#include "kinds/registry.h"
#include "shm/arena.h"
#include "shm/stats.h"
#include "worker/flight/coalesce_int.h"
#include "worker/loop.h"
#include "redis/redis.h"

#define VALUE_VERSION 2      /* 2: the key holds what made the answer (maker) */
#define MAKER_LEN 16         /* XXH3-128 of what makes a route's answers (route_maker) */
/* A value of a rule without a TTL (coalescing only) lives this long in Redis: enough for the
 * followers woken by its PUBLISH to read it. */
#define FOLLOWER_READ_MS 1000u
#define LEASE_MARGIN_MS 5u   /* a follower asks again this long after the lease's end */
#define MAX_CHANGES 2        /* new lease holders seen while following, then local */
#define LEASE_MIN_MS 200u    /* the shortest lease derived from run times */
#define LEASE_COLD_MS 2000u  /* the lease of a kind that has not run here yet */

/* KEYS[1] value, KEYS[2] lease; ARGV[1] token, ARGV[2] lease ms, ARGV[3] the largest value
 * accepted, bytes. The value (a hit), else the lease taken (1), else the holder's token and
 * the lease's time to live in ms (-1: no expiry, not a lease of ours). A key of another type
 * (FOREIGN) or a value or holder too long to read within the budget (TOO_LONG) is that key's
 * miss, never an error reply. One script, so no leader can store between a GET and a SET NX. */
static const char ACQUIRE[] =
    "local t = redis.call('TYPE', KEYS[1]).ok "
    "if t == 'string' then "
    "if redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[3]) then return 3 end "
    "return redis.call('GET', KEYS[1]) elseif t ~= 'none' then return 2 end "
    "if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    "if redis.call('TYPE', KEYS[2]).ok ~= 'string' then return 2 end "
    "if redis.call('STRLEN', KEYS[2]) > 200 then return 3 end "
    "return {redis.call('GET', KEYS[2]), redis.call('PTTL', KEYS[2])}";
#define FOREIGN 2
#define TOO_LONG 3
/* KEYS as above; ARGV[1] token, ARGV[2] value, ARGV[3] ttl ms ("0": a release, no value),
 * ARGV[4] channel, ARGV[5] message. Only the lease's holder stores: the fencing of a leader
 * paused past its lease. 1 stored (or released), 0 refused. */
static const char STORE[] =
    "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end "
    "if ARGV[3] ~= '0' then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end "
    "redis.call('DEL', KEYS[2]) redis.call('PUBLISH', ARGV[4], ARGV[5]) return 1";

/* KEYS[1] lease; ARGV[1] token, ARGV[2] ms: a live leader extends its own lease (one that
 * stopped, or whose loop died, cannot: then it is taken over). 1 extended, 0 not ours. */
static const char RENEW[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

/* Sent as EVALSHA once loaded (redis/redis.h), one table per process. */
enum { S_ACQUIRE, S_STORE, S_RENEW };
static struct lg_redis_script scripts[] = {
	[S_ACQUIRE] = { ACQUIRE, "" }, [S_STORE] = { STORE, "" }, [S_RENEW] = { RENEW, "" },
};

struct lg_cflight {
	struct lg_cflight *prev, *next;
	struct lg_cluster *k;
	struct lg_lflight *f;
	struct lg_redis_op op;
	ev_timer lease;              /* follower: the leader's lease ends */
	ev_timer renew;              /* leader: extends its lease while its job runs */
	char tag[33];                /* hex XXH3-128 of the key: the {hash tag} */
	char token[112];
	uint32_t route;              /* the route's index: its maker */
	uint64_t lease_ms;
	uint64_t deadline_ms;        /* the route's: a follower waits at most half of it */
	uint64_t follow_end_ns;      /* when the first wait began + that bound; 0 before */
	int waits;                   /* follower waits so far */
	int changes;                 /* new lease holders seen since the first */
	char holder[112];            /* the lease's holder when last asked */
	int waiting;                 /* parked on another replica's lease */
	int published;               /* its PUBLISH came while a script was in flight (the two
	                              * connections do not order against each other) */
	int leader, done;            /* holds the lease; stored or released it */
};

struct lg_cluster {
	struct lg_worker *w;
	struct lg_redis *r;
	struct lg_cluster_ops ops;
	struct lg_cluster_counters *ctr;
	struct lg_cflight *list;
	const struct lg_cluster_cfg *cl; /* the cluster scope's settings (common/cfg_flight.h) */
	char id[96];                 /* host:pid:random, the token's replica and process part */
	unsigned char (*maker)[MAKER_LEN]; /* by route index (route_maker) */
	uint32_t nroutes;
	uint64_t seq;
};

/* A store or release in flight: it outlives its flight. */
struct lg_cstore {
	struct lg_redis_op op;
	struct lg_cluster *k;
	int release;
};

static struct lg_cluster *the; /* one loop worker per process */

static uint64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The value and lease keys of tag, with the prefix and the hash tag: one slot of a Redis
 * Cluster for both, which the scripts need. */
static void
key_names(const struct lg_cluster *k, const char *tag, char *v, char *l, char *ch, size_t cap)
{
	snprintf(v, cap, "%s{%s}:v", k->cl->redis_prefix, tag);
	snprintf(l, cap, "%s{%s}:l", k->cl->redis_prefix, tag);
	snprintf(ch, cap, "%sdone:%s", k->cl->redis_prefix, tag);
}

static void acquire_done(struct lg_redis_op *op, const struct redisReply *reply);

/* The longest value read from Redis, bytes: the largest answer stored, its key and the
 * fields around them. A longer one is not transferred (the script says TOO_LONG): a few MB
 * would not be read within the budget. */
static uint64_t
value_max(const struct lg_cluster *k)
{
	return k->cl->cluster_max_value + MAKER_LEN + LG_FLIGHT_KEY_MAX + 512u;
}

/* Asks Redis for cf's value or lease. Returns 0, or -1 (not sent). */
static int
acquire(struct lg_cflight *cf)
{
	char v[160], l[160], ch[160], ms[24], max[24];
	const char *argv[6] = { "2", v, l, cf->token, ms, max };
	size_t lens[6];

	key_names(cf->k, cf->tag, v, l, ch, sizeof(v));
	snprintf(ms, sizeof(ms), "%" PRIu64, cf->lease_ms);
	snprintf(max, sizeof(max), "%" PRIu64, value_max(cf->k));
	for (int i = 0; i < 6; i++)
		lens[i] = strlen(argv[i]);
	cf->op.done = acquire_done;
	cf->op.data = cf;
	cf->published = 0;
	return lg_redis_eval(cf->k->r, &cf->op, &scripts[S_ACQUIRE], 6, argv, lens);
}

/* cf's key runs on this replica without Redis (breaker, error, waits used up). */
static void
local(struct lg_cflight *cf)
{
	lg_stats_add(&cf->k->ctr->local, 1);
	cf->waiting = 0;
	ev_timer_stop(cf->k->w->ev, &cf->lease);
	cf->k->ops.run(cf->f); /* may drop the flight, and cf with it */
}

/* Whether a status may come from a kind, for what the rule stores: a 2xx (204 and 205
 * without a body: RFC 9110 sections 15.3.5 and 15.3.6), and under negative-ttl a kind error
 * (4xx, 500): never 1xx, 3xx or another 5xx, which a kind cannot give (kinds/host.c). An
 * upstream route's value (its body: the app's fields and body) has a status its rule stores
 * (http/cachectl.h: 200, 203, 204, 300, 301; 404, 410 under negative-ttl). */
static int
status_ok(const struct lg_policy *p, uint64_t status, size_t body_len)
{
	if (p->whole_query) /* an upstream route's: what http/cachectl.h lets it store */
		return status == 200 || status == 203 || status == 204 || status == 300 ||
		    status == 301 || (p->negative_ttl_ms > 0 && (status == 404 || status == 410));
	if (status >= 200 && status <= 299)
		return (status != 204 && status != 205) || body_len == 0;
	return p->negative_ttl_ms > 0 && ((status >= 400 && status <= 499) || status == 500);
}

/* A content type fit for a header line: printable ASCII, as kinds/host.c asks of a module's. */
static int
ctype_ok(const char *p, size_t n)
{
	if (n >= LG_CACHE_CTYPE)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return 0;
	return 1;
}

/* The longest a value of status may live under rule p, ms (what lg_cluster_store gives it). */
static uint64_t
ttl_max(const struct lg_policy *p, uint64_t status)
{
	if (status == 404 || status == 410 || (!p->whole_query && (status < 200 || status > 299)))
		return p->negative_ttl_ms;
	return p->ttl_ms > 0 ? p->ttl_ms : FOLLOWER_READ_MS;
}

/* Whether o, a value's 7 fields [version, maker + key, status, ctype, stored_ms, ttl_ms,
 * body], is one this replica would have stored for cf's key: nothing read from Redis is
 * trusted more than a module's answer (docs/CACHE.md "What is checked"). */
static int
value_ok(const struct lg_cflight *cf, const msgpack_object *o, const char *key, size_t klen)
{
	const struct lg_policy *p = cf->f->pol;
	const unsigned char *maker = cf->k->maker[cf->route];

	return o[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && o[0].via.u64 == VALUE_VERSION &&
	    o[1].type == MSGPACK_OBJECT_BIN && o[1].via.bin.size == MAKER_LEN + klen &&
	    memcmp(o[1].via.bin.ptr, maker, MAKER_LEN) == 0 &&
	    memcmp(o[1].via.bin.ptr + MAKER_LEN, key, klen) == 0 &&
	    o[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o[3].type == MSGPACK_OBJECT_STR && ctype_ok(o[3].via.str.ptr, o[3].via.str.size) &&
	    o[4].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o[5].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o[6].type == MSGPACK_OBJECT_BIN &&
	    o[6].via.bin.size <= cf->k->cl->cluster_max_value &&
	    status_ok(p, o[2].via.u64, o[6].via.bin.size) &&
	    o[5].via.u64 > 0 && o[5].via.u64 <= ttl_max(p, o[2].via.u64);
}

/* Whether value o (value_ok) is within its TTL by our clock, a stored time ahead of it taken
 * as now. One past it is refused: Redis should have expired it, so its expiry was removed (a
 * foreign PERSIST) or the replica that stored it keeps another time; served, it would be an
 * answer older than the rule allows, for as long as the key stays. */
static int
fresh(const msgpack_object *o, uint64_t now)
{
	return o[4].via.u64 >= now || now - o[4].via.u64 < o[5].via.u64;
}

/* Reads a value of f's key (value_ok) and answers f from it. Returns 0, or -1 (not a value
 * this replica would have stored for this key, or trailing bytes: f is untouched). */
static int
hit(struct lg_cflight *cf, const char *data, size_t len)
{
	msgpack_unpacked up;
	size_t off = 0, klen;
	uint64_t hash, now = wall_ms();
	const char *key = cf->k->ops.key(cf->f, &klen, &hash);
	int rc = -1;

	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, data, len, &off) == MSGPACK_UNPACK_SUCCESS && off == len &&
	    up.data.type == MSGPACK_OBJECT_ARRAY && up.data.via.array.size == 7 &&
	    value_ok(cf, up.data.via.array.ptr, key, klen) && fresh(up.data.via.array.ptr, now)) {
		msgpack_object *o = up.data.via.array.ptr;
		char ctype[LG_CACHE_CTYPE];
		uint64_t age = now > o[4].via.u64 ? now - o[4].via.u64 : 0;
		uint64_t left = o[5].via.u64 - age;

		memcpy(ctype, o[3].via.str.ptr, o[3].via.str.size);
		ctype[o[3].via.str.size] = '\0';
		struct lg_cluster *k = cf->k; /* cf goes with the flight */

		rc = k->ops.hit(cf->f, (int)o[2].via.u64, ctype, o[6].via.bin.ptr,
		    o[6].via.bin.size, age, left); /* 0: dropped the flight */
		if (rc == 0)
			lg_stats_add(&k->ctr->hits, 1);
	}
	msgpack_unpacked_destroy(&up);
	return rc;
}

/* Another replica (token holder, len bytes) holds the lease for about pttl_ms more: wait for
 * its PUBLISH, or for the lease's end (then ask again: take it over if the leader died). A
 * leader renewing its lease is waited for as long as it runs, up to half the route's deadline
 * (a legitimate leader's own deadline ends its job; a foreign writer's renewals must not park
 * requests until theirs); after MAX_CHANGES new holders (leaders that died in turn) the key is
 * computed here. A lease without an expiry (PTTL -1: a foreign SET or PERSIST) is not a
 * lease: computed here at once. Each wait lasts at least a third of our lease (a live
 * leader's PTTL never falls below two thirds of it; its PUBLISH ends a wait early), so a
 * lease kept near its end cannot make a follower poll. */
static void
follow(struct lg_cflight *cf, const char *holder, size_t len, int64_t pttl)
{
	struct lg_cluster *k = cf->k;
	uint64_t now = lg_now_ns(), pttl_ms;

	if (len >= sizeof(cf->holder))
		len = sizeof(cf->holder) - 1;
	if (pttl < 0) {
		lg_stats_add(&k->ctr->bad_values, 1);
		log_debug("lease of key {%s} has no expiry: not a lease; computed here", cf->tag);
		local(cf);
		return;
	}
	pttl_ms = (uint64_t)pttl;
	if (cf->waits++ == 0) {
		lg_stats_add(&k->ctr->lost, 1);
		lg_stats_add(&k->ctr->waits, 1);
		cf->follow_end_ns = now + cf->deadline_ms / 2 * LG_NS_PER_MS;
	} else if (((strlen(cf->holder) != len || memcmp(cf->holder, holder, len) != 0) &&
	    ++cf->changes > MAX_CHANGES) || now >= cf->follow_end_ns) {
		local(cf);
		return;
	}
	memcpy(cf->holder, holder, len);
	cf->holder[len] = '\0';
	if (cf->published) {
		/* the leader stored (or gave up) after our script ran: at once, not at the lease's
		 * end */
		if (acquire(cf) == -1)
			local(cf);
		return;
	}
	if (pttl_ms > cf->lease_ms)
		pttl_ms = cf->lease_ms;
	if (pttl_ms < cf->lease_ms / 3)
		pttl_ms = cf->lease_ms / 3;
	if (now + (pttl_ms + LEASE_MARGIN_MS) * LG_NS_PER_MS > cf->follow_end_ns)
		pttl_ms = cf->follow_end_ns > now ? (cf->follow_end_ns - now) / LG_NS_PER_MS : 0;
	cf->waiting = 1;
	ev_timer_set(&cf->lease, (double)(pttl_ms + LEASE_MARGIN_MS) / 1000., 0.);
	ev_timer_start(k->w->ev, &cf->lease);
}

static void
renew_done(struct lg_redis_op *op, const struct redisReply *reply)
{
	struct lg_cflight *cf = op->data;

	if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
		log_warn("lease of key {%s} lost while its job ran: its store will be refused",
		    cf->tag);
		ev_timer_stop(cf->k->w->ev, &cf->renew);
	}
}

/* Every third of the lease, while the job runs: a job longer than the lease keeps it, and
 * only a leader that cannot run (stopped, dead) loses it. */
static void
renew_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_cflight *cf = t->data;
	char v[160], l[160], ch[160], ms[24];
	const char *argv[4] = { "1", l, cf->token, ms };
	size_t lens[4];

	if (cf->op.t != NULL)
		return; /* the last one has not answered yet */
	key_names(cf->k, cf->tag, v, l, ch, sizeof(v));
	snprintf(ms, sizeof(ms), "%" PRIu64, cf->lease_ms);
	for (int i = 0; i < 4; i++)
		lens[i] = strlen(argv[i]);
	cf->op.done = renew_done;
	cf->op.data = cf;
	/* not ready: the lease may pass */
	lg_redis_eval(cf->k->r, &cf->op, &scripts[S_RENEW], 4, argv, lens);
}

static void
acquire_done(struct lg_redis_op *op, const struct redisReply *reply)
{
	struct lg_cflight *cf = op->data;
	struct lg_cluster *k = cf->k;

	if (reply == NULL) {
		local(cf);
	} else if (reply->type == REDIS_REPLY_STRING ||
	    (reply->type == REDIS_REPLY_INTEGER && reply->integer != 1)) {
		/* a value refused by the checks, one of another type or too long: this key's miss,
		 * counted, computed here (one line per key at debug level: a client can repeat
		 * it at its request rate) */
		if (reply->type == REDIS_REPLY_INTEGER || hit(cf, reply->str, reply->len) == -1) {
			lg_stats_add(&k->ctr->bad_values, 1);
			log_debug("redis value of key {%s} refused (%s): computed locally", cf->tag,
			    reply->type == REDIS_REPLY_STRING ? "failed the checks" :
			    reply->integer == FOREIGN ? "not a string" : "too long");
			local(cf);
		}
	} else if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) {
		if (cf->waits == 0)
			lg_stats_add(&k->ctr->misses, 1);
		lg_stats_add(cf->waits > 0 ? &k->ctr->taken_over : &k->ctr->won, 1);
		cf->leader = 1;
		cf->waiting = 0;
		double third = (double)cf->lease_ms / 3000.;

		ev_timer_set(&cf->renew, third, third);
		ev_timer_start(k->w->ev, &cf->renew);
		k->ops.run(cf->f); /* may drop the flight, and cf with it */
	} else if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
	    reply->element[0]->type == REDIS_REPLY_STRING &&
	    reply->element[1]->type == REDIS_REPLY_INTEGER) {
		if (cf->waits == 0)
			lg_stats_add(&k->ctr->misses, 1);
		follow(cf, reply->element[0]->str, reply->element[0]->len,
		    (int64_t)reply->element[1]->integer);
	} else {
		local(cf);
	}
}

/* Asks again: the PUBLISH came, the lease ended, or the subscription is back. */
static void
again(struct lg_cflight *cf)
{
	cf->waiting = 0;
	ev_timer_stop(cf->k->w->ev, &cf->lease);
	if (acquire(cf) == -1)
		local(cf);
}

static void
lease_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	again(t->data);
}

static void
on_message(void *arg, const char *payload, size_t len)
{
	struct lg_cluster *k = arg;

	for (struct lg_cflight *cf = k->list; cf != NULL; cf = cf->next)
		if (!cf->leader && len == strlen(cf->tag) && memcmp(payload, cf->tag, len) == 0) {
			if (cf->waiting)
				again(cf);
			else if (cf->op.t != NULL)
				cf->published = 1; /* follow() asks again at once */
			return; /* one flight per key per loop */
		}
}

/* The subscription is (back) up: a PUBLISH may have been missed meanwhile. */
static void
on_ready(void *arg)
{
	struct lg_cluster *k = arg;
	struct lg_cflight *next;

	for (struct lg_cflight *cf = k->list; cf != NULL; cf = next) {
		next = cf->next;
		if (cf->waiting)
			again(cf);
	}
}

/* The breaker opened: every waiting follower computes locally. */
static void
on_down(void *arg)
{
	struct lg_cluster *k = arg;
	struct lg_cflight *next;

	for (struct lg_cflight *cf = k->list; cf != NULL; cf = next) {
		next = cf->next;
		if (cf->waiting)
			local(cf);
	}
}

static void
store_done(struct lg_redis_op *op, const struct redisReply *reply)
{
	struct lg_cstore *s = op->data;

	if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && !s->release)
		lg_stats_add(reply->integer == 1 ? &s->k->ctr->stored : &s->k->ctr->refused, 1);
	if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
		log_warn("redis refused a late %s: the lease had passed to another replica",
		    s->release ? "release" : "store");
	free(s);
}

/* The STORE script for cf's lease: value (len bytes) for ttl ("0": a release). */
static void
send_store(struct lg_cflight *cf, const char *value, size_t len, const char *ttl)
{
	struct lg_cstore *s = calloc(1, sizeof(*s));
	char v[160], l[160], ch[160];
	const char *argv[8] = { "2", v, l, cf->token, value, ttl, ch, cf->tag };
	size_t lens[8];

	cf->done = 1;
	ev_timer_stop(cf->k->w->ev, &cf->renew);
	if (s == NULL)
		return; /* the lease ends by itself */
	s->k = cf->k;
	s->release = strcmp(ttl, "0") == 0;
	s->op.done = store_done;
	s->op.data = s;
	key_names(cf->k, cf->tag, v, l, ch, sizeof(v));
	for (int i = 0; i < 8; i++)
		lens[i] = i == 4 ? len : strlen(argv[i]);
	if (lg_redis_eval(cf->k->r, &s->op, &scripts[S_STORE], 8, argv, lens) == -1)
		free(s);
}

void
lg_cluster_store(struct lg_lflight *f, int status, const char *ctype, const void *body,
    size_t len, uint64_t ttl_ms)
{
	struct lg_cflight *cf = f->cl;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t klen, clen = strlen(ctype ? ctype : "");
	uint64_t hash;
	const char *key = cf != NULL ? cf->k->ops.key(f, &klen, &hash) : NULL;
	char ttl[24];

	if (cf == NULL || !cf->leader || cf->done || status == 502 || status == 503 ||
	    status == 504)
		return; /* released at the drop */
	if (len > cf->k->cl->cluster_max_value) {
		lg_stats_add(&cf->k->ctr->too_large, 1);
		return;
	}
	if (ttl_ms == 0)
		ttl_ms = FOLLOWER_READ_MS;
	snprintf(ttl, sizeof(ttl), "%" PRIu64, ttl_ms);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 7);
	msgpack_pack_uint64(&pk, VALUE_VERSION);
	msgpack_pack_bin(&pk, MAKER_LEN + klen);
	msgpack_pack_bin_body(&pk, cf->k->maker[cf->route], MAKER_LEN);
	msgpack_pack_bin_body(&pk, key, klen);
	msgpack_pack_uint64(&pk, (uint64_t)status);
	msgpack_pack_str(&pk, clen);
	msgpack_pack_str_body(&pk, ctype ? ctype : "", clen);
	msgpack_pack_uint64(&pk, wall_ms());
	msgpack_pack_uint64(&pk, ttl_ms);
	msgpack_pack_bin(&pk, len);
	msgpack_pack_bin_body(&pk, body, len);
	send_store(cf, sb.data, sb.size, ttl);
	msgpack_sbuffer_destroy(&sb);
}

void
lg_cluster_drop(struct lg_lflight *f)
{
	struct lg_cflight *cf = f->cl;
	struct lg_cluster *k = cf->k;

	f->cl = NULL;
	lg_redis_cancel(&cf->op);
	ev_timer_stop(k->w->ev, &cf->lease);
	ev_timer_stop(k->w->ev, &cf->renew);
	if (cf->leader && !cf->done)
		send_store(cf, "", 0, "0"); /* the followers ask again at once */
	if (cf->prev)
		cf->prev->next = cf->next;
	else
		k->list = cf->next;
	if (cf->next)
		cf->next->prev = cf->prev;
	free(cf);
}

/* The lease for a job of kind: --redis-lease-ms, or when 0 twice the kind's p99 run time on
 * this replica (the upper bound of the bucket of its run-time histogram holding the 99th
 * percentile, summed over the compute processes), at least LEASE_MIN_MS, LEASE_COLD_MS before
 * the kind has run here or for no kind (LG_CLUSTER_NO_KIND: an upstream route's key, renewed
 * while its app answers); never past the route's deadline. */
static uint64_t
lease_for(const struct lg_cluster *k, uint32_t kind, uint64_t deadline_ms)
{
	const struct lg_arena *a = k->w->env->arena;
	uint64_t n[LG_STATS_BOUNDS + 1] = { 0 }, count = 0, seen = 0, ms = k->cl->redis_lease_ms;

	for (uint32_t p = k->w->env->nloops; ms == 0 && kind < a->stat_kinds && p < a->nprocs;
	    p++)
		for (unsigned i = 0; i <= LG_STATS_BOUNDS; i++) {
			const struct lg_kind_stats *ks = lg_arena_kind_stats(a, p, kind);
			uint64_t v = atomic_load_explicit(&ks->run.bucket[i], memory_order_relaxed);

			n[i] += v;
			count += v;
		}
	for (unsigned i = 0; ms == 0 && count > 0 && i <= LG_STATS_BOUNDS; i++)
		if ((seen += n[i]) * 100 >= count * 99)
			ms = 2 * lg_stats_time_bounds[i < LG_STATS_BOUNDS ? i : LG_STATS_BOUNDS - 1]
			    / LG_NS_PER_MS;
	if (ms == 0)
		ms = count > 0 ? LEASE_MIN_MS : LEASE_COLD_MS;
	if (ms < LEASE_MIN_MS)
		ms = LEASE_MIN_MS;
	return ms < deadline_ms ? ms : deadline_ms;
}

int
lg_cluster_begin(struct lg_lflight *f, uint32_t kind, uint32_t route, uint64_t deadline_ms)
{
	struct lg_cluster *k = the;
	struct lg_cflight *cf;
	size_t klen;
	uint64_t hash;
	const char *key = k != NULL ? k->ops.key(f, &klen, &hash) : NULL;

	if (k == NULL || route >= k->nroutes || !lg_redis_ready(k->r) ||
	    (cf = calloc(1, sizeof(*cf))) == NULL)
		return -1;
	/* unseeded: the same on every replica running the same code and configuration */
	unsigned char both[MAKER_LEN + LG_FLIGHT_KEY_MAX];

	memcpy(both, k->maker[route], MAKER_LEN);
	memcpy(both + MAKER_LEN, key, klen < LG_FLIGHT_KEY_MAX ? klen : LG_FLIGHT_KEY_MAX);
	XXH128_hash_t h = XXH3_128bits(both, MAKER_LEN + (klen < LG_FLIGHT_KEY_MAX ? klen :
	    LG_FLIGHT_KEY_MAX));
	snprintf(cf->tag, sizeof(cf->tag), "%016" PRIx64 "%016" PRIx64, h.high64, h.low64);
	snprintf(cf->token, sizeof(cf->token), "%s:%" PRIu64, k->id, ++k->seq);
	cf->k = k;
	cf->f = f;
	cf->route = route;
	cf->deadline_ms = deadline_ms;
	cf->lease_ms = lease_for(k, kind, deadline_ms);
	ev_timer_init(&cf->lease, lease_cb, 1., 0.);
	cf->lease.data = cf;
	ev_timer_init(&cf->renew, renew_cb, 1., 1.);
	cf->renew.data = cf;
	if (acquire(cf) == -1) {
		free(cf);
		return -1;
	}
	cf->next = k->list;
	if (k->list)
		k->list->prev = cf;
	k->list = cf;
	f->cl = cf;
	return 0;
}

static void
maker_str(XXH3_state_t *st, const char *v)
{
	XXH3_128bits_update(st, v, strlen(v) + 1); /* NUL included: "ab","c" is not "a","bc" */
}

static void
maker_conf(XXH3_state_t *st, const struct lagless_conf *conf)
{
	for (unsigned i = 0; i < conf->n; i++) {
		maker_str(st, conf->kv[i].key);
		maker_str(st, conf->kv[i].value);
	}
	maker_str(st, "");
}

/* What makes the answers of route rt (docs/CACHE.md "What a cluster key holds"): the lagless
 * release (the built-in kinds and the host), the kind's name, its module's name, version and
 * file contents (XXH3-64, master/modules.c), the module's and the route's keys and the route's
 * content type; for an upstream route, the upstream's name. Two replicas share a key only
 * when all of it is equal: during a rolling upgrade, or after a reload that changed any of
 * it, old and new code never read each other's answers. Into out (MAKER_LEN bytes). */
static void
route_maker(const struct lg_registry *reg, const struct lg_route_def *rt, unsigned char *out)
{
	const struct lg_kind *kd = lg_registry_kind(reg, rt->kind);
	XXH3_state_t *st = XXH3_createState();

	if (st == NULL) {
		memset(out, 0xff, MAKER_LEN); /* out of memory at start: shares with no one */
		return;
	}
	XXH3_128bits_reset(st);
	maker_str(st, "lagless cluster value " LG_VERSION);
	maker_str(st, kd != NULL ? kd->name : "");
	if (kd != NULL && kd->module < reg->nmodules) {
		const struct lg_module *m = &reg->modules[kd->module];

		maker_str(st, m->name);
		maker_str(st, m->version);
		XXH3_128bits_update(st, &m->content, sizeof(m->content));
		maker_conf(st, &m->conf);
	}
	maker_conf(st, &rt->conf);
	maker_str(st, rt->ctype);
	/* an upstream route's answers: its app's, by the upstream's name (its servers may be
	 * named otherwise on each replica) */
	if (rt->upstream) {
		maker_str(st, "upstream");
		maker_str(st, rt->upstream <= reg->nupstreams ?
		    reg->upstreams[rt->upstream - 1].name : "");
	}
	XXH128_hash_t h = XXH3_128bits_digest(st);

	XXH3_freeState(st);

	memcpy(out, &h.high64, 8);
	memcpy(out + 8, &h.low64, 8);
}

int
lg_cluster_ready(struct lg_worker *w)
{
	return the != NULL && lg_redis_ready(the->r);
}

int
lg_cluster_setup(struct lg_worker *w, const struct lg_cluster_ops *ops)
{
	const struct lg_cluster_cfg *cl = &w->env->cfg->cluster;
	const struct lg_registry *reg = w->env->cfg->reg;
	struct lg_cluster *k;
	char host[48] = "", pattern[96];
	uint32_t rnd = 0;

	if (cl->redis[0] == '\0' || w->env->cache == NULL)
		return 0;
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return -1;
	k->w = w;
	k->cl = cl;
	k->ops = *ops;
	k->ctr = &lg_cache_row(w->env->cache, w->env->index)->cl;
	k->nroutes = reg->nroutes;
	if ((k->maker = calloc(k->nroutes ? k->nroutes : 1, MAKER_LEN)) == NULL) {
		free(k);
		return -1;
	}
	for (uint32_t i = 0; i < k->nroutes; i++)
		route_maker(reg, &reg->routes[i], k->maker[i]);
	gethostname(host, sizeof(host) - 1);
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint32_t)lg_now_ns();
	snprintf(k->id, sizeof(k->id), "%s:%d:%08x", host, (int)getpid(), rnd);
	snprintf(pattern, sizeof(pattern), "%sdone:*", cl->redis_prefix);
	struct lg_redis_cfg rc = { .addr = cl->redis, .budget_ms = cl->redis_budget_ms,
	    .breaker_ms = cl->redis_breaker_ms, .pattern = pattern, .scripts = scripts,
	    .nscripts = sizeof(scripts) / sizeof(scripts[0]) };
	struct lg_redis_hooks h = { .message = on_message, .ready = on_ready, .down = on_down,
	    .arg = k };

	if ((k->r = lg_redis_start(w->ev, &rc, k->ctr, &h)) == NULL) {
		free(k->maker);
		free(k);
		return -1;
	}
	the = k;
	return 0;
}
