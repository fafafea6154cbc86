#include "http/resp.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/query.h"
#include "http/chars.h"

/* The states: the status line, the header section (H_FIELDS + a field-line state), the body,
 * the trailer section (T_FIELDS + a field-line state). */
enum {
	H_VERSION, H_CODE, H_SP2, H_REASON, H_SL_LF,
	H_FIELDS,                /* .. H_FIELDS + F_END_LF */
	H_INTERIM = H_FIELDS + 6, /* a 1xx head was returned: the next call starts another */
	B_LENGTH, B_CLOSE,
	B_CSIZE0, B_CSIZE, B_CBWS,
	/* chunk-ext (RFC 9112 7.1.1): after ';', a name, BWS after it, after '=', a token value,
	 * a quoted one, a quoted-pair, after the value, BWS after it */
	B_EXT, B_EXT_NAME, B_EXT_NBWS, B_EXT_EQ, B_EXT_TOKEN, B_EXT_QUOTED, B_EXT_QPAIR,
	B_EXT_VEND, B_EXT_VBWS,
	B_CSIZE_LF, B_CDATA, B_CDATA_CR, B_CDATA_LF,
	T_FIELDS,                /* .. T_FIELDS + F_END_LF */
	S_DONE = T_FIELDS + 6,
};

/* Where a field line is (RFC 9112 section 5): the same rules in the header and trailer
 * sections. F_LINE_DONE and F_SECTION_DONE are results, never states. */
enum { F_LINE, F_NAME, F_OWS, F_VALUE, F_VALUE_LF, F_END_LF, F_LINE_DONE, F_SECTION_DONE };

static const char *const err_names[] = {
	[LG_RESP_OK] = "ok",
	[LG_RESP_E_STATUS_LINE] = "status_line",
	[LG_RESP_E_VERSION] = "version",
	[LG_RESP_E_STATUS_CODE] = "status_code",
	[LG_RESP_E_FIELD_NAME] = "field_name",
	[LG_RESP_E_SPACE_BEFORE_COLON] = "space_before_colon",
	[LG_RESP_E_OBS_FOLD] = "obs_fold",
	[LG_RESP_E_BARE_CR] = "bare_cr",
	[LG_RESP_E_BARE_LF] = "bare_lf",
	[LG_RESP_E_FIELD_VALUE] = "field_value",
	[LG_RESP_E_HEAD_TOO_LARGE] = "head_too_large",
	[LG_RESP_E_TOO_MANY_FIELDS] = "too_many_fields",
	[LG_RESP_E_CONNECTION] = "connection",
	[LG_RESP_E_CL_INVALID] = "cl_invalid",
	[LG_RESP_E_CL_DIFFERENT] = "cl_different",
	[LG_RESP_E_CL_AND_TE] = "cl_and_te",
	[LG_RESP_E_TE_INVALID] = "te_invalid",
	[LG_RESP_E_TE_NOT_CHUNKED] = "te_not_chunked",
	[LG_RESP_E_TE_HTTP10] = "te_http10",
	[LG_RESP_E_CHUNK_SIZE] = "chunk_size",
	[LG_RESP_E_CHUNK_OVERFLOW] = "chunk_overflow",
	[LG_RESP_E_CHUNK_LINE] = "chunk_line",
	[LG_RESP_E_CHUNK_EXT] = "chunk_ext",
	[LG_RESP_E_CHUNK_CRLF] = "chunk_crlf",
	[LG_RESP_E_TRAILER_FRAMING] = "trailer_framing",
	[LG_RESP_E_TRUNCATED] = "truncated",
	[LG_RESP_E_MISUSE] = "misuse",
};
_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == LG_RESP_E_COUNT,
    "one name per enum lg_resp_err");

const char *
lg_resp_strerror(enum lg_resp_err e)
{
	return (unsigned)e < LG_RESP_E_COUNT ? err_names[e] : "unknown";
}

__attribute__((cold)) static int
fail(struct lg_resp *r, enum lg_resp_err e)
{
	r->err = e;
	return -1;
}

static int
ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

