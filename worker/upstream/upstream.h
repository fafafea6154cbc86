/* The upstream room (issue 35): routes that name an [upstream] instead of a kind are proxied to
 * an app over keep-alive connections of this loop worker, with the pool's promises: a
 * server-wide admission count decided before a byte of the body is read (shm/upstream.h: 503
 * at once when in flight and queue are full), a deadline counted from the request's arrival
 * (504), strict framing of the answer (http/resp.h: 502 for anything ambiguous, nothing
 * forwarded), both bodies streamed through bounded buffers with backpressure.
 *
 * Its parts of a connection (LG_UP(c): the exchange, struct lg_conn_up) and of the loop worker
 * (LG_WUP(w): pools and queues) are declared in worker/upstream/up_state.h and up_int.h and
 * private to this room (the core holds them as opaque bytes, LG_PART): the
 * router calls the verbs below, and this room answers through the connection core's verbs
 * (lg_conn_error, the lg_conn_stream_* verbs). The core never includes this header. */
#ifndef LG_WORKER_UPSTREAM_H
#define LG_WORKER_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "http/resp.h"
#include "kinds/registry.h"
#include "shm/wire.h"
#include "worker/core/conn.h"
#include "worker/upstream/up_state.h"

/* Builds this loop's part from the registry's upstreams (pools and queues, all empty).
 * Returns 0, or -1 with errno ENOMEM. */
int lg_up_loop_init(struct lg_worker *w);

/* The loop's tick (100 ms): kept connections idle past idle_timeout_ms are closed, queued
 * requests try again for a place (a lost UPWAKE is made up for here), ejected servers whose
 * back-off ended go back in the rotation. */
void lg_up_tick(struct lg_worker *w);

/* A graceful drain began: kept connections are closed; proxied requests finish. */
void lg_up_drain(struct lg_worker *w);

/* UPWAKE m arrived on this loop's completion channel: a place of m's upstream came free. */
void lg_up_message(struct lg_worker *w, const struct lg_msg *m);

/* At head time, for c's request to route d (an upstream route of the registry: its upstream,
 * bulkhead, deadline_ms from the request's arrival, retry_on): admission (the client
 * address's share, the bulkhead's place or its queue, then the upstream's: a 503 with
 * Retry-After at once when full or when CoDel sees a standing queue, before any body byte is
 * read), the head for the app, and the connect when a place is free; retry_on
 * (kinds/registry.h LG_RETRY_*) says what sends it once to another server. Returns 0, or the
 * status the caller answers: 503 or 429 (refused, counted), 431 (the head does not fit). */
int lg_up_head(struct lg_conn *c, const struct lg_route_def *d);

/* For a route with request_buffering = on, at head time, before its body is read: the status
 * the caller answers at once when route d's upstream or its bulkhead (as lg_up_head) is full
 * (max_conns in flight and the queue full: 503, counted as `full`) or the client address holds
 * its share (client_share: 503 or 429, counted as `client_limit`), else 0. Nothing is taken:
 * the request takes its place only once its body is whole (lg_up_head_body), so a slow upload
 * holds none. */
int lg_up_full(struct lg_conn *c, const struct lg_route_def *d);

/* c's request with its body received whole (len bytes at body, in a transit buffer c holds
 * until its answer is written: worker/job/offload.h lg_offload_claim_body) goes to route
 * d's upstream with a Content-Length, its deadline d->deadline_ms from now: admission (a
 * place, or the queue), the head, then the answer awaited (state LG_CONN_PROXY); d as
 * lg_up_head's. Returns 0, or 503 or 429 (refused now, no server reachable) or 431 (the head
 * does not fit): the caller answers it. */
int lg_up_head_body(struct lg_conn *c, const struct lg_route_def *d, const unsigned char *body,
    uint64_t len);

/* Body bytes of c's proxied request from the parser (decoded: the framing toward the app is
 * this room's). Returns 0, or -1 with c->http.status set. */
int lg_up_body(struct lg_conn *c, const char *at, size_t len);

/* The input bytes the parser may feed now: the free room of the buffer toward the app (0 while
 * the request waits for a place, or that buffer is full: backpressure on the client). */
size_t lg_up_body_room(struct lg_conn *c);

/* The request is whole: c waits for the app's answer (state LG_CONN_PROXY). Returns 0, or -1
 * when c was closed or finished. */
int lg_up_dispatch(struct lg_conn *c);

/* The client's socket can take more of the answer (ops->stream). Returns as lg_up_dispatch. */
int lg_up_stream(struct lg_conn *c);

/* c got its connection block (ops->init, through the router): no exchange. */
static inline void
lg_up_conn_init(struct lg_conn *c)
{
	LG_UP(c)->x = NULL;
}

/* 1 when c's current request is proxied (an exchange from its head to its answer's end),
 * else 0. */
static inline int
lg_up_active(const struct lg_conn *c)
{
	return LG_UP(c)->x != NULL;
}

/* c closes (client gone, write error): its place, queue entry and app connection are given
 * back (the app connection is closed when an exchange was under way). */
void lg_up_gone(struct lg_conn *c);

/* A copy of an answer for someone besides its client (the router hands single-flight's:
 * docs/CACHE.md "Proxied routes"). The steps are called as the app's answer is read, whether
 * its client still waits for it or left (the exchange then reads the answer to its end all
 * the same: up_orphan.c), never from inside lg_up_tee itself:
 * head: the final head (head bytes, http/resp.h's index f[0..n) into them) is checked and
 *   about to go to the client (1xx dropped, a retry_on decided before);
 * data: payload bytes of the body, in order (dechunked), as each piece is checked;
 * end: called once, last: status is the app's when its answer was read whole and well framed,
 *   else 0, with mine the status lagless answered the client in its stead (502, 503, 504),
 *   or 0 when it answered nothing (the client left first, the answer was cut). */
struct lg_up_tee {
	void (*head)(void *arg, int status, const char *head, const struct lg_resp_field *f,
	    unsigned n);
	void (*data)(void *arg, const char *p, size_t n);
	void (*end)(void *arg, int status, int mine);
};

/* A background refresh (docs/CACHE.md "Proxied routes"): c's request (a GET without a body)
 * goes to route d's app again, for tee t with arg alone: when a place of the upstream takes it
 * at once, the exchange is detached from c (c is answered otherwise, by the caller), connects
 * and writes if it must, and reads the app's answer to its end for t (up_orphan.c), within
 * the route's deadline and the upstream's timeouts. Returns 0 (t's end comes later, at the
 * latest then), or -1 when no place is free now (nothing sent, nothing answered, t never
 * called). */
int lg_up_refresh(struct lg_conn *c, const struct lg_route_def *d, const struct lg_up_tee *t,
    void *arg);

/* After lg_up_head (c's exchange exists): tee t (static, may be NULL) with arg gets a copy of
 * the answer; extra (static, NULL or CRLF-ended lines) is added to the head the client gets. */
void lg_up_tee(struct lg_conn *c, const struct lg_up_tee *t, void *arg, const char *extra);

#endif
