/* Idle connections: what a keep-alive connection holds between requests, and the pool its
 * buffers come from while bytes are in flight (worker/core/conn.h lg_conn_start, lg_conn_tick,
 * lg_conn_drain are the public side). nginx frees an idle keep-alive connection's request
 * buffers and h2o recycles its socket buffers; here an idle connection keeps a struct
 * lg_conn_idle (~140 bytes: socket, read watcher, timer) and its struct lg_conn (~33 KiB of
 * address space, its touched pages resident) goes back to the loop worker's pool. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/core/conn.h"
#include "worker/core/conn_int.h"
#include "worker/core/conn_timer.h"
#include "worker/observe.h"

/* An idle connection (worker/core/conn.h lg_conn_start): what it holds between requests. */
struct lg_conn_idle {
	struct lg_worker *w;
	struct lg_conn_idle *prev, *next;
	ev_io io;
	ev_timer timer;    /* keep-alive idle limit, the first head's deadline, or the drain's */
	ev_tstamp req_at;  /* accept time while nothing was received yet, else 0 */
	int fd;
};

static void idle_io_cb(struct ev_loop *ev, ev_io *io, int revents);
static void idle_timer_cb(struct ev_loop *ev, ev_timer *t, int revents);

/* Makes fd an idle connection whose timer fires after `after` seconds; fresh: fd was just
 * accepted (else a busy connection watched it until now). */
static struct lg_conn_idle *
idle_start(struct lg_worker *w, int fd, ev_tstamp req_at, double after, int fresh)
{
	struct lg_conn_idle *s = malloc(sizeof(*s));

	if (s == NULL)
		return NULL;
	s->w = w;
	s->fd = fd;
	s->req_at = req_at;
	s->prev = NULL;
	s->next = w->idle;
	if (w->idle)
		w->idle->prev = s;
	w->idle = s;
	if (fresh)
		ev_io_init(&s->io, idle_io_cb, fd, EV_READ);
	else
		lg_conn_io_move(&s->io, idle_io_cb, fd, EV_READ);
	s->io.data = s;
	ev_timer_init(&s->timer, idle_timer_cb, after > 1e-3 ? after : 1e-3, 0.);
	s->timer.data = s;
	ev_io_start(w->ev, &s->io);
	ev_timer_start(w->ev, &s->timer);
	return s;
}

/* Forgets s; its socket stays open unless the caller closes it. */
static void
idle_free(struct lg_conn_idle *s)
{
	struct lg_worker *w = s->w;

	ev_io_stop(w->ev, &s->io);
	ev_timer_stop(w->ev, &s->timer);
	if (s->prev)
		s->prev->next = s->next;
	else
		w->idle = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

/* Idle limit, first head deadline or drain: a connection with nothing of a request received is
 * closed without an answer. */
static void
idle_timer_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_conn_idle *s = t->data;
	struct lg_worker *w = s->w;

	close(s->fd);
	idle_free(s);
	lg_conn_gone(w);
}

/* Bytes (or EOF) on an idle connection: it takes a struct lg_conn from the pool and reads. */
static void
idle_io_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	struct lg_conn_idle *s = io->data;
	struct lg_worker *w = s->w;
	struct lg_conn *c = lg_pool_get(lg_conn_pool(w));

	lg_obs_cb_begin(w, NULL);
	if (c == NULL) {
		log_warn("no memory for a connection's buffers: closing fd %d", s->fd);
		close(s->fd);
		idle_free(s);
		lg_conn_gone(w);
	} else {
		int fd = s->fd;
		ev_tstamp req_at = s->req_at;

		idle_free(s); /* stops its watchers first: the fd's epoll mask stays as it is */
		lg_conn_wake(c, w, fd, req_at, revents);
	}
	lg_obs_cb_end(w, "connection I/O");
}

int
lg_conn_start(struct lg_worker *w, int fd)
{
	const struct lg_config *cfg = w->env->cfg;
	ev_tstamp now = ev_now(w->ev);

	/* the head deadline of the first request runs from accept */
	if (idle_start(w, fd, now, cfg->http.head_timeout_ms / 1e3, 1) == NULL) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	w->nconns++;
	lg_obs_conns(w);
	return 0;
}

/* Nothing of a request is buffered or queued, no slot or rendered body is held: c's memory can
 * go back to the pool. */
static int
is_idle(const struct lg_conn *c)
{
	return c->state == LG_CONN_HEAD && c->rlen == 0 && !lg_obs_in_request(&c->obs) &&
	    c->out.whead_len == 0 && !(c->held & LG_CONN_HELD_BUFFER) && c->out.wbody_owned == NULL &&
	    !c->close_after && c->http.frame.head_bytes == 0 && c->cont_off == 0;
}

/* c becomes an idle connection with the time its timer had left. */
static void
to_idle(struct lg_conn *c)
{
	struct lg_worker *w = c->w;
	double left = ev_is_active(&c->timer) ? lg_conn_timer_left(c) :
	    w->env->cfg->conn.keepalive_timeout_ms / 1e3;

	ev_io_stop(w->ev, &c->io); /* before the idle watcher starts: the epoll mask is kept */
	if (idle_start(w, c->fd, c->tmo.req_at, left, 0) == NULL) {
		ev_io_start(w->ev, &c->io);
		return; /* stays as it is; tried again next tick */
	}
	ev_timer_stop(w->ev, &c->timer);
	lg_conn_free(c);
}

void
lg_conn_tick(struct lg_worker *w)
{
	struct lg_conn *c, *next;

	for (c = w->conns; c != NULL; c = next) {
		next = c->next;
		if (!is_idle(c))
			c->tmo.idle_ticks = 0;
		else if (++c->tmo.idle_ticks >= 2) /* idle through a whole tick: 100 to 200 ms */
			to_idle(c);
	}
	lg_pool_trim(lg_conn_pool(w));
	lg_pool_trim(lg_conn_rbuf_pool(w));
	lg_obs_conn_buffers(w, lg_conn_pool(w));
}

void
lg_conn_drain(struct lg_worker *w)
{
	struct lg_conn_idle *s, *snext;
	struct lg_conn *c, *next;

	for (s = w->idle; s != NULL; s = snext) {
		snext = s->next;
		if (ev_timer_remaining(w->ev, &s->timer) > LG_CONN_DRAIN_IDLE_MS / 1000.) {
			ev_timer_stop(w->ev, &s->timer);
			ev_timer_set(&s->timer, LG_CONN_DRAIN_IDLE_MS / 1000., 0.);
			ev_timer_start(w->ev, &s->timer);
		}
	}
	for (c = w->conns; c != NULL; c = next) {
		next = c->next;
		/* idle: between requests, no byte of the next one received (a parsed part
		 * of a head leaves rlen at 0, but req_start_ns says a request began) */
		if (c->state == LG_CONN_HEAD && c->rlen == 0 && !lg_obs_in_request(&c->obs))
			lg_conn_drain_idle(c);
		else if (c->state == LG_CONN_LINGER)
			lg_conn_drain_linger(c);
	}
}
