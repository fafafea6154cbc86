/* The app's answer to the client: its head checked whole by http/resp.c before a byte goes on
 * (an invalid one is a 502 and nothing of it is forwarded), rewritten without hop-by-hop
 * fields and with lagless's framing, then its body streamed: one piece at a time, the next
 * read from the app only once the client took the last (RFC 9112 6.3, RFC 9110 7.6.1). And the
 * request side's verbs the router calls: body, room, dispatch. */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "worker/upstream/up_int.h"
#include "worker/upstream/upstream.h"

/* len bytes of s at b + n; returns the new length. */
static size_t
put(char *b, size_t n, const char *s, size_t len)
{
	memcpy(b + n, s, len);
	return n + len;
}

#define PUT_LIT(b, n, lit) put((b), (n), (lit), sizeof(lit) - 1)

/* Body bytes a first piece may have to be sent in the head's write (one send, not two). */
#define WITH_HEAD_MAX 4096

/* The client's head from the app's (hop-by-hop and framing fields left out, lagless's framing
 * written), into x->hbuf, with room after it for the body bytes that came with the head (up
 * to WITH_HEAD_MAX: write_pending sends them in the head's write). Copies and lg_fmt_u64,
 * not snprintf: formatting was a tenth of a proxied request's instructions
 * (bench/bench_proxy.py, 13a). What is written beside the
 * app's own bytes (status line and the fields copied from head, hlen at most together) is
 * under 100 bytes, within the 256 of room. Returns 0, or -1 out of memory. */
static int
client_head(struct lg_conn_up *x, const char *head, size_t hlen)
{
	const struct lg_resp *r = &x->resp;
	const struct lg_http_req *q = &x->c->http.req;
	size_t more = x->in_len - hlen < WITH_HEAD_MAX ? x->in_len - hlen : WITH_HEAD_MAX;
	char *b = malloc(hlen + 256 + more);
	size_t n;

	if (b == NULL)
		return -1;
	n = PUT_LIT(b, 0, "HTTP/1.1 ");
	n += lg_fmt_u64(b + n, (uint64_t)r->status);
	b[n++] = ' ';
	n = put(b, n, head + r->reason.off, r->reason.len);
	n = PUT_LIT(b, n, "\r\n");
	for (unsigned i = 0; i < r->nfields; i++) {
		const struct lg_resp_field *f = &r->fields[i];

		if ((f->flags & LG_RESP_F_HOP) || ((f->flags & LG_RESP_F_FRAMING) &&
		    r->framing != LG_RESP_NONE))
			continue;
		n = put(b, n, head + f->line.off, f->line.len);
	}
	x->raw = 1;
	if (r->framing == LG_RESP_LENGTH) {
		n = PUT_LIT(b, n, "Content-Length: ");
		n += lg_fmt_u64(b + n, r->content_length);
		n = PUT_LIT(b, n, "\r\n");
	} else if (r->framing == LG_RESP_CHUNKED && q->minor >= 1)
		n = PUT_LIT(b, n, "Transfer-Encoding: chunked\r\n");
	else if (r->framing == LG_RESP_CHUNKED || r->framing == LG_RESP_CLOSE)
		x->close_client = 1, x->raw = 0; /* an HTTP/1.0 client: the payload, then the close */
	if (!q->keep_alive || x->c->w->draining)
		x->close_client = 1;
	if (x->tee_extra != NULL) /* X-Cache of a coalescing route (docs/CACHE.md) */
		n = put(b, n, x->tee_extra, strlen(x->tee_extra));
	if (x->close_client)
		n = PUT_LIT(b, n, "Connection: close\r\n");
	else if (q->minor == 0)
		n = PUT_LIT(b, n, "Connection: keep-alive\r\n");
	memcpy(b + n, "\r\n", 2);
	x->hbuf = b;
	x->hcap = hlen + 256 + more;
	x->hpend = b;
	x->hpend_len = n + 2;
	return 0;
}

/* The answer is whole and written: the app connection is kept when its answer was well framed
 * and nothing follows it, the place given back, the client's request finished. Returns -1: x
 * is gone. */
static int
finish(struct lg_conn_up *x)
{
	struct lg_conn *c = x->c;
	int status = x->resp.status, close = x->close_client;
	uint64_t bytes = x->body_bytes;
	int reuse = lg_up_reusable(x);

	atomic_fetch_add(&lg_up_of(x)->adm->requests[status / 100], 1);
	lg_up_time(x, &lg_up_of(x)->adm->total, x->arrived);
	lg_up_note_time(x);
	c->obs.up_status = status;
	x->tee_status = status; /* whole and well framed: its copy may be shared */
	lg_up_free(x, reuse);
	(void)lg_conn_stream_end(c, status, bytes, close);
	return -1; /* x is gone (c goes on with its next request, or closed) */
}

/* The head, when it is whole: 1xx interim answers dropped (lagless sent its own 100), 101
 * a tunnel (up_tunnel.c) or a 502; its status judges the server (outlier ejection), and a
 * 502 or 503 may send x to another server instead (retry_on). Returns 1 when the head is out
 * (or queued in pend), 0 when more bytes are needed (or x was sent again), -1 when x is
 * gone. */
