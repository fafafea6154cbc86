/* Tunnels: an upgrade request (http/fwd.h lg_fwd_upgrade_request: WebSocket, RFC 6455 4.1) the
 * app accepted with 101 Switching Protocols (RFC 9110 15.2.2, 7.8). The 101 goes to the client,
 * then the bytes of both sockets are relayed unchanged, as nginx's upstream upgrade handler and
 * HAProxy's tunnel mode do:
 *
 * - through the exchange's own two buffers, fixed in size (x->out toward the app, x->in toward
 *   the client): a side is read only while its buffer has room, so a peer that does not read
 *   stops the other side instead of growing memory (backpressure);
 * - one side's EOF ends the other's writing once what it sent is written (shutdown(2)
 *   SHUT_WR, a half-close relayed); both ended, the tunnel closes; a reset or write error on
 *   either side closes both;
 * - no byte either way for the upstream's tunnel_idle_timeout_ms closes both;
 * - the exchange is kept until the close, holding its in-flight place (the upstream's
 *   max_conns counts tunnels) and its app connection, which is closed with it, never kept;
 * - the client's socket is the core's no more (lg_conn_detach) but stays counted among the
 *   loop's connections, so a draining loop waits for its tunnels; they close at 90% of
 *   --drain-timeout-ms, before the master's SIGKILL.
 *
 * One loop per process (prefork), so this loop's tunnels are a list of this file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/log.h"
#include "http/fwd.h"
#include "worker/upstream/up_int.h"
#include "worker/upstream/upstream.h"

enum { TO_APP = 0, TO_CLIENT = 1 };

/* One direction's bytes: buf[off..len) read from one side, not yet written to the other. */
struct tun_dir {
	char *buf;
	size_t cap, off, len;
	int eof;                      /* the source side sent its FIN */
	int shut;                     /* the destination's writing was ended (SHUT_WR) */
};

struct lg_up_tunnel {
	struct lg_conn_up *x;         /* kept: its place, its app connection, its buffers */
	struct lg_worker *w;
	int fd[2];                    /* [TO_APP]: the app's socket, [TO_CLIENT]: the client's */
	ev_io io[2];                  /* watchers of fd[TO_APP] and fd[TO_CLIENT] */
	ev_timer timer;               /* idle timeout and the drain's end */
	struct tun_dir d[2];          /* d[TO_APP]: client to app, d[TO_CLIENT]: app to client */
	const char *pre;              /* the 101 head, written to the client before d[TO_CLIENT] */
	size_t pre_len;
	ev_tstamp last;               /* a byte moved either way */
	struct lg_up_tunnel *prev, *next;
};

static struct lg_up_tunnel *tunnels; /* this loop's, open */
static ev_tstamp drain_due;          /* > 0 once the loop drains: every tunnel closes then */

/* Passes to relay per event at most: a fast pair yields to the loop's other work, and the
 * level-triggered watchers call again. */
#define TUN_PASSES 16

/* The 101 for the client from the app's head (hlen bytes of x->in): its status line, its
 * fields but the hop-by-hop and framing ones, its Upgrade kept, and Connection: upgrade
 * (RFC 9110 7.6.1, 7.8). Into x->hbuf. Returns its length, or -1 out of memory. */
static ssize_t
switch_head(struct lg_conn_up *x, size_t hlen)
{
	const struct lg_resp *r = &x->resp;
	char *b = malloc(hlen + 64);
	size_t n;

	if (b == NULL)
		return -1;
	memcpy(b, "HTTP/1.1 101 ", 13);
	n = 13;
	memcpy(b + n, x->in + r->reason.off, r->reason.len);
	n += r->reason.len;
	memcpy(b + n, "\r\n", 2);
	n += 2;
	for (unsigned i = 0; i < r->nfields; i++) {
		const struct lg_resp_field *f = &r->fields[i];
		int upg = f->name.len == 7 && strncasecmp(x->in + f->name.off, "upgrade", 7) == 0;

		if (!upg && (f->flags & (LG_RESP_F_HOP | LG_RESP_F_FRAMING)))
			continue;
		memcpy(b + n, x->in + f->line.off, f->line.len);
		n += f->line.len;
	}
	memcpy(b + n, "Connection: upgrade\r\n\r\n", 23);
	n += 23;
	x->hbuf = b;
	x->hcap = hlen + 64;
	return (ssize_t)n;
}

/* 1 when the 101's Upgrade field names only protocols x's request offered. */
static int
upgrade_matches(const struct lg_conn_up *x)
{
	const struct lg_resp *r = &x->resp;
	int found = 0;

	for (unsigned i = 0; i < r->nfields; i++) {
		const struct lg_resp_field *f = &r->fields[i];

		if (f->name.len != 7 || strncasecmp(x->in + f->name.off, "upgrade", 7) != 0)
			continue;
		if (!lg_fwd_upgrade_match(&x->c->http.req, x->in + f->value.off, f->value.len))
			return 0;
		found = 1;
	}
	return found;
}

/* Closes t: both sockets, its watchers, and x with its place and app connection (why: NULL for
 * both sides done, else the reason, logged). */
