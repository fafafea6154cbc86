/* One proxied request on this loop: the head and body toward the app (through x->out,
 * LG_UP_OBUF bytes: a full buffer stops reading the client), the answer read into x->in and
 * checked by http/resp.c before a byte of it goes on (a full client socket stops reading the
 * app), and the answers lagless writes itself (502, 503, 504). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/share.h"
#include "shm/upeject.h"
#include "worker/core/client.h"
#include "worker/upstream/up_int.h"
#include "worker/upstream/upstream.h"

static void xchg_put(struct lg_up_one *u, struct lg_conn_up *x);
static void send_now(struct lg_conn_up *x);
static void detached_watch(struct lg_conn_up *x);
static int send_step(struct lg_conn_up *x);

/* The app connection's events for what x waits for now. */
static void
upc_watch(struct lg_conn_up *x)
{
	struct lg_upc *uc = x->uc;
	int ev = 0;

	if (uc == NULL)
		return;
	if (uc->state == UPC_CONNECTING)
		ev = EV_WRITE;
	else {
		if (x->out_off < x->out_len || x->body_sent < x->body_len)
			ev |= EV_WRITE;
		if (x->dispatched && x->pend_len == 0 && x->hpend_len == 0 && !x->eof &&
		    x->in_len < sizeof(x->in))
			ev |= EV_READ;
	}
	if (ev_is_active(&uc->io) && uc->io.events == ev)
		return;
	ev_io_stop(uc->w->ev, &uc->io);
	if (ev == 0)
		return;
	/* the same descriptor: ev_io_set would make libev add it to epoll again (EEXIST) */
	ev_io_modify(&uc->io, ev);
	ev_io_start(uc->w->ev, &uc->io);
}

/* The timer for the earliest of the deadline and the phase's limit. */
void
lg_up_arm(struct lg_conn_up *x)
{
	struct ev_loop *ev = x->w->ev;
	ev_tstamp due = x->deadline, now = ev_now(ev);

	if (x->phase_due > 0 && x->phase_due < due)
		due = x->phase_due;
	ev_timer_stop(ev, &x->timer);
	ev_timer_set(&x->timer, due > now ? due - now : 1e-3, 0.);
	ev_timer_start(ev, &x->timer);
}

void
lg_up_tee(struct lg_conn *c, const struct lg_up_tee *t, void *arg, const char *extra)
{
	struct lg_conn_up *x = LG_UP(c)->x;

	x->tee = t;
	x->tee_arg = arg;
	x->tee_extra = extra;
}

void
lg_up_tee_head(struct lg_conn_up *x, const char *head)
{
	if (x->tee != NULL)
		x->tee->head(x->tee_arg, x->resp.status, head, x->resp.fields, x->resp.nfields);
}

void
lg_up_tee_data(struct lg_conn_up *x, const char *p, size_t n)
{
	if (x->tee != NULL && n > 0)
		x->tee->data(x->tee_arg, p, n);
}

int
lg_up_refresh(struct lg_conn *c, const struct lg_route_def *d, const struct lg_up_tee *t,
    void *arg)
{
	struct lg_conn_up *x;

	if (lg_up_head(c, d) != 0)
		return -1; /* refused (counted): the next stale request tries again */
	x = LG_UP(c)->x;
	if (!x->placed || x->uc == NULL) { /* it would wait for a place: not a refresh's to */
		lg_up_free(x, 0);
		return -1;
	}
	x->dispatched = 1;
	send_now(x);
	x->tee = t;
	x->tee_arg = arg;
	LG_UP(c)->x = NULL;
	lg_conn_unhold(c, LG_CONN_HELD_UP);
	c->obs.up_addr = NULL; /* c's answer is not this exchange's */
	if (x->uc->state == UPC_BUSY && x->out_off == x->out_len) {
		lg_up_orphan(x); /* written: the app has it, its answer is read for t */
		return 0;
	}
	x->c = NULL; /* connecting, or written in part: lg_up_detached_io goes on */
	x->orphan = x->detached = 1;
	detached_watch(x);
	return 0;
}

/* A detached refresh waits to write (connecting or a full socket): writable only. */
static void
detached_watch(struct lg_conn_up *x)
{
	ev_io_stop(x->w->ev, &x->uc->io);
	ev_io_modify(&x->uc->io, EV_WRITE);
	ev_io_start(x->w->ev, &x->uc->io);
}

