#include "http/fwd.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "http/authority.h"
#include "http/chars.h"

#define REQUEST_ID_MAX 200 /* bytes of an X-Request-Id value sent upstream */

/* What becomes of one of the client's field lines. */
enum fate {
	PASS,    /* copied as it came */
	DROP,    /* left out: hop-by-hop, replaced, or not to be trusted */
	GATHER,  /* a trusted chain (X-Forwarded-For, Forwarded): its value heads ours */
};

/* The head being written: every byte is counted (len), only those that fit cap are written,
 * so one test at the end tells whether it fitted and len is the size it needs. */
struct out {
	char *buf;
	size_t cap, len;
	int full;
};

static void
put(struct out *w, const char *s, size_t n)
{
	if (!w->full && n <= w->cap - w->len)
		memcpy(w->buf + w->len, s, n);
	else
		w->full = 1;
	w->len += n;
}

static void
puts_(struct out *w, const char *s)
{
	put(w, s, strlen(s));
}

/* A string literal's bytes: its length is the compiler's, not strlen's at each call. */
#define PUT_LIT(w, lit) put((w), (lit), sizeof(lit) - 1)

static int
name_is_n(const char *name, size_t len, const char *lit, size_t litlen)
{
	return litlen == len && strncasecmp(name, lit, len) == 0;
}

/* Whether name (len bytes) is the lower-case literal lit, case-insensitively. */
#define name_is(name, len, lit) name_is_n((name), (len), (lit), sizeof(lit) - 1)

/* Field line i of r: its name, and its value without surrounding OWS (http/http.h). */
static void
field_at(const struct lg_http_req *r, unsigned i, const char **name, size_t *nlen,
    const char **v, size_t *vlen)
{
	const struct lg_http_field *f = &r->kept[i];

	*name = r->fbuf + f->name_off;
	*nlen = f->name_len;
	*v = r->fbuf + f->value_off;
	*vlen = f->value_len;
	while (*vlen > 0 && (**v == ' ' || **v == '\t'))
		(*v)++, (*vlen)--;
	while (*vlen > 0 && ((*v)[*vlen - 1] == ' ' || (*v)[*vlen - 1] == '\t'))
		(*vlen)--;
}

/* Whether the comma-separated list v (vlen bytes: OWS around elements, empty elements
 * ignored, RFC 9110 section 5.6.1) has an element equal to tok case-insensitively; with
 * name_only, an element's "/version" is left out of the comparison (RFC 9110 section 7.8's
 * protocol-name). */
static int
list_has(const char *v, size_t vlen, const char *tok, size_t toklen, int name_only)
{
	const char *end = v + vlen;

	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *e = comma ? comma : end;
		const char *s = v, *slash;

		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (name_only && (slash = memchr(s, '/', (size_t)(e - s))) != NULL)
			e = slash;
		if ((size_t)(e - s) == toklen && strncasecmp(s, tok, toklen) == 0)
			return 1;
		v = comma ? comma + 1 : end;
	}
	return 0;
}

/* Whether a field line of r named field lists tok (list_has over each line, RFC 9110 section
 * 5.3: several lines are one list). */
static int
req_list_has(const struct lg_http_req *r, const char *field, const char *tok, size_t toklen,
    int name_only)
{
	unsigned pos = 0;
	size_t vlen;
	const char *v;

	while ((v = lg_http_field_next(r, field, &pos, &vlen)) != NULL)
		if (list_has(v, vlen, tok, toklen, name_only))
			return 1;
	return 0;
}

int
lg_fwd_upgrade_request(const struct lg_http_req *r)
{
	size_t n;

	if (r == NULL || !r->conn_upgrade || r->method != HTTP_GET || r->minor < 1 ||
	    r->chunked || (r->content_length != LG_HTTP_NO_LENGTH && r->content_length > 0))
		return 0;
	if (lg_http_field_get(r, "upgrade", &n) == NULL || n == 0 ||
	    !req_list_has(r, "connection", "upgrade", 7, 0))
		return 0;
	return !req_list_has(r, "upgrade", "h2c", 3, 1);
}

int
lg_fwd_upgrade_match(const struct lg_http_req *r, const char *v, size_t vlen)
{
	const char *end = v + vlen;
	int any = 0;

	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *e = comma ? comma : end;
		const char *s = v;

		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e > s) {
			if (!req_list_has(r, "upgrade", s, (size_t)(e - s), 0) ||
			    list_has(s, (size_t)(e - s), "h2c", 3, 1))
				return 0;
			any = 1;
		}
		v = comma ? comma + 1 : end;
	}
	return any;
}

