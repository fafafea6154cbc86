/* libFuzzer harness for the response parser (http/resp.c). Each input is an upstream's bytes
 * after one flag byte (bit 0: the request was HEAD; bits 1-4: a piece size of 1-16 bytes):
 *
 * 1. Through lg_resp_* whole and in pieces (the head presented again from its start as it
 *    grows, the body each byte once): the same verdict, reason, status, framing, end and body
 *    bytes both ways, every payload span inside the bytes its call took, and every head's
 *    field index tiling its field lines (check_index).
 * 2. Differentially against http-parser 2.9.4 (libhttp-parser-dev) in HTTP_RESPONSE mode,
 *    pausing after each message, the end of input as the upstream's close: wherever lg_resp
 *    accepts (every interim head and the final answer complete, or a close-delimited body
 *    ended by the close), http-parser must complete the same messages at the same offsets with
 *    the same status, the same framing (chunked, or the same Content-Length), the same body
 *    bytes, and no connection kept that http-parser would close. lg_resp may refuse what http-parser accepts (it is
 *    stricter: docs/HTTP.md "Responses from an upstream"); the one input it accepts that
 *    http-parser refuses is a Content-Length repeated with identical values (RFC 9110 8.6
 *    allows a recipient to take it as one; the proxy writes its own Content-Length, so no
 *    reader after it sees the repetition), which is left out of the comparison.
 *
 * http-parser reads a body after a 1xx, 204 or 304 head that declares one, and after any
 * answer to HEAD: its callers say "no body" by returning 1 from on_headers_complete, as
 * Node.js does, and so does the oracle here (RFC 9112 6.3 (1)).
 */
#include <http_parser.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/cachectl.h"
#include "http/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MSGS 8
#define BODY 16384

static const struct lg_resp_limits lim = { 4096, 64 };

/* What one reading found: the heads and the final message. */
struct reading {
	enum lg_resp_err err;
	int ok;                   /* every message complete, no refusal */
	unsigned nmsg;            /* messages (interim heads + the final answer) */
	int status[MSGS];
	size_t end[MSGS];         /* where each ends in the input */
	enum lg_resp_framing framing;
	uint64_t cl;
	int keep_alive, cl_merged;
	size_t body_len;
	char body[BODY];
	unsigned char payload[BODY]; /* 1: the input byte is payload (read_ours sets it) */
};

static void
put_body(struct reading *rd, const char *at, size_t n)
{
	if (n == 0)
		return;
	if (n > BODY - rd->body_len)
		abort(); /* more payload than input */
	memcpy(rd->body + rd->body_len, at, n);
	rd->body_len += n;
}

/* The index of a head h[0..n) tiles its field lines in order, each a name ending at its colon,
 * a value without leading or trailing OWS inside the line, and a CRLF; the empty line is last;
 * every Connection option is inside the head. */
/* RFC 9111's decision on any head it accepts (http/cachectl.h): stored only when shared, for
 * a time above 0 within the route's; never shared and marked hit-for-miss at once. */
static void
check_cachectl(const struct lg_resp *r, const char *h)
{
	static const char keyh[][32] = { "accept" };
	const struct lg_cc_rule rule = { .ttl_ms = 60000, .negative_ttl_ms = 5000,
	    .key_headers = keyh, .nkey_headers = 1, .credentials = r->nfields & 1 };
	struct lg_cc_decision d;
	unsigned f = lg_cc_decide(r->status, h, r->fields, r->nfields, &rule, &d);

	if (f != d.flags || d.why == NULL || ((f & LG_CC_STORE) && (!(f & LG_CC_SHARE) ||
	    d.ttl_ms == 0 || d.ttl_ms > 60000)) || ((f & LG_CC_HFM) && (f & LG_CC_SHARE)))
		abort();
	/* The field lines a proxied answer's stored value keeps (worker/flight/coalesce_up.c:
	 * no hop-by-hop or framing field, Date, Server, Age, X-Cache) are what another replica
	 * reading it from Redis accepts (lg_cc_fields_ok). */
	static char kept[65536];
	size_t klen = 0;

	for (unsigned i = 0; i < r->nfields; i++) {
		const struct lg_resp_field *x = &r->fields[i];
		static const char *const own[] = { "date", "server", "age", "x-cache" };
		int skip = (x->flags & (LG_RESP_F_HOP | LG_RESP_F_FRAMING)) != 0;

		for (size_t k = 0; k < 4 && !skip; k++)
			skip = strlen(own[k]) == x->name.len &&
			    strncasecmp(h + x->name.off, own[k], x->name.len) == 0;
		if (skip || klen + x->line.len > sizeof(kept))
			continue;
		memcpy(kept + klen, h + x->line.off, x->line.len);
		klen += x->line.len;
	}
	if (!lg_cc_fields_ok(kept, klen))
		abort();
}

