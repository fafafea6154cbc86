/* App connections of this loop worker: non-blocking connects (unix and TCP) and a keep-alive
 * pool per server. A kept connection is watched for reading while idle, so one the app closed
 * (or that sent bytes nobody asked for) is noticed and dropped, never reused. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/arena.h"
#include "shm/layout.h"
#include "shm/upeject.h"
#include "worker/core/env.h"
#include "worker/upstream/up_int.h"

static void
upc_io_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	lg_up_io(io->data, revents);
}

static void
unlink_idle(struct lg_upc *uc)
{
	struct lg_up_srv *s = &LG_WUP(uc->w)->ups[uc->ui].srv[uc->si];

	if (uc->prev)
		uc->prev->next = uc->next;
	else
		s->idle = uc->next;
	if (uc->next)
		uc->next->prev = uc->prev;
	uc->prev = uc->next = NULL;
	s->nidle--;
	atomic_fetch_sub(&LG_WUP(uc->w)->ups[uc->ui].adm->idle[uc->w->env->index], 1);
}

static void
upc_close(struct lg_upc *uc)
{
	struct lg_worker *w = uc->w;
	struct lg_up_one *u = &LG_WUP(w)->ups[uc->ui];

	if (uc->state == UPC_IDLE)
		unlink_idle(uc);
	else {
		u->srv[uc->si].nbusy--;
		atomic_fetch_sub(&u->adm->busy[w->env->index], 1);
	}
	ev_io_stop(w->ev, &uc->io);
	close(uc->fd);
	free(uc);
}

/* The servers of u that may be sent to, bit i for server i: all of them, or for an upstream
 * that takes an app's processes (def->app) those whose process runs and passed its readiness
 * probe, as the master publishes them in this generation's page (shm/layout.h lg_app_row);
 * none while the page has no row for the app. */
static uint32_t
ready_servers(const struct lg_worker *w, const struct lg_up_one *u)
{
	const struct lg_master_page *mp = w->env->arena->master;
	uint32_t n;

	if (u->def->app[0] == '\0')
		return UINT32_MAX;
	n = atomic_load_explicit(&mp->napps, memory_order_acquire);
	for (uint32_t i = 0; i < n && i < LG_APP_ROWS; i++)
		if (strncmp(mp->apps[i].name, u->def->app, sizeof(mp->apps[i].name)) == 0)
			return atomic_load_explicit(&mp->apps[i].ready_mask, memory_order_relaxed);
	return 0;
}

/* The server of u for a request that tried the servers of mask tried: among the ready ones
 * in the rotation (not ejected: shm/upeject.h) and not tried, the one with the fewest requests
 * in flight from this loop, ties taken in turn from u->rr on (nginx's least_conn, HAProxy's
 * leastconn: sequential requests to idle servers are spread, not all sent to the first); for
 * a first try when every ready one is ejected (an app's processes not ready), the least busy
 * ready one; UINT32_MAX when none. */
static uint32_t
pick_server(const struct lg_worker *w, const struct lg_up_one *u, uint32_t tried)
{
	uint32_t best = UINT32_MAX, ready = ready_servers(w, u) & ~tried;
	uint32_t ok = ready & ~lg_upadm_ejected(u->adm), n = u->def->nservers;

	if (ok == 0 && tried == 0)
		ok = ready;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (u->rr + k) % n;

		if ((ok & (1u << i)) && (best == UINT32_MAX || u->srv[i].nbusy < u->srv[best].nbusy))
			best = i;
	}
	return best;
}

int
lg_upc_other(struct lg_worker *w, const struct lg_conn_up *x)
{
	return pick_server(w, &LG_WUP(w)->ups[x->ui], x->tried) != UINT32_MAX;
}

/* x leaves the in-flight count of the server it was taken for, if it is in one. */
static void
unhold(struct lg_conn_up *x)
{
	if (x->held_si != 0) {
		lg_upadm_srv_put(lg_up_of(x)->adm, x->held_si - 1, x->w->env->index);
		x->held_si = 0;
	}
}

