/* The upstream room's own state (worker/upstream/ only): a proxied request's part of a
 * connection, the app connections and this loop's pools and queues. */
#ifndef LG_WORKER_UP_INT_H
#define LG_WORKER_UP_INT_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "http/resp.h"
#include "kinds/registry.h"
#include "shm/codel.h"
#include "shm/upstream.h"
#include "worker/core/conn.h"
#include "worker/upstream/up_state.h"

/* bytes toward the app: the head, then body as it comes. A head of the default --max-head
 * (LG_HTTP_MAX_HEAD, every field kept: http/http.h) plus the fields lagless adds (X-Forwarded-*,
 * X-Request-Id, X-Lagless-Deadline-Ms, a Host of its own: well under 4 KiB) fits; a larger one
 * (a raised --max-head) is a 431 before anything is sent (lg_up_head). */
#define LG_UP_OBUF   (LG_HTTP_MAX_HEAD + 4096)
#define LG_UP_IBUF   32768   /* bytes from the app: its head must fit, then body pieces */
#define LG_UP_FIELDS 128     /* field lines of the app's head */
/* Freed exchanges a loop's pool of them keeps per upstream past a trim (common/pool.h). */
#define LG_UP_XKEEP  4

struct lg_upc;
struct lg_up_tee;

/* One app connection of this loop (a pool entry when idle). */
struct lg_upc {
	struct lg_worker *w;
	uint32_t ui, si;              /* upstream and server */
	int fd;
	ev_io io;
	enum { UPC_CONNECTING, UPC_BUSY, UPC_IDLE } state;
	uint64_t nreq;                /* requests begun on it */
	struct lg_conn_up *x;         /* the exchange it carries (BUSY, CONNECTING) */
	struct lg_upc *prev, *next;   /* idle list of its server */
	ev_tstamp idle_since;
};

/* One server of an upstream, on this loop. */
struct lg_up_srv {
	struct lg_upc *idle;          /* kept connections, most recent first */
	unsigned nidle, nbusy;
};
_Static_assert(LG_UP_SERVERS <= LG_UPADM_SERVERS, "a shared record counts every server");

/* A server-wide bound on this loop: an upstream's (max_conns, queue) or a route's bulkhead
 * within it, with this loop's requests waiting for one of its places. */
struct lg_up_gate {
	struct lg_upadm *adm;         /* the server-wide record (shared) */
	struct lg_conn_up *qhead, *qtail; /* requests of this loop waiting for a place, FIFO */
	int serving;                  /* serve_queue is running (no reentry) */
	uint32_t rec;                 /* the record's index (shm/upstream.h; UPWAKE names it) */
	int bulkhead;                 /* a route's bulkhead: a place here is then asked of the
	                               * upstream's gate */
};

/* One upstream, on this loop. */
struct lg_up_one {
	const struct lg_upstream_def *def;
	struct lg_upadm *adm;         /* the server-wide record (shared): g.adm */
	struct lg_up_gate g;          /* its bounds and this loop's waiters */
	struct lg_codel_params codel; /* admission by queue wait (off: target 0) */
	struct lg_up_srv srv[LG_UP_SERVERS];
	uint32_t rr;                  /* where the next pick's scan starts: ties rotate */
	/* Exchanges' memory: page-aligned blocks of a pool (common/pool.h), fresh mappings that
	 * hold only the pages an exchange's bytes reach (one waiting for its answer: one page),
	 * kept while in use, unmapped after a trim period unused (lg_up_tick). A malloc'd 55 KiB
	 * exchange straddled pages at random, and freed ones stayed in the heap: 500 requests
	 * at once left their pages behind them. */
	struct lg_pool xpool;
};

/* A proxied request: LG_UP(c)->x (worker/upstream/up_state.h), from its head until its answer
 * is written or c closes; after c closed mid-exchange (orphan), until the app's answer is read
 * whole and dropped or the deadline passes, holding its place all along. */