_Static_assert(offsetof(struct lg_resp, status) == offsetof(struct lg_resp, fields) +
    sizeof(((struct lg_resp *)0)->fields), "lg_resp_init sets every member before status");

void
lg_resp_init(struct lg_resp *r, const struct lg_resp_limits *lim, struct lg_resp_field *fields)
{
	r->lim = lim; /* the members before status; lg_resp_start clears every other */
	r->fields = fields;
	lg_resp_start(r, 0);
}

/* Clears what one head says, keeping the caller's settings and head_req. */
static void
head_reset(struct lg_resp *r)
{
	int head_req = r->head_req;

	memset(&r->status, 0, sizeof(*r) - offsetof(struct lg_resp, status));
	r->head_req = head_req;
	r->state = H_VERSION;
}

void
lg_resp_start(struct lg_resp *r, int head_request)
{
	r->head_req = head_request != 0;
	head_reset(r);
}

int
lg_resp_done(const struct lg_resp *r)
{
	return r->err == LG_RESP_OK && r->state == S_DONE;
}

int
lg_resp_eof(struct lg_resp *r)
{
	if (r->err != LG_RESP_OK)
		return -1;
	if (r->state == B_CLOSE)
		r->state = S_DONE;
	return r->state == S_DONE ? 0 : fail(r, LG_RESP_E_TRUNCATED);
}

/* One byte of the status line (RFC 9112 section 4): "HTTP/" DIGIT "." DIGIT SP 3DIGIT SP
 * reason-phrase CRLF, reason-phrase = *( HTAB / SP / VCHAR / obs-text ), i the byte's offset in
 * the head. Returns the next state or -1. */
static int
status_byte(struct lg_resp *r, int st, unsigned char c, size_t i)
{
	int digit = c >= '0' && c <= '9';

	switch (st) {
	case H_VERSION:
		if (i < 5 ? c != (unsigned char)"HTTP/"[i] : i == 6 ? c != '.' :
		    i == 8 ? c != ' ' : !digit)
			return fail(r, LG_RESP_E_STATUS_LINE);
		if (i == 5 && c != '1')
			r->minor = 10; /* marks a major version other than 1 */
		else if (i == 7 && r->minor == 0)
			r->minor = (unsigned)(c - '0');
		if (i == 8 && r->minor > 1)
			return fail(r, LG_RESP_E_VERSION);
		return i == 8 ? H_CODE : H_VERSION;
	case H_CODE:
		if (!digit)
			return fail(r, LG_RESP_E_STATUS_CODE);
		r->status = r->status * 10 + (c - '0');
		return i == 11 ? H_SP2 : H_CODE;
	case H_SP2:
		if (c != ' ')
			return fail(r, digit ? LG_RESP_E_STATUS_CODE : LG_RESP_E_STATUS_LINE);
		if (r->status < 100 || r->status > 599)
			return fail(r, LG_RESP_E_STATUS_CODE);
		r->reason.off = (uint32_t)i + 1;
		return H_REASON;
	case H_REASON:
		if (c == '\r') {
			r->reason.len = (uint32_t)(i - r->reason.off);
			return H_SL_LF;
		}
		if (!lg_ch(c, LG_CH_VALUE))
			return fail(r, c == '\n' ? LG_RESP_E_BARE_LF : LG_RESP_E_STATUS_LINE);
		return H_REASON;
	default: /* H_SL_LF */
		if (c != '\n')
			return fail(r, LG_RESP_E_BARE_CR);
		return H_FIELDS + F_LINE;
	}
}

/* One byte of a field line or of the empty line ending the section (RFC 9112 section 5,
 * RFC 9110 section 5.5: field-name = token, then ':' at once, OWS, field-value of field-vchar,
 * SP, HTAB and obs-text, OWS, CRLF). f is the line state; returns the next one, F_LINE_DONE
 * after a field line's LF, F_SECTION_DONE after the empty line's, or -1. */
