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
#include "worker/backing.h"
#include "http/http.h"
#include "worker/loop.h"

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
	LG_CONN_LINGER, /* response sent, write side shut: unread input is drained before the close,
	                 * so the kernel does not reset the connection and lose the response
	                 * (RFC 9112 section 9.6) */
};

struct lg_route;
struct lg_conn;
struct lg_conn_idle;
struct lg_policy;
struct lg_lflight;
struct lg_coal;

/* What the connection I/O calls back into, given by its creator (the router and the offload
 * path, worker/routes.c): conn.c answers through its own respond API and knows nothing of
 * routes, jobs or slots beyond the slot index it holds. */
struct lg_conn_ops {
	/* http-parser hooks (struct lg_http on_head / on_body), ctx being the connection */
	int (*head)(struct lg_http *h, void *conn);
	int (*body)(struct lg_http *h, void *conn, const char *at, size_t len);
	/* struct lg_http body_room: input bytes the parser may take of a body it reads (chunked)
	 * before more must be backed; SIZE_MAX when unbounded */
	size_t (*body_room)(struct lg_http *h, void *conn);
	/* a complete request head (and any parser-read body): answer or start the job.
	 * Returns 0, or -1 when the connection was closed or finished (the rule above) */
	int (*dispatch)(struct lg_conn *c);
	/* before reading more of a Content-Length body into the slot: 0, 1 (wait for the
	 * backing), or -1 (answered: closed or finished) */
	int (*body_window)(struct lg_conn *c);
	/* the Content-Length body in the slot is complete: 0, or -1 (closed) */
	int (*body_done)(struct lg_conn *c);
	/* the job deadline passed (state LG_CONN_JOB): 0, or -1 (closed) */
	int (*job_timeout)(struct lg_conn *c);
	/* the response is written while c holds a slot: give it back */
	int (*release)(struct lg_conn *c);
	/* c closes while it holds a slot or is parked on a flight (fl set): client gone, write
	 * failed */
	void (*gone)(struct lg_conn *c);
};

struct lg_worker {
	struct ev_loop *ev;
	const struct lg_loop_env *env;
	ev_io accept_io;
	ev_io done_io;
	ev_signal sig_term, sig_int;
	ev_timer tick;                /* heartbeat; also retries accept after EMFILE */
	int nconns;
	int accepting;                /* accept_io is started */
	int accept_paused_until_tick; /* EMFILE/ENFILE back-off: no refusals on this tick */
	ev_tstamp emfile_warned_at;   /* rate limit of the "pausing accept" warning (loop.c) */
	uint64_t emfile_warn_repeats;
	ev_tstamp refuse_warned_at;   /* and of the over --max-conns refusal warning */
	uint64_t refuse_warn_repeats;
	int draining;
	struct lg_conn **pending;     /* by slot index: the connection holding it, or NULL */
	struct lg_backing backing;    /* helper thread that backs input regions (worker/backing.h) */
	struct lg_coal *coal;         /* single-flight state (worker/coalesce.c), opaque here */
	struct lg_conn *conns;        /* every connection holding a struct lg_conn (busy) */
	struct lg_conn_idle *idle;    /* every idle one: a socket, two watchers, ~150 bytes */
	struct lg_pool pool;          /* struct lg_conn blocks (worker/conn.c) */
	char date[40];                /* cached "Date: ..." value (RFC 9110 section 6.6.1) */
	ev_tstamp date_at;
	/* observability (worker/observe.h) */
	ev_timer lag;                 /* loop-lag probe, re-armed every --lag-interval-ms */
	uint64_t lag_due_ns;          /* CLOCK_MONOTONIC when the probe should fire */
	uint32_t inflight;            /* requests received and not yet answered */
	uint64_t cb_start_ns;         /* start of the callback being timed */
	struct lg_conn *cb_conn;      /* the connection that callback is for, or NULL */
	uint64_t worst_unit_ns;       /* longest request step inside the callback so far */
	uint64_t unit_start_ns;
	const char *unit_route, *worst_route;
	char unit_what[128], worst_what[128]; /* "METHOD target" of those steps */
	char *render;                 /* /metrics and /status buffer, render_cap bytes */
	size_t render_cap;
	int render_busy;              /* a response is still being written from it */
	struct lg_http_limits lim;    /* from the configuration, shared by every connection */
	const struct lg_conn_ops *ops; /* the creator's callbacks, for every connection */
	/* the router (worker/routes.c), built from the registry's routes at start */
	struct lg_route *routes;
	unsigned nroutes;
	unsigned nrows;               /* statistics rows: routes (capped), then "none" */
	const char **row_names;
	const char **kind_names;      /* by kind id */
	unsigned none_row;            /* stats row of a request that matched no route */
};