struct lg_conn_up {
	struct lg_conn *c;            /* NULL once orphaned */
	struct lg_worker *w;
	int orphan;                   /* the client left while the app had the request */
	uint32_t ui;
	struct lg_up_gate *bh;        /* its route's bulkhead, or NULL */
	uint32_t client_ref;          /* its entry among the upstream's clients (client_share), or
	                               * 0 */
	int bh_placed;                /* holds a place of bh */
	int placed;                   /* holds an in-flight place of the upstream */
	int queued;                   /* waits for one in qg's FIFO (bh's, then the upstream's) */
	struct lg_up_gate *qg;
	struct lg_conn_up *qprev, *qnext;
	struct lg_upc *uc;            /* its app connection, or NULL */
	int reused;                   /* uc was a kept connection */
	int retried;                  /* sent again after a kept connection failed */
	int moved;                    /* sent again to another server (retry_on) */
	int budget;                   /* holds a place of the retry budget (shm/upeject.h) */
	uint32_t retry_on;            /* the route's LG_RETRY_* bits */
	uint32_t tried;               /* servers it was sent to, bit per server */
	uint32_t held_si;             /* 1 + the server whose in-flight count it is in until
	                               * judged (shm/upeject.h lg_upadm_srv_take), or 0 */
	unsigned sends;               /* times it was sent again (resend) */
	ev_timer timer;               /* the deadline, connect and first-byte timeouts */
	ev_tstamp deadline, phase_due; /* libev time; phase_due: connect or first byte, or 0 */
	ev_tstamp arrived, placed_at, connect_at; /* for the time histograms (shm/upstream.h) */
	int phase;                    /* enum lg_up_reason of phase_due */
	int idempotent;               /* RFC 9110 9.2.2 */
	int upgrade;                  /* the request asks to switch protocols (http/fwd.h
	                               * lg_fwd_upgrade_request): Upgrade goes to the app, and a
	                               * 101 answer makes a tunnel (up_tunnel.c) */
	int has_body;
	int chunked;                  /* the body goes to the app chunked (unknown length) */
	int dispatched;               /* the request is whole (state PROXY) */
	int compacted;                /* bytes of out were dropped: it no longer starts with the
	                               * head (no resend) */
	uint64_t sent;                /* bytes written to the app */
	int buffered;                 /* the body came whole first (request_buffering): it is sent
	                               * from body (the transit buffer the connection holds) with
	                               * its Content-Length, after the head in out */
	const unsigned char *body;
	uint64_t body_len, body_sent;
	size_t out_len, out_off;
	/* the answer */
	struct lg_resp resp;
	struct lg_resp_limits lim;
	int head_done;                /* the answer's head is checked, the client's built */
	int started;                  /* a byte of the answer went to the client */
	int got_bytes;                /* the app sent something */
	int eof;                      /* the app closed its side */
	int raw;                      /* forward the body bytes as they are (chunked kept) */
	int close_client;             /* the client's connection ends with this answer */
	uint64_t body_bytes;
	size_t in_len, in_off;        /* bytes in `in`, and how many the parser took */
	const char *hpend, *pend;     /* bytes being written to the client (the head, a body
	                               * piece), and how many */
	size_t hpend_len, pend_len;
	char *hbuf;                   /* the client head built from the app's (heap) */
	size_t hcap;                  /* hbuf's bytes: room for a first body piece after the head */
	const struct lg_up_tee *tee;  /* who gets a copy of the answer (lg_up_tee), or NULL */
	void *tee_arg;
	const char *tee_extra;        /* lines added to the client's head ("X-Cache: miss\r\n") */
	int tee_status, tee_mine;     /* what tee->end is told when x is freed (lg_up_free) */
	int detached;                 /* a refresh without a client still connecting or writing
	                               * (lg_up_refresh); then an orphan */
	/* The buffers last, the small members above all in the first page: an exchange touches
	 * only the pages its bytes reach (xchg_alloc zeroes the members, never the buffers), so
	 * one waiting for its answer holds that page and the head's in out, and a small answer
	 * adds the first of in's pages and of the field index's. */
	char out[LG_UP_OBUF];
	struct lg_resp_field fields[LG_UP_FIELDS];
	char in[LG_UP_IBUF];
};

/* The memory budget counts an exchange as LG_UP_XCHG_BYTES (shm/upstream.h): the struct, the
 * client's head (up to the app's, + 256, up_resp.c client_head) and malloc's overhead. */
_Static_assert(sizeof(struct lg_conn_up) + LG_UP_IBUF + 256 + 64 <= LG_UP_XCHG_BYTES,
    "an exchange within its share of the memory budget");
_Static_assert(sizeof(struct lg_upc) + 64 <= LG_UP_CONN_BYTES / 2,
    "an app connection within its share of the memory budget");

/* up_pool.c: app connections */