static void
check_index(const struct lg_resp *r, const char *h, size_t n)
{
	size_t at = r->nfields ? r->fields[0].line.off : n - 2;

	for (unsigned i = 0; i < r->nfields; i++) {
		const struct lg_resp_field *f = &r->fields[i];
		size_t end = (size_t)f->line.off + f->line.len, v = f->value.off, vl = f->value.len;

		if (f->line.off != at || f->name.off != at || f->name.len == 0 || end > n - 2 ||
		    h[f->name.off + f->name.len] != ':' || v + vl > end - 2 ||
		    v <= (size_t)f->name.off + f->name.len || memcmp(h + end - 2, "\r\n", 2) != 0)
			abort();
		if (vl > 0 && (h[v] == ' ' || h[v] == '\t' || h[v + vl - 1] == ' ' ||
		    h[v + vl - 1] == '\t'))
			abort();
		at = end;
	}
	if (at != n - 2 || memcmp(h + n - 2, "\r\n", 2) != 0)
		abort();
	for (unsigned j = 0; j < r->nconn; j++)
		if ((size_t)r->conn[j].off + r->conn[j].len > n || r->conn[j].len == 0)
			abort();
}

/* One head step over in[*off..avail), the head presented from its start: returns 1 when the
 * final head is in, 2 after an interim head, 0 when more bytes are needed, -1 on a refusal. */
static int
head_step(struct lg_resp *r, struct reading *rd, const char *in, size_t *off, size_t avail)
{
	long n = lg_resp_head(r, in + *off, avail - *off);

	if (n == LG_RESP_PARTIAL || n == LG_RESP_ERROR)
		return n == LG_RESP_ERROR ? -1 : 0;
	if (n <= 0 || (size_t)n > avail - *off)
		abort();
	check_index(r, in + *off, (size_t)n);
	check_cachectl(r, in + *off);
	*off += (size_t)n;
	rd->cl_merged |= r->cl_merged; /* in any head of the answer */
	if (rd->nmsg < MSGS) {
		rd->status[rd->nmsg] = r->status;
		rd->end[rd->nmsg] = *off;
	}
	rd->nmsg++;
	return r->interim ? 2 : 1;
}

/* One body step over in[*off..avail): returns 0, or -1 on a refusal. */
static int
body_step(struct lg_resp *r, struct reading *rd, const char *in, size_t *off, size_t avail)
{
	const char *d;
	size_t dl;
	long n = lg_resp_body(r, in + *off, avail - *off, &d, &dl);

	if (n == LG_RESP_ERROR)
		return -1;
	if (n <= 0 || (size_t)n > avail - *off || (dl > 0 && (d < in + *off ||
	    d + dl > in + *off + (size_t)n)))
		abort();
	put_body(rd, d, dl);
	if (dl > 0)
		memset(rd->payload + (d - in), 1, dl);
	*off += (size_t)n;
	return 0;
}