static int
take_head(struct lg_conn_up *x)
{
	int r;

	for (;;) {
		long h = lg_resp_head(&x->resp, x->in, x->in_len);

		if (h == LG_RESP_PARTIAL) {
			if (x->eof)
				return lg_up_fail(x, 502, LG_UPR_RESET);
			if (x->in_len == sizeof(x->in))
				return lg_up_fail(x, 502, LG_UPR_INVALID);
			return 0;
		}
		if (h < 0) {
			lg_upc_judge(x, x->uc->si, 0);
			return lg_up_fail(x, 502, LG_UPR_INVALID);
		}
		if (x->resp.framing == LG_RESP_UPGRADE) { /* a tunnel when asked for, else a 502 */
			lg_upc_judge(x, x->uc->si, 1);
			return lg_up_tunnel(x, (size_t)h);
		}
		if (x->resp.interim) {
			memmove(x->in, x->in + h, x->in_len - (size_t)h);
			x->in_len -= (size_t)h;
			continue;
		}
		lg_upc_judge(x, x->uc->si, x->resp.status < 500); /* outlier ejection's count */
		if ((r = lg_up_retry_status(x)) != 0)
			return r == 1 ? 0 : -1; /* sent to another server, or gone */
		if (client_head(x, x->in, (size_t)h) == -1)
			return lg_up_fail(x, 502, LG_UPR_INVALID);
		x->in_off = (size_t)h;
		x->head_done = 1;
		lg_up_tee_head(x, x->in);
		return 1;
	}
}

/* Writes what is pending for the client: the head, then the body piece. Returns 1 when all of
 * it went, 0 when the client's socket is full, -1 when c is closed (x gone). */
static int
write_pending(struct lg_conn_up *x)
{
	struct lg_conn *c = x->c;

	if (x->hpend_len > 0 && x->pend_len > 0 && x->hpend == x->hbuf &&
	    x->hpend_len + x->pend_len <= x->hcap) {
		/* The head and a first piece that fits after it go in one write (nginx's writev:
		 * one system call per answer fewer, bench/bench_proxy.py 13a). */
		memcpy(x->hbuf + x->hpend_len, x->pend, x->pend_len);
		x->hpend_len += x->pend_len;
		x->pend += x->pend_len;
		x->pend_len = 0;
	}
	while (x->hpend_len > 0 || x->pend_len > 0) {
		const char **p = x->hpend_len > 0 ? &x->hpend : &x->pend;
		size_t *len = x->hpend_len > 0 ? &x->hpend_len : &x->pend_len;
		ssize_t n = lg_conn_stream_write(c, *p, *len);

		if (n < 0) {
			lg_conn_close(c); /* the client left: gone frees x */
			return -1;
		}
		if (n > 0 && !x->started) {
			x->started = 1;
			lg_obs_response(&c->obs, x->resp.status, 0); /* the access line's, if cut */
		}
		*p += n;
		*len -= (size_t)n;
		if (*len > 0) {
			lg_conn_stream_want(c, 1);
			return 0;
		}
	}
	c->obs.resp_bytes = (size_t)x->body_bytes; /* every piece checked went out */
	free(x->hbuf);
	x->hbuf = NULL;
	return 1;
}

/* Checks the next body piece in x->in into x->pend. Returns 0, or -1 when x is gone (a framing
 * fault: a 502 while nothing went to the client, else the client's connection closed). */
static int
next_piece(struct lg_conn_up *x)
{
	const char *d;
	size_t dl;
	long k = lg_resp_body(&x->resp, x->in + x->in_off, x->in_len - x->in_off, &d, &dl);

	if (k < 0)
		return lg_up_fail(x, 502, LG_UPR_INVALID);
	x->pend = x->raw ? x->in + x->in_off : d;
	x->pend_len = x->raw ? (size_t)k : dl;
	x->body_bytes += dl;
	lg_up_tee_data(x, d, dl);
	x->in_off += (size_t)k;
	return 0;
}

/* Moves the answer on as far as the two sockets allow. The head goes out with the first body
 * piece already checked (when one came with it), so a bad first chunk is still a 502. */
int
lg_up_pump(struct lg_conn_up *x)
{
	for (;;) {
		if (!x->head_done) {
			int r = take_head(x);

			if (r <= 0)
				return r;
		}
		if (x->pend_len == 0 && !lg_resp_done(&x->resp) && x->in_off < x->in_len &&
		    next_piece(x) == -1)
			return -1;
		/* The app's answer is whole: its place goes back before the client has the last
		 * byte, so a client's next request never finds the place still taken. */
		if (x->placed && lg_resp_done(&x->resp))
			lg_up_release(x);
		/* Its copy ends here too, before the client has the last byte: a request the
		 * client sends next finds the answer stored, not the flight still open. */
		if (x->tee != NULL && lg_resp_done(&x->resp))
			lg_up_tee_end(x, x->resp.status);
		if (x->hpend_len > 0 || x->pend_len > 0) {
			int r = write_pending(x);

			if (r <= 0)
				return r;
		}
		if (lg_resp_done(&x->resp))
			return finish(x);
		if (x->in_off < x->in_len)
			continue;
		x->in_off = x->in_len = 0;
		if (!x->eof)
			return 0;
		if (lg_resp_eof(&x->resp) == -1)
			return lg_up_fail(x, 502, LG_UPR_TRUNCATED);
	}
}
