/* Connection and worker state shared by the loop worker's modules (worker/ only; the master
 * sees nothing of it). One request at a time per connection: read and parse, then either answer
 * inline or wait for the compute pool, write the response, and go on with any pipelined bytes.
 *
 * Ownership rule: a struct lg_conn is a block of the loop's pool (common/pool.h), given back the
 * moment the connection closes, and any answer may close it (a failed write, the last response
 * of a closing or draining connection). Every function that may close c therefore returns an
 * int: 0 while c is still the caller's, -1 when it is closed or finished for the caller
 * (lingering: it closes later by itself). After -1 nothing may read or write c: whatever must be
 * counted or decided about the request (statistics, a cache refresh) is done before answering.
 * The ASan build poisons pool blocks while they are free, so any test that reaches such a use
 * reports it. */
#ifndef LG_WORKER_CONN_H
#define LG_WORKER_CONN_H

#include <ev.h>
#include <stdint.h>

#include "common/pool.h"
#include "http/http.h"
#include "worker/core/env.h"
#include "worker/core/obs_state.h"

#define LG_CONN_RBUF  16384  /* bytes of buffered input per connection: the read-side backpressure
                              * bound; the parser streams, so a head may be longer */
#define LG_CONN_WHEAD 8192  /* queued output: response heads and copied bodies */
#define LG_CONN_COPY  2048  /* bodies up to this size are copied into it, larger ones referenced */
#define LG_CONN_BATCH 4096  /* pipelined responses are batched while at most this much is
                             * queued, so the next head and a copied body always fit */

enum lg_conn_state {
	LG_CONN_HEAD,   /* reading and parsing a request head (or a body the parser reads) */
	LG_CONN_BODY,   /* reading a Content-Length body straight into a slot's input region */
	LG_CONN_JOB,    /* the job is queued or running; waiting for its completion */
	LG_CONN_WRITE,  /* writing the response */
	LG_CONN_PROXY,  /* the answer is streamed by another room (worker/upstream/) through the
	                 * stream verbs below; that room keeps its own timers */
	LG_CONN_LINGER, /* response sent, write side shut: unread input is drained before the close,
	                 * so the kernel does not reset the connection and lose the response
	                 * (RFC 9112 section 9.6) */
};

struct lg_conn;
struct lg_conn_idle;
struct lg_coal;
struct lg_body;

/* A room's part of a connection or of the loop worker (nginx's r->ctx[module], r->upstream):
 * bytes the core holds at a fixed place and never reads, typed and reached only by the room that
 * owns them, through its own macro (LG_JOB(c) in worker/job/offload_state.h, LG_FLIGHT(c),
 * LG_RT(c), ...). The header that declares a part's struct checks it fits its size here and
 * alignment LG_PART_ALIGN (_Static_assert); the core includes none of those headers. */
#define LG_PART_ALIGN 16
#define LG_PART(bytes) struct { _Alignas(LG_PART_ALIGN) unsigned char b[bytes]; }

/* A buffer the router renders a body into (/metrics, /status: worker/route/inline.c), reused
 * for the next rendering once the core has written or dropped the body (lg_render_give_back). */
struct lg_worker_render {
	char *buf;                    /* cap bytes */
	size_t cap;
	int busy;                     /* a response is still being written from it */
};

/* A response body p was written or dropped: when p is the render buffer, the buffer is free for
 * the next rendering and 1 is returned; else 0 (p is the caller's to free). */
static inline int
lg_render_give_back(struct lg_worker_render *r, const char *p)
{
	if (p != r->buf)
		return 0;
	r->busy = 0;
	return 1;
}

/* What the connection core calls back into, given by its creator (the router, which wires the
 * job and flight rooms in: worker/route/routes.c). The core answers through its own respond API;
 * of routes, jobs, slots and flights it knows only what the rooms tell it through these ops and
 * c->held (lg_conn_hold), and it writes into no room's memory: a body goes to the sink a room
 * installs (body_buf). */
