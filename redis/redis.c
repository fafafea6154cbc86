/* Redis connections of a loop worker (redis/redis.h). */
#include "redis/redis.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libev.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/stats.h"

/* A command in flight: hiredis holds it as its privdata until it calls back (a reply, or NULL
 * when the context is freed), so it outlives a cancelled op. */
struct lg_redis_ticket {
	struct lg_redis *r;
	struct lg_redis_op *op;      /* NULL once cancelled */
	ev_timer budget;
	uint64_t start_ns;
	struct lg_redis_script *script; /* sent as EVALSHA: its EVAL form, for a NOSCRIPT */
	char *fallback;
	int fallback_len;
};

struct lg_redis {
	struct ev_loop *ev;
	struct lg_redis_cfg cfg;
	char addr[256], pattern[128];
	char host[64];
	int port;                    /* 0: unix socket at addr + 5 */
	redisAsyncContext *cmd, *sub;
	int cmd_up, subscribed;
	int open;                    /* the breaker: nothing is sent */
	int quiet;                   /* a trip while not up again: logged at debug level */
	char err[128];               /* why the last connect could not start (open_ctx) */
	ev_timer connect_budget;     /* from a connect to both connections ready */
	ev_timer breaker;            /* open -> connect again */
	ev_timer resub;              /* the subscription alone was lost: reconnect it now */
	ev_timer settle;             /* the bound on the first connect (readiness held meanwhile) */
	struct lg_cluster_counters *ctr;
	struct lg_redis_hooks hooks;
};

static void connect_all(struct lg_redis *r);
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);
static int connect_sub(struct lg_redis *r);

static void
set_up(struct lg_redis *r)
{
	int up = lg_redis_ready(r);

	atomic_store(&r->ctr->up, (uint64_t)up);
	if (up) {
		ev_timer_stop(r->ev, &r->connect_budget);
		ev_timer_stop(r->ev, &r->settle);
		atomic_store(&r->ctr->settled, 1);
		if (r->quiet)
			log_info("redis %s: connected; cluster keys shared again", r->addr);
		r->quiet = 0;
	}
	if (up && r->hooks.ready)
		r->hooks.ready(r->hooks.arg);
}

/* Opens the breaker: frees both contexts (hiredis calls every pending callback with NULL, so
 * each command in flight fails now, after the breaker is open), and tries again after
 * breaker_ms. */
static void
trip(struct lg_redis *r, const char *why)
{
	redisAsyncContext *cmd = r->cmd, *sub = r->sub;

	if (r->open)
		return;
	r->open = 1;
	r->cmd = r->sub = NULL;
	r->cmd_up = r->subscribed = 0;
	atomic_store(&r->ctr->open, 1);
	atomic_store(&r->ctr->up, 0);
	lg_stats_add(&r->ctr->trips, 1);
	LG_LOG_AT(r->quiet ? LG_LOG_DEBUG : LG_LOG_WARN, "redis %s: %s; cluster keys are local "
	    "for %llu ms (retried every %llu ms until it answers)", r->addr, why,
	    (unsigned long long)r->cfg.breaker_ms, (unsigned long long)r->cfg.breaker_ms);
	r->quiet = 1;
	ev_timer_stop(r->ev, &r->connect_budget);
	ev_timer_stop(r->ev, &r->resub);
	ev_timer_set(&r->breaker, (double)r->cfg.breaker_ms / 1000., 0.);
	ev_timer_start(r->ev, &r->breaker);
	if (cmd != NULL)
		redisAsyncFree(cmd);
	if (sub != NULL)
		redisAsyncFree(sub);
	if (r->hooks.down)
		r->hooks.down(r->hooks.arg);
}

static void
record_rtt(struct lg_redis *r, uint64_t start_ns)
{
	static const uint64_t bounds[] = LG_CLUSTER_RTT_BOUNDS_US;
	uint64_t us = (lg_now_ns() - start_ns) / 1000u;
	unsigned i = 0;

	while (i < sizeof(bounds) / sizeof(bounds[0]) && us > bounds[i])
		i++;
	lg_stats_add(&r->ctr->rtt[i], 1);
	lg_stats_add(&r->ctr->rtt_count, 1);
	lg_stats_add(&r->ctr->rtt_sum_us, us);
}

/* Error replies that say Redis itself cannot serve (redis.io "Errors", the server's error
 * prefixes): these open the breaker. Any other error concerns the command's own keys. */
