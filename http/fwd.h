/* The request head lagless sends to an upstream (docs/HTTP.md "Requests to an upstream"):
 * built from a request the strict parser accepted (http/http.h struct lg_http_req) and what
 * the caller knows of its connection and route (struct lg_fwd_opts). A pure function: no I/O,
 * no allocation, no state; it writes into the caller's buffer.
 *
 * The rules (RFC 9110 section 7.6 for an intermediary's duties):
 * - the request line is METHOD origin-form-target HTTP/1.1 (RFC 9112 section 3.2.1: an
 *   absolute-form target is sent as its path and query, its authority becomes the Host);
 * - hop-by-hop fields are removed (RFC 9110 section 7.6.1): Connection and every field it
 *   names, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade (kept with opts->tunnel, then
 *   with "Connection: upgrade"), Proxy-Connection; so are the client's Content-Length (the
 *   framing is the caller's: opts->body), Expect (lagless answers 100-continue itself), Host
 *   (sent first, RFC 9112 section 3.2), X-Lagless-Deadline-Ms (never a client's deadline),
 *   X-Request-Id when opts->request_id is given, and the forwarding fields unless the peer is
 *   a trusted proxy (below);
 * - the forwarding fields: X-Forwarded-For (the trusted client's list with the address
 *   appended, else the address alone), X-Forwarded-Proto, X-Forwarded-Host (the client's Host;
 *   a trusted client's own X-Forwarded-Proto and X-Forwarded-Host pass instead of ours), or
 *   with opts->style LG_FWD_FORWARDED one RFC 7239 Forwarded element for=;proto=;host=
 *   (appended to a trusted client's Forwarded list);
 * - X-Request-Id, X-Lagless-Deadline-Ms (the ms left, as Envoy's
 *   x-envoy-expected-rq-timeout-ms), then the framing field: Content-Length or
 *   Transfer-Encoding: chunked. No Connection field: HTTP/1.1 persists by default. */
#ifndef LG_HTTP_FWD_H
#define LG_HTTP_FWD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/http.h"

#define LG_FWD_DEADLINE_FIELD "X-Lagless-Deadline-Ms"

/* How the body goes upstream: the caller's choice, not the client's fields (a body the client
 * sent chunked may go with a length once received whole, and the reverse). */
enum lg_fwd_body {
	LG_FWD_BODY_NONE = 0,    /* no framing field: no body (RFC 9112 section 6.3 rule 7) */
	LG_FWD_BODY_LENGTH = 1,  /* Content-Length: opts->content_length */
	LG_FWD_BODY_CHUNKED = 2, /* Transfer-Encoding: chunked */
};

enum lg_fwd_style {
	LG_FWD_XFF = 0,       /* X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host */
	LG_FWD_FORWARDED = 1, /* Forwarded (RFC 7239 section 4) */
};

/* What the caller knows beyond the request. Every string is borrowed, NUL-terminated, read only
 * during the call. */
struct lg_fwd_opts {
	/* The address the request came from, numeric (inet_ntop's IPv4 or IPv6 text): the peer,
	 * or the source of its PROXY protocol header. Anything else (NULL, "-", "unix") is sent
	 * as "unknown" (RFC 7239 section 6.3). */
	const char *client_addr;
	int tls;                    /* the client's connection was TLS: proto "https", else "http" */
	/* The Host sent upstream, NULL: the client's (the absolute-form target's authority, else
	 * its Host field, else empty, RFC 9112 section 3.2). Host syntax only (http/authority.h). */
	const char *host;
	/* X-Request-Id sent upstream (the client's, checked, or one generated), replacing the
	 * client's; NULL: the client's X-Request-Id fields pass as they are. 1 to 200 bytes of
	 * visible ASCII. */
	const char *request_id;
	/* Milliseconds left before the route's deadline, sent as X-Lagless-Deadline-Ms;
	 * negative: no deadline, no field (a client's is removed all the same). */
	int64_t deadline_ms;
	/* 1 when the trusted-proxy rule (worker/core/client.h, --trusted-proxies) trusts the peer:
	 * the client's X-Forwarded-For / Forwarded chain is kept and appended to, its
	 * X-Forwarded-Proto and X-Forwarded-Host pass. 0: every forwarding field of the client is
	 * removed and replaced by ours. */
	int trusted;
	int style;                  /* enum lg_fwd_style */
	int tunnel;                 /* 1: Upgrade passes, with "Connection: upgrade" (RFC 9110 7.8) */
	int body;                   /* enum lg_fwd_body */
	uint64_t content_length;    /* with LG_FWD_BODY_LENGTH: the body's bytes */
};

/* Writes the head for request r with opts o into buf (cap bytes; not NUL-terminated): request
 * line, field lines, the empty line, by the rules above. r's field lines are its kept ones
 * (lg_http_field_next), names as the client spelt them, values without surrounding OWS; r
 * must have kept every field line of its head (nkept == nfields: parsed without a keep set in
 * its limits, and within LG_HTTP_KEPT lines and LG_HTTP_FIELD_BUF bytes), else a field would
 * be silently lost. Returns the bytes written, or -1 with errno EINVAL (r or o NULL, a view
 * that did not keep every field, a CONNECT request: no tunnel is offered, RFC 9110 section
 * 9.3.6; an unknown o->body or o->style, o->host or o->request_id with a byte they may not
 * hold) or ENOSPC (cap too small; buf then holds nothing usable). */
ssize_t lg_fwd_head(const struct lg_http_req *r, const struct lg_fwd_opts *o, char *buf,
    size_t cap);

/* 1 when r asks to switch protocols in a way lagless relays as a tunnel (RFC 9110 section
 * 7.8, RFC 6455 section 4.1): a GET of HTTP/1.1 without a body whose Connection lists
 * "upgrade" and whose Upgrade field is not empty and names no "h2c" (HTTP/2's cleartext
 * upgrade, which RFC 9113 section 3.1 removed: such a request is an ordinary one, its
 * Upgrade dropped). Else 0 (r NULL too). Pure. */
int lg_fwd_upgrade_request(const struct lg_http_req *r);

/* 1 when the Upgrade value v (vlen bytes) of a 101 answer to r names at least one protocol and
 * only protocols r's Upgrade offered, compared case-insensitively, versions included (RFC
 * 9110 section 7.8: the server switches to protocols the client listed), and no h2c; else 0. */
int lg_fwd_upgrade_match(const struct lg_http_req *r, const char *v, size_t vlen);

/* The bytes lg_fwd_head(r, o, ...) needs (what it would return with room enough), to size a
 * buffer first; writes nothing. -1 with errno EINVAL as lg_fwd_head. */
ssize_t lg_fwd_head_size(const struct lg_http_req *r, const struct lg_fwd_opts *o);

#endif