static int
field_syntax(struct lg_resp *r, int f, unsigned char c)
{
	switch (f) {
	case F_LINE:
		if (c == '\r')
			return F_END_LF;
		if (ows(c))
			return fail(r, LG_RESP_E_OBS_FOLD);
		if (c == '\n')
			return fail(r, LG_RESP_E_BARE_LF);
		return lg_ch(c, LG_CH_TCHAR) ? F_NAME : fail(r, LG_RESP_E_FIELD_NAME);
	case F_NAME:
		if (lg_ch(c, LG_CH_TCHAR))
			return F_NAME;
		if (c == ':')
			return F_OWS;
		if (ows(c))
			return fail(r, LG_RESP_E_SPACE_BEFORE_COLON);
		return fail(r, c == '\n' ? LG_RESP_E_BARE_LF : LG_RESP_E_FIELD_NAME);
	case F_OWS:
	case F_VALUE:
		if (c == '\r')
			return F_VALUE_LF;
		if (!lg_ch(c, LG_CH_VALUE))
			return fail(r, c == '\n' ? LG_RESP_E_BARE_LF : LG_RESP_E_FIELD_VALUE);
		return f == F_OWS && ows(c) ? F_OWS : F_VALUE;
	case F_VALUE_LF:
		return c == '\n' ? F_LINE_DONE : fail(r, LG_RESP_E_BARE_CR);
	default: /* F_END_LF */
		return c == '\n' ? F_SECTION_DONE : fail(r, LG_RESP_E_BARE_CR);
	}
}

/* Whether v[0..n) is the lower-case name lower (llen bytes), case-insensitively (RFC 9110
 * section 5.1). */
static int
name_is_n(const char *v, size_t n, const char *lower, size_t llen)
{
	return llen == n && strncasecmp(v, lower, n) == 0;
}

/* name_is_n of a string literal, its length the compiler's (no strlen per field line). */
#define name_is(v, n, lit) name_is_n((v), (n), (lit), sizeof(lit) - 1)

/* http-parser 2.9.4 takes a name that begins with Transfer-Encoding for one (http/frame.c
 * found it in requests): such a name is refused rather than read otherwise than a reader
 * built on it would. */
static int
extends_te(const char *v, size_t n)
{
	return n > 17 && strncasecmp(v, "transfer-encoding", 17) == 0;
}

/* The elements of a #rule list (RFC 9110 section 5.6.1) in v[0..n), split at each comma:
 * calls each(r, v, off, len) with the element's offset and length in v, its OWS trimmed (len 0:
 * an empty element). Returns -1 at the first call that does, else 0. */
static int
list_each(const char *v, size_t n, int (*each)(struct lg_resp *, const char *, size_t, size_t),
    struct lg_resp *r)
{
	size_t i = 0;

	for (;;) {
		size_t s = i, e;

		while (s < n && ows((unsigned char)v[s]))
			s++;
		e = s;
		while (e < n && v[e] != ',')
			e++;
		i = e;
		while (e > s && ows((unsigned char)v[e - 1]))
			e--;
		if (each(r, v, s, e - s) == -1)
			return -1;
		if (i == n)
			return 0;
		i++;
	}
}

static int
is_token(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!lg_ch((unsigned char)v[i], LG_CH_TCHAR))
			return 0;
	return n > 0;
}

/* One Content-Length value (RFC 9110 section 8.6): 1*DIGIT, at most 19 significant digits;
 * a list of identical values, or one line per value, is one value. */
