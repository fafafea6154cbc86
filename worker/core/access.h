/* The access log line of a response (--access-log), in text or JSON lines
 * (--access-log-json), and the request id (--request-id) echoed in X-Request-Id. */
#ifndef LG_WORKER_ACCESS_H
#define LG_WORKER_ACCESS_H

#include <stddef.h>
#include <stdint.h>

struct lg_conn;

/* Writes the access line of c's request, which took `took` ns from its first byte to its last
 * response byte: method, path, status, bytes, times, then the client address (the peer, or
 * the client a trusted proxy names: worker/core/client.h lg_client_text), the
 * query, the User-Agent and the request id. One write(2) to standard error (the error log). */
void lg_access_line(const struct lg_conn *c, uint64_t took);

/* The request id of c's current request into out (cap bytes, NUL-terminated): the client's
 * X-Request-Id when it is 1-128 of A-Z a-z 0-9 . _ : - (among the kept fields), else 24 hex
 * digits of this process's pid and the request's start time in ns (one more than the last
 * request's when that is not later, so every request of the process has its own), the same
 * for the whole request. Returns its length; 0 without a request. */
size_t lg_access_request_id(const struct lg_conn *c, char *out, size_t cap);

#endif
