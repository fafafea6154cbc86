/* The connection core's stream verbs (declared in worker/core/conn.h): another room
 * (worker/upstream/) writes the answer of c's current request as it arrives, in state
 * LG_CONN_PROXY, instead of handing a whole one to lg_conn_respond. Calls into conn.c only
 * (worker/core/conn_int.h). */
#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "worker/core/conn.h"
#include "worker/core/conn_int.h"
#include "worker/observe.h"

void
lg_conn_stream_begin(struct lg_conn *c)
{
	c->state = LG_CONN_PROXY;
	c->stream_wr = 0;
	ev_timer_stop(c->w->ev, &c->timer);
	if (!c->processing)
		lg_conn_watch_next(c);
}

ssize_t
lg_conn_stream_write(struct lg_conn *c, const void *buf, size_t len)
{
	if (c->out.whead_len > 0) { /* answers batched before this one go first */
		int r = lg_conn_flush(c);

		if (r == -1)
			return -1;
		if (r == 0)
			return 0;
		c->out.whead_len = c->out.woff = 0;
	}
	for (;;) {
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	}
}

void
lg_conn_stream_want(struct lg_conn *c, int on)
{
	int ev = c->rlen < LG_CONN_RBUF ? EV_READ : 0;

	c->stream_wr = on;
	if (c->state == LG_CONN_PROXY)
		lg_conn_watch(c, ev | (on || c->out.whead_len > 0 ? EV_WRITE : 0));
}

int
lg_conn_stream_end(struct lg_conn *c, int status, uint64_t body_bytes, int close)
{
	lg_obs_response(&c->obs, status, (size_t)body_bytes);
	if (close || !c->http.req.keep_alive || c->w->draining)
		c->close_after = 1;
	c->stream_wr = 0;
	c->out.wreq = 1;
	c->state = LG_CONN_WRITE;
	if (lg_conn_response_done(c) == -1)
		return -1;
	return c->processing ? 0 : lg_conn_process(c);
}

int
lg_conn_can_detach(const struct lg_conn *c)
{
	return c->state == LG_CONN_PROXY && !c->processing && c->out.whead_len == 0 &&
	    c->held == 0;
}

int
lg_conn_detach(struct lg_conn *c, int status)
{
	struct lg_worker *w = c->w;
	int fd = c->fd;

	if (!lg_conn_can_detach(c))
		return -1;
	lg_obs_response(&c->obs, status, 0);
	c->close_after = 1; /* the parser is not readied for a next request */
	lg_conn_request_done(c);
	lg_obs_conn_closed(c);
	ev_io_stop(w->ev, &c->io);
	ev_timer_stop(w->ev, &c->timer);
	lg_conn_free(c);
	return fd;
}

void
lg_conn_detached_close(struct lg_worker *w, int fd)
{
	close(fd);
	lg_conn_gone(w);
}
