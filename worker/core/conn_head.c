/* Response heads of the connection I/O (worker/core/conn_head.h). */
#include "worker/core/conn_head.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "worker/core/access.h"

/* "HTTP/1.1 NNN Reason\r\n" by status (100..999), each made at its first use: the longest
 * reason (RFC 9110, 31 bytes) leaves room. */
struct status_line {
	unsigned char len;            /* 0 until made */
	char line[55];
};
static struct status_line status_lines[900];

/* The lines after the status line up to Content-Length's value, whose Date changes once a
 * second; the connection lines by enum lg_conn_line. */
static const char date_fmt[] = "Server: lagless\r\nDate: %a, %d %b %Y %H:%M:%S GMT\r\n"
    "Content-Length: ";
static const struct {
	const char *s;
	size_t len;
} conn_lines[] = {
	[LG_CONN_LINE_NONE] = { "", 0 },
	[LG_CONN_LINE_CLOSE] = { "Connection: close\r\n", 19 },
	[LG_CONN_LINE_KEEP] = { "Connection: keep-alive\r\n", 24 },
};

/* Appends the n bytes of s at *at when they fit before end; the caller checks *at <= end. */
static void
put(char **at, const char *end, const char *s, size_t n)
{
	if (n <= (size_t)(end - *at))
		memcpy(*at, s, n);
	*at += n;
}

/* put() of s[0..n) from a buffer of cap >= n readable bytes (cap a constant): with room for
 * all cap, they are copied whole and *at moves by n, a copy of fixed size that the compiler
 * makes a few moves instead of a call. */
#define PUT_WHOLE(at, end, s, n, cap) do { \
	if ((size_t)((end) - *(at)) >= (cap)) { \
		memcpy(*(at), (s), (cap)); \
		*(at) += (n); \
	} else { \
		put((at), (end), (s), (n)); \
	} \
} while (0)

/* The Server, Date and Content-Length name lines of w (remade when the second changed). */
static void
put_date(char **at, const char *end, struct lg_worker *w)
{
	ev_tstamp now = ev_now(w->ev);

	if (now - w->date_at >= 1. || w->date_len == 0) {
		time_t t = (time_t)now;
		struct tm tm;

		gmtime_r(&t, &tm);
		w->date_len = strftime(w->date, sizeof(w->date), date_fmt, &tm);
		w->date_at = (ev_tstamp)t;
	}
	PUT_WHOLE(at, end, w->date, w->date_len, sizeof(w->date));
}

/* The status line of status (100..999, else 500 with lg_http_reason(status)). */
static void
put_status(char **at, const char *end, int status)
{
	int code = status >= 100 && status <= 999 ? status : 500, n;
	struct status_line *sl = &status_lines[code - 100];
	char line[80];

	if (code == status && sl->len > 0) {
		PUT_WHOLE(at, end, sl->line, sl->len, sizeof(sl->line));
		return;
	}
	n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", code, lg_http_reason(status));
	n = n < 0 ? 0 : (size_t)n < sizeof(line) ? n : (int)sizeof(line) - 1;
	if (code == status && (size_t)n < sizeof(sl->line)) {
		memcpy(sl->line, line, (size_t)n);
		sl->len = (unsigned char)n;
	}
	put(at, end, line, (size_t)n);
}

/* Decimal digits of v at *at (no terminator), as put() does. */
static void
put_u64(char **at, const char *end, uint64_t v)
{
	char d[LG_FMT_U64_MAX];

	if (v < 10) { /* a one-digit length (/ping's "ok") needs no conversion loop */
		d[0] = (char)('0' + v);
		put(at, end, d, 1);
		return;
	}
	put(at, end, d, lg_fmt_u64(d, v));
}

/* Writes a response head (status line, Server, Date, Content-Length, the optional Content-Type,
 * connection and extra lines, the empty line) into out[0..cap). The fields and their order are
 * those every answer of lagless has (docs/HTTP.md); built from stored lines with memcpy
 * because this runs once per response (snprintf's format interpretation was the largest
 * user-space cost of a /ping after the system calls, then strlen of constants and the reason
 * lookup). Returns its length; >= cap when it does not fit. */
size_t
lg_conn_put_head(char *out, size_t cap, struct lg_conn *c, int status, size_t len,
    const char *ctype, enum lg_conn_line conn, const char *extra)
{
	char *at = out, *end = out + cap;

	put_status(&at, end, status);
	put_date(&at, end, c->w);
	if (status == 204 || status == 304 || status < 200) {
		/* no content, and no Content-Length (RFC 9110 sections 8.6, 15.3.5, 15.4.5): the
		 * stored lines end with its name, which goes again */
		at -= sizeof("Content-Length: ") - 1;
	} else {
		put_u64(&at, end, len);
		if (ctype != NULL) {
			put(&at, end, "\r\nContent-Type: ", 16);
			put(&at, end, ctype, strlen(ctype));
		}
		put(&at, end, "\r\n", 2);
	}
	put(&at, end, conn_lines[conn].s, conn_lines[conn].len);
	if (extra != NULL)
		put(&at, end, extra, strlen(extra));
	if (c->w->env->cfg->conn.request_id) { /* --request-id: the one the access log names */
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
