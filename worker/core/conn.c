#include "worker/core/conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "http/proxyproto.h"
#include "worker/core/client.h"
#include "worker/core/conn_head.h"
#include "worker/core/conn_int.h"
#include "worker/core/conn_timer.h"
#include "shm/stats.h"
#include "worker/observe.h"
#include "worker/core/access.h"

static void conn_io_cb(struct ev_loop *ev, ev_io *io, int revents);
static void conn_io(struct lg_conn *c, int revents);
static void conn_timer_cb(struct ev_loop *ev, ev_timer *t, int revents);

static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";
#define CONTINUE_LEN (sizeof(continue_line) - 1)
/* A draining loop lingers at most this long (s), whatever --lingering-time-ms says: its exit
 * waits for its lingering connections. */
#define LINGER_DRAIN_S 2.0

/* Watches c's socket for events (EV_READ, EV_WRITE, or 0: neither). */
void
lg_conn_watch(struct lg_conn *c, int events)
{
	if (ev_is_active(&c->io) && c->io.events == events)
		return;
	ev_io_stop(c->w->ev, &c->io);
	if (events == 0)
		return;
	ev_io_set(&c->io, c->fd, events);
	ev_io_start(c->w->ev, &c->io);
}

/* Readies c (a pool block) for fd; req_at is when the head deadline starts (accept, for a
 * connection that has sent nothing yet), or 0. */
static void
conn_init(struct lg_conn *c, struct lg_worker *w, int fd, ev_tstamp req_at)
{
	c->w = w;
	c->fd = fd;
	c->held = 0;
	w->ops->init(c);
	c->rlen = 0;
	c->rbuf = NULL;
	c->state = LG_CONN_HEAD;
	c->close_after = 0;
	c->out.wbody_owned = NULL;
	c->out.wbody_shared = NULL;
	lg_obs_init(&c->obs);
	c->stream_wr = 0;
	c->tmo.req_at = req_at;
	c->tmo.body_at = 0;
	c->tmo.idle_ticks = 0;
	c->want_continue = 0;
	c->cont_off = 0;
	c->nreq = 0;
	c->processing = 0;
	c->reject_extra[0] = '\0';
	c->out.whead_len = c->out.woff = c->out.wbody_len = 0;
	c->out.wreq = 0;
	c->out.wbody = NULL;
	lg_http_init(&c->http, &w->lim);
	c->http.on_body = w->ops->body;
	c->http.body_room = w->ops->body_room;
	c->http.ctx = c;
	c->prev = NULL;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	lg_conn_io_move(&c->io, conn_io_cb, fd, EV_READ); /* the idle watcher's socket */
	c->io.data = c;
	ev_init(&c->timer, conn_timer_cb);
	c->timer.data = c;
	ev_io_start(w->ev, &c->io);
	lg_conn_rearm(c);
}

/* Bytes (or EOF) arrived on an idle connection (worker/core/conn_idle.c): c is a pool block. */
void
lg_conn_wake(struct lg_conn *c, struct lg_worker *w, int fd, ev_tstamp req_at, int revents)
{
	conn_init(c, w, fd, req_at);
	lg_obs_cb_begin(w, c);
	conn_io(c, revents);
}

/* Gives back a rendered body (the router's) or a shared one once it is written or the
 * connection goes. */
static void
release_owned(struct lg_conn *c)
{
	lg_body_unref(c->out.wbody_shared);
	c->out.wbody_shared = NULL;
	if (c->out.wbody_owned == NULL)
		return;
	if (!lg_render_give_back(&c->w->render, c->out.wbody_owned))
		free(c->out.wbody_owned);
	c->out.wbody_owned = NULL;
}

int
lg_conn_respond_shared(struct lg_conn *c, int status, const char *ctype, const char *extra,
    struct lg_body *b)
{
	b->refs++;
	c->out.wbody_shared = b; /* before responding: a write error closes c, which drops it */
	return lg_conn_respond(c, status, ctype, extra, b->data, b->len);
}

