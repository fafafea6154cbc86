#include "worker/core/access.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "worker/core/client.h"
#include "worker/core/conn.h"

/* This process's pid: asked once, not per request (getpid(2) is a system call), and asked
 * again in a child of fork(2), whose pid differs (pthread_atfork(3) clears the copy). */
static pid_t pid_self;

static void
pid_forget(void)
{
	pid_self = 0;
}

static pid_t
self_pid(void)
{
	static int hooked;

	if (!hooked && pthread_atfork(NULL, NULL, pid_forget) == 0)
		hooked = 1;
	if (pid_self == 0 || !hooked)
		pid_self = getpid();
	return pid_self;
}

/* v's low 4 * digits bits as that many lower-case hex digits at out, zero-padded, as printf's
 * "%0<digits>x" writes them (no NUL). */
static void
put_hex(char *out, uint64_t v, int digits)
{
	static const char two[] = /* a byte's two digits, a pair per value: one step per byte */
	    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	    "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	    "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

	for (; digits >= 2; digits -= 2, v >>= 8)
		memcpy(out + digits - 2, two + 2 * (v & 0xff), 2);
	if (digits == 1)
		out[0] = "0123456789abcdef"[v & 15];
}

size_t
lg_access_request_id(const struct lg_conn *c, char *out, size_t cap)
{
	size_t n;
	const char *v = lg_http_field_get(&c->http.req, "x-request-id", &n);
	static const char ok[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-";

	if (cap == 0 || c->obs.req_start_ns == 0)
		return 0;
	if (v != NULL && n > 0 && n <= 128 && n < cap) {
		size_t i = 0;

		while (i < n && strchr(ok, v[i]) != NULL && v[i] != '\0')
			i++;
		if (i == n) {
			memcpy(out, v, n);
			out[n] = '\0';
			return n;
		}
	}
	char id[25];

	put_hex(id, (uint64_t)(unsigned)self_pid(), 8);
	put_hex(id + 8, c->obs.rid, 16);
	n = sizeof(id) - 1 < cap ? sizeof(id) - 1 : cap - 1;
	memcpy(out, id, n);
	out[n] = '\0';
	return n;
}

/* printf at *at within end, never past it (a line too long is cut). */
static void __attribute__((format(printf, 3, 4)))
putf(char **at, const char *end, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (*at >= end)
		return;
	va_start(ap, fmt);
	r = vsnprintf(*at, (size_t)(end - *at), fmt, ap);
	va_end(ap);
	*at = r < 0 ? *at : (size_t)r < (size_t)(end - *at) ? *at + r : (char *)end;
}

/* Longest logged form (escaped bytes) of the path and the query, and of the user agent: a
 * longer one is cut and ends in "...", so a line (the fixed fields, an id of 128 and these)
 * stays within its buffer and one write of it within PIPE_BUF (pipe(7)): whole, with its id
 * and, in JSON, its closing brace. */
#define LOG_TARGET_MAX 1024
#define LOG_UA_MAX 512

/* s (len bytes) escaped at *at, at most cap bytes of it (cap >= 3): whole when that fits,
 * else cut where "..." still fits after it. */
static void
put_capped(char **at, const char *end, const char *s, size_t len, size_t cap)
{
	size_t room = (size_t)(end - *at);
	char *start = *at, *stop = *at + (cap < room ? cap : room);

	if (lg_json_escape(at, stop, s, len, LG_JSON_ASCII) == len || stop - start < 3)
		return; /* whole; or no room even for the mark (the caps leave it: not reached) */
	*at = start;
	(void)lg_json_escape(at, stop - 3, s, len, LG_JSON_ASCII);
	memcpy(*at, "...", 3);
	*at += 3;
}

void
lg_access_line(const struct lg_conn *c, uint64_t took)
{
	const struct lg_http_req *r = &c->http.req;
	int json = c->w->env->cfg->conn.access_log_json;
	char line[4000], *at = line, *end = line + sizeof(line) - 2, client[64], id[130], ts[40];
	const char *method = r->path ? http_method_str(r->method) : "-";
	const char *ua;
	size_t ua_len = 0;
	struct timespec now;
	struct tm tm;

	lg_client_text(c, client, sizeof(client));
	lg_access_request_id(c, id, sizeof(id));
	if ((ua = lg_http_field_get(r, "user-agent", &ua_len)) == NULL)
		ua = "";
	if (json) {
		clock_gettime(CLOCK_REALTIME, &now);
		gmtime_r(&now.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		putf(&at, end, "{\"time\":\"%s.%03ldZ\",\"pid\":%d,\"loop\":%u,\"client\":\"%s\","
		    "\"method\":\"%s\",\"path\":\"", ts, now.tv_nsec / 1000000, (int)self_pid(),
		    c->w->env->index, client, method);
	} else {
		putf(&at, end, "%s ", method);
	}
	put_capped(&at, end, r->path ? r->path : "-", r->path ? r->path_len : 1, LOG_TARGET_MAX);
	putf(&at, end, json ? "\",\"status\":%d,\"bytes\":%zu,\"time_ms\":%.3f,\"queue_ms\":%.3f,"
	    "\"run_ms\":%.3f,\"query\":\"" : " status=%d bytes=%zu time_ms=%.3f queue_ms=%.3f "
	    "run_ms=%.3f query=\"", c->obs.resp_status, c->obs.resp_bytes, (double)took / 1e6,
	    (double)c->obs.queue_ns / 1e6, (double)c->obs.run_ns / 1e6);
	put_capped(&at, end, r->query ? r->query : "", r->query ? r->query_len : 0,
	    LOG_TARGET_MAX);
	if (json)
		putf(&at, end, "\",\"ua\":\"");
	else
		putf(&at, end, "\" client=%s ua=\"", client);
	put_capped(&at, end, ua, ua_len, LOG_UA_MAX);
	putf(&at, end, "\"");
	if (c->obs.up_addr != NULL) /* a proxied request: the app's server, status and time */
		putf(&at, end, json ? ",\"upstream\":\"%s\",\"upstream_status\":%d,"
		    "\"upstream_ms\":%.3f" : " upstream=%s upstream_status=%d upstream_ms=%.3f",
		    c->obs.up_addr, c->obs.up_status, c->obs.up_ms);
	if (c->obs.why != NULL) /* an upstream's fault lagless answered for (worker/upstream/) */
		putf(&at, end, json ? ",\"upstream_error\":\"%s\"" : " upstream_error=%s",
		    c->obs.why);
	putf(&at, end, json ? ",\"request_id\":\"%s\"}" : " id=%s", id);
	if (!json) { /* its own switch (--access-log), so written whatever --log-level says */
		*at = '\0';
		lg_log_write(LG_LOG_INFO, "access", "%s", line);
		return;
	}
	*at++ = '\n';
	/* One write, as lg_log_write does, so lines of several processes never interleave. */
	(void)!write(STDERR_FILENO, line, (size_t)(at - line));
}