static void
read_ours(const char *in, size_t size, size_t piece, int head_req, struct reading *rd)
{
	static struct lg_resp_field fields[64];
	struct lg_resp r;
	size_t off = 0, avail = 0;
	int in_body = 0, need = 1;

	memset(rd, 0, offsetof(struct reading, body));
	memset(rd->payload, 0, size);
	lg_resp_init(&r, &lim, fields);
	lg_resp_start(&r, head_req);
	while (!lg_resp_done(&r) && r.err == LG_RESP_OK) {
		if (need) {
			if (avail == size) {
				lg_resp_eof(&r);
				break;
			}
			avail = size - avail < piece ? size : avail + piece;
			need = 0;
		}
		if (!in_body) {
			int h = head_step(&r, rd, in, &off, avail);

			if (h == -1)
				break;
			in_body = h == 1;
			need = h == 0 || (h == 2 && off == avail);
		} else if (off == avail) {
			need = 1;
		} else if (body_step(&r, rd, in, &off, avail) == -1) {
			break;
		}
	}
	rd->err = r.err;
	rd->ok = lg_resp_done(&r);
	rd->framing = r.framing;
	rd->cl = r.content_length;
	rd->keep_alive = r.keep_alive;
	if (rd->ok && rd->nmsg <= MSGS)
		rd->end[rd->nmsg - 1] = off;
}

/* http-parser's reading, message after message. */
struct hp_reading {
	int head_req;
	int err;                  /* enum http_errno past the messages it completed */
	unsigned nmsg;
	int status[MSGS], chunked[MSGS], keep_alive[MSGS];
	uint64_t cl[MSGS];
	size_t end[MSGS];
	size_t body_len;          /* the current message's */
	char body[BODY];
};

static int
hp_begin(http_parser *p)
{
	((struct hp_reading *)p->data)->body_len = 0;
	return 0;
}

static int
hp_headers(http_parser *p)
{
	struct hp_reading *h = p->data;
	unsigned s = p->status_code;

	if (h->nmsg < MSGS) {
		h->status[h->nmsg] = (int)s;
		h->chunked[h->nmsg] = (p->flags & F_CHUNKED) != 0;
		h->cl[h->nmsg] = p->content_length;
	}
	/* RFC 9112 6.3 (1), which http-parser leaves to its caller */
	return h->head_req || s / 100 == 1 || s == 204 || s == 304;
}

static int
hp_body(http_parser *p, const char *at, size_t len)
{
	struct hp_reading *h = p->data;

	if (len > BODY - h->body_len)
		abort();
	memcpy(h->body + h->body_len, at, len);
	h->body_len += len;
	return 0;
}

