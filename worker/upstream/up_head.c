/* The request head lagless sends to an app: http/fwd.h's rules (hop-by-hop fields removed,
 * forwarding fields, request id, deadline, the framing of the body as this room sends it),
 * with what the connection knows: the client's address by the trusted-proxy rule
 * (worker/core/client.h), the request id of the access log. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "http/fwd.h"
#include "worker/core/access.h"
#include "worker/core/client.h"
#include "worker/upstream/up_int.h"

/* Behind a trusted proxy that sent X-Forwarded-For (worker/core/client.h), its chain is kept
 * and the peer, the proxy, appended (fwd.h opts->trusted): 1 with the peer's address in who.
 * Else 0 with the client by the trusted-proxy rule in who. */
static int
chain_kept(const struct lg_conn *c, char *who, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	size_t n;

	if (lg_client_addr(c, &ss, &len) == 1 &&
	    lg_http_field_get(&c->http.req, "x-forwarded-for", &n) != NULL &&
	    getpeername(c->fd, (struct sockaddr *)&ss, &(socklen_t){ sizeof(ss) }) == 0) {
		const void *a = ss.ss_family == AF_INET6 ?
		    (const void *)&((const struct sockaddr_in6 *)&ss)->sin6_addr :
		    (const void *)&((const struct sockaddr_in *)&ss)->sin_addr;

		if ((ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
		    inet_ntop(ss.ss_family, a, who, (socklen_t)cap) != NULL)
			return 1;
	}
	lg_client_text(c, who, cap);
	return 0;
}

int
lg_up_build_head(struct lg_conn_up *x, const struct lg_upstream_def *u)
{
	const struct lg_conn *c = x->c;
	const struct lg_http_req *r = &c->http.req;
	char who[64], id[160];
	double left = x->deadline - ev_now(c->w->ev);
	struct lg_fwd_opts o;
	ssize_t n;

	memset(&o, 0, sizeof(o));
	o.trusted = chain_kept(c, who, sizeof(who));
	lg_access_request_id(c, id, sizeof(id));
	o.client_addr = who;
	o.host = u->host[0] ? u->host : NULL;
	o.request_id = id[0] ? id : NULL;
	o.deadline_ms = left > 0 ? (int64_t)(left * 1e3) : 0;
	o.style = LG_FWD_XFF;
	x->upgrade = !x->buffered && lg_fwd_upgrade_request(r);
	o.tunnel = x->upgrade;
	if (x->buffered) { /* received whole: its length is known (never chunked) */
		o.body = LG_FWD_BODY_LENGTH;
		o.content_length = x->body_len;
	} else if (r->chunked)
		o.body = LG_FWD_BODY_CHUNKED;
	else if (r->content_length != LG_HTTP_NO_LENGTH && (r->content_length > 0 ||
	    r->method == HTTP_POST || r->method == HTTP_PUT || r->method == HTTP_PATCH)) {
		o.body = LG_FWD_BODY_LENGTH;
		o.content_length = r->content_length;
	}
	n = lg_fwd_head(r, &o, x->out, sizeof(x->out) - 64);
	if (n < 0)
		return -1;
	x->out_len = (size_t)n;
	x->out_off = 0;
	return 0;
}