struct lg_conn_ops {
	/* a request head is in (the parser returned LG_HTTP_HEAD_DONE, c->http.req is its view):
	 * the route, its admission and the body's destination. Called by the core outside the
	 * parser; returns an enum lg_http_head_action, which the core hands to lg_http_body_to
	 * before it feeds on */
	int (*head)(struct lg_conn *c);
	/* the parser's body sink (struct lg_http on_body, http/http.h), ctx being the
	 * connection */
	int (*body)(struct lg_http *h, void *conn, const char *at, size_t len);
	/* struct lg_http body_room: input bytes the parser may take of a body it reads (chunked)
	 * before more must be backed; SIZE_MAX when unbounded */
	size_t (*body_room)(struct lg_http *h, void *conn);
	/* a complete request head (and any parser-read body): answer or start the job.
	 * Returns 0, or -1 when the connection was closed or finished (the rule above) */
	int (*dispatch)(struct lg_conn *c);
	/* The body sink of a Content-Length body the core reads in state LG_CONN_BODY, installed
	 * by the room that owns its destination (the job room: the slot's input region); the core
	 * writes nowhere else. body_buf: where the next bytes go, 0 with *dst and *len (> 0, at
	 * most the bytes still owed) set, 1 while nothing is ready (wait for lg_conn_body_ready),
	 * -1 after answering (closed or finished). body_took: n bytes were written at *dst;
	 * returns 1 when that completed the body, else 0. body_got: the body's bytes so far. */
	int (*body_buf)(struct lg_conn *c, unsigned char **dst, size_t *len);
	int (*body_took)(struct lg_conn *c, size_t n);
	uint64_t (*body_got)(const struct lg_conn *c);
	/* the Content-Length body is complete (body_got reached it): 0, or -1 (closed) */
	int (*body_done)(struct lg_conn *c);
	/* readies the rooms' parts of c (job, flight, route: LG_PART) when c gets its block */
	void (*init)(struct lg_conn *c);
	/* the job deadline passed (state LG_CONN_JOB): 0, or -1 (closed) */
	int (*job_timeout)(struct lg_conn *c);
	/* the response is written while a room holds a buffer for c (LG_CONN_HELD_BUFFER): give
	 * it back */
	int (*release)(struct lg_conn *c);
	/* c closes while a room holds it (c->held: a buffer, parked on a waiting list, or an
	 * exchange with an upstream): client gone, write failed */
	void (*gone)(struct lg_conn *c);
	/* state LG_CONN_PROXY: the client's socket can take more of the answer (asked for with
	 * lg_conn_stream_want). Returns 0, or -1 when c was closed or finished or may have been
	 * (its request ended: the caller does nothing more with c in this event) */
	int (*stream)(struct lg_conn *c);
};

struct lg_worker {
	struct ev_loop *ev;
	const struct lg_loop_env *env;
	ev_signal sig_term, sig_int;
	ev_timer tick;                /* heartbeat; also retries accept after EMFILE */
	int nconns;
	int draining;
	LG_PART(128) part_acc;        /* the listener's side: LG_ACC(w) (worker/loop.h) */
	LG_PART(256) part_job;        /* completions, slots held, backing: LG_WJOB(w)
	                               * (worker/job/offload_state.h) */
	struct lg_coal *coal;         /* single-flight state (worker/flight/coalesce.c), opaque here */
	struct lg_conn *conns;        /* every connection holding a struct lg_conn (busy) */
	struct lg_conn_idle *idle;    /* every idle one: a socket, two watchers, ~150 bytes */
	struct lg_pool pool;          /* struct lg_conn blocks (worker/core/conn.c) */
	struct lg_pool rbufs;         /* read buffers (struct lg_conn rbuf), LG_CONN_RBUF each */
	char date[96];                /* cached "Server: lagless\r\nDate: ...\r\nContent-Length: "
	                               * (RFC 9110 section 6.6.1; worker/core/conn_head.c) */
	size_t date_len;
	ev_tstamp date_at;
	struct lg_worker_obs obs;     /* lag probe, slow callbacks (worker/core/obs_state.h) */
	struct lg_worker_render render; /* /metrics and /status buffer (above) */
	struct lg_http_limits lim;    /* from the configuration, shared by every connection */
	const struct lg_conn_ops *ops; /* the creator's callbacks, for every connection */
	LG_PART(64) part_rt;          /* the router's table: LG_WRT(w) (worker/route/routes_state.h) */
	LG_PART(32) part_up;          /* the upstreams' pools and queues: LG_WUP(w)
	                               * (worker/upstream/upstream.h) */
};