/* The server x is sent to: the least busy of the rotation whose run of failures the requests
 * in flight to it cannot carry to an ejection (shm/upeject.h lg_upadm_srv_take), else the
 * least busy (forced); its place taken. UINT32_MAX when none (as pick_server). */
static uint32_t
take_server(struct lg_worker *w, struct lg_conn_up *x)
{
	struct lg_up_one *u = &LG_WUP(w)->ups[x->ui];
	uint32_t held = 0, si;

	for (;;) {
		si = pick_server(w, u, x->tried | held);
		if (si == UINT32_MAX)
			break;
		if (lg_upadm_srv_take(u->adm, si, w->env->index, 0)) {
			x->held_si = si + 1;
			u->rr = si + 1;
			return si;
		}
		held |= 1u << si;
	}
	if (held == 0 || (si = pick_server(w, u, x->tried)) == UINT32_MAX)
		return UINT32_MAX;
	lg_upadm_srv_take(u->adm, si, w->env->index, 1);
	x->held_si = si + 1;
	u->rr = si + 1;
	return si;
}

void
lg_upc_judge(struct lg_conn_up *x, uint32_t si, int ok)
{
	const struct lg_up_one *u = lg_up_of(x);
	uint64_t ms;

	unhold(x);
	if (ok) {
		lg_upadm_srv_ok(u->adm, si);
		return;
	}
	if ((ms = lg_upadm_srv_fail(u->adm, si, lg_now_ns() / LG_NS_PER_MS)) > 0)
		log_warn("upstream %s: server %s ejected for %llu ms after %s (ejection %u in a "
		    "row)", u->def->name, u->def->servers[si].addr, (unsigned long long)ms,
		    u->adm->eject_after > 1 ? "failures in a row" : "a failure",
		    atomic_load(&u->adm->srv[si].times));
}

void
lg_upc_eject_sweep(struct lg_worker *w)
{
	uint64_t now = lg_now_ns() / LG_NS_PER_MS;

	for (uint32_t i = 0; i < LG_WUP(w)->n; i++) {
		const struct lg_up_one *u = &LG_WUP(w)->ups[i];
		uint32_t back = lg_upadm_ejected(u->adm) ? lg_upadm_eject_sweep(u->adm, now) : 0;

		for (uint32_t si = 0; back != 0 && si < u->def->nservers; si++)
			if (back & (1u << si))
				log_warn("upstream %s: server %s back in the rotation after its "
				    "back-off (one failure ejects it again)", u->def->name,
				    u->def->servers[si].addr);
	}
}