void
lg_up_detached_io(struct lg_conn_up *x, int revents)
{
	struct lg_upc *uc = x->uc;
	const struct lg_upstream_def *u = lg_up_of(x)->def;
	int r;

	if (uc->state == UPC_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(uc->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
			err = errno;
		if (err != 0) { /* its tee is told: nothing came (the refresh backs off) */
			lg_upc_judge(x, uc->si, 0);
			lg_up_free(x, 0);
			return;
		}
		uc->state = UPC_BUSY;
		x->phase = LG_UPR_FIRST_BYTE;
		x->phase_due = ev_now(x->w->ev) + u->first_byte_timeout_ms / 1e3;
		lg_up_arm(x);
	}
	while ((r = send_step(x)) == 1)
		;
	if (r == -1) {
		lg_up_free(x, 0);
		return;
	}
	if (x->out_off < x->out_len) {
		detached_watch(x);
		return;
	}
	x->detached = 0; /* written whole: read as an orphan's */
	lg_up_orphan_event(x, EV_READ);
}

void
lg_up_tee_end(struct lg_conn_up *x, int status)
{
	const struct lg_up_tee *t = x->tee;

	x->tee = NULL; /* once */
	t->end(x->tee_arg, status, 0);
}

void
lg_up_free(struct lg_conn_up *x, int reuse)
{
	struct lg_conn *c = x->c;
	/* The tee's end comes once x is gone: it may answer other connections and send their
	 * requests, which take places and connections x gave back. */
	const struct lg_up_tee *tee = x->tee;
	void *tee_arg = x->tee_arg;
	int tee_status = x->tee_status, tee_mine = x->tee_mine;

	ev_timer_stop(x->w->ev, &x->timer);
	if (x->budget) {
		x->budget = 0;
		lg_upadm_retry_done(lg_up_of(x)->adm, x->w->env->index);
	}
	lg_up_unqueue(x);
	lg_upadm_client_del(lg_up_of(x)->adm, x->client_ref);
	x->client_ref = 0;
	lg_upc_put(x, reuse);   /* kept first: a waiter handed the place may take it */
	free(x->hbuf);
	if (c != NULL) {
		LG_UP(c)->x = NULL;
		lg_conn_unhold(c, LG_CONN_HELD_UP);
	}
	lg_up_release(x);
	xchg_put(lg_up_of(x), x);
	if (tee != NULL)
		tee->end(tee_arg, tee_status, tee_mine);
}

int
lg_up_reusable(const struct lg_conn_up *x)
{
	return lg_resp_done(&x->resp) && x->resp.keep_alive && !x->eof &&
	    x->in_off == x->in_len && x->out_off == x->out_len && x->body_sent == x->body_len &&
	    x->dispatched;
}

static void
count_status(struct lg_conn_up *x, int status)
{
	unsigned k = status >= 100 && status < 600 ? (unsigned)status / 100 : 0;

	atomic_fetch_add(&lg_up_of(x)->adm->requests[k], 1);
}

/* lg_up_fail, or with hold (the app has the request and has not answered yet) the client's
 * answer alone: the exchange goes on as an orphan that keeps its place (lg_up_orphan). */
static int
fail(struct lg_conn_up *x, int status, enum lg_up_reason why, int hold)
{
	struct lg_conn *c = x->c;
	const struct lg_upstream_def *u = lg_up_of(x)->def;

	atomic_fetch_add(&lg_up_of(x)->adm->errors[why], 1);
	lg_up_time(x, &lg_up_of(x)->adm->total, x->arrived);
	lg_up_note_time(x);
	c->obs.up_status = x->head_done ? x->resp.status : 0;
	c->obs.why = lg_up_reason_str(why);
	if (x->started) {
		/* Part of the answer went out: never let it look complete (RFC 9112 8). */
		log_info("upstream %s: %s after the answer's head: closing the client's connection",
		    u->name, lg_up_reason_str(why));
		atomic_fetch_add(&lg_up_of(x)->adm->errors[LG_UPR_TRUNCATED], why !=
		    LG_UPR_TRUNCATED);
		lg_up_free(x, 0);
		lg_conn_close(c);
		return -1;
	}
	log_info("upstream %s: %s (%s): %d", u->name, lg_up_reason_str(why),
	    x->resp.err ? lg_resp_strerror(x->resp.err) : "-", status);
	count_status(x, status);
	x->tee_mine = status;
	int whole = x->dispatched;
	char extra[96]; /* the X-Cache of a coalescing route's answer (static), Retry-After */

	snprintf(extra, sizeof(extra), "%s%s", x->tee_extra ? x->tee_extra : "",
	    status == 503 ? LG_CONN_RETRY_AFTER : "");
	if (hold) {
		LG_UP(c)->x = NULL;
		lg_conn_unhold(c, LG_CONN_HELD_UP);
		lg_up_orphan(x);
	} else {
		lg_up_free(x, 0);
	}
	/* A request whose body was not all read closes with the answer. Outside the core's
	 * process loop (an app's or a timer's event), a request the client pipelined behind this
	 * one left the answer queued for a batch: resumed as the job room resumes after a job's
	 * answer, the answer goes out and the next request is read. */
	if (lg_conn_error(c, status, !whole, extra[0] ? extra : NULL) == 0 &&
	    !c->processing)
		(void)lg_conn_resume(c);
	return -1; /* x is gone (c may live on) */
}

int
lg_up_fail(struct lg_conn_up *x, int status, enum lg_up_reason why)
{
	return fail(x, status, why, 0);
}

static int resend(struct lg_conn_up *x, int moved);

int
lg_up_may_move(struct lg_conn_up *x, enum lg_up_retry why)
{
	struct lg_up_one *u = lg_up_of(x);
	uint32_t bit = why == LG_UPRT_CONNECT ? LG_RETRY_CONNECT : why == LG_UPRT_502 ?
	    LG_RETRY_502 : LG_RETRY_503;

	if (x->moved || !(x->retry_on & bit) || x->compacted || x->started || x->orphan)
		return 0;
	if (!(x->idempotent || x->sent == 0) || (why != LG_UPRT_CONNECT && !x->idempotent))
		return 0; /* RFC 9110 9.2.2: the app may have acted on it */
	if (!lg_upc_other(x->w, x))
		return 0;
	if (!lg_upadm_retry_claim(u->adm, x->w->env->index)) {
		log_debug("upstream %s: retry budget spent: no retry", u->def->name);
		return 0;
	}
	x->budget = 1;
	x->moved = 1;
	atomic_fetch_add(&u->adm->retried[why], 1);
	return 1;
}

/* The app connection failed before the answer's head (reset, closed, write error): sent again
 * once on a new connection when that is safe (RFC 9110 9.2.2: the method is idempotent, or
 * nothing was written), else 502. A fresh connection's failure counts against its server
 * (outlier ejection). Returns 0, or -1 when x is gone. */
static int
conn_fault(struct lg_conn_up *x, enum lg_up_reason why)
{
	struct lg_up_one *u = lg_up_of(x);

	if (!x->reused && x->uc != NULL)
		lg_upc_judge(x, x->uc->si, 0);
	if (x->retried || !x->reused || x->got_bytes || x->compacted ||
	    !(x->idempotent || x->sent == 0))
		return lg_up_fail(x, 502, why);
	log_debug("upstream %s: kept connection failed before an answer: sending again",
	    u->def->name);
	atomic_fetch_add(&u->adm->retried[LG_UPRT_KEPT], 1);
	return resend(x, 0);
}

/* Sends x again from its first byte on a new connection (out still holds all of it): to
 * another server (moved: lg_up_may_move said so), or after a kept connection failed, to any
 * (its server again too). Its deadline and its place are kept. Returns 0, or -1 when x is
 * gone. */
static int
resend(struct lg_conn_up *x, int moved)
{
	struct lg_up_one *u = lg_up_of(x);

	atomic_fetch_add(&u->adm->retries, 1);
	if (!moved && x->uc != NULL)
		x->tried &= ~(1u << x->uc->si); /* its server may take it again */
	lg_upc_put(x, 0);
	x->sends++;
	x->retried = 1; /* on a new connection, never a kept one */
	x->got_bytes = 0;
	x->out_off = 0;
	x->body_sent = 0;
	x->sent = 0;
	x->in_len = x->in_off = 0;
	x->eof = 0;
	lg_resp_start(&x->resp, x->c->http.req.method == HTTP_HEAD);
	if (lg_upc_get(x->c->w, x) == -1)
		return lg_up_fail(x, 502, LG_UPR_CONNECT);
	x->phase = LG_UPR_CONNECT_TIMEOUT;
	x->phase_due = ev_now(x->c->w->ev) + u->def->connect_timeout_ms / 1e3;
	lg_up_arm(x);
	upc_watch(x);
	return 0;
}

/* One send(2) of what x->out holds, else of a buffered body from its transit buffer: 1 when
 * bytes went, 0 when nothing is left or the socket is full (EAGAIN), -1 on a fault (errno). */
static int
send_step(struct lg_conn_up *x)
{
	int head = x->out_off < x->out_len;
	ssize_t n;

	if (!head && x->body_sent >= x->body_len)
		return 0;
	do
		n = send(x->uc->fd, head ? (const void *)(x->out + x->out_off) :
		    (const void *)(x->body + x->body_sent), head ? x->out_len - x->out_off :
		    (size_t)(x->body_len - x->body_sent), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		if (head)
			x->out_off += (size_t)n;
		else
			x->body_sent += (uint64_t)n;
		x->sent += (uint64_t)n;
		return 1;
	}
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
}

/* Writes what x->out holds to the app, then a buffered body from its transit buffer.
 * Returns 0, or -1 when x is gone. */
static int
send_out(struct lg_conn_up *x)
{
	int r;

	while ((r = send_step(x)) == 1)
		;
	return r == -1 ? conn_fault(x, LG_UPR_RESET) : 0;
}

/* The request is whole and its app connection is connected (a kept one): its bytes go now,
 * not a loop turn later when the write watch reports room, so a kept connection's exchange
 * needs no watch change to send (one epoll_ctl(2) and one wake-up fewer). What does not go
 * (a full socket, or a fault, which the write watch meets again and send_out judges as
 * before) waits for the write watch. */
static void
send_now(struct lg_conn_up *x)
{
	if (x->uc == NULL || x->uc->state != UPC_BUSY)
		return;
	while (send_step(x) == 1)
		;
}

/* Reads what the app sent. Returns 0, or -1 when x is gone. */
static int
read_in(struct lg_conn_up *x)
{
	ssize_t n = recv(x->uc->fd, x->in + x->in_len, sizeof(x->in) - x->in_len, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n < 0) {
		if (!x->got_bytes)
			return conn_fault(x, LG_UPR_RESET);
		x->eof = 1; /* a reset mid-answer: what came is checked, then the end is judged */
		return 0;
	}
	if (n == 0) {
		if (!x->got_bytes)
			return conn_fault(x, LG_UPR_RESET);
		x->eof = 1;
		return 0;
	}
	if (!x->got_bytes) {
		x->got_bytes = 1;
		lg_up_time(x, &lg_up_of(x)->adm->first_byte, x->placed_at);
		x->phase_due = 0; /* the first byte came: only the deadline is left */
		lg_up_arm(x);
	}
	x->in_len += (size_t)n;
	return 0;
}

/* Continues reading the client's body once x->out has room again (the parser waits for it:
 * body_room said 0). Returns 0, or -1 when c was closed or finished. */
static int
resume_body(struct lg_conn_up *x)
{
	struct lg_conn *c = x->c;

	if (x->dispatched || !c->http.body_wait || lg_up_body_room(c) == 0)
		return 0;
	return lg_conn_body_ready(c);
}

/* A connect failed or timed out (why) before a byte was sent: counted against its server,
 * then once more on another server when lg_up_may_move allows (retry_on connect-failure),
 * else 502 (504 for a timeout). Returns 0, or -1 when x is gone. */
static int
connect_failed(struct lg_conn_up *x, enum lg_up_reason why)
{
	lg_upc_judge(x, x->uc->si, 0);
	if (!lg_up_may_move(x, LG_UPRT_CONNECT))
		return lg_up_fail(x, why == LG_UPR_CONNECT ? 502 : 504, why);
	return resend(x, 1); /* nothing was sent */
}

int
lg_up_retry_status(struct lg_conn_up *x)
{
	int st = x->resp.status;

	if ((st != 502 && st != 503) || !x->dispatched ||
	    !lg_up_may_move(x, st == 502 ? LG_UPRT_502 : LG_UPRT_503))
		return 0;
	log_debug("upstream %s: %s answered %d: sending to another server",
	    lg_up_of(x)->def->name, lg_up_of(x)->def->servers[x->uc->si].addr, st);
	return resend(x, 1) == 0 ? 1 : -1;
}

void
lg_up_io(struct lg_upc *uc, int revents)
{
	struct lg_conn_up *x = uc->x;

	if (uc->state == UPC_IDLE || x == NULL) {
		lg_upc_idle_event(uc);
		return;
	}
	if (x->detached) {
		lg_up_detached_io(x, revents);
		return;
	}
	if (x->orphan) {
		lg_up_orphan_event(x, revents);
		return;
	}
	if (uc->state == UPC_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(uc->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
			err = errno;
		if (err != 0) {
			log_info("upstream %s: connect to %s: %s", lg_up_of(x)->def->name,
			    lg_up_of(x)->def->servers[uc->si].addr, strerror(err));
			(void)connect_failed(x, LG_UPR_CONNECT);
			return;
		}
		uc->state = UPC_BUSY;
		lg_up_time(x, &lg_up_of(x)->adm->connect, x->connect_at);
		x->phase = LG_UPR_FIRST_BYTE;
		x->phase_due = ev_now(uc->w->ev) + lg_up_of(x)->def->first_byte_timeout_ms / 1e3;
		lg_up_arm(x);
		revents |= EV_WRITE;
	}
	unsigned sends = x->sends;

	if ((revents & EV_WRITE) && send_out(x) == -1)
		return;
	if (x->sends != sends) { /* sent again on a new connection (resend): its events decide */
		upc_watch(x);
		return;
	}
	if ((revents & EV_READ) && (read_in(x) == -1 || lg_up_pump(x) == -1))
		return;
	upc_watch(x);
	(void)resume_body(x);
}

int
lg_up_start(struct lg_conn_up *x)
{
	struct lg_up_one *u = lg_up_of(x);

	x->placed_at = ev_now(x->c->w->ev);
	lg_up_time(x, &u->adm->queue_wait, x->arrived);
	/* It waited: the head says the time left now (nothing but the head is in out yet). */
	if (x->out_off == 0 && lg_up_build_head(x, u->def) == -1)
		return lg_up_fail(x, 502, LG_UPR_INVALID);
	if (lg_upc_get(x->c->w, x) == -1)
		return lg_up_fail(x, 503, LG_UPR_CONNECT);
	if (x->reused) {
		x->phase = LG_UPR_FIRST_BYTE;
		x->phase_due = ev_now(x->c->w->ev) + u->def->first_byte_timeout_ms / 1e3;
	} else {
		x->phase = LG_UPR_CONNECT_TIMEOUT;
		x->phase_due = ev_now(x->c->w->ev) + u->def->connect_timeout_ms / 1e3;
	}
	lg_up_arm(x);
	upc_watch(x);
	return resume_body(x);
}

static void
timer_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_conn_up *x = t->data;
	ev_tstamp now = ev_now(ev);

	if (x->orphan)
		lg_up_orphan_event(x, 0);
	else if (x->queued)
		(void)lg_up_fail(x, 504, LG_UPR_QUEUE_TIMEOUT);
	else if (x->phase_due > 0 && now >= x->phase_due - 1e-3 &&
	    x->phase == LG_UPR_CONNECT_TIMEOUT && x->uc != NULL)
		(void)connect_failed(x, LG_UPR_CONNECT_TIMEOUT);
	else if (x->phase_due > 0 && now >= x->phase_due - 1e-3) {
		if (x->uc != NULL) /* no first byte in time */
			lg_upc_judge(x, x->uc->si, 0);
		(void)lg_up_fail(x, 504, (enum lg_up_reason)x->phase);
	} else if (now >= x->deadline - 1e-3 && lg_up_app_has_it(x)) {
		/* The client's deadline, not the app's: the app goes on with the request, so its
		 * place is held until it answers or its first-byte timeout (no new request is
		 * sent to a stalled app in its stead: up_orphan.c). */
		(void)fail(x, 504, LG_UPR_DEADLINE, 1);
	} else if (now >= x->deadline - 1e-3) {
		if (x->uc != NULL && !x->got_bytes) /* no first byte by the deadline */
			lg_upc_judge(x, x->uc->si, 0);
		(void)lg_up_fail(x, 504, LG_UPR_DEADLINE);
	} else
		lg_up_arm(x);
}

#define UP_SKIP(m) offsetof(struct lg_conn_up, m), sizeof(((struct lg_conn_up *)0)->m)
_Static_assert(offsetof(struct lg_conn_up, out) < offsetof(struct lg_conn_up, fields) &&
    offsetof(struct lg_conn_up, fields) < offsetof(struct lg_conn_up, in),
    "xchg_alloc skips out, fields and in in this order");

/* A new exchange's memory (a block of u's pool), every member zero but the buffers
 * out and in and the field index (52 KiB of the 55: each is written before it is read,
 * out_len, in_len and resp.nfields saying how much). calloc wrote every page of them for each
 * request: most of a proxied request's instructions and, as the heap's top was trimmed and
 * grown again, a brk and page faults every other request (bench/bench_proxy.py, 13a).
 * Returns NULL out of memory. */
static struct lg_conn_up *
xchg_alloc(struct lg_up_one *u)
{
	static const size_t skip[][2] = { { UP_SKIP(out) }, { UP_SKIP(fields) }, { UP_SKIP(in) } };
	struct lg_conn_up *x;
	size_t at = 0;

	if (u->xpool.size == 0)
		lg_pool_init(&u->xpool, sizeof(*x), LG_UP_XKEEP);
	if ((x = lg_pool_get(&u->xpool)) == NULL)
		return NULL;
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
		memset((char *)x + at, 0, skip[i][0] - at);
		at = skip[i][0] + skip[i][1];
	}
	memset((char *)x + at, 0, sizeof(*x) - at);
	return x;
}