/* An app connection for x (a kept one of the least busy server in the rotation that x was
 * not sent to yet, or a new connect; a connect that fails at once is judged, and another
 * server tried when lg_up_may_move allows). Returns 0 with x->uc set (x->reused when kept),
 * or -1 (no server reachable now). */
int lg_upc_get(struct lg_worker *w, struct lg_conn_up *x);

/* 1 when a server of x's upstream could take x now (ready, in the rotation, not tried by x),
 * else 0. */
int lg_upc_other(struct lg_worker *w, const struct lg_conn_up *x);

/* Judges server si of x's upstream by an exchange's outcome (ok 1: an answer under 500; 0: a
 * connect refused or timed out, no first byte in time, a 5xx, a fresh connection reset):
 * outlier ejection's counts (shm/upeject.h), an ejection logged once; x leaves the server's
 * count of requests in flight. */
void lg_upc_judge(struct lg_conn_up *x, uint32_t si, int ok);

/* Puts back in the rotation the servers whose back-off ended (each logged once). */
void lg_upc_eject_sweep(struct lg_worker *w);

/* x's exchange on uc ended: kept (reuse 1: idle, read-watched) or closed. x->uc cleared. */
void lg_upc_put(struct lg_conn_up *x, int reuse);

/* An idle connection became readable: the app closed it (EOF, reset) or sent bytes nobody
 * asked for; either way it cannot carry a request: closed. */
void lg_upc_idle_event(struct lg_upc *uc);

/* Closes the idle ones past their idle timeout (all with force) of every upstream. */
void lg_upc_sweep(struct lg_worker *w, int force);

/* up_xchg.c: the exchange */

/* The tee's steps (lg_up_tee), no-ops without one: the final head (in head, x->resp's index),
 * a payload piece. Its end is called by lg_up_free, after x is gone, with x->tee_status (the
 * app's status, set when its answer was read whole) and x->tee_mine (lagless's own answer to
 * the client, set by lg_up_fail). */
void lg_up_tee_head(struct lg_conn_up *x, const char *head);
void lg_up_tee_data(struct lg_conn_up *x, const char *p, size_t n);
/* A detached refresh's app connection is ready (revents): connected, then its request
 * written; then it is read as an orphan's. */
void lg_up_detached_io(struct lg_conn_up *x, int revents);

/* The app's answer (status) is whole and well framed: x->tee's end now (x->tee set), not when
 * x is freed. It may answer other connections and send their requests to the app. */
void lg_up_tee_end(struct lg_conn_up *x, int status);

/* An app connection uc carrying x is connected (or failed: err, an errno) or ready to read or
 * write (revents). */
void lg_up_io(struct lg_upc *uc, int revents);

/* x got its place: take a connection and start sending. Returns 0, or -1 when c was answered
 * (closed or finished). */
int lg_up_start(struct lg_conn_up *x);

/* Ends x with an answer of lagless's own (status, reason) when nothing was forwarded yet, or a
 * close of the client's connection after. Returns -1: x is gone (c answered or closed; the
 * caller touches neither). */
int lg_up_fail(struct lg_conn_up *x, int status, enum lg_up_reason why);

/* Frees x and gives back what it holds (place, queue entry, connection: closed unless
 * reuse); LG_UP(c)->x cleared and c unheld (an orphan has no c). */
void lg_up_free(struct lg_conn_up *x, int reuse);

/* Whether x may go once to another server after why (enum lg_up_retry: a connect failure, a
 * 502 or 503 answer): the route's retry_on says so, RFC 9110 9.2.2 allows it (nothing was
 * sent, or the method is idempotent and the request is still whole in x->out), it was not
 * moved before, another server can take it and the retry budget has room (then a place of
 * it is taken, given back with x). Returns 1 (the caller resends), else 0. */
int lg_up_may_move(struct lg_conn_up *x, enum lg_up_retry why);

/* The app answered x with a head (x->resp.status) not yet forwarded: a 502 or 503 sends x
 * once to another server when lg_up_may_move allows. Returns 1 (sent again: x waits for the
 * new answer), 0 (the answer goes to the client), or -1 (x is gone). */
int lg_up_retry_status(struct lg_conn_up *x);

/* Arms x's timer for the earliest of its deadline and its phase's limit (phase_due). */
void lg_up_arm(struct lg_conn_up *x);

/* 1 when x's app connection may carry another request: the answer is whole, said keep-alive,
 * nothing followed it and the request went whole. */
int lg_up_reusable(const struct lg_conn_up *x);

