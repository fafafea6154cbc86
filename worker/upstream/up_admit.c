/* Admission of proxied requests: the server-wide record (shm/upstream.h) decides go, wait or
 * 503; this loop keeps its waiters in a FIFO per upstream, each with the request's deadline,
 * and hands a released place to the first of them, or rings the loops that have some. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

	wu->n = reg->nupstreams;
	wu->ups = calloc(wu->n ? wu->n : 1, sizeof(*wu->ups));
	if (wu->ups == NULL)
		return -1;
	for (uint32_t i = 0; i < wu->n; i++) {
		wu->ups[i].def = &reg->upstreams[i];
		wu->ups[i].adm = w->env->ups && i < w->env->ups->n ? &w->env->ups->adm[i] : NULL;
		if (wu->ups[i].adm == NULL) {
			errno = EINVAL;
			return -1;
		}
	}
	return 0;
}

void
lg_up_enqueue(struct lg_conn_up *x)
{
	struct lg_up_one *u = lg_up_of(x);

	x->queued = 1;
	x->qnext = NULL;
	x->qprev = u->qtail;
	if (u->qtail)
		u->qtail->qnext = x;
	else
		u->qhead = x;
	u->qtail = x;
}

/* x leaves the FIFO (its queue place is the caller's to account). */
static void
unlink_queued(struct lg_conn_up *x)
{
	struct lg_up_one *u = lg_up_of(x);

	if (x->qprev)
		x->qprev->qnext = x->qnext;
	else
		u->qhead = x->qnext;
	if (x->qnext)
		x->qnext->qprev = x->qprev;
	else
		u->qtail = x->qprev;
	x->queued = 0;
	x->qprev = x->qnext = NULL;
}

void
lg_up_unqueue(struct lg_conn_up *x)
{
	if (!x->queued)
		return;
	unlink_queued(x);
	lg_upadm_unqueue(lg_up_of(x)->adm, x->w->env->index);
}

/* This loop's waiters of u take the places that are free, first come first: each starts. */
static void
serve_queue(struct lg_worker *w, struct lg_up_one *u)
{
	uint32_t loop = w->env->index;

	if (u->serving)
		return;
	u->serving = 1;
	while (u->qhead != NULL && lg_upadm_take(u->adm, loop)) {
		struct lg_conn_up *x = u->qhead;

		unlink_queued(x);
		x->placed = 1;
		(void)lg_up_start(x); /* may answer and free x: the loop reads u->qhead again */
	}
	u->serving = 0;
}

/* Rings every other loop that has waiters of upstream ui (UPWAKE on its completion channel;
 * a full channel is made up for by that loop's tick). */
static void
wake_others(struct lg_worker *w, uint32_t ui, struct lg_upadm *a)
{
	const struct lg_loop_env *env = w->env;
	struct lg_msg m = { .type = LG_MSG_UPWAKE, .upwake = { ui } };

	for (uint32_t i = 0; i < env->nloops && i < LG_UPADM_LOOPS; i++)
		if (i != env->index && atomic_load(&a->waiting[i]) > 0)
			(void)lg_chan_send(env->ch->done[i][1], &m, MSG_DONTWAIT);
}

void
lg_up_release(struct lg_conn_up *x)
{
	struct lg_worker *w = x->w;
	struct lg_up_one *u = lg_up_of(x);

	if (!x->placed)
		return;
	x->placed = 0;
	if (lg_upadm_release(u->adm, w->env->index) == 0)
		return;
	if (u->qhead != NULL)
		serve_queue(w, u);
	else
		wake_others(w, x->ui, u->adm);
}

void
lg_up_message(struct lg_worker *w, const struct lg_msg *m)
{
	if (LG_WUP(w)->ups != NULL && m->type == LG_MSG_UPWAKE && m->upwake.upstream < LG_WUP(w)->n)
		serve_queue(w, &LG_WUP(w)->ups[m->upwake.upstream]);
}

void
lg_up_tick(struct lg_worker *w)
{
	if (LG_WUP(w)->ups == NULL)
		return;
	for (uint32_t i = 0; i < LG_WUP(w)->n; i++)
		serve_queue(w, &LG_WUP(w)->ups[i]);
	lg_upc_sweep(w, 0);
	lg_upc_eject_sweep(w);
}

void
lg_up_drain(struct lg_worker *w)
{
	if (LG_WUP(w)->ups != NULL)
		lg_upc_sweep(w, 1);
}