/* Gives x's memory back to u's pool (the ASan build poisons it there). */
static void
xchg_put(struct lg_up_one *u, struct lg_conn_up *x)
{
	lg_pool_put(&u->xpool, x);
}

/* A new exchange for c to upstream ui, its deadline deadline_ms from the request's arrival. */
static struct lg_conn_up *
xchg_new(struct lg_conn *c, uint32_t ui, uint64_t deadline_ms, uint32_t retry_on)
{
	struct lg_conn_up *x = xchg_alloc(&LG_WUP(c->w)->ups[ui]);
	const struct lg_http_req *r = &c->http.req;
	ev_tstamp at = c->tmo.req_at > 0 ? c->tmo.req_at : ev_now(c->w->ev);

	if (x == NULL)
		return NULL;
	x->c = c;
	x->w = c->w;
	x->ui = ui;
	x->retry_on = retry_on;
	x->deadline = at + deadline_ms / 1e3;
	x->arrived = at;
	x->has_body = r->chunked || (r->content_length != LG_HTTP_NO_LENGTH &&
	    r->content_length > 0);
	x->chunked = r->chunked;
	x->idempotent = r->method == HTTP_GET || r->method == HTTP_HEAD || r->method == HTTP_PUT ||
	    r->method == HTTP_DELETE || r->method == HTTP_OPTIONS || r->method == HTTP_TRACE;
	x->lim.max_head = sizeof(x->in);
	x->lim.max_fields = LG_UP_FIELDS;
	lg_resp_init(&x->resp, &x->lim, x->fields);
	lg_resp_start(&x->resp, r->method == HTTP_HEAD);
	ev_init(&x->timer, timer_cb);
	x->timer.data = x;
	return x;
}