/* Timeouts (docs/HTTP.md): one ev_timer per connection, armed for the limit of the current
 * state (worker/core/conn_timer.c), from these instants. */
struct lg_conn_tmo {
	ev_tstamp req_at;             /* first byte of the current request (accept for the first),
	                               * 0 while idle between requests */
	ev_tstamp body_at;            /* the body began, 0 before */
	ev_tstamp linger_until;       /* lingering (conn.c linger): the close at the latest */
	ev_tstamp linger_seen;        /* lingering: the client's last bytes (or the start) */
	uint64_t lingered;            /* input bytes drained while lingering */
	int linger_copy;              /* lingering: recv(MSG_TRUNC) is refused (a unix socket):
	                               * drained by read(2) into rbuf instead */
	ev_tstamp write_at;           /* the current response began to be written */
	ev_tstamp wprogress_at;       /* the client last took response bytes (docs/HTTP.md) */
	uint64_t wdelivered;          /* response bytes the client had taken then (written minus
	                               * the socket's unsent queue) */
	unsigned idle_ticks;          /* loop ticks seen idle with no I/O in between (conn.c) */
	ev_tstamp due;                /* the limit lg_conn_arm_timer set (the timer may fire
	                               * earlier: worker/core/conn_timer.h) */
};

/* Queued output (worker/core/conn.c): the head bytes in whead, then one body. */
struct lg_conn_out {
	size_t whead_len, woff;       /* queued output in whead, and how much of it is written */
	int wreq;                     /* the queued output ends with the current request's answer */
	const unsigned char *wbody;   /* NULL or a region that stays valid until written */
	size_t wbody_len;
	char *wbody_owned;            /* a rendered body freed (or handed back) once written */
	struct lg_body *wbody_shared; /* shared (lg_conn_respond_shared): dropped once written */
};

/* A connection: the core below is connection I/O (worker/core/conn.c); each module keeps its own
 * part in an embedded struct declared in a header of its own (nginx's r->upstream). */
struct lg_conn {
	struct lg_worker *w;
	struct lg_conn *prev, *next;
	int fd;
	ev_io io;
	ev_timer timer;               /* idle, body or job deadline, by state */
	enum lg_conn_state state;
	int close_after;              /* close once the current response is written */
	int reject_status;            /* status chosen by the router (ops->head) for a rejected request */
	char reject_extra[64];        /* header lines for it (Retry-After, Allow), or "" */
	unsigned nreq;                /* requests parsed on this connection */
	unsigned held;                /* LG_CONN_HELD_* bits: what rooms hold for c (lg_conn_hold) */
	/* conn_process is running for c: it watches c's socket and arms its timer for the state
	 * it leaves c in when it returns, so a response finished inside it does not do so too */
	int processing;
	/* Expect: 100-continue (RFC 9110 section 10.1.1): the router (ops->head) sets want_continue when
	 * the body will be read; the 100 goes out only while the body is awaited, and a response
	 * drops an unsent one or finishes a partly sent one first. */
	int want_continue;
	size_t cont_off;              /* bytes of the interim response written */
	struct lg_conn_tmo tmo;       /* timeouts (above) */
	struct lg_conn_out out;       /* queued output (above) */
	LG_PART(64) part_rt;          /* the router's: route, row, label: LG_RT(c)
	                               * (worker/route/routes_state.h) */
	LG_PART(128) part_job;        /* the offloaded job: LG_JOB(c) (worker/job/offload_state.h) */
	LG_PART(64) part_flight;      /* single-flight and cache: LG_FLIGHT(c)
	                               * (worker/flight/coalesce_state.h) */
	struct lg_conn_obs obs;       /* metrics and the access log (worker/core/obs_state.h) */
	LG_PART(16) part_up;          /* a proxied request's exchange: LG_UP(c)
	                               * (worker/upstream/upstream.h) */
	int stream_wr;                /* state PROXY: ops->stream wants the socket writable */
	size_t rlen;
	/* The bytes read and not yet taken: rlen of LG_CONN_RBUF, in a block of the loop's
	 * w->rbufs, borrowed for a read and given back once empty while the request is away (a
	 * job, a proxied request waiting for its app, its answer going out) or c goes idle; NULL
	 * when none is held. So a waiting request holds none (nginx's client_header_buffer,
	 * freed once the head is read), and keep-alive requests borrow none each. */
	char *rbuf;
	/* The parser's view and the buffers last, every small member above them in the first
	 * page: the pool's blocks are fresh mappings, so a connection holds only the pages its
	 * bytes reach (a proxied request waiting for its app: that page alone, the head's copies
	 * at the start of the request view's fbuf in it). */
	struct lg_http http;
	char whead[LG_CONN_WHEAD];
};