static int
server_error(const char *s, size_t n)
{
	static const char *const prefixes[] = { "LOADING", "BUSY", "MASTERDOWN", "READONLY",
	    "OOM", "NOAUTH", "NOPERM", "MISCONF", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK",
	    "EXECABORT", NULL };

	for (const char *const *p = prefixes; *p != NULL; p++) {
		size_t k = strlen(*p);

		if (n >= k && memcmp(s, *p, k) == 0 && (n == k || s[k] == ' '))
			return 1;
	}
	return 0;
}

static void load_script(struct lg_redis *r, struct lg_redis_script *s);

/* A NOSCRIPT for an EVALSHA: the same command again as EVAL, on the same ticket and budget.
 * Returns 0 when sent. */
static int
resend_eval(struct lg_redis *r, struct lg_redis_ticket *t)
{
	int rc;

	t->script->sha[0] = '\0';
	load_script(r, t->script);
	rc = redisAsyncFormattedCommand(r->cmd, on_reply, t, t->fallback,
	    (size_t)t->fallback_len);
	redisFreeCommand(t->fallback);
	t->fallback = NULL;
	return rc == REDIS_OK ? 0 : -1;
}

static void
on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct lg_redis_ticket *t = privdata;
	struct lg_redis *r = t->r;
	redisReply *rp = reply;
	struct lg_redis_op *op = t->op;
	uint64_t start_ns = t->start_ns;

	if (rp != NULL && rp->type == REDIS_REPLY_ERROR && t->fallback != NULL &&
	    strncmp(rp->str, "NOSCRIPT", 8) == 0 && resend_eval(r, t) == 0)
		return; /* the EVAL's reply calls back */
	ev_timer_stop(r->ev, &t->budget);
	if (t->fallback != NULL)
		redisFreeCommand(t->fallback);
	free(t);
	if (op != NULL)
		op->t = NULL;
	if (rp != NULL)
		record_rtt(r, start_ns);
	if (rp != NULL && rp->type == REDIS_REPLY_ERROR && server_error(rp->str, rp->len)) {
		log_warn("redis %s: error reply: %.*s", r->addr, (int)rp->len, rp->str);
		trip(r, "error reply");
		rp = NULL;
	} else if (rp != NULL && rp->type == REDIS_REPLY_ERROR) {
		lg_stats_add(&r->ctr->key_errors, 1);
		log_debug("redis %s: error reply for one key: %.*s", r->addr, (int)rp->len,
		    rp->str);
	}
	if (op != NULL)
		op->done(op, rp);
}

static void
budget_cb(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct lg_redis_ticket *t = w->data;

	trip(t->r, "command over its budget"); /* frees t through on_reply */
}

/* Sends argv for op on a new ticket (fallback: the EVAL form of an EVALSHA, taken over).
 * Returns 0 or -1 (nothing sent, fallback freed). */
static int
send_cmd(struct lg_redis *r, struct lg_redis_op *op, int argc, const char **argv,
    const size_t *lens, struct lg_redis_script *s, char *fallback, int fallback_len)
{
	struct lg_redis_ticket *t;

	if (!lg_redis_ready(r) || (t = calloc(1, sizeof(*t))) == NULL) {
		if (fallback != NULL)
			redisFreeCommand(fallback);
		return -1;
	}
	t->r = r;
	t->op = op;
	t->start_ns = lg_now_ns();
	t->script = s;
	t->fallback = fallback;
	t->fallback_len = fallback_len;
	ev_timer_init(&t->budget, budget_cb, (double)r->cfg.budget_ms / 1000., 0.);
	t->budget.data = t;
	if (redisAsyncCommandArgv(r->cmd, on_reply, t, argc, argv, lens) != REDIS_OK) {
		if (fallback != NULL)
			redisFreeCommand(fallback);
		free(t);
		return -1;
	}
	ev_timer_start(r->ev, &t->budget);
	op->t = t;
	return 0;
}

int
lg_redis_cmd(struct lg_redis *r, struct lg_redis_op *op, int argc, const char **argv,
    const size_t *lens)
{
	return send_cmd(r, op, argc, argv, lens, NULL, NULL, 0);
}