static void
tun_close(struct lg_up_tunnel *t, const char *why)
{
	struct lg_worker *w = t->w;
	struct lg_up_one *u = lg_up_of(t->x);

	if (why != NULL)
		log_info("upstream %s: tunnel closed: %s", u->def->name, why);
	ev_io_stop(w->ev, &t->io[TO_APP]);
	ev_io_stop(w->ev, &t->io[TO_CLIENT]);
	ev_timer_stop(w->ev, &t->timer);
	if (t->prev)
		t->prev->next = t->next;
	else
		tunnels = t->next;
	if (t->next)
		t->next->prev = t->prev;
	atomic_fetch_sub(&u->adm->tunnels[w->env->index], 1);
	lg_up_free(t->x, 0); /* the app connection closed, the place given back */
	lg_conn_detached_close(w, t->fd[TO_CLIENT]);
	free(t);
}

/* Reads what side (dir's source) sent into dir d while it has room. Returns 1 when bytes
 * came, 0 when none (EAGAIN, full, EOF already), -1 on an error (reset). */
static int
tun_read(struct lg_up_tunnel *t, int d)
{
	struct tun_dir *s = &t->d[d];
	int from = d == TO_APP ? t->fd[TO_CLIENT] : t->fd[TO_APP];
	ssize_t n;

	if (s->eof)
		return 0;
	if (s->off > 0 && s->len == s->cap) { /* written in part: room again at the front */
		memmove(s->buf, s->buf + s->off, s->len - s->off);
		s->len -= s->off;
		s->off = 0;
	}
	if (s->len == s->cap)
		return 0;
	do
		n = recv(from, s->buf + s->len, s->cap - s->len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		s->len += (size_t)n;
		return 1;
	}
	if (n == 0) {
		s->eof = 1;
		return 1;
	}
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
}

/* One send(2) of p (len bytes) to fd: the bytes taken (0 full), or -1 on an error. */
static ssize_t
tun_send(int fd, const char *p, size_t len)
{
	ssize_t n;

	do
		n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	return n;
}

/* Writes what dir d holds to its destination, then ends the destination's writing once its
 * source's EOF came and all is written. Returns 1 when bytes went, 0 when none, -1 on an
 * error. */
static int
tun_write(struct lg_up_tunnel *t, int d)
{
	struct tun_dir *s = &t->d[d];
	int to = t->fd[d];
	int moved = 0;
	ssize_t n;

	if (d == TO_CLIENT && t->pre_len > 0) {
		if ((n = tun_send(to, t->pre, t->pre_len)) < 0)
			return -1;
		t->pre += n;
		t->pre_len -= (size_t)n;
		if (t->pre_len > 0)
			return n > 0;
		moved = 1;
	}
	if (s->off < s->len) {
		if ((n = tun_send(to, s->buf + s->off, s->len - s->off)) < 0)
			return -1;
		s->off += (size_t)n;
		atomic_fetch_add(&lg_up_of(t->x)->adm->tunnel_bytes[d], (uint64_t)n);
		moved |= n > 0;
	}
	if (s->off == s->len) {
		s->off = s->len = 0;
		if (s->eof && !s->shut) {
			s->shut = 1;
			if (shutdown(to, SHUT_WR) == -1 && errno != ENOTCONN)
				return -1;
		}
	}
	return moved;
}

/* Relays both ways as far as the sockets allow. Returns 0, or -1 when t is closed. */
static int
tun_pump(struct lg_up_tunnel *t)
{
	int moved = 1;

	for (int pass = 0; moved && pass < TUN_PASSES; pass++) {
		moved = 0;
		for (int d = 0; d < 2; d++) {
			int r = tun_read(t, d), s = r == -1 ? -1 : tun_write(t, d);

			if (r == -1 || s == -1) {
				tun_close(t, r == -1 ? "reset" : "write failed");
				return -1;
			}
			moved |= r | s;
		}
		if (moved)
			t->last = ev_now(t->w->ev);
	}
	if (t->d[TO_APP].shut && t->d[TO_CLIENT].shut) {
		tun_close(t, NULL);
		return -1;
	}
	return 0;
}

/* Watches each socket for what t waits for on it. */
static void
tun_watch(struct lg_up_tunnel *t)
{
	for (int side = 0; side < 2; side++) {
		/* side's socket is read for dir `in` (it is the source) and written for dir side */
		int in = side == TO_APP ? TO_CLIENT : TO_APP;
		const struct tun_dir *r = &t->d[in], *wd = &t->d[side];
		int ev = 0;

		if (!r->eof && (r->len < r->cap || r->off > 0))
			ev |= EV_READ;
		if (wd->off < wd->len || (side == TO_CLIENT && t->pre_len > 0))
			ev |= EV_WRITE;
		if (ev_is_active(&t->io[side]) && t->io[side].events == ev)
			continue;
		ev_io_stop(t->w->ev, &t->io[side]);
		if (ev == 0)
			continue;
		ev_io_modify(&t->io[side], ev);
		ev_io_start(t->w->ev, &t->io[side]);
	}
}

static void
tun_io_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	struct lg_up_tunnel *t = io->data;

	if (tun_pump(t) == 0)
		tun_watch(t);
}