/* Counts a refusal (status) lagless answered for upstream u itself (why: full, shed, connect,
 * client_limit); c's access line says why. */
static void
count_refused(struct lg_conn *c, struct lg_up_one *u, enum lg_up_reason why, int status)
{
	atomic_fetch_add(&u->adm->errors[why], 1);
	atomic_fetch_add(&u->adm->requests[status / 100], 1);
	c->obs.why = lg_up_reason_str(why);
}

/* 1 when c's client address (lg_client_addr: the trusted proxy's client) already has its
 * share of upstream u at the app or in its queue (client_share), with *tag set; 0 otherwise
 * (the share off, a unix-socket peer: *tag 0). */
static int
client_over(struct lg_conn *c, const struct lg_up_one *u, uint32_t *tag)
{
	struct sockaddr_storage ss;
	socklen_t len;
	uint32_t limit = lg_upstream_client_limit(u->def);

	*tag = 0;
	if (limit == 0 || lg_client_addr(c, &ss, &len) == -1)
		return 0;
	*tag = lg_share_tag((struct sockaddr *)&ss, len);
	return *tag != 0 && lg_upadm_client_count(u->adm, *tag) >= limit;
}

/* 1 when record a has every place taken and its queue full. */
static int
gate_full(const struct lg_upadm *a)
{
	uint32_t inflight, queued;

	lg_upadm_counts(a, &inflight, &queued);
	return inflight >= a->max_conns && queued >= a->queue;
}