/* up_orphan.c: c closed, or was answered 504 at its deadline, while the app had x's request
 * (sent > 0, answer not whole): x goes on without c, reading the answer to its end and
 * dropping it (then the app connection is kept when lg_up_reusable) or closing the app
 * connection at the deadline, or at the first-byte timeout while the app has sent nothing
 * (lg_up_app_has_it); its place is given back only then, so the app never has more than
 * max_conns requests, counting those nobody waits for. A request not wholly sent is ended
 * toward the app (shutdown(2) SHUT_WR). */
void lg_up_orphan(struct lg_conn_up *x);

/* 1 when the app has x's whole request and has sent nothing back yet, while its first-byte
 * timeout is still ahead: the app works on it whoever waits, so its place is held
 * (lg_up_orphan). A request not wholly sent is not: the app cannot have started it. */
static inline int
lg_up_app_has_it(const struct lg_conn_up *x)
{
	return x->placed && x->uc != NULL && x->dispatched && x->out_off >= x->out_len &&
	    x->body_sent >= x->body_len && !x->got_bytes && !x->started &&
	    x->phase == LG_UPR_FIRST_BYTE && x->phase_due > ev_now(x->w->ev);
}

/* An orphan's app connection is readable (revents), or its timer fired (revents 0). */
void lg_up_orphan_event(struct lg_conn_up *x, int revents);

/* up_resp.c: moves the answer on as far as the two sockets allow. Returns 0, or -1 when x is
 * gone (answered, failed, or c closed): the caller touches neither x nor c then. */
int lg_up_pump(struct lg_conn_up *x);

/* x got its bulkhead's place (bh_placed): ask the upstream for one, as lg_up_claim; a refusal
 * is answered here. Returns 0, or -1 when x is gone. */
int lg_up_bulkhead_placed(struct lg_conn_up *x);

/* x took a place of its upstream after waiting: shed (503) when CoDel says it waited too long,
 * else lg_up_start. Returns 0, or -1 when x is gone. */
int lg_up_dequeued(struct lg_conn_up *x);

/* up_admit.c: the places */

/* Gives x's places back (the upstream's, then its bulkhead's) and hands each to a waiter of
 * this loop or wakes the loops that have some. */
void lg_up_release(struct lg_conn_up *x);

/* x leaves the FIFO it waits in (and gives that queue place back). */
void lg_up_unqueue(struct lg_conn_up *x);

/* Enqueues x in g's FIFO (it holds a queue place of g). */
void lg_up_enqueue(struct lg_conn_up *x, struct lg_up_gate *g);

/* The gate of route bulkhead b (1-based, struct lg_route_def bulkhead) on this loop, or NULL. */
struct lg_up_gate *lg_up_bulkhead(struct lg_worker *w, uint32_t b);

/* up_head.c: the request head toward the app into x->out. Returns 0, or -1 (431: it does not
 * fit the buffer, or the request kept too few of its fields). */
int lg_up_build_head(struct lg_conn_up *x, const struct lg_upstream_def *u);

/* up_tunnel.c: the app answered x's upgrade request with 101, its head hlen bytes of x->in:
 * when the request asked for it and the 101 names a protocol it offered, the 101 goes to the
 * client and c's socket and x's app connection become a tunnel, relaying bytes both ways (x
 * kept, holding its place and its app connection, until the tunnel closes); else a 502.
 * Returns -1: x is no longer the caller's (tunnel or answered), nor c. */
int lg_up_tunnel(struct lg_conn_up *x, size_t hlen);

/* This loop drains: every tunnel, open now or later, closes at 90% of --drain-timeout-ms. */
void lg_up_tunnel_drain(struct lg_worker *w);

static inline struct lg_up_one *
lg_up_of(const struct lg_conn_up *x)
{
	return &LG_WUP(x->w)->ups[x->ui];
}

/* The access line's upstream time: from the place taken to now, in ms. */
static inline void
lg_up_note_time(const struct lg_conn_up *x)
{
	x->c->obs.up_ms = x->placed_at > 0 ? (ev_now(x->c->w->ev) - x->placed_at) * 1e3 : 0;
}

/* Observes the time from `since` (libev time) to now into x's upstream's histogram h. */
static inline void
lg_up_time(const struct lg_conn_up *x, struct lg_hist *h, ev_tstamp since)
{
	ev_tstamp d = ev_now(x->w->ev) - since;

	lg_upadm_observe(h, d > 0 ? (uint64_t)(d * 1e9) : 0);
}

#endif