static int
cl_element(struct lg_resp *r, const char *v, size_t off, size_t n)
{
	uint64_t x = 0;
	size_t digits = 0;

	if (n == 0)
		return fail(r, LG_RESP_E_CL_INVALID);
	for (size_t i = off; i < off + n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return fail(r, LG_RESP_E_CL_INVALID);
		if (x > 0 || v[i] != '0')
			digits++;
		if (digits > 19)
			return fail(r, LG_RESP_E_CL_INVALID);
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (r->cl_seen && x != r->content_length)
		return fail(r, LG_RESP_E_CL_DIFFERENT);
	if (r->cl_seen)
		r->cl_merged = 1;
	r->cl_seen = 1;
	r->content_length = x;
	return 0;
}

/* One transfer-coding (RFC 9112 section 6.1, 7): only chunked, once. The request side sends
 * an upstream no TE field, so no other coding may be applied (RFC 9110 10.1.4). */
static int
te_element(struct lg_resp *r, const char *v, size_t off, size_t n)
{
	if (!is_token(v + off, n))
		return fail(r, LG_RESP_E_TE_INVALID);
	if (!name_is(v + off, n, "chunked"))
		return fail(r, LG_RESP_E_TE_NOT_CHUNKED);
	if (r->te_chunked)
		return fail(r, LG_RESP_E_TE_INVALID);
	r->te_chunked = 1;
	return 0;
}

/* One connection option (RFC 9110 section 7.6.1): a token; empty elements are ignored. Its
 * span is kept (its offset in the head) for the hop-by-hop removal. */
static int
conn_element(struct lg_resp *r, const char *v, size_t off, size_t n)
{
	if (n == 0)
		return 0;
	if (!is_token(v + off, n) || r->nconn == LG_RESP_CONN_MAX)
		return fail(r, LG_RESP_E_CONNECTION);
	if (name_is(v + off, n, "keep-alive")) { /* its field is hop-by-hop already: not listed */
		r->conn_keep = 1;
		return 0;
	}
	r->conn[r->nconn].off = (uint32_t)(r->vstart + off);
	r->conn[r->nconn++].len = (uint32_t)n;
	if (name_is(v + off, n, "close"))
		r->conn_close = 1;
	return 0;
}

/* One element of a Proxy-Connection field, a name no RFC defines (RFC 9110 7.6.1 lists it
 * among the hop-by-hop ones a proxy removes): its close is taken, as http-parser and llhttp
 * take it, since a connection closed without need costs less than one reused that the
 * upstream closes; nothing else of it is read. */
static int
pconn_element(struct lg_resp *r, const char *v, size_t off, size_t n)
{
	if (name_is(v + off, n, "close"))
		r->conn_close = 1;
	return 0;
}

/* A field line of the header section is whole, buf[r->line..end): index it and read what a
 * framing or connection field says. */
static int
field_done(struct lg_resp *r, const char *buf, size_t end)
{
	struct lg_resp_field *fl = &r->fields[r->nfields++];
	const char *name = buf + r->line, *v = buf + r->vstart;
	size_t nlen = r->colon - r->line, vlen = r->vend - r->vstart;

	fl->name = (struct lg_resp_span){ (uint32_t)r->line, (uint32_t)nlen };
	fl->value = (struct lg_resp_span){ (uint32_t)r->vstart, (uint32_t)vlen };
	fl->line = (struct lg_resp_span){ (uint32_t)r->line, (uint32_t)(end - r->line) };
	fl->flags = 0;
	if (name_is(name, nlen, "content-length")) {
		fl->flags = LG_RESP_F_FRAMING;
		return list_each(v, vlen, cl_element, r);
	}
	if (name_is(name, nlen, "transfer-encoding")) {
		fl->flags = LG_RESP_F_FRAMING | LG_RESP_F_HOP;
		r->te_seen = 1;
		return list_each(v, vlen, te_element, r);
	}
	if (extends_te(name, nlen))
		return fail(r, LG_RESP_E_TE_INVALID);
	if (name_is(name, nlen, "connection")) {
		fl->flags = LG_RESP_F_HOP;
		return list_each(v, vlen, conn_element, r);
	}
	if (name_is(name, nlen, "proxy-connection")) {
		fl->flags = LG_RESP_F_HOP;
		return list_each(v, vlen, pconn_element, r);
	}
	if (name_is(name, nlen, "keep-alive") || name_is(name, nlen, "te") ||
	    name_is(name, nlen, "upgrade"))
		fl->flags = LG_RESP_F_HOP;
	return 0;
}

/* The fields the Connection options name are hop-by-hop too (RFC 9110 section 7.6.1). */
static void
mark_listed(struct lg_resp *r, const char *buf)
{
	if (r->nconn == 0)
		return;
	for (unsigned i = 0; i < r->nfields; i++) {
		struct lg_resp_field *fl = &r->fields[i];

		for (unsigned j = 0; j < r->nconn; j++)
			if (fl->name.len == r->conn[j].len && strncasecmp(buf + fl->name.off,
			    buf + r->conn[j].off, fl->name.len) == 0)
				fl->flags |= LG_RESP_F_HOP;
	}
}

/* The header section is complete: refuse ambiguous framing, then decide the body's by
 * RFC 9112 section 6.3 in its order. Returns 0 or -1. */
static int
head_end(struct lg_resp *r, const char *buf)
{
	if (r->te_seen && r->minor == 0) /* 6.1: faulty framing, even with a Content-Length */
		return fail(r, LG_RESP_E_TE_HTTP10);
	if (r->te_seen && r->cl_seen)
		return fail(r, LG_RESP_E_CL_AND_TE);
	mark_listed(r, buf);
	if (r->status == 101)
		r->framing = LG_RESP_UPGRADE;
	else if (r->status < 200)
		r->interim = 1;
	else if (r->head_req || r->status == 204 || r->status == 304)
		r->framing = LG_RESP_NONE;
	else if (r->te_seen)
		r->framing = LG_RESP_CHUNKED;
	else if (r->cl_seen)
		r->framing = LG_RESP_LENGTH;
	else
		r->framing = LG_RESP_CLOSE;
	r->keep_alive = !r->conn_close && (r->minor == 1 || r->conn_keep) &&
	    r->framing != LG_RESP_CLOSE && r->framing != LG_RESP_UPGRADE;
	if (r->interim)
		r->state = H_INTERIM;
	else if (r->framing == LG_RESP_CHUNKED)
		r->state = B_CSIZE0;
	else if (r->framing == LG_RESP_CLOSE)
		r->state = B_CLOSE;
	else if (r->framing == LG_RESP_LENGTH && r->content_length > 0)
		r->state = B_LENGTH;
	else
		r->state = S_DONE;
	r->remaining = r->content_length;
	return 0;
}

/* One byte buf[i] of the header section in line state f, with the index's bookkeeping.
 * Returns the next line state, F_SECTION_DONE, or -1. */
static int
head_field_byte(struct lg_resp *r, const char *buf, size_t i, int f)
{
	unsigned char c = (unsigned char)buf[i];
	int n;

	if (f == F_LINE) {
		r->line = i;
		if (c != '\r' && r->nfields >= r->lim->max_fields)
			return fail(r, LG_RESP_E_TOO_MANY_FIELDS);
	}
	n = field_syntax(r, f, c);
	if (f == F_NAME && n == F_OWS)
		r->colon = i;
	else if (f == F_OWS && n == F_VALUE)
		r->vstart = i, r->vend = i + 1;
	else if (f == F_VALUE && n == F_VALUE && !ows(c))
		r->vend = i + 1;
	else if (f == F_OWS && n == F_VALUE_LF)
		r->vstart = r->vend = i;
	if (n == F_LINE_DONE)
		return field_done(r, buf, i + 1) == -1 ? -1 : F_LINE;
	return n;
}

/* Where the run of bytes from buf[i] that leaves state st as it is ends (within len and the
 * head limit): name characters in a name; value characters but CR in a value or the reason
 * phrase, a value's end moved past each that is not OWS. The byte loop would make the same
 * checks one call per byte; this is its fast path, not a second reading. */
static size_t
run_end(struct lg_resp *r, int st, const char *buf, size_t i, size_t len)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t stop = len < r->lim->max_head ? len : r->lim->max_head, j = i;

	if (st == H_FIELDS + F_NAME) {
		while (j + 4 <= stop && lg_ch4(b + j, LG_CH_TCHAR))
			j += 4;
		while (j < stop && lg_ch(b[j], LG_CH_TCHAR))
			j++;
		return j;
	}
	j = lg_value_end(b, j, stop); /* CR, LF and CTLs are not value bytes */
	if (st == H_FIELDS + F_VALUE) {
		size_t e = j;

		while (e > i && ows(b[e - 1]))
			e--;
		if (e > i)
			r->vend = e;
	}
	return j;
}