int
lg_up_full(struct lg_conn *c, const struct lg_route_def *d)
{
	struct lg_up_one *u = &LG_WUP(c->w)->ups[d->upstream - 1];
	struct lg_up_gate *bh = lg_up_bulkhead(c->w, d->bulkhead);
	uint32_t tag;

	if (client_over(c, u, &tag)) {
		count_refused(c, u, LG_UPR_CLIENT_LIMIT, (int)u->def->client_limit_status);
		return (int)u->def->client_limit_status;
	}
	if (!gate_full(u->adm) && (bh == NULL || !gate_full(bh->adm)))
		return 0;
	if (bh != NULL && gate_full(bh->adm))
		atomic_fetch_add(&bh->adm->errors[LG_UPR_FULL], 1);
	count_refused(c, u, LG_UPR_FULL, 503);
	return 503;
}

static int admit(struct lg_conn *c, struct lg_conn_up *x);

int
lg_up_head(struct lg_conn *c, const struct lg_route_def *d)
{
	struct lg_up_one *u = &LG_WUP(c->w)->ups[d->upstream - 1];
	struct lg_conn_up *x = xchg_new(c, d->upstream - 1, d->deadline_ms, d->retry_on);

	if (x == NULL)
		return 503;
	x->bh = lg_up_bulkhead(c->w, d->bulkhead);
	if (lg_up_build_head(x, u->def) == -1) {
		xchg_put(u, x);
		return 431;
	}
	return admit(c, x);
}