struct lg_conn {
	struct lg_worker *w;
	struct lg_conn *prev, *next;
	int fd;
	ev_io io;
	ev_timer timer;               /* idle, body or job deadline, by state */
	ev_tstamp timer_due;          /* when the limit lg_conn_arm_timer set is due (ev_now) */
	enum lg_conn_state state;
	struct lg_http http;
	const struct lg_route *route; /* route of the current request, NULL when none matched
	                               * (opaque here: the router's) */
	unsigned route_row;           /* its row in the statistics (w->none_row when none) */
	const char *route_label;      /* its path for logs and metrics ("none" when none) */
	uint32_t kind;                /* job kind of an offloaded route, 0 when inline */
	uint32_t pool;                /* pool of an offloaded route (cfg->pools, master->pools) */
	int close_after;              /* close once the current response is written */
	int reject_status;            /* status chosen by the head hook for a rejected request */
	int refuse_status;            /* a refusal answered at dispatch, keeping the connection
	                               * (its body, if any, read and dropped first), or 0 */
	char reject_extra[64];        /* header lines for it (Retry-After, Allow), or "" */
	/* timeouts (docs/HTTP.md): one ev_timer, armed for the limit of the current state */
	ev_tstamp req_at;             /* first byte of the current request (accept for the first),
	                               * 0 while idle between requests */
	ev_tstamp body_at;            /* the body began, 0 before */
	ev_tstamp linger_until;
	ev_tstamp write_at;           /* the current response began to be written */
	ev_tstamp wprogress_at;       /* the client last took response bytes (docs/HTTP.md) */
	uint64_t wdelivered;          /* response bytes the client had taken then (written minus
	                               * the socket's unsent queue) */
	unsigned nreq;                /* requests parsed on this connection */
	unsigned idle_ticks;          /* loop ticks seen idle with no I/O in between (conn.c) */
	/* Expect: 100-continue (RFC 9110 section 10.1.1): the head hook sets want_continue when
	 * the body will be read; the 100 goes out only while the body is awaited, and a response
	 * drops an unsent one or finishes a partly sent one first. */
	int want_continue;
	size_t cont_off;              /* bytes of the interim response written */
	/* the current offloaded job */
	int slot;                     /* -1 when the connection holds no slot */
	uint32_t gen;
	uint64_t arg;                 /* the route's index (the compute side finds its config) */
	uint64_t deadline_ms;         /* of the job, queue wait included */
	int run_inline;               /* a where=loop kind: run here, not queued */
	const char *ctype;            /* Content-Type of the job's 2xx answer (the route's) */
	uint64_t max_body;            /* of the current request's route */
	uint64_t body_off;            /* the body's offset in the input region (after the view) */
	uint64_t body_need, body_got; /* bytes of a Content-Length body, and read so far */
	uint64_t reserved;            /* body bytes of the slot's input region backed (fallocate) */
	int backing_wait;             /* a backing request for the slot is with the helper */
	size_t head_body;             /* body bytes that came with the head, still in rbuf until
	                               * the first window is backed */
	/* single-flight and cache (worker/coalesce.h; opaque here) */
	int coal;                     /* the route coalesces: decided at dispatch */
	int coal_alone;               /* run this request's own job (retry after a failed share) */
	const struct lg_policy *pol;  /* the route's rule */
	struct lg_lflight *fl;        /* the flight c is parked on, or NULL */
	struct lg_conn *fl_prev, *fl_next; /* the flight's parked connections */
	const char *fl_label;         /* X-Cache value it will be answered with */
	/* output */
	size_t whead_len, woff;       /* queued output in whead, and how much of it is written */
	int wreq;                     /* the queued output ends with the current request's answer */
	const unsigned char *wbody;   /* NULL or a region that stays valid until written */
	size_t wbody_len;
	char *wbody_owned;            /* a rendered body freed (or handed back) once written */
	struct lg_body *wbody_shared; /* shared (lg_conn_respond_shared): dropped once written */
	/* the current request, for metrics and the access log */
	uint64_t req_start_ns;        /* first byte of the request; 0 while none is in progress */
	int resp_status;
	size_t resp_bytes;            /* body bytes of the response */
	uint64_t queue_ns, run_ns;    /* offloaded: the job's queue wait and run time */
	size_t rlen;
	char rbuf[LG_CONN_RBUF];
	char whead[LG_CONN_WHEAD];
};

/* Takes ownership of an accepted non-blocking socket fd and waits for its first bytes. Until a
 * byte arrives, and again once it has been idle for a loop tick (100-200 ms, nothing buffered,
 * nothing to write, no slot), the connection holds only a struct lg_conn_idle; a struct lg_conn
 * (buffers and parser, ~33 KiB of address space) comes from w->pool while bytes are in flight.
 * Returns 0, or -1 with errno ENOMEM (fd is closed). */
int lg_conn_start(struct lg_worker *w, int fd);

/* The loop's periodic tick (100 ms): connections idle since the previous tick give their
 * struct lg_conn back, and pool blocks unused for a whole tick are unmapped. */
void lg_conn_tick(struct lg_worker *w);

/* A graceful drain began: every connection idle between requests gets LG_CONN_DRAIN_IDLE_MS for
 * one more request (lg_conn_drain_idle), busy ones finish theirs. */
void lg_conn_drain(struct lg_worker *w);

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

/* Answers an error status with a short text body. close_after forces Connection: close.
 * Returns as lg_conn_respond. */
int lg_conn_error(struct lg_conn *c, int status, int close_after, const char *extra);

/* Ends the body c is receiving with 408 and a close, to free its transit buffer for another
 * request (worker/fairshare.c lg_fair_tick): held_s is how long it has held it, for the log.
 * Counted as a slow upload. Returns 1 when it did (c may be closed: the caller must not touch
 * it), 0 when c is not receiving a body (nothing done). */
int lg_conn_cut_upload(struct lg_conn *c, double held_s);

/* The input region of c got backed (worker/backing.h): reading the body may go on. In state
 * BODY it watches the socket again; otherwise it continues as after any event. Returns 0, or -1
 * when c was closed or finished. */
int lg_conn_body_ready(struct lg_conn *c);

/* Continues a connection after an asynchronous event changed its state (a job completed):
 * parses and answers pipelined requests. Returns 0, or -1 when c was closed or finished. */
int lg_conn_resume(struct lg_conn *c);

#endif