/* The fast path of a whole status line of the common form "HTTP/1.x NNN " at the start of
 * buf (len bytes): 13 when it is there whole and valid, with the version, the status and the
 * reason's start set as the byte loop sets them; else 0, and nothing set (the byte loop reads
 * it, and finds what is wrong). */
static size_t
status_fast(struct lg_resp *r, const char *buf, size_t len)
{
	const unsigned char *b = (const unsigned char *)buf;
	int status;

	if (len < 13 || r->lim->max_head < 13 || memcmp(b, "HTTP/1.", 7) != 0 ||
	    (b[7] != '0' && b[7] != '1') || b[8] != ' ' || b[12] != ' ')
		return 0;
	for (int k = 9; k < 12; k++)
		if (b[k] < '0' || b[k] > '9')
			return 0;
	status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
	if (status < 100 || status > 599)
		return 0;
	r->minor = (unsigned)(b[7] - '0');
	r->status = status;
	r->reason.off = 13;
	r->state = H_REASON;
	return 13;
}

/* The fast path of one whole field line from buf[i] (state F_LINE): a token name, ':', OWS,
 * value characters, CRLF, all within len and the head limit, and room for another field.
 * Then the line is indexed as the byte loop would index it (the same offsets, field_done) and
 * the offset after its LF returned, or -1 on what field_done refuses. Anything else returns i,
 * nothing set: the byte loop reads that line and finds what is wrong with it. */
