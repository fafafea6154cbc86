/* The request head lagless sends to an app: the client's request line and fields, less the
 * hop-by-hop ones (RFC 9110 section 7.6.1), with the proxy's own fields and its own framing.
 * http/fwd.h (branch fwd) is to take this over. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "worker/core/access.h"
#include "worker/core/client.h"
#include "worker/upstream/up_int.h"

/* Fields never copied: hop-by-hop ones (RFC 9110 7.6.1, and Proxy-Connection), those lagless
 * writes itself (Host, framing, X-Forwarded-*, the request id, the deadline) and Expect (the
 * 100 Continue is lagless's to send; the body goes on without waiting for the app's). */
static const char *const dropped[] = {
	"connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade",
	"trailer", "host", "content-length", "expect", "x-forwarded-proto", "x-forwarded-host",
	"x-request-id", "x-lagless-deadline-ms", "x-forwarded-for",
};

static int
is_dropped(const char *name, size_t n, const struct lg_http_req *r)
{
	size_t cl;
	const char *conn;
	unsigned pos = 0;

	for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
		if (strlen(dropped[i]) == n && strncasecmp(dropped[i], name, n) == 0)
			return 1;
	while ((conn = lg_http_field_next(r, "connection", &pos, &cl)) != NULL) {
		while (cl > 0) { /* a name the Connection field lists is hop-by-hop too */
			size_t t = 0;

			while (t < cl && conn[t] != ',')
				t++;
			size_t a = 0, b = t;
			while (a < b && (conn[a] == ' ' || conn[a] == '\t'))
				a++;
			while (b > a && (conn[b - 1] == ' ' || conn[b - 1] == '\t'))
				b--;
			if (b - a == n && strncasecmp(conn + a, name, n) == 0)
				return 1;
			conn += t < cl ? t + 1 : t;
			cl -= t < cl ? t + 1 : t;
		}
	}
	return 0;
}

struct out {
	char *p;
	size_t len, cap;
	int over;
};

static void __attribute__((format(printf, 2, 3)))
put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->over)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->len)
		o->over = 1;
	else
		o->len += (size_t)n;
}

/* X-Forwarded-For: the client's list, then the client (RFC 7239's de facto predecessor). */
static void
put_forwarded(struct out *o, const struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;
	char who[64], host[LG_PATH_MAX];
	size_t n, hn;
	const char *xff = lg_http_field_get(r, "x-forwarded-for", &n);
	const char *h = lg_http_field_get(r, "host", &hn);

	lg_client_text(c, who, sizeof(who));
	if (xff != NULL && n > 0)
		put(o, "X-Forwarded-For: %.*s, %s\r\n", (int)n, xff, who);
	else
		put(o, "X-Forwarded-For: %s\r\n", who);
	put(o, "X-Forwarded-Proto: http\r\n");
	if (h != NULL && hn > 0 && hn < sizeof(host))
		put(o, "X-Forwarded-Host: %.*s\r\n", (int)hn, h);
}

int
lg_up_build_head(struct lg_conn_up *x, const struct lg_upstream_def *u)
{
	const struct lg_conn *c = x->c;
	const struct lg_http_req *r = &c->http.req;
	struct out o = { x->out, 0, sizeof(x->out) - 64, 0 };
	const char *target_end = r->target + r->target_len;
	size_t hn;
	const char *host = lg_http_field_get(r, "host", &hn);
	char id[160];
	double left = x->deadline - ev_now(c->w->ev);

	if (r->kept_short)
		return -1;
	put(&o, "%s %.*s HTTP/1.1\r\n", http_method_str(r->method), (int)(target_end - r->path),
	    r->path);
	if (u->host[0])
		put(&o, "Host: %s\r\n", u->host);
	else if (host != NULL)
		put(&o, "Host: %.*s\r\n", (int)hn, host);
	for (unsigned i = 0; i < r->nkept; i++) {
		const struct lg_http_field *f = &r->kept[i];
		const char *name = r->fbuf + f->name_off;

		if (!is_dropped(name, f->name_len, r))
			put(&o, "%.*s: %.*s\r\n", (int)f->name_len, name, (int)f->value_len,
			    r->fbuf + f->value_off);
	}
	put_forwarded(&o, c);
	lg_access_request_id(c, id, sizeof(id));
	put(&o, "X-Request-Id: %s\r\n", id);
	put(&o, "X-Lagless-Deadline-Ms: %lld\r\n", (long long)(left > 0 ? left * 1e3 : 0));
	if (r->chunked)
		put(&o, "Transfer-Encoding: chunked\r\n");
	else if (r->content_length != LG_HTTP_NO_LENGTH && (r->content_length > 0 ||
	    r->method == HTTP_POST || r->method == HTTP_PUT || r->method == HTTP_PATCH))
		put(&o, "Content-Length: %llu\r\n", (unsigned long long)r->content_length);
	put(&o, "\r\n");
	if (o.over)
		return -1;
	x->out_len = o.len;
	x->out_off = 0;
	return 0;
}