static int
hp_complete(http_parser *p)
{
	struct hp_reading *h = p->data;

	if (h->nmsg < MSGS) /* here its flags know a body was skipped */
		h->keep_alive[h->nmsg] = http_should_keep_alive(p);
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings hp_settings = {
	.on_message_begin = hp_begin, .on_headers_complete = hp_headers, .on_body = hp_body,
	.on_message_complete = hp_complete,
};

/* Reads until want messages are complete, an error, an upgrade, or the end of input, which
 * is then signalled as the upstream's close (a zero-length execute). */
static void
read_hp(const char *in, size_t size, int head_req, unsigned want, struct hp_reading *h)
{
	http_parser p;
	size_t off = 0;

	memset(h, 0, offsetof(struct hp_reading, body));
	h->head_req = head_req;
	http_parser_init(&p, HTTP_RESPONSE);
	p.data = h;
	while (h->nmsg < want && h->nmsg < MSGS) {
		int at_eof = off == size;

		off += http_parser_execute(&p, &hp_settings, at_eof ? NULL : in + off,
		    size - off);
		enum http_errno e = HTTP_PARSER_ERRNO(&p);

		if (e == HPE_PAUSED) {
			h->end[h->nmsg++] = off;
			http_parser_pause(&p, 0);
			if (p.upgrade)
				return;
			continue;
		}
		if (e != HPE_OK)
			h->err = (int)e;
		if (e != HPE_OK || at_eof)
			return;
	}
}

static void
differ(const char *what, unsigned i)
{
	fprintf(stderr, "fuzz_resp: lg_resp accepted, http-parser differs: %s (message %u)\n",
	    what, i);
	abort();
}

/* 1 when a Connection field line in in[0, n) holds a list (a comma: two elements, or an empty
 * one). RFC 9110 5.6.1.2: a recipient takes each element and ignores empty ones, and lg_resp
 * does; http-parser 2.9.4 misses a "keep-alive" after another element in several spellings
 * ("Connection: ,keep-alive", "Connection:u,keep-alive" on an HTTP/1.0 answer), so it closes
 * where lg_resp keeps. Its reading of a single token is the one compared. */
static int
conn_list(const char *in, size_t n)
{
	static const char name[] = "connection:";

	for (size_t i = 0; i + sizeof(name) - 1 <= n; i++) {
		if ((i > 0 && in[i - 1] != '\n') || strncasecmp(in + i, name, sizeof(name) - 1) != 0)
			continue;
		for (size_t j = i + sizeof(name) - 1; j < n && in[j] != '\r' && in[j] != '\n'; j++)
			if (in[j] == ',')
				return 1;
	}
	return 0;
}

/* Where lg_resp accepted, http-parser read the same messages. */
static void
compare_hp(const char *in, size_t size, int head_req, const struct reading *rd)
{
	static struct hp_reading h;
	unsigned last = rd->nmsg - 1;

	if (!rd->ok || rd->cl_merged || rd->nmsg > MSGS)
		return;
	/* http-parser takes only SP as OWS and BWS (RFC 9110 5.6.3 allows HTAB too): it is shown
	 * an SP for every HTAB outside the payload, as the request side's oracle does */
	static char shown[BODY];

	for (size_t i = 0; i < size; i++)
		shown[i] = in[i] == '\t' && !rd->payload[i] ? ' ' : in[i];
	read_hp(shown, size, head_req, rd->nmsg, &h);
	if (h.nmsg < rd->nmsg)
		differ(h.err ? http_errno_name((enum http_errno)h.err) : "incomplete", h.nmsg);
	for (unsigned i = 0; i < rd->nmsg; i++) {
		if (h.status[i] != rd->status[i])
			differ("status", i);
		if (h.end[i] != rd->end[i])
			differ("end", i);
	}
	if (rd->framing != LG_RESP_NONE && rd->framing != LG_RESP_UPGRADE &&
	    (rd->framing == LG_RESP_CHUNKED) != h.chunked[last]) /* NONE: its fields say nothing */
		differ("chunked", last);
	if (rd->framing == LG_RESP_LENGTH && h.cl[last] != rd->cl)
		differ("content-length", last);
	if (rd->framing == LG_RESP_CLOSE && h.cl[last] != ULLONG_MAX)
		differ("close-delimited", last);
	if (h.body_len != rd->body_len || memcmp(h.body, rd->body, h.body_len) != 0)
		differ("body", last);
	/* lagless may close a connection http-parser would keep (it misses a "close" after an
	 * empty list element or before an HTAB, and takes a Connection trailer only for what it
	 * lists), never keep one it would close, except where http-parser misses a "keep-alive"
	 * inside a list (conn_list) */
	if (rd->framing != LG_RESP_UPGRADE && rd->keep_alive && !h.keep_alive[last] &&
	    !conn_list(in, rd->end[last]))
		differ("keep-alive", last);
}

/* The whole and the split reading agree. */
static void
compare_split(const struct reading *a, const struct reading *b)
{
	if (a->err != b->err || a->ok != b->ok || a->nmsg != b->nmsg)
		abort();
	for (unsigned i = 0; i < a->nmsg && i < MSGS; i++)
		if (a->status[i] != b->status[i] || (a->ok && a->end[i] != b->end[i]))
			abort();
	if (a->ok && (a->framing != b->framing || a->cl != b->cl ||
	    a->keep_alive != b->keep_alive || a->body_len != b->body_len ||
	    memcmp(a->body, b->body, a->body_len) != 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct reading whole, split;

	if (size < 1 || size - 1 > BODY)
		return 0;
	const char *in = (const char *)data + 1;
	int head_req = data[0] & 1;
	size_t piece = 1 + ((data[0] >> 1) & 15);

	read_ours(in, size - 1, size - 1 > 0 ? size - 1 : 1, head_req, &whole);
	read_ours(in, size - 1, piece, head_req, &split);
	compare_split(&whole, &split);
	compare_hp(in, size - 1, head_req, &whole);
	return 0;
}