static long
line_fast(struct lg_resp *r, const char *buf, size_t i, size_t len)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t stop = len < r->lim->max_head ? len : r->lim->max_head, j = i, colon, vs, ve;

	if (r->nfields >= r->lim->max_fields || j >= stop || !lg_ch(b[j], LG_CH_TCHAR))
		return (long)i;
	while (j + 4 <= stop && lg_ch4(b + j, LG_CH_TCHAR))
		j += 4;
	while (j < stop && lg_ch(b[j], LG_CH_TCHAR))
		j++;
	if (j >= stop || b[j] != ':')
		return (long)i;
	colon = j++;
	while (j < stop && ows(b[j]))
		j++;
	vs = j; /* at the value's first byte, not OWS, or at the CR */
	j = lg_value_end(b, j, stop);
	ve = j;
	while (ve > vs && ows(b[ve - 1])) /* after the last byte that is not OWS */
		ve--;
	if (j + 1 >= stop || b[j] != '\r' || b[j + 1] != '\n')
		return (long)i;
	r->line = i;
	r->colon = colon;
	r->vstart = vs;
	r->vend = ve;
	return field_done(r, buf, j + 2) == -1 ? -1 : (long)(j + 2);
}

long
lg_resp_head(struct lg_resp *r, const char *buf, size_t len)
{
	size_t i;

	if (r->err != LG_RESP_OK)
		return LG_RESP_ERROR;
	if (r->state == H_INTERIM)
		head_reset(r);
	if (r->state > H_INTERIM || len < r->scanned)
		return fail(r, LG_RESP_E_MISUSE);
	if (r->scanned == 0 && r->state == H_VERSION)
		r->scanned = status_fast(r, buf, len);
	for (i = r->scanned; i < len; i++) {
		int st = r->state, n;

		if (st == H_FIELDS + F_LINE) {
			long e = line_fast(r, buf, i, len);

			if (e == -1)
				return LG_RESP_ERROR;
			if ((size_t)e > i) { /* a whole field line: the next starts at e */
				i = (size_t)e - 1;
				continue;
			}
		}
		if (st == H_FIELDS + F_NAME || st == H_FIELDS + F_VALUE || st == H_REASON) {
			size_t j = run_end(r, st, buf, i, len);

			if (j > i) { /* the run's bytes change no state: its end byte is read below */
				i = j - 1;
				continue;
			}
		}
		if (i >= r->lim->max_head)
			return fail(r, LG_RESP_E_HEAD_TOO_LARGE);
		if (st < H_FIELDS)
			n = status_byte(r, st, (unsigned char)buf[i], i);
		else if ((n = head_field_byte(r, buf, i, st - H_FIELDS)) >= 0)
			n += H_FIELDS;
		if (n == -1)
			return LG_RESP_ERROR;
		if (n == H_FIELDS + F_SECTION_DONE)
			return head_end(r, buf) == -1 ? LG_RESP_ERROR : (long)(i + 1);
		r->state = n;
	}
	r->scanned = len;
	return LG_RESP_PARTIAL;
}