/* What a room holds for a connection, in c->held: the core tells the room when c closes
 * (ops->gone), gives the buffer back once the response is written (ops->release), keeps the
 * body deadlines of a held buffer, and never lets c go idle while it holds one. */
#define LG_CONN_HELD_BUFFER 1u  /* a transit buffer (a job slot: worker/job) */
#define LG_CONN_HELD_PARKED 2u  /* c waits on a room's list (a flight: worker/flight) */
#define LG_CONN_HELD_UP     4u  /* c's request is an exchange with an upstream (worker/upstream) */

/* A room took (lg_conn_hold) or gave back (lg_conn_unhold) what bit says for c. */
static inline void
lg_conn_hold(struct lg_conn *c, unsigned bit)
{
	c->held |= bit;
}

static inline void
lg_conn_unhold(struct lg_conn *c, unsigned bit)
{
	c->held &= ~bit;
}

/* 1 when c is parked on a room's waiting list (a flight), else 0. */
static inline int
lg_conn_parked(const struct lg_conn *c)
{
	return (c->held & LG_CONN_HELD_PARKED) != 0;
}

/* The head verbs of the router (struct lg_conn_ops head, called by the core once the parser
 * returned at head complete): lg_conn_head_begin forgets the previous request's interim
 * response and refusal lines; lg_conn_reject chooses the
 * status the core answers a request the router returns LG_HTTP_REJECT for (its header lines, or
 * "", in c->reject_extra); lg_conn_expect_continue(c, 1) says the body will be read, so a
 * client waiting for 100 Continue (RFC 9110 section 10.1.1) gets it while the body is awaited. */
static inline void
lg_conn_head_begin(struct lg_conn *c)
{
	c->want_continue = 0;
	c->cont_off = 0;
	c->reject_extra[0] = '\0';
}

static inline void
lg_conn_reject(struct lg_conn *c, int status)
{
	c->reject_status = status;
}

static inline void
lg_conn_expect_continue(struct lg_conn *c, int want)
{
	c->want_continue = want;
}

/* The body the next response of c sends is p, a buffer the router rendered into: the core gives
 * it back once written or dropped (lg_render_give_back, else free(3)). */
static inline void
lg_conn_own_body(struct lg_conn *c, char *p)
{
	c->out.wbody_owned = p;
}

/* Takes ownership of an accepted non-blocking socket fd and waits for its first bytes. Until a
 * byte arrives, and again once it has been idle for a loop tick (100-200 ms, nothing buffered,
 * nothing to write, no slot), the connection holds only a struct lg_conn_idle; a struct lg_conn
 * (parser, request view, output queue: ~35 KiB of address space) comes from w->pool while bytes
 * are in flight, its input buffer from w->rbufs while it reads.
 * Returns 0, or -1 with errno ENOMEM (fd is closed). */