int
lg_up_head_body(struct lg_conn *c, const struct lg_route_def *d, const unsigned char *body,
    uint64_t len)
{
	struct lg_up_one *u = &LG_WUP(c->w)->ups[d->upstream - 1];
	struct lg_conn_up *x = xchg_new(c, d->upstream - 1, d->deadline_ms, d->retry_on);
	int st;

	if (x == NULL)
		return 503;
	x->bh = lg_up_bulkhead(c->w, d->bulkhead);
	x->arrived = ev_now(c->w->ev); /* the request reaches the app's side now, whole */
	x->deadline = x->arrived + d->deadline_ms / 1e3;
	x->buffered = 1;
	x->body = body;
	x->body_len = len;
	x->has_body = len > 0;
	x->chunked = 0;
	if (lg_up_build_head(x, u->def) == -1) {
		xchg_put(u, x);
		return 431;
	}
	if ((st = admit(c, x)) != 0)
		return st;
	(void)lg_up_dispatch(c); /* whole: the answer is awaited (state PROXY) */
	return 0;
}

/* The queue wait of x from its arrival to now, in ns. */
static uint64_t
waited_ns(const struct lg_conn_up *x)
{
	ev_tstamp d = ev_now(x->w->ev) - x->arrived;

	return d > 0 ? (uint64_t)(d * 1e9) : 0;
}

