/* A client connection of the load generator (load/conn.h). */
#include "load/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <stddef.h>
#include <unistd.h>

#include "common/clock.h"

const char *
ll_lconn_err_name(int code)
{
	switch (code) {
	case LL_LERR_CONNECT: return "connect";
	case LL_LERR_IO: return "io";
	case LL_LERR_PARSE: return "parse";
	case LL_LERR_TIMEOUT: return "timeout";
	default: return "error";
	}
}

static void
finish(struct ll_lconn *c, int status)
{
	struct ll_lreq *r = c->req;

	ev_timer_stop(c->loop, &c->timer);
	c->req = NULL;
	if (r == NULL)
		return;
	r->status = status;
	r->end_ns = lg_now_ns();
	c->ops->done(c, r);
}

static void
shut(struct ll_lconn *c, int status)
{
	if (c->state == LL_LC_CLOSED)
		return;
	ev_io_stop(c->loop, &c->io);
	ev_timer_stop(c->loop, &c->timer);
	close(c->fd);
	c->fd = -1;
	c->state = LL_LC_CLOSED;
	finish(c, status);
	c->ops->closed(c);
}

void
ll_lconn_close(struct ll_lconn *c)
{
	shut(c, LL_LERR_IO);
}

/* Watches c for events. ev_io_set would flag the fd as new and cost an epoll_ctl(2) on every
 * change; ev_io_modify keeps the fd, and an unchanged mask costs nothing. */
static void
want(struct ll_lconn *c, int events)
{
	if (ev_is_active(&c->io) && (c->io.events & (EV_READ | EV_WRITE)) == events)
		return;
	ev_io_stop(c->loop, &c->io);
	ev_io_modify(&c->io, events);
	ev_io_start(c->loop, &c->io);
}

static void
write_some(struct ll_lconn *c)
{
	struct ll_lreq *r = c->req;
	struct iovec v[2];
	size_t skip = c->written, total = r->iov[0].iov_len + r->iov[1].iov_len;
	int n = 0, i;
	ssize_t w;

	for (i = 0; i < 2; i++) {
		if (skip >= r->iov[i].iov_len) {
			skip -= r->iov[i].iov_len;
			continue;
		}
		v[n].iov_base = (char *)r->iov[i].iov_base + skip;
		v[n].iov_len = r->iov[i].iov_len - skip;
		skip = 0;
		n++;
	}
	if (c->written == 0)
		r->sent_ns = lg_now_ns();
	w = writev(c->fd, v, n);
	if (w < 0) {
		if (errno == EAGAIN || errno == EINTR) {
			want(c, EV_READ | EV_WRITE);
			return;
		}
		shut(c, LL_LERR_IO);
		return;
	}
	c->written += (size_t)w;
	want(c, c->written < total ? EV_READ | EV_WRITE : EV_READ);
}

static void
read_some(struct ll_lconn *c)
{
	ssize_t n = read(c->fd, c->rbuf, sizeof(c->rbuf));
	long used;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (c->req == NULL) {   /* idle: the server closed, or sent what nobody asked for */
		shut(c, LL_LERR_IO);
		return;
	}
	if (n <= 0) {
		shut(c, n == 0 && ll_resp_eof(&c->resp) == 0 ? c->resp.status : LL_LERR_IO);
		return;
	}
	used = ll_resp_feed(&c->resp, c->rbuf, (size_t)n);
	if (used < 0 || (c->resp.complete && used != n)) {
		shut(c, LL_LERR_PARSE);
		return;
	}
	if (!c->resp.complete)
		return;
	c->requests++;
	if (!c->resp.keep_alive) {
		shut(c, c->resp.status);
		return;
	}
	c->state = LL_LC_IDLE;
	want(c, EV_READ);
	finish(c, c->resp.status);
}

static void
on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ll_lconn *c = w->data;
	int err = 0;
	socklen_t len = sizeof(err);

	if (c->state == LL_LC_CONNECTING && (revents & EV_WRITE)) {
		if (c->connect_errno != 0 ||
		    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0) {
			shut(c, LL_LERR_CONNECT);
			return;
		}
		c->state = c->req != NULL ? LL_LC_BUSY : LL_LC_IDLE;
		if (c->req == NULL) {
			want(c, EV_READ);
			return;
		}
	}
	if ((revents & EV_WRITE) && c->req != NULL &&
	    c->written < c->req->iov[0].iov_len + c->req->iov[1].iov_len) {
		write_some(c);
		if (c->state == LL_LC_CLOSED)
			return;
	}
	if (revents & EV_READ)
		read_some(c);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	shut(w->data, LL_LERR_TIMEOUT);
}

int
ll_lconn_open(struct ll_lconn *c, struct ev_loop *loop, const struct sockaddr *addr,
              socklen_t addrlen, double timeout_s, const struct ll_lconn_ops *ops, void *ctx)
{
	int one = 1;
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd == -1)
		return -1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(c, 0, offsetof(struct ll_lconn, rbuf));
	c->loop = loop;
	c->fd = fd;
	c->ops = ops;
	c->ctx = ctx;
	c->timeout_s = timeout_s;
	c->state = LL_LC_CONNECTING;
	ev_io_init(&c->io, on_io, fd, EV_WRITE);
	c->io.data = c;
	ev_timer_init(&c->timer, on_timeout, timeout_s, 0);
	c->timer.data = c;
	/* a connect that fails at once is reported through done()/closed() like a refused
	 * asynchronous one, from the loop, so the caller has a single path */
	if (connect(fd, addr, addrlen) == -1 && errno != EINPROGRESS)
		c->connect_errno = errno;
	ev_io_start(loop, &c->io);
	return 0;
}

void
ll_lconn_send(struct ll_lconn *c, struct ll_lreq *r)
{
	c->req = r;
	c->written = 0;
	r->sent_ns = 0;
	ll_resp_init(&c->resp, r->head_method, r->body, r->body_cap);
	ev_timer_set(&c->timer, c->timeout_s, 0);
	ev_timer_start(c->loop, &c->timer);
	if (c->state == LL_LC_CONNECTING)
		return;
	c->state = LL_LC_BUSY;
	write_some(c);
}
