/* Response heads of the connection I/O (worker/conn_head.h). */
#include "worker/conn_head.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "worker/access.h"

static const char *
date_header(struct lg_worker *w)
{
	ev_tstamp now = ev_now(w->ev);

	if (now - w->date_at >= 1. || w->date[0] == '\0') {
		time_t t = (time_t)now;
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(w->date, sizeof(w->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		w->date_at = (ev_tstamp)t;
	}
	return w->date;
}

/* Appends the n bytes of s at *at when they fit before end; the caller checks *at <= end. */
static void
put(char **at, const char *end, const char *s, size_t n)
{
	if (n <= (size_t)(end - *at))
		memcpy(*at, s, n);
	*at += n;
}

/* Decimal digits of v at *at (no terminator), as put() does. */
static void
put_u64(char **at, const char *end, uint64_t v)
{
	char d[LG_FMT_U64_MAX];

	put(at, end, d, lg_fmt_u64(d, v));
}

/* Writes a response head (status line, Server, Date, Content-Length, the optional Content-Type,
 * connection and extra lines, the empty line) into out[0..cap). The fields and their order are
 * those every answer of lagless has (docs/HTTP.md); built with memcpy because this runs once
 * per response, and snprintf's format interpretation was the largest user-space cost of a
 * /ping after the system calls. Returns its length; >= cap when it does not fit. */
size_t
lg_conn_put_head(char *out, size_t cap, struct lg_conn *c, int status, size_t len,
    const char *ctype, const char *conn, const char *extra)
{
	static const char server[] = "\r\nServer: lagless\r\nDate: ";
	static const char clen[] = "\r\nContent-Length: ";
	const char *reason = lg_http_reason(status), *date = date_header(c->w);
	char *at = out, *end = out + cap;

	put(&at, end, "HTTP/1.1 ", 9);
	put_u64(&at, end, (uint64_t)(status >= 100 && status <= 999 ? status : 500));
	put(&at, end, " ", 1);
	put(&at, end, reason, strlen(reason));
	put(&at, end, server, sizeof(server) - 1);
	put(&at, end, date, strlen(date));
	put(&at, end, clen, sizeof(clen) - 1);
	put_u64(&at, end, len);
	put(&at, end, "\r\n", 2);
	if (ctype != NULL) {
		put(&at, end, "Content-Type: ", 14);
		put(&at, end, ctype, strlen(ctype));
		put(&at, end, "\r\n", 2);
	}
	put(&at, end, conn, strlen(conn));
	if (extra != NULL)
		put(&at, end, extra, strlen(extra));
	if (c->w->env->cfg->request_id) { /* --request-id: the one the access log names */
		char id[130];
		size_t n = lg_access_request_id(c, id, sizeof(id));

		if (n > 0) {
			put(&at, end, "X-Request-Id: ", 14);
			put(&at, end, id, n);
			put(&at, end, "\r\n", 2);
		}
	}
	put(&at, end, "\r\n", 2);
	return (size_t)(at - out);
}
