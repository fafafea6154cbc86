/* Response heads of the connection I/O (worker/core/conn.c): the one place that formats the status
 * line and the fields every answer of lagless carries (docs/HTTP.md). Private to the
 * connection module. */
#ifndef LG_WORKER_CONN_HEAD_H
#define LG_WORKER_CONN_HEAD_H

#include <stddef.h>

#include "worker/core/conn.h"

/* The connection line of a response head. */
enum lg_conn_line {
	LG_CONN_LINE_NONE,            /* HTTP/1.1 keeping the connection: none */
	LG_CONN_LINE_CLOSE,           /* "Connection: close" */
	LG_CONN_LINE_KEEP,            /* "Connection: keep-alive" (an HTTP/1.0 client) */
};

/* Writes the head of c's response: status (100..999, else 500), Server, Date (the loop's
 * cached one, RFC 9110 section 6.6.1), Content-Length len (bytes), Content-Type ctype unless
 * NULL (neither for a 1xx, 204 or 304: RFC 9110 sections 8.6, 15.4.5), the connection line conn and the extra lines (CRLF-ended, or NULL), X-Request-Id
 * under --request-id, and the empty line, into out[0..cap). Returns its length in bytes;
 * >= cap when it does not fit (out then holds a cut head). */
size_t lg_conn_put_head(char *out, size_t cap, struct lg_conn *c, int status, size_t len,
    const char *ctype, enum lg_conn_line conn, const char *extra);

#endif