int lg_conn_start(struct lg_worker *w, int fd);

/* The loop's periodic tick (100 ms): connections idle since the previous tick give their
 * struct lg_conn back, and pool blocks unused for a whole tick are unmapped. */
void lg_conn_tick(struct lg_worker *w);

/* A graceful drain began: every connection idle between requests gets LG_CONN_DRAIN_IDLE_MS for
 * one more request (lg_conn_drain_idle), busy ones finish theirs. */
void lg_conn_drain(struct lg_worker *w);

/* A graceful drain reached c while it lingers after a closing answer: it lingers no longer than
 * a connection that begins lingering in a draining loop, which the loop's exit waits for. */
void lg_conn_drain_linger(struct lg_conn *c);

/* Closes the connection and frees it; releases any slot it holds (cancelling a queued job). c's
 * block is back in the pool on return: the caller must not touch c again. */
void lg_conn_close(struct lg_conn *c);

/* A response body several connections of one loop worker send at once: the answer of one
 * coalesced job to each of its waiters, one copy however many wait (a copy per waiter made 100
 * waiters of a 10 MiB answer hold 1 GB). Loop-local, so the count is a plain integer. */
struct lg_body {
	unsigned refs;
	size_t len;                   /* bytes of data */
	unsigned char data[];
};

/* A body of len bytes with one reference, the caller's; data is not initialised. Returns NULL
 * when out of memory (errno ENOMEM). */
struct lg_body *lg_body_new(size_t len);

/* Drops one reference to b; the last one frees it. NULL is a no-op. */
void lg_body_unref(struct lg_body *b);

/* lg_conn_respond with body b->data, b->len, which c holds a reference to until it is written
 * or c closes (the caller keeps its own). Returns as lg_conn_respond. */
int lg_conn_respond_shared(struct lg_conn *c, int status, const char *ctype, const char *extra,
    struct lg_body *b);

/* Queues a response: status, optional Content-Type, extra header lines (each ending in CRLF, or
 * NULL), and a body. A body of up to 2 KiB is copied; a larger one is referenced and must stay
 * valid until written (arena output regions do: the slot is held until then). HEAD requests get
 * the head only. Then writes what the socket takes. Returns 0, or -1 when the connection was
 * closed (write error, a draining loop's last answer) or is finished (lingering after a closing
 * answer); the caller must not touch c after -1. */
int lg_conn_respond(struct lg_conn *c, int status, const char *ctype, const char *extra,
    const void *body, size_t len);

/* A graceful drain reached c while it is idle between requests: rather than closing at once
 * (a request the client is sending right now would then fail), give it LG_CONN_DRAIN_IDLE_MS
 * for one more request, which is answered with Connection: close; then close. */
void lg_conn_drain_idle(struct lg_conn *c);

#define LG_CONN_DRAIN_IDLE_MS 500

/* The header line of every 503 whose cause passes within a second or so (no job slot or
 * buffer free, shared memory short, too many connections): RFC 9110 section 10.2.3
 * Retry-After in delay-seconds, CRLF-terminated, for lg_conn_error's extra. */
#define LG_CONN_RETRY_AFTER "Retry-After: 1\r\n"

/* Answers an error status with a short text body. close_after forces Connection: close.
 * Returns as lg_conn_respond. */
int lg_conn_error(struct lg_conn *c, int status, int close_after, const char *extra);

/* Ends the body c is receiving with 408 and a close, to free its transit buffer for another
 * request (worker/job/fairshare.c lg_fair_tick): held_s is how long it has held it, for the log.
 * Counted as a slow upload. Returns 1 when it did (c may be closed: the caller must not touch
 * it), 0 when c is not receiving a body (nothing done). */
int lg_conn_cut_upload(struct lg_conn *c, double held_s);

/* The input region of c got backed (worker/job/backing.h): reading the body may go on. In state
 * BODY it watches the socket again; otherwise it continues as after any event. Returns 0, or -1
 * when c was closed or finished. */
int lg_conn_body_ready(struct lg_conn *c);