/* When t closes unless a byte moves: its idle timeout from the last byte, or the drain's end. */
static ev_tstamp
tun_due(const struct lg_up_tunnel *t)
{
	ev_tstamp due = t->last + lg_up_of(t->x)->def->tunnel_idle_timeout_ms / 1e3;

	return drain_due > 0 && drain_due < due ? drain_due : due;
}

static void
tun_arm(struct lg_up_tunnel *t)
{
	ev_tstamp now = ev_now(t->w->ev), due = tun_due(t);

	ev_timer_stop(t->w->ev, &t->timer);
	ev_timer_set(&t->timer, due > now ? due - now : 1e-3, 0.);
	ev_timer_start(t->w->ev, &t->timer);
}

static void
tun_timer_cb(struct ev_loop *ev, ev_timer *tm, int revents)
{
	struct lg_up_tunnel *t = tm->data;
	ev_tstamp now = ev_now(ev);

	if (drain_due > 0 && now >= drain_due - 1e-3)
		tun_close(t, "the loop drains");
	else if (now >= tun_due(t) - 1e-3)
		tun_close(t, "idle timeout");
	else
		tun_arm(t);
}

/* t's two directions: toward the app through x->out (the client's bytes buffered behind the
 * head, pending bytes long, taken into it first), toward the client through x->in (the app's
 * bytes behind its 101 head kept where they are), after the 101 head (pre). */
static void
tun_setup(struct lg_up_tunnel *t, struct lg_conn_up *x, size_t hlen, size_t head, size_t pending)
{
	t->x = x;
	t->w = x->w;
	t->d[TO_APP] = (struct tun_dir){ x->out, sizeof(x->out), 0, pending, 0, 0 };
	t->d[TO_CLIENT] = (struct tun_dir){ x->in, sizeof(x->in), hlen, x->in_len, 0, 0 };
	t->pre = x->hbuf;
	t->pre_len = head;
	t->last = ev_now(x->w->ev);
	ev_init(&t->timer, tun_timer_cb);
	t->timer.data = t;
}

/* Counts the 101 (a request answered by the app, its times, the access line's upstream
 * fields) and the tunnel opened. */
static void
count_open(struct lg_conn_up *x)
{
	struct lg_up_one *u = lg_up_of(x);

	atomic_fetch_add(&u->adm->requests[1], 1);
	atomic_fetch_add(&u->adm->tunnels_opened, 1);
	atomic_fetch_add(&u->adm->tunnels[x->w->env->index], 1);
	lg_up_time(x, &u->adm->total, x->arrived);
	lg_up_note_time(x);
	x->c->obs.up_status = 101;
}

int
lg_up_tunnel(struct lg_conn_up *x, size_t hlen)
{
	struct lg_conn *c = x->c;
	struct lg_up_tunnel *t;
	size_t pending = lg_conn_buffered(c);
	ssize_t head;

	/* The request must have asked (RFC 9110 15.2.2: a 101 only to an Upgrade), be whole,
	 * and c be free to hand over (its own processing not under way, nothing queued). */
	if (!x->upgrade || !x->dispatched || !upgrade_matches(x) || pending > sizeof(x->out))
		return lg_up_fail(x, 502, LG_UPR_INVALID);
	LG_UP(c)->x = NULL; /* c's part let go first: lg_conn_can_detach asks c->held == 0 */
	lg_conn_unhold(c, LG_CONN_HELD_UP);
	t = lg_conn_can_detach(c) ? calloc(1, sizeof(*t)) : NULL;
	if (t == NULL || (head = switch_head(x, hlen)) < 0) {
		free(t);
		LG_UP(c)->x = x;
		lg_conn_hold(c, LG_CONN_HELD_UP);
		return lg_up_fail(x, 502, LG_UPR_INVALID);
	}
	lg_conn_take(c, x->out, pending);
	count_open(x);
	ev_timer_stop(x->w->ev, &x->timer);
	ev_io_stop(x->w->ev, &x->uc->io); /* the app connection's watcher is t's now */
	x->c = NULL;
	x->head_done = x->started = 1;
	tun_setup(t, x, hlen, (size_t)head, pending);
	t->fd[TO_APP] = x->uc->fd;
	t->fd[TO_CLIENT] = lg_conn_detach(c, 101);
	for (int side = 0; side < 2; side++) {
		ev_io_init(&t->io[side], tun_io_cb, t->fd[side], 0);
		t->io[side].data = t;
	}
	t->next = tunnels;
	if (tunnels)
		tunnels->prev = t;
	tunnels = t;
	log_debug("upstream %s: tunnel open", lg_up_of(x)->def->name);
	tun_arm(t);
	if (tun_pump(t) == 0)
		tun_watch(t);
	return -1;
}

void
lg_up_tunnel_drain(struct lg_worker *w)
{
	uint64_t ms = w->env->cfg->master.drain_timeout_ms;

	drain_due = ev_now(w->ev) + (ms > 0 ? ms : 1000) * 0.9 / 1e3;
	for (struct lg_up_tunnel *t = tunnels; t != NULL; t = t->next)
		tun_arm(t);
}
