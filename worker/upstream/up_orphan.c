/* An exchange whose client left, or was answered 504 at its deadline, while the app had its
 * request (up_int.h lg_up_orphan): the app does not notice a client that left its proxy and
 * works on, so the request keeps its server-wide place (shm/upstream.h) until the app's answer
 * is read whole, checked by the same framing rules (http/resp.h) and dropped, or until the
 * first-byte timeout while the app sent nothing (else the request's deadline): then the app
 * connection is closed and the place goes back. max_conns therefore bounds the requests the
 * app works on, not the clients still waiting for them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "worker/upstream/up_int.h"

/* Only readable matters now (nothing more is written to the app). */
static void
watch_read(struct lg_conn_up *x)
{
	struct lg_upc *uc = x->uc;
	int want = x->in_len < sizeof(x->in) ? EV_READ : 0;

	if (ev_is_active(&uc->io) && uc->io.events == want)
		return;
	ev_io_stop(uc->w->ev, &uc->io);
	if (want == 0)
		return;
	ev_io_modify(&uc->io, want); /* the same descriptor (no new epoll add) */
	ev_io_start(uc->w->ev, &uc->io);
}

static int orphan_drop(struct lg_conn_up *x, int *reuse);

void
lg_up_orphan(struct lg_conn_up *x)
{
	int reuse = 0;

	/* Nothing back yet: the app works on it until its first-byte timeout, whatever the
	 * client's deadline says (a deadline-bound close would let the next request in to an
	 * app still busy with this one: after a stall, it started those seconds late). */
	if (lg_up_app_has_it(x) && x->phase_due > x->deadline)
		x->deadline = x->phase_due;
	x->c = NULL;
	x->orphan = 1;
	x->hpend_len = x->pend_len = 0; /* what was on its way to the client is dropped */
	free(x->hbuf);
	x->hbuf = NULL;
	if (!x->dispatched || x->out_off < x->out_len || x->body_sent < x->body_len) {
		/* The rest of the request never comes: the app reads the end of its input (a
		 * body cut short it answers or gives up on), and the connection is not kept. */
		(void)shutdown(x->uc->fd, SHUT_WR);
		x->out_off = x->out_len;
		x->dispatched = 0;
	}
	x->body = NULL; /* a buffered body's transit buffer goes back with the connection */
	x->body_sent = x->body_len;
	/* What the app sent and the client never took is dropped now: the buffer may be full
	 * (nothing more would be read from the app) or hold the answer's end (no event would
	 * come), and the place would be held to the deadline. */
	if (orphan_drop(x, &reuse)) {
		lg_up_free(x, reuse);
		return;
	}
	lg_up_arm(x);
	watch_read(x);
}

/* Reads what the app sent into x->in. Returns 1 while the connection is open (or would
 * block), 0 at its end (EOF or an error: x->eof set). */
static int
orphan_recv(struct lg_conn_up *x)
{
	for (;;) {
		ssize_t n = recv(x->uc->fd, x->in + x->in_len, sizeof(x->in) - x->in_len,
		    MSG_DONTWAIT);

		if (n > 0) {
			x->in_len += (size_t)n;
			return 1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		x->eof = 1;
		return 0;
	}
}

/* Reads the answer in x->in by its framing, dropping it. Returns 1 when it is over (whole, or
 * it can never be: x->eof or a framing fault, then reuse is 0 with *reuse), 0 while more is to
 * come. */
static int
orphan_drop(struct lg_conn_up *x, int *reuse)
{
	*reuse = 0;
	for (;;) {
		if (!x->head_done) {
			long h = lg_resp_head(&x->resp, x->in, x->in_len);

			if (h == LG_RESP_PARTIAL)
				return x->eof || x->in_len == sizeof(x->in);
			if (h < 0 || x->resp.framing == LG_RESP_UPGRADE)
				return 1;
			if (x->resp.interim) {
				memmove(x->in, x->in + h, x->in_len - (size_t)h);
				x->in_len -= (size_t)h;
				continue;
			}
			x->in_off = (size_t)h;
			x->head_done = 1;
			lg_upc_judge(x, x->uc->si, x->resp.status < 500); /* outlier ejection's */
			lg_up_tee_head(x, x->in); /* the flight's waiters still want it */
		}
		while (!lg_resp_done(&x->resp) && x->in_off < x->in_len) {
			const char *d;
			size_t dl;
			long k = lg_resp_body(&x->resp, x->in + x->in_off, x->in_len - x->in_off,
			    &d, &dl);

			if (k < 0)
				return 1;
			x->in_off += (size_t)k;
			lg_up_tee_data(x, d, dl);
		}
		if (lg_resp_done(&x->resp)) {
			*reuse = lg_up_reusable(x);
			x->tee_status = x->resp.status;
			return 1;
		}
		x->in_off = x->in_len = 0;
		return x->eof;
	}
}

void
lg_up_orphan_event(struct lg_conn_up *x, int revents)
{
	const struct lg_upstream_def *u = lg_up_of(x)->def;
	ev_tstamp now = ev_now(x->w->ev);
	int reuse = 0;

	if (revents == 0) { /* the timer */
		if (now < x->deadline - 1e-3 && (x->phase_due == 0 || now < x->phase_due - 1e-3)) {
			lg_up_arm(x);
			return;
		}
		log_info("upstream %s: the app still had a request nobody waits for at its %s: "
		    "closing its connection", u->name, now >= x->deadline - 1e-3 ? "deadline" :
		    "first-byte timeout");
		if (x->in_len == 0 && !x->head_done) /* no first byte in time: its server's fault */
			lg_upc_judge(x, x->uc->si, 0);
		lg_up_free(x, 0);
		return;
	}
	(void)orphan_recv(x);
	if (x->in_len > 0 && x->phase_due > 0) {
		x->phase_due = 0; /* the first byte came: only the deadline is left */
		lg_up_arm(x);
	}
	if (orphan_drop(x, &reuse)) {
		lg_up_free(x, reuse);
		return;
	}
	watch_read(x);
}