int
lg_redis_eval(struct lg_redis *r, struct lg_redis_op *op, struct lg_redis_script *s,
    int argc, const char **argv, const size_t *lens)
{
	const char *av[16] = { "EVAL", s->src };
	size_t al[16] = { 4, strlen(s->src) };
	char *fallback = NULL;
	int n = 0;

	if (argc > 14)
		return -1;
	for (int i = 0; i < argc; i++) {
		av[2 + i] = argv[i];
		al[2 + i] = lens[i];
	}
	if (s->sha[0] != '\0') {
		if ((n = redisFormatCommandArgv(&fallback, argc + 2, av, al)) < 0)
			return -1;
		av[0] = "EVALSHA";
		al[0] = 7;
		av[1] = s->sha;
		al[1] = strlen(s->sha);
	}
	return send_cmd(r, op, argc + 2, av, al, s, fallback, n);
}

void
lg_redis_cancel(struct lg_redis_op *op)
{
	if (op->t != NULL) {
		op->t->op = NULL;
		op->t = NULL;
	}
}

int
lg_redis_ready(const struct lg_redis *r)
{
	return r != NULL && !r->open && r->cmd != NULL && r->cmd_up && r->sub != NULL &&
	    r->subscribed;
}

/* The subscription's callback: hiredis calls it for the confirmation and for every message
 * on the pattern, and with NULL when the context goes (the disconnect callback acts then). */
static void
on_sub(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct lg_redis *r = privdata;
	redisReply *rp = reply;

	if (rp == NULL || ac != r->sub || rp->type != REDIS_REPLY_ARRAY || rp->elements < 3 ||
	    rp->element[0]->type != REDIS_REPLY_STRING)
		return;
	if (strcmp(rp->element[0]->str, "psubscribe") == 0) {
		r->subscribed = 1;
		set_up(r);
	} else if (strcmp(rp->element[0]->str, "pmessage") == 0 && rp->elements == 4 &&
	    rp->element[3]->type == REDIS_REPLY_STRING && r->hooks.message) {
		r->hooks.message(r->hooks.arg, rp->element[3]->str, rp->element[3]->len);
	}
}

static void
on_loaded(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct lg_redis_script *s = privdata;
	redisReply *rp = reply;

	if (rp != NULL && rp->type == REDIS_REPLY_STRING && rp->len == 40)
		memcpy(s->sha, rp->str, 41);
}

/* SCRIPT LOAD s: its SHA-1 comes back (on_loaded); no budget of its own (a hung Redis trips
 * on the next command's). */
static void
load_script(struct lg_redis *r, struct lg_redis_script *s)
{
	if (r->cmd != NULL)
		(void)redisAsyncCommand(r->cmd, on_loaded, s, "SCRIPT LOAD %s", s->src);
}

static void
on_connect(const redisAsyncContext *ac, int status)
{
	struct lg_redis *r = ac->data;

	if (ac != r->cmd && ac != r->sub)
		return; /* a context given up already */
	if (status != REDIS_OK) {
		/* hiredis frees a context whose connect failed */
		if (ac == r->cmd)
			r->cmd = NULL;
		else
			r->sub = NULL;
		trip(r, ac->errstr[0] ? ac->errstr : "connect failed");
		return;
	}
	if (ac == r->cmd) {
		r->cmd_up = 1;
		for (unsigned i = 0; i < r->cfg.nscripts; i++)
			load_script(r, &r->cfg.scripts[i]);
		set_up(r);
	}
}

static void
on_disconnect(const redisAsyncContext *ac, int status)
{
	struct lg_redis *r = ac->data;

	if (ac == r->cmd) {
		r->cmd = NULL;
		r->cmd_up = 0;
		trip(r, "command connection lost");
	} else if (ac == r->sub) {
		/* The subscription alone (CLIENT KILL TYPE pubsub, say): made again at once, and
		 * its waiters re-read when it is back (hooks.ready); new keys are local
		 * meanwhile. A new subscription that is lost before Redis confirmed it (a Redis
		 * going down still accepts for a moment) is an outage: the breaker's trip, said
		 * once, and retried at its pace, not a warning and a reconnect per loss. */
		int was = r->subscribed;

		r->sub = NULL;
		r->subscribed = 0;
		atomic_store(&r->ctr->up, 0);
		if (!was) {
			trip(r, "subscription lost before it was confirmed");
			return;
		}
		log_warn("redis %s: subscription lost; subscribing again", r->addr);
		ev_timer_start(r->ev, &r->resub);
	}
}