/* One byte of a chunk extension (RFC 9112 section 7.1.1): chunk-ext = *( BWS ";" BWS
 * chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ), name a token, value a token or a
 * quoted-string (RFC 9110 section 5.6.4); BWS comes only before ';' or '=', so never before the
 * CR. Extensions are checked and ignored. Returns the next state, or -1 (r->err is the
 * caller's to set). */
static int
ext_byte(int st, unsigned char c)
{
	int tchar = lg_ch(c, LG_CH_TCHAR), end = c == '\r' ? B_CSIZE_LF : c == ';' ? B_EXT : -1;

	switch (st) {
	case B_EXT:
		if (ows(c))
			return B_EXT;
		return tchar ? B_EXT_NAME : -1;
	case B_EXT_NAME:
		if (tchar)
			return B_EXT_NAME;
		__attribute__((fallthrough));
	case B_EXT_NBWS:
		if (ows(c))
			return B_EXT_NBWS;
		return c == '=' ? B_EXT_EQ : st == B_EXT_NAME || c == ';' ? end : -1;
	case B_EXT_EQ:
		if (ows(c))
			return B_EXT_EQ;
		return c == '"' ? B_EXT_QUOTED : tchar ? B_EXT_TOKEN : -1;
	case B_EXT_TOKEN:
		if (tchar)
			return B_EXT_TOKEN;
		__attribute__((fallthrough));
	case B_EXT_VEND:
		return ows(c) ? B_EXT_VBWS : end;
	case B_EXT_VBWS:
		return ows(c) ? B_EXT_VBWS : c == ';' ? B_EXT : -1;
	case B_EXT_QUOTED: /* qdtext: HTAB, SP, VCHAR but '"' and '\\', obs-text */
		if (c == '"')
			return B_EXT_VEND;
		if (c == '\\')
			return B_EXT_QPAIR;
		return lg_ch(c, LG_CH_VALUE) ? B_EXT_QUOTED : -1;
	default: /* B_EXT_QPAIR */
		return lg_ch(c, LG_CH_VALUE) ? B_EXT_QUOTED : -1;
	}
}

/* One byte of a chunk-size line or of the CRLF after chunk data (RFC 9112 section 7.1):
 * chunk-size [ chunk-ext ] CRLF, chunk-size = 1*HEXDIG. Returns the next state or -1. */
static int
chunk_byte(struct lg_resp *r, int st, unsigned char c)
{
	int h = lg_hexval(c);

	if (st <= B_EXT_VBWS && c != '\r' && ++r->chunk_line > LG_RESP_CHUNK_LINE)
		return fail(r, LG_RESP_E_CHUNK_LINE);
	if (st >= B_EXT && st <= B_EXT_VBWS) {
		int n = ext_byte(st, c);

		return n >= 0 ? n : fail(r, c == '\n' ? LG_RESP_E_BARE_LF : LG_RESP_E_CHUNK_EXT);
	}
	switch (st) {
	case B_CSIZE0:
		if (h < 0)
			return fail(r, c == '\n' ? LG_RESP_E_BARE_LF : LG_RESP_E_CHUNK_SIZE);
		r->remaining = (uint64_t)h;
		return B_CSIZE;
	case B_CSIZE:
		if (h >= 0) {
			if (r->remaining >> 56) /* the size would reach 2^60 */
				return fail(r, LG_RESP_E_CHUNK_OVERFLOW);
			r->remaining = r->remaining * 16 + (uint64_t)h;
			return B_CSIZE;
		}
		if (c == '\r')
			return B_CSIZE_LF;
		__attribute__((fallthrough));
	case B_CBWS: /* BWS comes only before ';' (RFC 9112 section 7.1.1) */
		if (ows(c))
			return B_CBWS;
		if (c == ';')
			return B_EXT;
		return fail(r, c == '\n' ? LG_RESP_E_BARE_LF : LG_RESP_E_CHUNK_SIZE);
	case B_CSIZE_LF:
		if (c != '\n')
			return fail(r, LG_RESP_E_BARE_CR);
		r->chunk_line = 0;
		return r->remaining > 0 ? B_CDATA : T_FIELDS + F_LINE;
	case B_CDATA_CR:
		return c == '\r' ? B_CDATA_LF : fail(r, LG_RESP_E_CHUNK_CRLF);
	default: /* B_CDATA_LF */
		return c == '\n' ? B_CSIZE0 : fail(r, LG_RESP_E_CHUNK_CRLF);
	}
}

