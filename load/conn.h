/* One client connection of the load generator on a libev loop: non-blocking connect, one
 * request at a time (written with writev from storage its route owns), the response parsed by
 * load/resp.h, a timeout per request, and keep-alive reuse when the server allows it.
 *
 * The creator gets two callbacks: done() once per request handed to ll_lconn_send (a status,
 * or a negative LL_LERR_* code), and closed() once when the connection is gone (after done for
 * its last request); closed() may free the connection. */
#ifndef LL_LOAD_CONN_H
#define LL_LOAD_CONN_H

#include <ev.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "load/resp.h"

enum ll_lerr {
	LL_LERR_CONNECT = -1,   /* connect(2) failed or was refused */
	LL_LERR_IO = -2,        /* reset, or closed before the response was complete */
	LL_LERR_PARSE = -3,     /* not an HTTP/1.x response */
	LL_LERR_TIMEOUT = -4,   /* no whole response within the timeout */
};
#define LL_LERR_KINDS 4

struct ll_lreq {
	struct ll_lreq *next;   /* the engine's FIFO of requests waiting for a connection */
	unsigned route;
	uint64_t due_ns;        /* scheduled send time (latency counts from here) */
	uint64_t sent_ns;       /* when its first byte was written */
	struct iovec iov[2];    /* head and body, borrowed from the route */
	char *own_head;         /* a head built for this request (a path template), owned */
	double tvalue;          /* its template's value (load/tmpl.h), NaN without one */
	int head_method;        /* HEAD: the response has no body */
	char *body;             /* capture of the response body (NULL: count only), borrowed */
	size_t body_cap;
	int status;             /* result, set before done() */
	uint64_t end_ns;        /* when the response was complete or the error seen */
};

enum ll_lconn_state { LL_LC_CONNECTING, LL_LC_IDLE, LL_LC_BUSY, LL_LC_CLOSED };

struct ll_lconn;

struct ll_lconn_ops {
	void (*done)(struct ll_lconn *c, struct ll_lreq *r);
	void (*closed)(struct ll_lconn *c);
};

struct ll_lconn {
	struct ev_loop *loop;
	ev_io io;
	ev_timer timer;
	int fd;
	int connect_errno;         /* connect(2) failed at once with this */
	enum ll_lconn_state state;
	const struct ll_lconn_ops *ops;
	void *ctx;                 /* the creator's */
	struct ll_lconn *prev, *next;  /* the creator's lists */
	struct ll_lreq *req;       /* in flight, or NULL */
	size_t written;            /* bytes of req already written */
	double timeout_s;          /* per request, from when it is handed over */
	unsigned requests;         /* answered on this connection */
	struct ll_resp resp;
	char rbuf[16384];
};

/* Starts a non-blocking connect to addr on loop. Returns 0 (the connection is CONNECTING; a
 * request may be sent at once and goes out when connected), or -1 with errno set by socket(2)
 * (e.g. EMFILE) and nothing to clean up. c is caller-owned storage and must stay put until
 * closed() ran. */
int ll_lconn_open(struct ll_lconn *c, struct ev_loop *loop, const struct sockaddr *addr,
                  socklen_t addrlen, double timeout_s, const struct ll_lconn_ops *ops,
                  void *ctx);

/* Hands request r (caller-owned until done()) to c, which must be CONNECTING without a request
 * or IDLE. The timeout counts from now. */
void ll_lconn_send(struct ll_lconn *c, struct ll_lreq *r);

/* Closes c now: a request in flight gets done() with LL_LERR_IO, then closed() runs. */
void ll_lconn_close(struct ll_lconn *c);

/* Short name of a negative LL_LERR_* code ("connect", "io", "parse", "timeout"). */
const char *ll_lconn_err_name(int code);

#endif
