/* Admission of proxied requests: a server-wide record (shm/upstream.h) decides go, wait or
 * 503, for an upstream and for a route's bulkhead within it; this loop keeps its waiters in a
 * FIFO per record (a gate), each with the request's deadline, and hands a released place to the
 * first of them, or rings the loops that have some. A bulkhead route's request takes its
 * bulkhead's place first, waiting in the bulkhead's FIFO, and only then asks the upstream: a
 * flooded route's backlog waits outside the upstream's queue, so the app's other routes never
 * queue behind it (Nygard's bulkheads; Envoy's per-route circuit breakers). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/channel.h"
#include "worker/core/env.h"
#include "worker/upstream/up_int.h"
#include "worker/upstream/upstream.h"

int
lg_up_loop_init(struct lg_worker *w)
{
	const struct lg_registry *reg = w->env->cfg->reg;
	struct lg_worker_up *wu = LG_WUP(w);
	const struct lg_upshm *shm = w->env->ups;

	wu->n = reg->nupstreams;
	wu->nbh = 0;
	for (uint32_t k = 0; k < reg->nroutes; k++)
		if (reg->routes[k].bulkhead > wu->nbh)
			wu->nbh = reg->routes[k].bulkhead;
	wu->ups = calloc(wu->n ? wu->n : 1, sizeof(*wu->ups));
	wu->bh = calloc(wu->nbh ? wu->nbh : 1, sizeof(*wu->bh));
	if (wu->ups == NULL || wu->bh == NULL ||
	    (wu->n + wu->nbh > 0 && (shm == NULL || shm->n < wu->n + wu->nbh))) {
		errno = wu->ups == NULL || wu->bh == NULL ? ENOMEM : EINVAL;
		return -1;
	}
	for (uint32_t i = 0; i < wu->n; i++) {
		struct lg_up_one *u = &wu->ups[i];

		u->def = &reg->upstreams[i];
		u->adm = u->g.adm = &shm->adm[i];
		u->g.rec = i;
		u->codel.target_ns = u->def->queue_wait_target_ms * LG_NS_PER_MS;
		u->codel.interval_ns = u->def->queue_wait_interval_ms * LG_NS_PER_MS;
	}
	for (uint32_t b = 0; b < wu->nbh; b++) {
		wu->bh[b].adm = &shm->adm[wu->n + b];
		wu->bh[b].rec = wu->n + b;
		wu->bh[b].bulkhead = 1;
	}
	return 0;
}

struct lg_up_gate *
lg_up_bulkhead(struct lg_worker *w, uint32_t b)
{
	return b >= 1 && b <= LG_WUP(w)->nbh ? &LG_WUP(w)->bh[b - 1] : NULL;
}

void
lg_up_enqueue(struct lg_conn_up *x, struct lg_up_gate *g)
{
	x->queued = 1;
	x->qg = g;
	x->qnext = NULL;
	x->qprev = g->qtail;
	if (g->qtail)
		g->qtail->qnext = x;
	else
		g->qhead = x;
	g->qtail = x;
	if (!g->bulkhead)
		atomic_store(&g->adm->last_enqueue_ns, lg_now_ns());
}

/* x leaves the FIFO (its queue place is the caller's to account). */
static void
unlink_queued(struct lg_conn_up *x)
{
	struct lg_up_gate *g = x->qg;

	if (x->qprev)
		x->qprev->qnext = x->qnext;
	else
		g->qhead = x->qnext;
	if (x->qnext)
		x->qnext->qprev = x->qprev;
	else
		g->qtail = x->qprev;
	x->queued = 0;
	x->qprev = x->qnext = NULL;
}

void
lg_up_unqueue(struct lg_conn_up *x)
{
	if (!x->queued)
		return;
	unlink_queued(x);
	lg_upadm_unqueue(x->qg->adm, x->w->env->index);
}

/* This loop's waiters of g take the places that are free, first come first: a bulkhead's then
 * ask their upstream, an upstream's start. */
static void
serve_queue(struct lg_worker *w, struct lg_up_gate *g)
{
	uint32_t loop = w->env->index;

	if (g->serving)
		return;
	g->serving = 1;
	while (g->qhead != NULL && lg_upadm_take(g->adm, loop)) {
		struct lg_conn_up *x = g->qhead;

		unlink_queued(x);
		/* Either may answer and free x: the loop reads g->qhead again. */
		if (g->bulkhead) {
			x->bh_placed = 1;
			(void)lg_up_bulkhead_placed(x);
		} else {
			x->placed = 1;
			(void)lg_up_dequeued(x);
		}
	}
	g->serving = 0;
}

/* Rings every other loop that has waiters of record g->rec (UPWAKE on its completion channel;
 * a full channel is made up for by that loop's tick). */
static void
wake_others(struct lg_worker *w, const struct lg_up_gate *g)
{
	const struct lg_loop_env *env = w->env;
	struct lg_msg m = { .type = LG_MSG_UPWAKE, .upwake = { g->rec } };

	for (uint32_t i = 0; i < env->nloops && i < LG_UPADM_LOOPS; i++)
		if (i != env->index && atomic_load(&g->adm->waiting[i]) > 0)
			(void)lg_chan_send(env->ch->done[i][1], &m, MSG_DONTWAIT);
}

/* Gives a place of g back, handing it to a waiter here or elsewhere. */
static void
release_gate(struct lg_worker *w, struct lg_up_gate *g)
{
	if (lg_upadm_release(g->adm, w->env->index) == 0)
		return;
	if (g->qhead != NULL)
		serve_queue(w, g);
	else
		wake_others(w, g);
}

void
lg_up_release(struct lg_conn_up *x)
{
	struct lg_worker *w = x->w;

	if (x->placed) {
		x->placed = 0;
		release_gate(w, &lg_up_of(x)->g);
	}
	if (x->bh_placed) {
		x->bh_placed = 0;
		release_gate(w, x->bh);
	}
}

/* The gate record m names (an upstream's, then the bulkheads'), or NULL. */
static struct lg_up_gate *
gate_of(struct lg_worker *w, uint32_t rec)
{
	struct lg_worker_up *wu = LG_WUP(w);

	if (wu->ups == NULL)
		return NULL;
	return rec < wu->n ? &wu->ups[rec].g : rec - wu->n < wu->nbh ? &wu->bh[rec - wu->n] : NULL;
}

void
lg_up_message(struct lg_worker *w, const struct lg_msg *m)
{
	struct lg_up_gate *g = m->type == LG_MSG_UPWAKE ? gate_of(w, m->upwake.upstream) : NULL;

	if (g != NULL)
		serve_queue(w, g);
}

void
lg_up_tick(struct lg_worker *w)
{
	struct lg_worker_up *wu = LG_WUP(w);

	if (wu->ups == NULL)
		return;
	for (uint32_t i = 0; i < wu->n; i++)
		serve_queue(w, &wu->ups[i].g);
	for (uint32_t b = 0; b < wu->nbh; b++)
		serve_queue(w, &wu->bh[b]);
	lg_upc_sweep(w, 0);
	lg_upc_eject_sweep(w);
	for (uint32_t i = 0; i < wu->n; i++)
		if (wu->ups[i].xpool.size != 0)
			lg_pool_trim(&wu->ups[i].xpool);
}

void
lg_up_drain(struct lg_worker *w)
{
	if (LG_WUP(w)->ups != NULL)
		lg_upc_sweep(w, 1);
	lg_up_tunnel_drain(w);
}