/* x (holding its bulkhead's place, if its route has one) asks its upstream for a place: it
 * starts at once (a connection, the head on its way), waits in the upstream's FIFO, or is
 * refused: CoDel's verdict (a standing queue: shed), every place and the queue taken (full),
 * or no server reachable (connect). Returns 0, or 503 with *why (the caller answers and frees
 * x, which may hold an in-flight place then). */
static int
claim_upstream(struct lg_conn_up *x, enum lg_up_reason *why)
{
	struct lg_up_one *u = lg_up_of(x);
	struct lg_worker *w = x->w;

	/* CoDel off (no target): no clock read, nothing shared touched. */
	int codel = u->codel.target_ns > 0;

	if (codel && lg_codel_refuse(&u->adm->codel, &u->codel, lg_now_ns(),
	    lg_upadm_queued_floor, u->adm)) {
		*why = LG_UPR_SHED;
		return 503;
	}
	switch (lg_upadm_claim(u->adm, w->env->index)) {
	case LG_UPADM_FULL:
		*why = LG_UPR_FULL;
		return 503;
	case LG_UPADM_WAIT:
		lg_up_enqueue(x, &u->g);
		lg_up_arm(x);
		return 0;
	}
	x->placed = 1;
	x->placed_at = ev_now(w->ev);
	lg_up_time(x, &u->adm->queue_wait, x->arrived);
	if (codel)
		lg_codel_sample(&u->adm->codel, &u->codel, waited_ns(x), lg_now_ns(),
		    lg_upadm_queued_floor, u->adm);
	if (lg_upc_get(w, x) == -1) {
		*why = LG_UPR_CONNECT;
		return 503;
	}
	x->phase = x->reused ? LG_UPR_FIRST_BYTE : LG_UPR_CONNECT_TIMEOUT;
	x->phase_due = ev_now(w->ev) + (x->reused ? u->def->first_byte_timeout_ms :
	    u->def->connect_timeout_ms) / 1e3;
	lg_up_arm(x);
	upc_watch(x);
	return 0;
}

/* x, new for c's request, is counted for its client address (client_share: refused past it),
 * takes its bulkhead's place (or waits in its FIFO), then its upstream's (claim_upstream).
 * Returns 0, or the status refusing it (503; 429 by client_limit_status) with x freed
 * (counted). */
static int
admit(struct lg_conn *c, struct lg_conn_up *x)
{
	struct lg_up_one *u = lg_up_of(x);
	enum lg_up_reason why = LG_UPR_FULL;
	int st = 0;

	LG_UP(c)->x = x;
	lg_conn_hold(c, LG_CONN_HELD_UP);
	uint32_t tag;

	if (client_over(c, u, &tag)) {
		why = LG_UPR_CLIENT_LIMIT;
		st = (int)u->def->client_limit_status;
	} else if (tag != 0) {
		x->client_ref = lg_upadm_client_add(u->adm, c->w->env->index, tag);
	}
	if (st == 0 && x->bh != NULL) {
		switch (lg_upadm_claim(x->bh->adm, c->w->env->index)) {
		case LG_UPADM_FULL:
			atomic_fetch_add(&x->bh->adm->errors[LG_UPR_FULL], 1);
			st = 503;
			break;
		case LG_UPADM_WAIT:
			lg_up_enqueue(x, x->bh);
			lg_up_arm(x);
			return 0;
		default:
			x->bh_placed = 1;
		}
	}
	if (st == 0 && (st = claim_upstream(x, &why)) == 0)
		return 0;
	lg_up_time(x, &u->adm->total, x->arrived);
	count_refused(c, u, why, st);
	lg_up_free(x, 0);
	return st;
}