static redisAsyncContext *
open_ctx(struct lg_redis *r)
{
	redisAsyncContext *ac = r->port == 0 ? redisAsyncConnectUnix(r->addr + 5) :
	    redisAsyncConnect(r->host, r->port);

	if (ac == NULL)
		return NULL;
	if (ac->err) { /* said once by the trip that follows (connect_all), not per retry */
		snprintf(r->err, sizeof(r->err), "cannot connect: %s", ac->errstr);
		redisAsyncFree(ac);
		return NULL;
	}
	ac->data = r;
	redisLibevAttach(r->ev, ac);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	return ac;
}

static int
connect_sub(struct lg_redis *r)
{
	if ((r->sub = open_ctx(r)) == NULL)
		return -1;
	if (redisAsyncCommand(r->sub, on_sub, r, "PSUBSCRIBE %b", r->pattern,
	    strlen(r->pattern)) != REDIS_OK) {
		redisAsyncContext *ac = r->sub;

		r->sub = NULL;
		redisAsyncFree(ac);
		return -1;
	}
	ev_timer_again(r->ev, &r->connect_budget);
	return 0;
}

static void
connect_all(struct lg_redis *r)
{
	r->open = 0;
	atomic_store(&r->ctr->open, 0);
	ev_timer_again(r->ev, &r->connect_budget);
	r->err[0] = '\0';
	if ((r->cmd = open_ctx(r)) == NULL || connect_sub(r) == -1)
		trip(r, r->err[0] ? r->err : "cannot connect");
}

static void
connect_budget_cb(struct ev_loop *ev, ev_timer *w, int revents)
{
	trip(w->data, "not ready within the connect budget");
}

static void
breaker_cb(struct ev_loop *ev, ev_timer *w, int revents)
{
	connect_all(w->data);
}

/* The first connect did not come up within its bound: the replica stops holding its
 * readiness (fail open: its cluster keys are local until Redis answers). */
static void
settle_cb(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct lg_redis *r = w->data;

	atomic_store(&r->ctr->settled, 1);
	log_warn("redis %s: not up within %llu ms of start: ready without it (cluster keys "
	    "local until it answers)", r->addr,
	    (unsigned long long)(2 * r->cfg.budget_ms + r->cfg.breaker_ms));
}

static void
resub_cb(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct lg_redis *r = w->data;

	if (!r->open && r->sub == NULL && connect_sub(r) == -1)
		trip(r, "cannot subscribe again");
}

/* "unix:/path", "IP:PORT" or "[IPv6]:PORT" into r. Returns 0 or -1. */
static int
parse_addr(struct lg_redis *r, const char *addr)
{
	const char *colon = strrchr(addr, ':');
	size_t n;

	snprintf(r->addr, sizeof(r->addr), "%s", addr);
	if (strncmp(addr, "unix:", 5) == 0)
		return addr[5] == '/' ? 0 : -1;
	if (colon == NULL || (r->port = atoi(colon + 1)) <= 0 || r->port > 65535)
		return -1;
	if (addr[0] == '[')
		addr++;
	n = (size_t)(colon - addr) - (colon[-1] == ']');
	if (n == 0 || n >= sizeof(r->host))
		return -1;
	memcpy(r->host, addr, n);
	r->host[n] = '\0';
	return 0;
}

struct lg_redis *
lg_redis_start(struct ev_loop *ev, const struct lg_redis_cfg *cfg,
    struct lg_cluster_counters *ctr, const struct lg_redis_hooks *hooks)
{
	struct lg_redis *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	if (parse_addr(r, cfg->addr) == -1) {
		free(r);
		errno = EINVAL;
		return NULL;
	}
	r->ev = ev;
	r->cfg = *cfg;
	snprintf(r->pattern, sizeof(r->pattern), "%s", cfg->pattern);
	r->ctr = ctr;
	r->hooks = *hooks;
	ev_init(&r->connect_budget, connect_budget_cb);
	r->connect_budget.repeat = (double)cfg->budget_ms / 1000.;
	r->connect_budget.data = r;
	ev_timer_init(&r->breaker, breaker_cb, 1., 0.);
	r->breaker.data = r;
	ev_timer_init(&r->resub, resub_cb, 0., 0.);
	r->resub.data = r;
	/* A first connect, its breaker period, and one more connect: then ready anyway. */
	double bound = (double)(2 * cfg->budget_ms + cfg->breaker_ms) / 1000.;

	ev_timer_init(&r->settle, settle_cb, bound, 0.); /* once: a repeat would fire again */
	r->settle.data = r;
	ev_timer_start(ev, &r->settle);
	connect_all(r);
	return r;
}