/* A new connection to server si of u, connecting. Returns it, or NULL (errno). */
static struct lg_upc *
upc_connect(struct lg_worker *w, uint32_t ui, uint32_t si)
{
	struct lg_up_one *u = &LG_WUP(w)->ups[ui];
	const struct lg_upstream_server *s = &u->def->servers[si];
	struct lg_upc *uc = calloc(1, sizeof(*uc));
	int one = 1;

	if (uc == NULL)
		return NULL;
	uc->fd = socket(s->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (uc->fd < 0) {
		free(uc);
		return NULL;
	}
	if (s->sa.ss_family != AF_UNIX)
		(void)setsockopt(uc->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(uc->fd, (const struct sockaddr *)&s->sa, s->salen) == -1 &&
	    errno != EINPROGRESS) {
		int e = errno;

		close(uc->fd);
		free(uc);
		errno = e;
		return NULL;
	}
	uc->w = w;
	uc->ui = ui;
	uc->si = si;
	uc->state = UPC_CONNECTING;
	ev_io_init(&uc->io, upc_io_cb, uc->fd, EV_WRITE);
	uc->io.data = uc;
	ev_io_start(w->ev, &uc->io);
	u->srv[si].nbusy++;
	atomic_fetch_add(&u->adm->busy[w->env->index], 1);
	atomic_fetch_add(&u->adm->conns_opened, 1);
	return uc;
}

int
lg_upc_get(struct lg_worker *w, struct lg_conn_up *x)
{
	struct lg_up_one *u = &LG_WUP(w)->ups[x->ui];

	for (;;) {
		uint32_t si = take_server(w, x);
		struct lg_up_srv *s;
		struct lg_upc *uc;

		if (si == UINT32_MAX)
			return -1; /* no process of its app is ready, or every server tried */
		s = &u->srv[si];
		uc = s->idle;
		x->tried |= 1u << si;
		if (uc != NULL && !x->retried) {
			unlink_idle(uc);
			uc->state = UPC_BUSY;
			s->nbusy++;
			atomic_fetch_add(&u->adm->busy[w->env->index], 1);
			x->reused = 1;
		} else if ((uc = upc_connect(w, x->ui, si)) == NULL) {
			log_info("upstream %s: connect to %s failed: %s", u->def->name,
			    u->def->servers[si].addr, strerror(errno));
			lg_upc_judge(x, si, 0);
			if (!lg_up_may_move(x, LG_UPRT_CONNECT))
				return -1;
			atomic_fetch_add(&u->adm->retries, 1);
			continue;
		} else {
			x->reused = 0;
			x->connect_at = ev_now(w->ev);
		}
		uc->x = x;
		uc->nreq++;
		x->uc = uc;
		x->c->obs.up_addr = u->def->servers[si].addr; /* the access line's (static) */
		x->c->obs.up_status = 0;
		return 0;
	}
}

void
lg_upc_put(struct lg_conn_up *x, int reuse)
{
	struct lg_upc *uc = x->uc;
	struct lg_worker *w;
	struct lg_up_one *u;
	struct lg_up_srv *s;

	unhold(x); /* an exchange that ends unjudged (its client gone, a drain) */
	if (uc == NULL)
		return;
	x->uc = NULL;
	uc->x = NULL;
	w = uc->w;
	u = &LG_WUP(w)->ups[uc->ui];
	s = &u->srv[uc->si];
	if (!reuse || uc->state != UPC_BUSY || w->draining || s->nidle >= u->def->keepalive ||
	    uc->nreq >= u->def->max_requests) {
		upc_close(uc);
		return;
	}
	s->nbusy--;
	atomic_fetch_sub(&u->adm->busy[w->env->index], 1);
	uc->state = UPC_IDLE;
	uc->idle_since = ev_now(w->ev);
	uc->prev = NULL;
	uc->next = s->idle;
	if (s->idle)
		s->idle->prev = uc;
	s->idle = uc;
	s->nidle++;
	atomic_fetch_add(&u->adm->idle[w->env->index], 1);
	ev_io_stop(w->ev, &uc->io);
	/* an idle app connection that reads is closing; the same descriptor, so its events
	 * change (ev_io_set would make libev add it to epoll again, refused: EEXIST) */
	ev_io_modify(&uc->io, EV_READ);
	ev_io_start(w->ev, &uc->io);
}

void
lg_upc_idle_event(struct lg_upc *uc)
{
	upc_close(uc);
}

void
lg_upc_sweep(struct lg_worker *w, int force)
{
	ev_tstamp now = ev_now(w->ev);

	for (uint32_t i = 0; i < LG_WUP(w)->n; i++) {
		struct lg_up_one *u = &LG_WUP(w)->ups[i];

		for (uint32_t si = 0; si < u->def->nservers; si++) {
			struct lg_upc *uc = u->srv[si].idle, *next;

			for (; uc != NULL; uc = next) {
				next = uc->next;
				if (force || now - uc->idle_since >= u->def->idle_timeout_ms / 1e3)
					upc_close(uc);
			}
		}
	}
}