/* One byte of the trailer section: the header section's field-line rules and limits, the
 * names kept only as far as needed to refuse framing fields (RFC 9110 section 6.5.1).
 * Returns the next state or -1. */
static int
trailer_byte(struct lg_resp *r, int f, unsigned char c)
{
	int n;

	if (++r->trailer_bytes > r->lim->max_head)
		return fail(r, LG_RESP_E_HEAD_TOO_LARGE);
	if (f == F_LINE && c != '\r') {
		if (++r->trailer_fields > r->lim->max_fields)
			return fail(r, LG_RESP_E_TOO_MANY_FIELDS);
		r->tname_len = 0;
	}
	if ((n = field_syntax(r, f, c)) == -1)
		return -1;
	if (n == F_NAME) {
		if (r->tname_len < sizeof(r->tname))
			r->tname[r->tname_len] = (char)c;
		if (r->tname_len <= sizeof(r->tname))
			r->tname_len++;
	} else if (f == F_NAME && (name_is(r->tname, r->tname_len, "content-length") ||
	    name_is(r->tname, r->tname_len, "transfer-encoding") ||
	    extends_te(r->tname, r->tname_len))) {
		return fail(r, LG_RESP_E_TRAILER_FRAMING);
	} else if (f == F_NAME && (name_is(r->tname, r->tname_len, "connection") ||
	    name_is(r->tname, r->tname_len, "proxy-connection"))) {
		/* connection management is no trailer's (RFC 9110 6.5.1), but a reader that
		 * takes its close (http-parser) must not find lagless reusing the connection */
		r->trailer_conn = 1;
		r->keep_alive = 0;
	}
	if (n == F_SECTION_DONE)
		return S_DONE;
	return T_FIELDS + (n == F_LINE_DONE ? F_LINE : n);
}

long
lg_resp_body(struct lg_resp *r, const char *buf, size_t len, const char **data,
    size_t *dlen)
{
	size_t i = 0;

	*data = NULL;
	*dlen = 0;
	if (r->err != LG_RESP_OK)
		return LG_RESP_ERROR;
	if (r->state <= H_INTERIM)
		return fail(r, LG_RESP_E_MISUSE);
	while (i < len && r->state != S_DONE) {
		int st = r->state, n;

		if (st == B_LENGTH || st == B_CDATA || st == B_CLOSE) {
			size_t take = len - i;

			if (st != B_CLOSE && r->remaining < take)
				take = (size_t)r->remaining;
			*data = buf + i;
			*dlen = take;
			r->body_bytes += take;
			if (st != B_CLOSE && (r->remaining -= take) == 0)
				r->state = st == B_LENGTH ? S_DONE : B_CDATA_CR;
			return (long)(i + take);
		}
		if (st >= T_FIELDS)
			n = trailer_byte(r, st - T_FIELDS, (unsigned char)buf[i]);
		else
			n = chunk_byte(r, st, (unsigned char)buf[i]);
		if (n == -1)
			return LG_RESP_ERROR;
		r->state = n;
		i++;
	}
	return (long)i;
}