/* Whether a Connection field line of r lists name (RFC 9110 section 7.6.1: a comma-separated
 * list of tokens, OWS around elements, empty elements ignored, names case-insensitive). */
static int
connection_names(const struct lg_http_req *r, const char *name, size_t nlen)
{
	unsigned pos = 0;
	size_t vlen;
	const char *v;

	while ((v = lg_http_field_next(r, "connection", &pos, &vlen)) != NULL)
		if (list_has(v, vlen, name, nlen, 0))
			return 1;
	return 0;
}

/* The fields never passed as they came: hop-by-hop (RFC 9110 section 7.6.1) and those
 * lagless writes itself from its own knowledge. */
#define NAME(lit) { lit, sizeof(lit) - 1 }
static const struct {
	const char *name;
	size_t len;
} always_drop[] = {
	NAME("connection"), NAME("keep-alive"), NAME("te"), NAME("trailer"),
	NAME("transfer-encoding"), NAME("proxy-connection"), NAME("content-length"),
	NAME("expect"), NAME("host"), NAME("x-lagless-deadline-ms"),
};
#undef NAME

/* The forwarding fields: a trusted peer's pass (or head our chain), an untrusted one's go. */
static enum fate
forwarding_fate(const struct lg_fwd_opts *o, const char *name, size_t nlen)
{
	int xff = name_is(name, nlen, "x-forwarded-for");
	int fwd = name_is(name, nlen, "forwarded");

	if (!xff && !fwd && !name_is(name, nlen, "x-forwarded-proto") &&
	    !name_is(name, nlen, "x-forwarded-host"))
		return PASS;
	if (!o->trusted)
		return DROP;
	if ((xff && o->style == LG_FWD_XFF) || (fwd && o->style == LG_FWD_FORWARDED))
		return GATHER;
	return PASS;
}

static enum fate
fate_of(const struct lg_http_req *r, const struct lg_fwd_opts *o, const char *name, size_t nlen)
{
	enum fate f;

	for (size_t i = 0; i < sizeof(always_drop) / sizeof(always_drop[0]); i++)
		if (name_is_n(name, nlen, always_drop[i].name, always_drop[i].len))
			return DROP;
	if (name_is(name, nlen, "upgrade"))
		return o->tunnel ? PASS : DROP;
	if (o->request_id != NULL && name_is(name, nlen, "x-request-id"))
		return DROP;
	f = forwarding_fate(o, name, nlen);
	if (f == DROP)
		return DROP;
	if (connection_names(r, name, nlen))
		return DROP;
	return f;
}

/* Whether a field called lit passes (so ours is not written). */
static int
passes(const struct lg_http_req *r, const struct lg_fwd_opts *o, const char *lit)
{
	size_t litlen = strlen(lit);

	if (!o->trusted) /* a forwarding field passes only from a trusted peer */
		return 0;
	for (unsigned i = 0; i < r->nkept; i++) {
		const char *name, *v;
		size_t nlen, vlen;

		field_at(r, i, &name, &nlen, &v, &vlen);
		if (name_is_n(name, nlen, lit, litlen) && fate_of(r, o, name, nlen) == PASS)
			return 1;
	}
	return 0;
}

/* The client's host (RFC 9112 section 3.2.2): an absolute-form target's authority, else the
 * Host field (the parser allows one at most), else none (len 0). */
static const char *
client_host(const struct lg_http_req *r, size_t *len)
{
	const char *t = r->target, *end = r->target + r->target_len;
	const char *v;

	if (t[0] != '/' && !(r->target_len == 1 && t[0] == '*')) {
		const char *auth = strstr(t, "://");

		if (auth != NULL) {
			const char *p = auth + 3;

			while (p < end && *p != '/' && *p != '?')
				p++;
			*len = (size_t)(p - auth - 3);
			return auth + 3;
		}
	}
	v = lg_http_field_get(r, "host", len);
	if (v == NULL)
		*len = 0;
	return v ? v : "";
}

/* The request line: method, origin-form target (an absolute-form one's path and query),
 * HTTP/1.1. */