/* c waits for a job, its own or a flight's, for at most deadline_ms milliseconds from now: state
 * LG_CONN_JOB, the timer armed for the deadline (then ops->job_timeout). The room that waits
 * answers c through lg_conn_respond when the job ends, after lg_conn_stop_timer. */
void lg_conn_wait_job(struct lg_conn *c, uint64_t deadline_ms);

/* Stops c's timer: the room answering c (a job ended, c left a flight) re-arms nothing itself;
 * the core arms the timer again for the state the answer leaves c in. */
void lg_conn_stop_timer(struct lg_conn *c);

/* The request head is complete and the rest of a Content-Length body goes to the room's body
 * sink (ops->body_buf, ops->body_took): state LG_CONN_BODY. */
void lg_conn_expect_body(struct lg_conn *c);

/* Input bytes buffered on c after the current request's head (pipelined or body bytes). */
size_t lg_conn_buffered(const struct lg_conn *c);

/* Takes the first n buffered input bytes of c (n <= lg_conn_buffered(c)): copies them to dst
 * (n bytes the caller owns) and drops them from c's input buffer. */
void lg_conn_take(struct lg_conn *c, void *dst, size_t n);

/* The stream verbs: another room (worker/upstream/) writes the answer of c's current request
 * itself, as it arrives, instead of handing a whole one to lg_conn_respond.
 *
 * lg_conn_stream_begin, from ops->dispatch: c enters state LG_CONN_PROXY, its own timer
 * stopped (the room keeps the request's deadline); the core keeps reading the socket to notice
 * a client that leaves (ops->gone) and buffers pipelined bytes. */
void lg_conn_stream_begin(struct lg_conn *c);

/* Writes up to len bytes of the answer (state PROXY), after any answers queued before it.
 * Returns the bytes the socket took (0: full, or queued answers still going out: ask for
 * lg_conn_stream_want), or -1 on a write error (c is not closed: the caller closes it). */
ssize_t lg_conn_stream_write(struct lg_conn *c, const void *buf, size_t len);

/* on: call ops->stream when the socket can take more; off: do not. */
void lg_conn_stream_want(struct lg_conn *c, int on);

/* The streamed answer is complete: status and body_bytes for the metrics and the access line;
 * close: the client's connection cannot carry another request (a close-delimited answer).
 * Finishes the request as lg_conn_respond does (the next pipelined request, or the close).
 * Returns 0, or -1 when c was closed or finished. */
int lg_conn_stream_end(struct lg_conn *c, int status, uint64_t body_bytes, int close);

/* The tunnel verbs: after an upgrade (RFC 9110 section 7.8: a 101 ends HTTP on the
 * connection), another room (worker/upstream/up_tunnel.c) relays the socket's bytes itself.
 *
 * lg_conn_can_detach: 1 when c may be handed over now (state PROXY, outside the core's own
 * processing of c, nothing queued to write), else 0.
 *
 * lg_conn_detach: the current request ends with status (metrics and the access line, as an
 * answer with no body), c's watchers and timer stop and its block goes back to the pool; the
 * socket stays open and counted among the loop's connections (max_conns counts it, a drain
 * waits for it) and is the caller's, to be closed only by lg_conn_detached_close. The caller
 * has taken the input buffered after the head (lg_conn_buffered, lg_conn_take) and holds
 * nothing of c (c->held 0). Returns the descriptor, or -1 when lg_conn_can_detach says 0
 * (nothing done). After a descriptor, c must not be touched. */
int lg_conn_can_detach(const struct lg_conn *c);
int lg_conn_detach(struct lg_conn *c, int status);

/* Closes fd, a socket lg_conn_detach gave w's caller: counted as a connection gone (a drain
 * waiting for it ends when it was the last). */
void lg_conn_detached_close(struct lg_worker *w, int fd);

/* Continues a connection after an asynchronous event changed its state (a job completed):
 * parses and answers pipelined requests. Returns 0, or -1 when c was closed or finished. */
int lg_conn_resume(struct lg_conn *c);

#endif