void
lg_conn_gone(struct lg_worker *w)
{
	w->nconns--;
	lg_obs_conns(w);
	if (w->draining && w->nconns == 0)
		ev_break(w->ev, EVBREAK_ALL);
}

void
lg_conn_close(struct lg_conn *c)
{
	struct lg_worker *w = c->w;

	lg_obs_conn_closed(c);
	release_owned(c);
	if (c->held)
		w->ops->gone(c);
	ev_io_stop(w->ev, &c->io);
	ev_timer_stop(w->ev, &c->timer);
	close(c->fd);
	lg_conn_free(c);
	lg_conn_gone(w);
}

void
lg_conn_free(struct lg_conn *c)
{
	struct lg_worker *w = c->w;

	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->rlen = 0; /* what it held is dropped with it */
	lg_conn_rbuf_drop(c);
	lg_pool_put(lg_conn_pool(w), c);
}

/* Writes as much of the response as the socket takes. Returns 1 when all of it is written,
 * 0 when the rest waits for EV_WRITE, -1 on a write error (the caller closes). */
int
lg_conn_flush(struct lg_conn *c)
{
	for (;;) {
		struct iovec iov[2];
		int n = 0;
		size_t total = c->out.whead_len + c->out.wbody_len;

		if (c->out.woff >= total)
			return 1;
		if (c->out.woff < c->out.whead_len) {
			iov[n].iov_base = c->whead + c->out.woff;
			iov[n++].iov_len = c->out.whead_len - c->out.woff;
		}
		if (c->out.wbody_len > 0) {
			size_t boff = c->out.woff > c->out.whead_len ? c->out.woff - c->out.whead_len : 0;

			iov[n].iov_base = (void *)(c->out.wbody + boff);
			iov[n++].iov_len = c->out.wbody_len - boff;
		}
		/* One buffer (a head with its copied body, or a batch): send(2) goes straight
		 * to the socket, where writev(2) first passes the VFS layer and imports the
		 * iovec, a few percent of a small answer's system time. */
		ssize_t w = n == 1 ? send(c->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL) :
		    writev(c->fd, iov, n);
		if (w > 0) {
			c->out.woff += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return -1; /* EPIPE, ECONNRESET: the peer is gone (SIGPIPE is ignored) */
	}
}

/* Closing after a response: shut the write side (the client reads the response, then EOF) and
 * drain what it still sends until its FIN, so that the close does not turn into a reset that
 * discards the response from the client's receive queue (a close with unread input sends RST:
 * RFC 9293 section 3.10.7.1; RFC 9112 section 9.6), and a client still writing a refused body
 * (Python's http.client and httpx write it whole before they read) finishes and reads the
 * answer instead of getting EPIPE. Bounded as nginx's lingering close: --lingering-time-ms in
 * all, --lingering-timeout-ms of silence, --lingering-bytes read (LINGER_DRAIN_S in a draining
 * loop). A draining loop lingers too: a client that pipelined requests behind the last one
 * answered has sent input that is never read. Returns -1: for the caller the connection is
 * finished (it is closed later by the loop). */
static int
linger(struct lg_conn *c)
{
	const struct lg_config *cfg = c->w->env->cfg;
	ev_tstamp now = ev_now(c->w->ev), most = cfg->conn.lingering_time_ms / 1e3;

	if (c->w->draining && most > LINGER_DRAIN_S)
		most = LINGER_DRAIN_S;
	if (most <= 0 || shutdown(c->fd, SHUT_WR) == -1) {
		lg_conn_close(c);
		return -1;
	}
	c->state = LG_CONN_LINGER;
	c->rlen = 0;
	c->tmo.lingered = 0;
	c->tmo.linger_copy = 0;
	c->tmo.linger_until = now + most;
	c->tmo.linger_seen = now;
	lg_conn_watch(c, EV_READ);
	lg_conn_rearm(c);
	return -1;
}

void
lg_conn_drain_linger(struct lg_conn *c)
{
	ev_tstamp most = ev_now(c->w->ev) + LINGER_DRAIN_S;

	if (c->tmo.linger_until > most) {
		c->tmo.linger_until = most;
		lg_conn_rearm(c);
	}
}

/* Drops what the client sent while lingering: recv(2) with MSG_TRUNC discards a TCP socket's
 * queued bytes without copying them (tcp(7)); a unix socket refuses it (EFAULT), and is read
 * into rbuf. Closes at EOF, an error or --lingering-bytes. */
static void
linger_read(struct lg_conn *c)
{
	uint64_t cap = c->w->env->cfg->conn.lingering_bytes;
	ssize_t n = -1;

	if (!c->tmo.linger_copy) {
		n = recv(c->fd, NULL, 1u << 20, MSG_TRUNC | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			c->tmo.linger_copy = 1;
	}
	if (c->tmo.linger_copy) {
		c->rlen = 0; /* nothing of c's is read any more */
		if (lg_conn_rbuf_need(c) == -1) {
			lg_conn_close(c);
			return;
		}
		n = read(c->fd, c->rbuf, LG_CONN_RBUF);
		lg_conn_rbuf_drop(c);
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && (c->tmo.lingered += (uint64_t)n) < cap) {
		c->tmo.linger_seen = ev_now(c->w->ev);
		lg_conn_rearm(c);
		return;
	}
	lg_conn_close(c);
}

/* The current request is answered (its response written, or queued behind others of a
 * pipelined batch with its body copied): free the slot, account for it, ready the parser. */
static void
request_done(struct lg_conn *c)
{
	if (c->held & (LG_CONN_HELD_BUFFER | LG_CONN_HELD_UP))
		c->w->ops->release(c); /* an exchange still held: lagless answered (a refusal) */
	release_owned(c);
	lg_obs_request_end(c);
	lg_stats_add(&c->w->env->page->requests, 1); /* this loop's page: one writer */
	c->want_continue = 0;
	c->cont_off = 0;
	c->tmo.body_at = 0;
	c->state = LG_CONN_HEAD;
	c->tmo.req_at = c->rlen > 0 ? ev_now(c->w->ev) : 0; /* pipelined bytes start the next head */
	if (!c->close_after && !c->w->draining) /* no next request when closing: the parser may
	                                          * have stopped in an error state */
		lg_http_next(&c->http);
}

void
lg_conn_request_done(struct lg_conn *c)
{
	request_done(c);
}

/* Everything queued is on the wire: finish the request it ended with (if any), then close or
 * wait for the next request. Returns 0, or -1 when the connection is finished. */
int
lg_conn_response_done(struct lg_conn *c)
{
	c->out.wbody = NULL;
	c->out.wbody_len = c->out.whead_len = c->out.woff = 0;
	if (c->out.wreq) {
		c->out.wreq = 0;
		request_done(c);
	}
	if (c->close_after || c->w->draining)
		return linger(c);
	c->state = LG_CONN_HEAD;
	if (c->processing)
		return 0; /* conn_process watches and arms for what comes next (watch_next) */
	lg_conn_watch(c, EV_READ);
	lg_conn_rearm(c);
	return 0;
}

/* Whether the response just queued can wait for those of the requests pipelined behind it, so
 * that a batch goes out in one writev(2) (as nginx, h2o and haproxy answer pipelines): only
 * when more input is buffered, the connection stays open, the body was copied (nothing is
 * referenced that must outlive the request) and the batch leaves room for one more response
 * head and a copied body. */
static int
can_batch(const struct lg_conn *c)
{
	return c->rlen > 0 && !c->close_after && !c->w->draining && c->out.wbody == NULL &&
	    c->out.whead_len <= LG_CONN_BATCH;
}

/* The response just queued by lg_conn_respond is not batched: state WRITE, as much of it
 * written as the socket takes. Returns as lg_conn_respond. */
static int
write_now(struct lg_conn *c)
{
	c->out.wreq = 1;
	c->state = LG_CONN_WRITE;
	c->tmo.write_at = c->tmo.wprogress_at = ev_now(c->w->ev);
	c->tmo.wdelivered = 0;
	switch (lg_conn_flush(c)) {
	case 1:
		return lg_conn_response_done(c);
	case 0:
		lg_conn_watch(c, EV_WRITE);
		lg_conn_rearm(c);
		return 0;
	default:
		lg_conn_close(c);
		return -1;
	}
}

int
lg_conn_respond(struct lg_conn *c, int status, const char *ctype, const char *extra,
    const void *body, size_t len)
{
	const struct lg_http_req *r = &c->http.req;
	/* A response to HEAD never has a body, refusals included (RFC 9110 section 9.3.2): the
	 * framing check knows the method before the request is whole or valid. Nor has a 204,
	 * 205 or 304, whatever a kind wrote (sections 15.3.5, 15.3.6, 15.4.5): its body is
	 * dropped, and a 205 says Content-Length: 0 (a 204 and a 304 carry none,
	 * lg_conn_put_head), so a kept connection stays in step. */
	int head_only = c->http.frame.head_method;
	size_t pre = 0, n;

	if (status == 204 || status == 205 || status == 304) {
		head_only = 1;
		len = 0;
	}
	if (!r->keep_alive || c->w->draining)
		c->close_after = 1;
	lg_obs_response(&c->obs, status, head_only ? 0 : len);
	/* A partly written 100 Continue is finished first; an unwritten one is dropped, so no
	 * interim response ever follows the final one (RFC 9110 section 15.2). */
	char *out = c->whead + c->out.whead_len; /* behind any batched responses */
	size_t room = sizeof(c->whead) - c->out.whead_len;

	if (c->want_continue && c->cont_off > 0 && c->cont_off < CONTINUE_LEN) {
		pre = CONTINUE_LEN - c->cont_off; /* nothing is queued then: see flush_queued */
		memcpy(out, continue_line + c->cont_off, pre);
	}
	c->want_continue = 0;
	n = lg_conn_put_head(out + pre, room - pre, c, status, len, ctype,
	    c->close_after ? LG_CONN_LINE_CLOSE : r->minor == 0 ? LG_CONN_LINE_KEEP :
	    LG_CONN_LINE_NONE, extra);
	/* A body of up to LG_CONN_COPY bytes may live on the caller's stack: it must be copied. */
	if (n >= room - pre || (!head_only && len <= LG_CONN_COPY && pre + n + len > room)) {
		log_error("response head for %d does not fit", status);
		lg_conn_close(c);
		return -1;
	}
	c->out.whead_len += pre + n;
	c->out.wbody = NULL;
	c->out.wbody_len = 0;
	if (!head_only && len > 0) {
		if (len <= LG_CONN_COPY) {
			memcpy(c->whead + c->out.whead_len, body, len);
			c->out.whead_len += len;
		} else {
			c->out.wbody = body;
			c->out.wbody_len = len;
		}
	}
	if (can_batch(c)) {
		request_done(c); /* written with the next ones, by flush_queued */
		return 0;
	}
	return write_now(c);
}

void
lg_conn_drain_idle(struct lg_conn *c)
{
	if (!ev_is_active(&c->timer) || lg_conn_timer_left(c) > LG_CONN_DRAIN_IDLE_MS / 1000.)
		lg_conn_arm_timer(c, LG_CONN_DRAIN_IDLE_MS / 1000.);
}

int
lg_conn_error(struct lg_conn *c, int status, int close_after, const char *extra)
{
	char body[64];
	const char *reason = lg_http_reason(status);
	size_t n = strlen(reason);

	if (n > sizeof(body) - 1)
		n = sizeof(body) - 1;
	memcpy(body, reason, n);
	body[n++] = '\n';
	c->close_after |= close_after;
	return lg_conn_respond(c, status, "text/plain", extra, body, n);
}

static void
consume(struct lg_conn *c, size_t n)
{
	if (n < c->rlen) /* pipelined bytes: most reads hold one request and leave none */
		memmove(c->rbuf, c->rbuf + n, c->rlen - n);
	c->rlen -= n;
}

/* Writes (the rest of) the 100 Continue while a body is awaited. Returns 0, or -1 when the
 * connection was closed. */
static int
send_continue(struct lg_conn *c)
{
	while (c->cont_off < CONTINUE_LEN) {
		ssize_t n = send(c->fd, continue_line + c->cont_off, CONTINUE_LEN - c->cont_off,
		    MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			c->cont_off += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return 0; /* the rest goes out on EV_WRITE */
		} else {
			lg_conn_close(c);
			return -1;
		}
	}
	return 0;
}

/* Answers the request the parser refused (h->status) or the router (ops->head) rejected. */
static int
answer_refusal(struct lg_conn *c)
{
	const struct lg_http *h = &c->http;

	if (h->status) {
		log_debug("refused a request: %d (%s)", h->status, h->why ? h->why : "router");
		return lg_conn_error(c, h->status, 1, h->status == 503 ? LG_CONN_RETRY_AFTER :
		    h->status == 405 ? c->reject_extra : NULL); /* 405: Allow (routes.c) */
	}
	return lg_conn_error(c, c->reject_status, 1, c->reject_extra[0] ? c->reject_extra : NULL);
}

/* Writes responses batched by lg_conn_respond. Returns 1 when nothing is left queued, 0 when
 * the rest waits for EV_WRITE, -1 when the connection was closed (write error). */
static int
flush_queued(struct lg_conn *c)
{
	int r = c->out.whead_len > 0 ? lg_conn_flush(c) : 1;

	if (r == 1)
		c->out.whead_len = c->out.woff = 0;
	else if (r == -1)
		lg_conn_close(c);
	return r;
}

/* The buffered requests are parsed (or one is waiting): writes the batched answers, then
 * watches for what c waits for now (its next bytes, the client reading, a job) and arms its
 * timer. Returns 0, or -1 when the connection was closed. */
int
lg_conn_watch_next(struct lg_conn *c)
{
	/* The request is parsed and away (a job, an app, its answer going out) with nothing
	 * behind it: the read buffer goes back until c reads again. A connection waiting for its
	 * next request keeps it (keep-alive traffic borrows nothing per request), until it goes
	 * idle (lg_conn_free). */
	if (c->state != LG_CONN_HEAD)
		lg_conn_rbuf_drop(c);
	if (c->state == LG_CONN_WRITE || c->state == LG_CONN_LINGER)
		return 0;
	int events = 0, q = flush_queued(c);
	if (q == -1)
		return -1;
	if (q == 0 && c->state == LG_CONN_HEAD) {
		/* The batch waits for the client to read: so does the next request. */
		c->state = LG_CONN_WRITE;
		lg_conn_watch(c, EV_WRITE);
		lg_conn_rearm(c);
		return 0;
	}
	if (c->state == LG_CONN_HEAD || c->state == LG_CONN_BODY)
		events = c->http.body_wait ? 0 : EV_READ;
	else if (c->state == LG_CONN_JOB || c->state == LG_CONN_PROXY)
		/* Keep reading to notice a client that goes away, but apply backpressure on
		 * pipelined bytes once the buffer is full. */
		events = (c->rlen < LG_CONN_RBUF ? EV_READ : 0) |
		    (c->state == LG_CONN_PROXY && c->stream_wr ? EV_WRITE : 0);
	if (q == 0)
		events |= EV_WRITE; /* batched answers still going out while a body or job runs */
	else if (lg_conn_in_body(c) && c->want_continue) {
		if (send_continue(c) == -1)
			return -1;
		if (c->cont_off < CONTINUE_LEN)
			events |= EV_WRITE;
	}
	if (c->state != LG_CONN_WRITE && c->state != LG_CONN_LINGER) {
		lg_conn_watch(c, events);
		lg_conn_rearm(c);
	}
	return 0;
}

/* Feeds c's buffered bytes to the parser. At head complete the parser returns
 * (LG_HTTP_HEAD_DONE) and the router (ops->head) picks the route, admits the request and
 * chooses the body's destination, outside the parser, before the feed goes on. Returns where
 * the parse stopped (enum lg_http_stop). */
static enum lg_http_stop
feed(struct lg_conn *c)
{
	for (;;) { /* at most twice: the head, then the body (the parser reads one message) */
		size_t used;
		enum lg_http_stop st = lg_http_feed(&c->http, c->rbuf, c->rlen, &used);

		consume(c, used);
		if (st != LG_HTTP_HEAD_DONE)
			return st;
		st = lg_http_body_to(&c->http, c->w->ops->head(c));
		if (st != LG_HTTP_MORE || c->rlen == 0)
			return st; /* complete, rejected, or its body still to come */
	}
}

/* Parses buffered bytes while the connection waits for a request head, answering each complete
 * request in turn (responses batched while more requests are buffered, then written together).
 * Returns 0, or -1 when the connection was closed. */
int
lg_conn_process(struct lg_conn *c)
{
	int outer = c->processing;

	c->processing = 1; /* back to outer before each return that leaves c open */
	while (c->state == LG_CONN_HEAD && c->rlen > 0) {
		if (!lg_obs_in_request(&c->obs))
			lg_obs_request_begin(c);
		enum lg_http_stop st = feed(c);

		if (st == LG_HTTP_ERROR) {
			c->processing = outer;
			return answer_refusal(c);
		}
		if (st == LG_HTTP_BODY_WAIT)
			break; /* its body's next window is being backed: lg_conn_body_ready resumes */
		if (st != LG_HTTP_DONE && c->rlen == LG_CONN_RBUF) {
			/* A full buffer the parser cannot consume (empty lines before a request
			 * line, say): reading on would get 0 bytes, taken for EOF, and the close
			 * would reset the connection. The head cannot fit: 431. */
			c->http.status = 431;
			c->http.why = "head does not fit the input buffer";
			c->processing = outer;
			return answer_refusal(c);
		}
		if (st != LG_HTTP_DONE)
			break;
		c->nreq++;
		struct lg_worker *w = c->w; /* c may be freed by the dispatch */
		lg_obs_unit_begin(w, c);
		int r = w->ops->dispatch(c);
		lg_obs_unit_end(w);
		if (r == -1)
			return -1; /* c is closed or lingers: conn_init clears processing */
	}
	c->processing = outer;
	return lg_conn_watch_next(c);
}

int
lg_conn_resume(struct lg_conn *c)
{
	return c->state == LG_CONN_HEAD ? lg_conn_process(c) : 0;
}

/* Reads the rest of a Content-Length body straight into the room's body sink (ops->body_buf:
 * the job room's slot input region). */
static void
read_body(struct lg_conn *c)
{
	const struct lg_conn_ops *ops = c->w->ops;
	unsigned char *dst;
	size_t len;

	switch (ops->body_buf(c, &dst, &len)) {
	case -1:
		return;
	case 1:
		lg_conn_watch(c, 0); /* its next window is being backed; lg_conn_body_ready resumes it */
		return;
	}
	ssize_t n = read(c->fd, dst, len);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		lg_conn_close(c); /* client gone mid-body: the slot is released, nothing queued */
		return;
	}
	if (n < 0)
		return;
	if (ops->body_took(c, (size_t)n) == 0) {
		lg_conn_rearm(c);
		return;
	}
	if (ops->body_done(c) == 0)
		lg_conn_process(c);
}

int
lg_conn_body_ready(struct lg_conn *c)
{
	c->http.body_wait = 0;
	if (c->state != LG_CONN_BODY)
		return lg_conn_process(c);
	lg_conn_watch(c, EV_READ);
	lg_conn_rearm(c);
	return 0;
}

/* The PROXY header a ",proxy" listener's connection owes first (worker/core/client.h), from the
 * buffered bytes: a bad one closes c unanswered (haproxy doc/proxy-protocol.txt section 2), a
 * partial one waits within the head timeout. Returns 0 (the rest is the client's), 1 (read
 * more), -1 (closed). */
static int
proxy_header(struct lg_conn *c)
{
	ssize_t r = lg_client_proxy_feed(c->fd, c->rbuf, c->rlen);

	if (r == LG_PROXY_PARTIAL) {
		lg_conn_rearm(c);
		return 1;
	}
	if (r < 0) {
		log_info("bad PROXY protocol header (fd %d, %zu bytes): closing", c->fd, c->rlen);
		lg_conn_close(c);
		return -1;
	}
	consume(c, (size_t)r);
	return 0;
}

static void
read_input(struct lg_conn *c)
{
	ssize_t n;

	if (lg_conn_rbuf_need(c) == -1) {
		log_warn("no memory for a read buffer: closing fd %d", c->fd);
		lg_conn_close(c);
		return;
	}
	n = recv(c->fd, c->rbuf + c->rlen, LG_CONN_RBUF - c->rlen, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		/* EOF or reset: a queued job is cancelled, a running one abandoned. */
		lg_conn_close(c);
		return;
	}
	if (n < 0) {
		lg_conn_rbuf_drop(c);
		return;
	}
	c->rlen += (size_t)n;
	if (c->state == LG_CONN_HEAD) {
		if (c->tmo.req_at == 0)
			c->tmo.req_at = ev_now(c->w->ev);
		if (lg_client_proxy_wanted(c->fd) && proxy_header(c) != 0)
			return;
		lg_conn_process(c);
	} else if (c->rlen == LG_CONN_RBUF) {
		lg_conn_watch(c, c->state == LG_CONN_PROXY && c->stream_wr ? EV_WRITE : 0);
	}
}

static void
conn_io(struct lg_conn *c, int revents)
{
	if (c->state == LG_CONN_LINGER) {
		linger_read(c);
		return;
	}
	if (c->state == LG_CONN_WRITE) {
		switch (lg_conn_flush(c)) {
		case 1:
			if (lg_conn_response_done(c) == 0)
				lg_conn_process(c);
			return;
		case 0:
			lg_conn_note_delivered(c); /* progress: the stall timeout counts from here */
			lg_conn_rearm(c);
			return;
		default:
			lg_conn_close(c);
			return;
		}
	}
	if ((revents & EV_WRITE) && c->out.whead_len > 0) { /* batched answers, state BODY or JOB */
		int q = flush_queued(c);

		if (q == -1)
			return;
		if (q == 1 && !(c->want_continue && lg_conn_in_body(c)))
			lg_conn_watch(c, c->io.events & ~EV_WRITE);
	}
	if ((revents & EV_WRITE) && c->state == LG_CONN_PROXY && c->out.whead_len == 0 &&
	    c->stream_wr) {
		c->stream_wr = 0;
		lg_conn_watch(c, c->io.events & ~EV_WRITE);
		if (c->w->ops->stream(c) == -1 || c->state != LG_CONN_PROXY)
			return;
	}
	if ((revents & EV_WRITE) && c->out.whead_len == 0 && c->want_continue && lg_conn_in_body(c)) {
		if (send_continue(c) == -1)
			return;
		if (c->cont_off == CONTINUE_LEN)
			lg_conn_watch(c, c->io.events & ~EV_WRITE);
	}
	if (!(revents & EV_READ))
		return;
	if (c->state == LG_CONN_BODY)
		read_body(c);
	else
		read_input(c);
}

/* The write timer fired. The kernel signals EV_WRITE only once a third of the send buffer is
 * free, so a client reading slowly but steadily (20 KB/s against megabytes of buffer) shows
 * no event for longer than the stall timeout: its progress is read from the socket's unsent
 * queue instead (SIOCOUTQ, tcp(7)), and any progress restarts the stall timeout. */
static void
write_timer(struct lg_conn *c)
{
	const struct lg_config *cfg = c->w->env->cfg;
	ev_tstamp now = ev_now(c->w->ev), due;

	lg_conn_note_delivered(c);
	due = lg_conn_download_due(c);
	if (lg_conn_past(c, due)) {
		log_info("client reads slower than --min-download-rate (%" PRIu64 " bytes in %.1f s), "
		    "closing fd %d", c->tmo.wdelivered, now - c->tmo.write_at, c->fd);
		lg_stats_add(&c->w->env->page->slow_downloads, 1);
		lg_conn_close(c);
	} else if (lg_conn_past(c, c->tmo.wprogress_at + cfg->conn.write_timeout_ms / 1e3)) {
		log_info("client stopped reading: write timeout, closing fd %d", c->fd);
		lg_conn_close(c);
	} else {
		lg_conn_rearm(c);
	}
}

static void
conn_timer(struct lg_conn *c)
{
	switch (c->state) {
	case LG_CONN_JOB:
		c->w->ops->job_timeout(c);
		return;
	case LG_CONN_PROXY:
		return; /* the upstream room keeps the request's deadline */
	case LG_CONN_WRITE:
		write_timer(c);
		return;
	case LG_CONN_LINGER:
		lg_conn_close(c);
		return;
	default:
		break;
	}
	if (lg_conn_in_body(c)) {
		ev_tstamp due = lg_conn_upload_due(c), req_due = lg_conn_request_due(c);

		if (lg_conn_past(c, req_due)) {
			log_info("request not complete within --request-deadline-ms (fd %d, %" PRIu64
			    " body bytes): 408", c->fd, lg_conn_body_bytes(c));
		} else if (lg_conn_past(c, due)) {
			log_info("body slower than --min-upload-rate (fd %d, %" PRIu64 " bytes in "
			    "%.1f s): 408", c->fd, lg_conn_body_bytes(c), ev_now(c->w->ev) - c->tmo.body_at);
			lg_stats_add(&c->w->env->page->slow_uploads, 1);
		} else {
			log_info("body too slow (fd %d, %" PRIu64 " bytes): 408", c->fd,
			    lg_conn_body_bytes(c));
		}
		lg_conn_error(c, 408, 1, NULL); /* releases the transit buffer once written */
	} else if (lg_client_proxy_wanted(c->fd)) {
		log_info("PROXY protocol header not complete within --head-timeout-ms (fd %d, "
		    "%zu bytes): closing", c->fd, c->rlen);
		lg_conn_close(c); /* no HTTP answer before the header: the peer is a proxy */
	} else if (c->rlen > 0 || c->http.frame.head_bytes > 0) {
		log_info("request head too slow (fd %d, %s): 408", c->fd,
		    lg_conn_past(c, lg_conn_request_due(c)) ? "--request-deadline-ms" :
		    "--head-timeout-ms");
		lg_conn_error(c, 408, 1, NULL);
	} else {
		lg_conn_close(c); /* idle: nothing of a request was sent */
	}
}

int
lg_conn_cut_upload(struct lg_conn *c, double held_s)
{
	if (!lg_conn_in_body(c))
		return 0;
	log_info("upload cut to free its transit buffer, every one being held (fd %d, %" PRIu64
	    " bytes in %.1f s, slower than --evict-upload-rate): 408", c->fd, lg_conn_body_bytes(c),
	    held_s);
	lg_stats_add(&c->w->env->page->slow_uploads, 1);
	lg_conn_error(c, 408, 1, NULL); /* gives the transit buffer back once written */
	return 1;
}

/* The libev entry points, timed for slow-callback warnings (worker/observe.h). */
static void
conn_io_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	struct lg_conn *c = io->data;
	struct lg_worker *w = c->w;

	lg_obs_cb_begin(w, c);
	c->tmo.idle_ticks = 0;
	conn_io(c, revents);
	lg_obs_cb_end(w, "connection I/O");
}

static void
conn_timer_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_conn *c = t->data;
	struct lg_worker *w = c->w;

	if (lg_conn_timer_early(c))
		return; /* the limit moved later since the timer was armed */
	lg_obs_cb_begin(w, c);
	c->tmo.idle_ticks = 0;
	conn_timer(c);
	lg_obs_cb_end(w, "connection timer");
}