int
lg_up_bulkhead_placed(struct lg_conn_up *x)
{
	enum lg_up_reason why;

	if (claim_upstream(x, &why) == 0)
		return 0;
	return lg_up_fail(x, 503, why);
}

int
lg_up_dequeued(struct lg_conn_up *x)
{
	struct lg_up_one *u = lg_up_of(x);
	uint64_t wait, now;

	if (u->codel.target_ns == 0)
		return lg_up_start(x);
	wait = waited_ns(x);
	now = lg_now_ns();

	/* Facebook's rule (shm/codel.h): past the target while overloaded, past the interval
	 * otherwise, the place goes to a younger request instead. */
	if (lg_codel_shed(&u->adm->codel, &u->codel, wait, now, lg_upadm_queued_floor, u->adm))
		return lg_up_fail(x, 503, LG_UPR_SHED);
	lg_codel_sample(&u->adm->codel, &u->codel, wait, now, lg_upadm_queued_floor, u->adm);
	return lg_up_start(x);
}

int
lg_up_body(struct lg_conn *c, const char *at, size_t len)
{
	struct lg_conn_up *x = LG_UP(c)->x;

	if (x->chunked) {
		x->out_len += (size_t)snprintf(x->out + x->out_len, sizeof(x->out) - x->out_len,
		    "%zx\r\n", len);
	}
	memcpy(x->out + x->out_len, at, len);
	x->out_len += len;
	if (x->chunked) {
		memcpy(x->out + x->out_len, "\r\n", 2);
		x->out_len += 2;
	}
	if (x->phase == LG_UPR_FIRST_BYTE && x->phase_due > 0) /* counts from the request's end */
		x->phase_due = ev_now(c->w->ev) + lg_up_of(x)->def->first_byte_timeout_ms / 1e3;
	upc_watch(x);
	return 0;
}

/* Room kept in x->out for a chunk's framing and the last chunk. */
#define FRAMING_ROOM 64

size_t
lg_up_body_room(struct lg_conn *c)
{
	struct lg_conn_up *x = LG_UP(c)->x;
	size_t room;

	if (!x->placed || x->uc == NULL)
		return 0;
	if (x->out_off == x->out_len && x->out_len > 0) {
		x->out_off = x->out_len = 0; /* all sent: the buffer starts again */
		x->compacted = 1;
	}
	room = sizeof(x->out) - x->out_len;
	return room > FRAMING_ROOM ? room - FRAMING_ROOM : 0;
}

int
lg_up_dispatch(struct lg_conn *c)
{
	struct lg_conn_up *x = LG_UP(c)->x;

	x->dispatched = 1;
	if (x->chunked) {
		memcpy(x->out + x->out_len, "0\r\n\r\n", 5);
		x->out_len += 5;
	}
	lg_conn_stream_begin(c);
	send_now(x);
	upc_watch(x);
	return 0;
}

int
lg_up_stream(struct lg_conn *c)
{
	struct lg_conn_up *x = LG_UP(c)->x;

	if (x == NULL)
		return 0;
	if (lg_up_pump(x) == -1)
		return -1;
	upc_watch(x);
	return 0;
}

void
lg_up_gone(struct lg_conn *c)
{
	struct lg_conn_up *x = LG_UP(c)->x;

	if (x == NULL)
		return;
	atomic_fetch_add(&lg_up_of(x)->adm->errors[LG_UPR_CLIENT_GONE], 1);
	lg_up_time(x, &lg_up_of(x)->adm->total, x->arrived);
	if (x->placed && x->uc != NULL && x->sent > 0 && !lg_resp_done(&x->resp)) {
		LG_UP(c)->x = NULL; /* c may live on (a refusal's lingering close) */
		lg_conn_unhold(c, LG_CONN_HELD_UP);
		lg_up_orphan(x); /* the app works on it: its place is kept until it answered */
		return;
	}
	/* Nothing reached the app (queued, connecting, not yet written), or its answer came
	 * whole (the place went back then): the app has no work left for it. */
	lg_up_free(x, lg_up_reusable(x));
}