static void
request_line(struct out *w, const struct lg_http_req *r)
{
	const char *end = r->target + r->target_len;

	puts_(w, lg_http_method_str(r->method));
	put(w, " ", 1);
	if (r->path >= r->target && r->path < end) {
		put(w, r->path, (size_t)(end - r->path)); /* path and query, or "*" */
	} else { /* an absolute-form target with an empty path: "/" (RFC 9110 section 4.2.3) */
		put(w, "/", 1);
		if (r->query != NULL) {
			put(w, "?", 1);
			put(w, r->query, r->query_len);
		}
	}
	PUT_LIT(w, " HTTP/1.1\r\n");
}

/* Whether a is an address as inet_ntop writes one (IPv4 dotted or IPv6 hex and colons); *v6
 * says which. */
static int
numeric_addr(const char *a, int *v6)
{
	size_t n = a ? strlen(a) : 0;

	if (n == 0 || n > 45)
		return 0;
	*v6 = strchr(a, ':') != NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)a[i];

		if (!(c == '.' || c == ':' || (c >= '0' && c <= '9') ||
		    (*v6 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))))
			return 0;
	}
	return 1;
}

/* A Forwarded parameter value (RFC 7239 section 4): a token as it is, else a quoted-string
 * with '"' and '\' escaped. */
static void
put_param(struct out *w, const char *v, size_t n)
{
	int token = n > 0;

	for (size_t i = 0; i < n && token; i++)
		token = lg_ch((unsigned char)v[i], LG_CH_TCHAR);
	if (token) {
		put(w, v, n);
		return;
	}
	put(w, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		if (v[i] == '"' || v[i] == '\\')
			put(w, "\\", 1);
		put(w, v + i, 1);
	}
	put(w, "\"", 1);
}

/* The trusted chain (the GATHER lines of field lit, in order, empty ones skipped) then ", ". */
static void
put_chain(struct out *w, const struct lg_http_req *r, const struct lg_fwd_opts *o,
    const char *lit)
{
	size_t litlen = strlen(lit);

	if (!o->trusted) /* only a trusted peer's chain is gathered (forwarding_fate) */
		return;
	for (unsigned i = 0; i < r->nkept; i++) {
		const char *name, *v;
		size_t nlen, vlen;

		field_at(r, i, &name, &nlen, &v, &vlen);
		if (vlen == 0 || !name_is_n(name, nlen, lit, litlen) ||
		    fate_of(r, o, name, nlen) != GATHER)
			continue;
		put(w, v, vlen);
		put(w, ", ", 2);
	}
}

/* X-Forwarded-For, -Proto, -Host, or Forwarded (RFC 7239 sections 4, 5.2, 5.3, 5.4, 6);
 * host (hlen bytes): the client's (client_host). */
static void
forwarding(struct out *w, const struct lg_http_req *r, const struct lg_fwd_opts *o,
    const char *host, size_t hlen)
{
	int v6 = 0, num = numeric_addr(o->client_addr, &v6);
	const char *proto = o->tls ? "https" : "http";

	if (o->style == LG_FWD_FORWARDED) {
		PUT_LIT(w, "Forwarded: ");
		put_chain(w, r, o, "forwarded");
		PUT_LIT(w, "for=");
		if (!num)
			PUT_LIT(w, "unknown");
		else if (v6) {
			PUT_LIT(w, "\"[");
			puts_(w, o->client_addr);
			PUT_LIT(w, "]\"");
		} else
			puts_(w, o->client_addr);
		PUT_LIT(w, ";proto=");
		puts_(w, proto);
		if (hlen > 0) {
			PUT_LIT(w, ";host=");
			put_param(w, host, hlen);
		}
		PUT_LIT(w, "\r\n");
		return;
	}
	PUT_LIT(w, "X-Forwarded-For: ");
	put_chain(w, r, o, "x-forwarded-for");
	puts_(w, num ? o->client_addr : "unknown");
	PUT_LIT(w, "\r\n");
	if (!passes(r, o, "x-forwarded-proto")) {
		PUT_LIT(w, "X-Forwarded-Proto: ");
		puts_(w, proto);
		PUT_LIT(w, "\r\n");
	}
	if (hlen > 0 && !passes(r, o, "x-forwarded-host")) {
		PUT_LIT(w, "X-Forwarded-Host: ");
		put(w, host, hlen);
		PUT_LIT(w, "\r\n");
	}
}

/* The fields lagless writes after the client's: X-Request-Id, the deadline, the tunnel's
 * Connection, the body's framing. */
