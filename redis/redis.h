/* One loop worker's connections to Redis (hiredis 0.14.1 async contexts on the loop's libev
 * loop, adapters/libev.h): one for commands, one standing subscription to a channel pattern,
 * made at connect time. hiredis 0.14 has no timeout hook for libev, so this module runs its
 * own timers: a budget for the connect (both connections ready, the subscription confirmed)
 * and one per command. Any error reply, lost command connection, failed connect or command
 * over budget opens a breaker: both connections are freed (every command in flight fails),
 * nothing is sent for --redis-breaker-ms, then it connects again. Nothing here blocks: the
 * address is numeric (resolved by the master, master/optset.c). */
#ifndef LG_REDIS_REDIS_H
#define LG_REDIS_REDIS_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/cache.h"

struct lg_redis;
struct lg_redis_ticket;
struct redisReply;

/* A command's caller: done is called once per lg_redis_cmd that returned 0, unless cancelled
 * first, with the reply (valid during the call only) or NULL when it failed (budget, lost
 * connection, an error reply that says Redis itself is unwell: LOADING, OOM, READONLY...; the
 * breaker is open by then). An error reply about the command's own keys (WRONGTYPE, a script's
 * error) is passed as a REDIS_REPLY_ERROR reply and opens no breaker: one foreign key must not
 * take every key off the cluster (counted in key_errors). */
struct lg_redis_op {
	void (*done)(struct lg_redis_op *op, const struct redisReply *reply);
	void *data;
	struct lg_redis_ticket *t;  /* the command in flight, NULL when none */
};

/* What the owner hears besides replies (arg: its own pointer). */
struct lg_redis_hooks {
	void (*message)(void *arg, const char *payload, size_t len); /* a PUBLISH on the pattern */
	void (*ready)(void *arg);   /* both connections ready (a PUBLISH may have been missed) */
	void (*down)(void *arg);    /* the breaker opened (every command in flight failed) */
	void *arg;
};

/* A Lua script sent as EVALSHA once SCRIPT LOAD (at each connect) gave its SHA-1, as EVAL
 * before that; a NOSCRIPT reply (Redis restarted, SCRIPT FLUSH) sends the same command again
 * as EVAL and loads the script again. The caller owns it (static storage). */
struct lg_redis_script {
	const char *src;
	char sha[41];               /* "" while unknown */
};

struct lg_redis_cfg {
	const char *addr;           /* "unix:/path" or "IP:PORT" / "[IPv6]:PORT" */
	uint64_t budget_ms, breaker_ms;
	const char *pattern;        /* PSUBSCRIBE pattern, e.g. "lagless:done:*" */
	struct lg_redis_script *scripts; /* loaded at each connect (may be NULL) */
	unsigned nscripts;
};

/* Starts connecting on ev (both connections). ctr: the loop's shared counters (trips, open,
 * up, round-trip histogram; settled is set once both connections are first up, or after
 * 2 * budget_ms + breaker_ms without that: the bound on the readiness it holds). Returns the handle (lives as long as the process), or NULL
 * (ENOMEM, EINVAL: a bad address). */
struct lg_redis *lg_redis_start(struct ev_loop *ev, const struct lg_redis_cfg *cfg,
    struct lg_cluster_counters *ctr, const struct lg_redis_hooks *hooks);

/* Whether commands may be sent now: both connections ready, the breaker closed. */
int lg_redis_ready(const struct lg_redis *r);

/* Sends argv (argc strings of lens bytes, copied) for op. Returns 0 (op->done will be called),
 * or -1 when not ready or hiredis refused it (op->done is not called). Never calls op->done
 * before it returns. */
int lg_redis_cmd(struct lg_redis *r, struct lg_redis_op *op, int argc, const char **argv,
    const size_t *lens);

/* Runs script s with argv (argc strings of lens bytes: numkeys, the keys, the arguments;
 * copied) for op, as EVALSHA when its SHA-1 is known (falling back to EVAL on NOSCRIPT within
 * the same budget), else as EVAL. Returns and calls op->done as lg_redis_cmd. argc <= 14. */
int lg_redis_eval(struct lg_redis *r, struct lg_redis_op *op, struct lg_redis_script *s,
    int argc, const char **argv, const size_t *lens);

/* op's command in flight, if any, will not call op->done (its reply is dropped). */
void lg_redis_cancel(struct lg_redis_op *op);

#endif
