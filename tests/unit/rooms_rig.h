/* A loop worker without a server for the rooms' unit tests (tests/unit/test_offload.c,
 * test_coalesce.c): a libev loop, the default configuration, a small arena of RIG_SLOTS job
 * slots, and connections that are bare struct lg_conn blocks (no socket) whose timer is
 * initialised, so the core's verbs that arm or stop it work on them. */
#ifndef LG_TESTS_ROOMS_RIG_H
#define LG_TESTS_ROOMS_RIG_H

#include <stdlib.h>
#include <string.h>

#include "master/options.h"
#include "worker/core/conn.h"
#include "worker/job/job.h"
#include "worker/job/offload_state.h"

#define RIG_SLOTS 4

struct rig {
	struct lg_config cfg;
	struct lg_arena arena;
	struct lg_loop_env env;
	struct lg_worker *w;
	struct lg_conn *pending[RIG_SLOTS];
};

static void
rig_timer_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
}

/* Sets r up; returns 0, or -1 when the arena or the loop could not be made. */
static int
rig_init(struct rig *r)
{
	memset(r, 0, sizeof(*r));
	lg_options_defaults(&r->cfg);
	if (lg_arena_create_sized(&r->arena, RIG_SLOTS, 1, 65536, 65536, 4, 1) == -1)
		return -1;
	r->env = (struct lg_loop_env){ .cfg = &r->cfg, .arena = &r->arena, .listen_fd = -1,
	    .admin_fd = -1, .nloops = 1, .page = &r->arena.procs[0] };
	if ((r->w = calloc(1, sizeof(*r->w))) == NULL)
		return -1;
	r->w->env = &r->env;
	LG_WJOB(r->w)->pending = r->pending;
	return (r->w->ev = ev_loop_new(EVFLAG_AUTO)) == NULL ? -1 : 0;
}

static void
rig_fini(struct rig *r)
{
	ev_loop_destroy(r->w->ev);
	free(r->w);
	lg_arena_destroy(&r->arena);
}

/* A connection of r's worker in state HEAD holding nothing, with job deadline deadline_ms;
 * freed with free(). */
static struct lg_conn *
rig_conn(struct rig *r, uint64_t deadline_ms)
{
	struct lg_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->w = r->w;
	c->fd = -1;
	c->state = LG_CONN_HEAD;
	ev_init(&c->timer, rig_timer_cb);
	lg_job_ready(c);
	lg_job_set_deadline(c, deadline_ms);
	return c;
}

#endif