static void
own_fields(struct out *w, const struct lg_fwd_opts *o)
{
	char num[LG_FMT_U64_MAX];

	if (o->request_id != NULL) {
		PUT_LIT(w, "X-Request-Id: ");
		puts_(w, o->request_id);
		PUT_LIT(w, "\r\n");
	}
	if (o->deadline_ms >= 0) {
		PUT_LIT(w, LG_FWD_DEADLINE_FIELD ": ");
		put(w, num, lg_fmt_u64(num, (uint64_t)o->deadline_ms));
		PUT_LIT(w, "\r\n");
	}
	if (o->tunnel)
		PUT_LIT(w, "Connection: upgrade\r\n");
	if (o->body == LG_FWD_BODY_LENGTH) {
		PUT_LIT(w, "Content-Length: ");
		put(w, num, lg_fmt_u64(num, o->content_length));
		PUT_LIT(w, "\r\n");
	} else if (o->body == LG_FWD_BODY_CHUNKED) {
		PUT_LIT(w, "Transfer-Encoding: chunked\r\n");
	}
}

/* Whether the caller's strings may go into a head: a Host of host syntax, an X-Request-Id of
 * visible ASCII (no CR, LF or NUL can reach the wire from them). */
static int
opts_ok(const struct lg_fwd_opts *o)
{
	if (o->body < LG_FWD_BODY_NONE || o->body > LG_FWD_BODY_CHUNKED ||
	    (o->style != LG_FWD_XFF && o->style != LG_FWD_FORWARDED))
		return 0;
	if (o->host != NULL) {
		size_t n = strlen(o->host);

		for (size_t i = 0; i < n; i++)
			if (!lg_host_char((unsigned char)o->host[i]) || o->host[i] == ' ' ||
			    o->host[i] == '\t')
				return 0;
		if (!lg_host_syntax_ok(o->host, n))
			return 0;
	}
	if (o->request_id != NULL) {
		size_t n = strlen(o->request_id);

		if (n == 0 || n > REQUEST_ID_MAX)
			return 0;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)o->request_id[i] <= ' ' ||
			    (unsigned char)o->request_id[i] >= 0x7f)
				return 0;
	}
	return 1;
}

/* Writes the head into w; -1 with EINVAL for what lg_fwd_head refuses. */
static int
write_head(struct out *w, const struct lg_http_req *r, const struct lg_fwd_opts *o)
{
	size_t hlen, chlen;
	const char *host, *chost;

	/* CONNECT asks for a tunnel, not a resource (RFC 9110 section 9.3.6): none is offered */
	if (r == NULL || o == NULL || r->kept_short || r->nkept != r->nfields ||
	    r->method == HTTP_CONNECT || !opts_ok(o)) {
		errno = EINVAL;
		return -1;
	}
	request_line(w, r);
	chost = client_host(r, &chlen);
	host = o->host ? o->host : chost;
	hlen = o->host ? strlen(o->host) : chlen;
	put(w, "Host: ", hlen > 0 ? 6 : 5); /* empty: "Host:", no authority (RFC 9112 3.2) */
	put(w, host, hlen);
	PUT_LIT(w, "\r\n");
	for (unsigned i = 0; i < r->nkept; i++) {
		const char *name, *v;
		size_t nlen, vlen;

		field_at(r, i, &name, &nlen, &v, &vlen);
		if (fate_of(r, o, name, nlen) != PASS)
			continue;
		put(w, name, nlen);
		put(w, ": ", 2);
		put(w, v, vlen);
		put(w, "\r\n", 2);
	}
	forwarding(w, r, o, chost, chlen);
	own_fields(w, o);
	put(w, "\r\n", 2);
	return 0;
}

ssize_t
lg_fwd_head(const struct lg_http_req *r, const struct lg_fwd_opts *o, char *buf, size_t cap)
{
	struct out w = { buf, buf ? cap : 0, 0, 0 };

	if (write_head(&w, r, o) == -1)
		return -1;
	if (w.full) {
		errno = ENOSPC;
		return -1;
	}
	return (ssize_t)w.len;
}

ssize_t
lg_fwd_head_size(const struct lg_http_req *r, const struct lg_fwd_opts *o)
{
	struct out w = { NULL, 0, 0, 0 };

	if (write_head(&w, r, o) == -1)
		return -1;
	return (ssize_t)w.len;
}
