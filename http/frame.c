#include "http/frame.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/query.h"
#include "http/authority.h"
#include "http/frame_rules.h"
#include "http/method.h"

__attribute__((cold)) int
lg_frame_fail(struct lg_frame *f, int status, const char *why)
{
	f->status = status;
	f->why = why;
	return -1;
}

void
lg_frame_init(struct lg_frame *f, const struct lg_http_limits *lim,
    const struct lg_frame_hooks *hooks, void *ctx)
{
	memset(f, 0, offsetof(struct lg_frame, val));
	f->lim = lim;
	f->hooks = hooks;
	f->ctx = ctx;
	f->state = S_RL;
}

/* A hook returned -1: it set f->status (else this does), and the parse stops. */
static void
hook_stopped(struct lg_frame *f)
{
	if (f->status == 0)
		fail(f, 400, "refused by the request's reader");
}

int
lg_frame_head_done(const struct lg_frame *f)
{
	return f->status == 0 && f->state != S_RL &&
	    ((f->state & TRAILER) || f->state >= S_HEAD_DONE);
}

int
lg_frame_msg_done(const struct lg_frame *f)
{
	return f->status == 0 && f->state == S_MSG_DONE;
}

int
lg_frame_keep_alive(const struct lg_frame *f)
{
	if (f->conn_close)
		return 0;
	return f->minor == 1 || f->conn_keep_alive;
}

static int
uint_value(const char *v, size_t len, uint64_t *out)
{
	uint64_t x = 0;
	size_t digits = 0;

	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		if (x > 0 || v[i] != '0')
			digits++;
		x = x * 10 + (uint64_t)(v[i] - '0');
		if (digits > 19) /* beyond what 64 bits hold without overflow, as other parsers */
			return -1;
	}
	*out = x;
	return 0;
}

/* Transfer-Encoding = #transfer-coding (RFC 9112 section 6.1); only "chunked" is implemented,
 * and it must come last and once (section 7). Empty list elements (",chunked", "chunked,") are
 * refused although RFC 9110 section 5.6.1 says to ignore them: no sender may generate them,
 * http-parser 2.9.4 (and proxies built on it) does not read ",chunked" as chunked, and nginx
 * answers 501 to any value but
 * "chunked", so a proxy in front may frame such a body differently (a smuggling vector). */
static int
te_value(struct lg_frame *f, const char *v, size_t len)
{
	size_t i = 0;

	for (;;) {
		size_t s = i, e;

		while (s < len && (v[s] == ' ' || v[s] == '\t'))
			s++;
		e = s;
		while (e < len && lg_ch((unsigned char)v[e], LG_CH_TCHAR))
			e++;
		if (e == s)
			return fail(f, 400, "empty or malformed transfer-coding");
		if (e - s == 7 && strncasecmp(v + s, "chunked", 7) == 0) {
			if (f->te_chunked_last || f->te_chunked_before)
				return fail(f, 400, "chunked applied more than once");
			f->te_chunked_last = 1;
		} else {
			if (f->te_chunked_last)
				f->te_chunked_before = 1;
			f->te_chunked_last = 0;
			f->te_other = 1;
		}
		i = e;
		while (i < len && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (i == len)
			return 0;
		if (v[i] != ',')
			return fail(f, 400, "malformed Transfer-Encoding");
		i++;
	}
}

/* One element of the Connection list (RFC 9110 section 7.6.1) is in f->val: the options that
 * decide persistence are recorded, and "upgrade" (RFC 9110 section 7.8: an upgrade request's
 * first sign, so that ordinary requests need no field lookup), others (field names) ignored,
 * empty ones skipped. */
static void
conn_element(struct lg_frame *f)
{
	size_t len = f->val_len;

	while (len > 0 && (f->val[len - 1] == ' ' || f->val[len - 1] == '\t'))
		len--;
	if (f->val_long)
		return;
	if (len == 5 && strncasecmp(f->val, "close", 5) == 0)
		f->conn_close = 1;
	else if (len == 10 && strncasecmp(f->val, "keep-alive", 10) == 0)
		f->conn_keep_alive = 1;
	else if (len == 7 && strncasecmp(f->val, "upgrade", 7) == 0)
		f->conn_upgrade = 1;
}

/* A complete field line of an interesting field: check and record its value. */
static int
field_done(struct lg_frame *f, int trailer)
{
	const char *v = f->val;
	size_t len = f->val_len;

	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	if (f->field == FLD_OTHER)
		return 0;
	if (trailer && f->field != FLD_EXPECT)
		return fail(f, 400, "framing or Host field in the trailer section");
	if (f->field == FLD_CONN) {
		conn_element(f);
		return 0;
	}
	if (f->val_long && f->field != FLD_HOST && f->field != FLD_CL)
		return fail(f, 400, "field value too long");
	switch (f->field) {
	case FLD_CL:
		if (uint_value(v, len, &f->content_length) == -1)
			return fail(f, 400, "invalid Content-Length");
		return 0;
	case FLD_TE:
		f->te_count++;
		return te_value(f, v, len);
	case FLD_HOST:
		if (++f->host_count > 1)
			return fail(f, 400, "more than one Host");
		/* a value longer than val is not kept whole: only its white space is judged; a
		 * whole one without brackets has none when lg_host_syntax_ok takes it */
		if (!f->host_ok && (((f->val_long || (len > 0 && v[0] == '[')) &&
		    (memchr(v, ' ', len) != NULL || memchr(v, '\t', len) != NULL)) ||
		    (!f->val_long && !lg_host_syntax_ok(v, len))))
			return fail(f, 400, "invalid Host");
		return 0;
	default: /* FLD_EXPECT */
		if (!trailer && len == 12 && strncasecmp(v, "100-continue", 12) == 0)
			f->expect_continue = 1;
		else if (!trailer)
			f->expect_other = 1;
		return 0;
	}
}

/* The header section is complete: decide the body framing (RFC 9112 section 6.3). */
static int
head_end(struct lg_frame *f)
{
	if (f->te_count && f->minor == 0)
		return fail(f, 400, "Transfer-Encoding in an HTTP/1.0 request");
	if (f->te_count && f->cl_count)
		return fail(f, 400, "Content-Length with Transfer-Encoding");
	if (f->te_count && !f->te_chunked_last)
		return fail(f, 400, "final transfer-coding is not chunked");
	if (f->te_other)
		return fail(f, 501, "transfer-coding not implemented");
	if (f->minor == 1 && f->host_count == 0)
		return fail(f, 400, "HTTP/1.1 request without Host");
	if (f->method == HTTP_CONNECT && (f->te_count || f->content_length > 0)) /* RFC 9110 9.3.6 */
		return fail(f, 400, "CONNECT request with content");
	if (f->minor == 0) /* RFC 9110 section 10.1.1: ignored in HTTP/1.0 */
		f->expect_continue = f->expect_other = 0;
	if (f->expect_other)
		return fail(f, 417, "expectation other than 100-continue");
	if (f->te_count) {
		f->body = LG_FRAME_CHUNKED;
		f->state = S_CSIZE0;
	} else if (f->cl_count && f->content_length > 0) {
		f->body = LG_FRAME_LENGTH;
		f->remaining = f->content_length;
		f->state = S_LENGTH;
	} else {
		f->body = f->cl_count ? LG_FRAME_LENGTH : LG_FRAME_NONE;
		f->state = S_MSG_DONE;
	}
	return 0;
}

/* Whether the n tchars at t are the lower-case letters and '-' of lower, case-insensitively:
 * c | 0x20 maps an upper-case letter to its lower case, and maps no other tchar to a letter
 * or to '-' (RFC 9110 section 5.1: field names are case-insensitive). */
static inline int
token_is(const char *t, const char *lower, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)t[i] | 0x20) != (unsigned char)lower[i])
			return 0;
	return 1;
}

/* The four bytes at t as one word, each byte with bit 0x20 set: token_is's rule, four at a time
 * (for a literal, its bytes as they are, lower case). */
static inline uint32_t
lower4(const char *t)
{
	uint32_t x;

	memcpy(&x, t, 4);
	return x | 0x20202020u;
}

/* The colon after the field name name[0..nlen) (only its first 24 bytes are read; nlen may be
 * 25 for any longer name): which interesting field the line is, and the value begins. Returns
 * S_VALUE, or -1 with f->status set. */
static int
name_end(struct lg_frame *f, const char *name, size_t nlen)
{
	/* The interesting names have lengths of their own: one comparison per field. */
	static const struct { size_t len; const char *name; int field; } names[] = {
		{ 4, "host", FLD_HOST }, { 6, "expect", FLD_EXPECT },
		{ 10, "connection", FLD_CONN }, { 14, "content-length", FLD_CL },
		{ 17, "transfer-encoding", FLD_TE },
	};

	/* http-parser 2.9.4 takes any name that begins with Transfer-Encoding for one (found by
	 * fuzz_http): refuse those names rather than read them otherwise than a proxy built on it
	 * would. */
	if (nlen > 17 && token_is(name, "transfer-encoding", 17))
		return fail(f, 400, "field name extends Transfer-Encoding");
	f->field = FLD_OTHER;
	if (nlen == 4) /* names[0], Host, in nearly every request: one word compared */
		f->field = lower4(name) == lower4("host") ? FLD_HOST : FLD_OTHER;
	else
		for (size_t i = 1; i < sizeof(names) / sizeof(names[0]); i++)
			if (names[i].len == nlen) {
				if (token_is(name, names[i].name, nlen))
					f->field = names[i].field;
				break;
			}
	f->val_len = 0;
	f->val_long = 0;
	f->host_ok = 0;
	f->vstarted = 0;
	/* a second Content-Length is refused at its name (RFC 9112 section 6.3 (5)) */
	if (f->field == FLD_CL && ++f->cl_count > 1)
		return fail(f, 400, "more than one Content-Length");
	return S_VALUE;
}

static int
name_char(struct lg_frame *f, unsigned char c, char *name, size_t *nlen)
{
	if (c == ':')
		return name_end(f, name, *nlen);
	if (!lg_ch(c, LG_CH_TCHAR))
		return fail(f, 400, c == ' ' || c == '\t' ? "whitespace before the colon" :
		    "character not allowed in a field name");
	if (*nlen < 24)
		name[(*nlen)++] = (char)c;
	else
		*nlen = 25; /* longer than any interesting name */
	return S_NAME;
}

/* Content-Length is checked byte by byte, so a request is refused at its first bad byte (as
 * http-parser, the test oracle, does). OWS is SP or HTAB (RFC 9110 section 5.6.3). */
static int
cl_char(struct lg_frame *f, unsigned char c)
{
	uint64_t v;

	if (c == ' ' || c == '\t') {
		if (f->val_len > 0)
			f->val_long = 1; /* borrowed as "trailing OWS seen" */
		return 0;
	}
	if (c < '0' || c > '9' || f->val_long || f->val_len >= sizeof(f->val) - 1)
		return fail(f, 400, "invalid Content-Length");
	f->val[f->val_len] = (char)c;
	if (uint_value(f->val, f->val_len + 1, &v) == -1)
		return fail(f, 400, "Content-Length beyond 19 digits");
	return 0;
}

static int
value_char(struct lg_frame *f, unsigned char c)
{
	if (c == '\r')
		return S_VALUE_LF;
	if (!lg_ch(c, LG_CH_VALUE))
		return fail(f, 400, c == '\n' ? "bare LF" : "control character in a field value");
	if (f->val_len == 0 && (c == ' ' || c == '\t') && f->field != FLD_CL)
		return S_VALUE; /* leading OWS */
	if (f->field == FLD_CL && cl_char(f, c) == -1)
		return -1;
	if (f->field == FLD_CL && (c == ' ' || c == '\t'))
		return S_VALUE; /* OWS: leading, or trailing once a digit was seen */
	if (f->field == FLD_CONN && c == ',') {
		conn_element(f);
		f->val_len = 0;
		f->val_long = 0;
		return S_VALUE;
	}
	if (f->field == FLD_HOST && !lg_host_char(c))
		return fail(f, 400, "invalid Host");
	if (f->val_len < sizeof(f->val))
		f->val[f->val_len++] = (char)c;
	else
		f->val_long = 1;
	return S_VALUE;
}

/* One byte of a header or trailer section; returns the next state or -1. */
static int
line_byte(struct lg_frame *f, int st, unsigned char c, char *name, size_t *nlen)
{
	int trailer = st & TRAILER;

	switch (st & ~TRAILER) {
	case S_LINE:
		if (c == '\r')
			return S_END_LF | trailer;
		if (c == ' ' || c == '\t')
			return fail(f, 400, "obs-fold or whitespace before a field name");
		if (!lg_ch(c, LG_CH_TCHAR))
			return fail(f, 400, c == '\n' ? "bare LF" : "malformed field name");
		if (++f->nfields > f->lim->max_fields)
			return fail(f, 431, "too many header fields");
		*nlen = 0;
		return name_char(f, c, name, nlen) == -1 ? -1 : S_NAME | trailer;
	case S_NAME: {
		if (c == ':' && *nlen == 0)
			return fail(f, 400, "empty field name");
		int n = name_char(f, c, name, nlen);
		if (trailer && f->field == FLD_CONN)
			f->field = FLD_OTHER; /* persistence is decided by the header section */
		return n == -1 ? -1 : n | trailer;
	}
	case S_VALUE: {
		int n = value_char(f, c);
		return n == -1 ? -1 : n | trailer;
	}
	case S_VALUE_LF:
		if (c != '\n')
			return fail(f, 400, "CR not followed by LF");
		return field_done(f, trailer) == -1 ? -1 : S_LINE | trailer;
	default: /* S_END_LF */
		if (c != '\n')
			return fail(f, 400, "CR not followed by LF");
		if (trailer)
			return S_MSG_DONE;
		return head_end(f) == -1 ? -1 : f->state;
	}
}

/* Hands buf[mark..end) to the name or value hook (report is one of them). Returns 0, or -1
 * with f->status set when the hook stopped the parse. */
static int
report(struct lg_frame *f, int (*hook)(void *, const char *, size_t), const char *buf,
    size_t mark, size_t end)
{
	if (hook == NULL || hook(f->ctx, buf + mark, end - mark) == 0)
		return 0;
	hook_stopped(f);
	return -1;
}

/* The value of a field that decides nothing is only checked for its characters (nothing of it
 * is kept here): skips from buf[i] to its CR, or to the first byte that is refused or passes
 * max_head, which the byte loop then handles. Sets *mark where the value starts past its
 * leading OWS when that is in buf. Returns the index reached. */
static size_t
skip_value(struct lg_frame *f, const char *buf, size_t i, size_t len, size_t *mark)
{
	size_t room = f->lim->max_head - f->head_bytes, j = i;
	size_t stop = len - i < room ? len : i + room;

	if (!f->vstarted) {
		while (j < stop && (buf[j] == ' ' || buf[j] == '\t'))
			j++;
		if (j < stop && buf[j] != '\r' && lg_ch((unsigned char)buf[j], LG_CH_VALUE)) {
			f->vstarted = 1;
			*mark = j;
		}
	}
	j = lg_value_end((const unsigned char *)buf, j, stop); /* CR is not a value byte */
	f->head_bytes += j - i;
	return j;
}

/* One byte of the head, buf[i], in state st (TRAILER cleared), with the hooks' bookkeeping:
 * *mark is where the name or value being read starts in buf (SIZE_MAX: not in buf). Returns
 * 0, or -1 when a rule failed or a hook stopped. */
static int
head_byte(struct lg_frame *f, int st, const char *buf, size_t i, size_t *mark, char *name,
    size_t *nlen)
{
	const struct lg_frame_hooks *k = (f->state & TRAILER) ? NULL : f->hooks;
	unsigned char c = (unsigned char)buf[i];

	if (st == S_LINE)
		*mark = i;
	else if (st == S_VALUE && !f->vstarted && c != ' ' && c != '\t' && c != '\r') {
		f->vstarted = 1;
		*mark = i;
	}
	int next = line_byte(f, f->state, c, name, nlen);
	if (next == -1)
		return -1;
	f->state = next;
	if (k != NULL && st == S_NAME && (next & ~TRAILER) == S_VALUE) {
		if (report(f, k->name, buf, *mark, i) == -1)
			return -1;
		*mark = SIZE_MAX;
	} else if (k != NULL && st == S_VALUE && (next & ~TRAILER) == S_VALUE_LF) {
		/* the line's last piece, empty when the value was (or when it began in an
		 * earlier call and its bytes there were reported then) */
		if (report(f, k->value, buf, *mark == SIZE_MAX ? i : *mark, i) == -1)
			return -1;
		*mark = SIZE_MAX;
	}
	return 0;
}

/* Where the first control byte (below 0x20, HTAB included, or 0x7f: RFC 9110 section 5.5 allows
 * none in a value but HTAB) is in b[p..len), or len: eight bytes at a time, a word having one
 * where (x - 0x20..) & ~x & 0x80.. or, for 0x7f, (d - 0x01..) & ~d & 0x80.. with d = x ^ 0x7f..
 * is not 0 (the "haszero" bit trick); the lowest byte flagged is the first such byte (a
 * borrow reaches only the bytes above it). A field line's first one must be its CR. */
static size_t
ctl_at(const unsigned char *b, size_t p, size_t len)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;

	for (; p + 8 <= len; p += 8) {
		uint64_t x, d, m;

		memcpy(&x, b + p, 8);
		d = x ^ (0x7f * ones);
		m = (((x - 0x20 * ones) & ~x) | ((d - ones) & ~d)) & highs;
		if (m != 0)
			return p + (size_t)(__builtin_ctzll(m) >> 3);
	}
#endif
	while (p < len && b[p] >= 0x20 && b[p] != 0x7f)
		p++;
	return p;
}

/* Whether the n bytes at v are the common Host value, a reg-name or IPv4 address of plain
 * characters (no '%', brackets or white space) then optionally ':' and digits: then every byte
 * is a host character and lg_host_syntax_ok would take it, so neither needs to run. */
static int
plain_host(const unsigned char *v, size_t n)
{
	size_t p = 0;

	while (p + 4 <= n && lg_ch4(v + p, LG_CH_REGNAME))
		p += 4;
	while (p < n && lg_ch(v[p], LG_CH_REGNAME))
		p++;
	if (p < n && v[p] == ':') {
		for (p++; p + 4 <= n && lg_ch4(v + p, LG_CH_DIGIT); p += 4)
			;
		while (p < n && lg_ch(v[p], LG_CH_DIGIT))
			p++;
	}
	return p == n;
}

/* The fast path of a header field line that is whole in buf[i..len) and breaks no rule of its
 * syntax (a token, ':', value characters, CRLF) or of the limits: it is judged as the byte
 * loop would judge it, its interesting value still byte by byte (value_char), with the same
 * hook calls in the same order, but without a state transition per byte. Returns the index
 * past its LF; i when the line is not whole, not clean or passes a limit (nothing is changed
 * then, and the byte loop reads it, finding the same verdict at the same byte); or, when a rule
 * about its content failed or a hook stopped, the index of the byte where the byte loop would
 * have stopped, with f->status set. */
static size_t
fast_line(struct lg_frame *f, const char *buf, size_t i, size_t len)
{
	const unsigned char *b = (const unsigned char *)buf;
	const struct lg_frame_hooks *k = f->hooks;
	size_t j = i, v, cr, room = f->lim->max_head - f->head_bytes;
	uint64_t hb = f->head_bytes;

	while (j + 4 <= len && lg_ch4(b + j, LG_CH_TCHAR))
		j += 4;
	while (j < len && lg_ch(b[j], LG_CH_TCHAR))
		j++;
	if (j == i || j == len || b[j] != ':' || f->nfields >= f->lim->max_fields)
		return i;
	v = j + 1;
	while (v < len && (b[v] == ' ' || b[v] == '\t'))
		v++;
	cr = ctl_at(b, v, len); /* the value's bytes before it are clean */
	if (cr + 1 >= len || b[cr] != '\r' || b[cr + 1] != '\n' || cr + 2 - i > room)
		return i;
	/* the line is whole and clean: as the byte loop, from its colon on (the field hook, when
	 * there is one, gets name and value together where the value hook would be called) */
	f->nfields++;
	f->head_bytes = hb + (j - i + 1);
	if (name_end(f, buf + i, j - i <= 24 ? j - i : 25) == -1 ||
	    (k != NULL && k->field == NULL && report(f, k->name, buf, i, j) == -1))
		return j;
	f->vstarted = v < cr;
	if (f->field == FLD_CL || f->field == FLD_CONN) { /* checked or split as they come */
		for (size_t p = v; p < cr; p++)
			if (value_char(f, b[p]) == -1) {
				f->head_bytes = hb + (p - i + 1);
				return p;
			}
	} else if (f->field != FLD_OTHER) { /* kept whole: value_char's effect, in one step */
		size_t p = v, n = cr - v;

		if (f->field == FLD_HOST && (f->host_ok = plain_host(b + v, n)))
			p = cr; /* host characters only, and a valid uri-host [ ":" port ] */
		else if (f->field == FLD_HOST)
			while (p < cr && lg_host_char(b[p]))
				p++;
		if (f->field == FLD_HOST && p < cr) {
			fail(f, 400, "invalid Host");
			f->head_bytes = hb + (p - i + 1);
			return p;
		}
		if (!f->host_ok) { /* a valid plain Host is judged: field_done reads no value */
			f->val_len = n < sizeof(f->val) ? n : sizeof(f->val);
			f->val_long = n > sizeof(f->val);
			memcpy(f->val, b + v, f->val_len);
		}
	}
	f->head_bytes = hb + (cr - i + 1);
	if (k != NULL && k->field != NULL) {
		if (k->field(f->ctx, buf + i, j - i, buf + v, cr - v) != 0) {
			hook_stopped(f);
			return cr;
		}
	} else if (k != NULL && report(f, k->value, buf, v, cr) == -1) {
		return cr;
	}
	f->head_bytes = hb + (cr + 2 - i);
	if (f->host_ok) { /* field_done's verdict on a plain Host, which reads nothing more */
		if (++f->host_count > 1) {
			fail(f, 400, "more than one Host");
			return cr + 1;
		}
	} else if (field_done(f, 0) == -1) {
		return cr + 1;
	}
	f->state = S_LINE;
	return cr + 2;
}

size_t
lg_frame_head(struct lg_frame *f, const char *buf, size_t len)
{
	const struct lg_frame_hooks *k = (f->state & TRAILER) ? NULL : f->hooks;
	char name[25];
	size_t nlen = 0, i, mark = SIZE_MAX;
	int st = f->state & ~TRAILER;

	/* The interesting field names are short; a name split across calls is re-read from
	 * the value buffer, which is idle while a name is being read. */
	if (st == S_NAME) {
		nlen = f->val_len;
		memcpy(name, f->val, nlen);
	}
	if (st == S_NAME || (st == S_VALUE && f->vstarted))
		mark = 0; /* a name or value begun in an earlier call goes on */
	for (i = 0; i < len && f->status == 0 && (st = f->state & ~TRAILER) < S_HEAD_DONE; i++) {
		if (f->state == S_LINE && buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n' &&
		    f->head_bytes + 2 <= f->lim->max_head) { /* the section ends, as line_byte */
			f->head_bytes += 2;
			i++; /* the LF, where the byte loop stops when head_end refuses */
			if (head_end(f) == -1)
				break;
			continue;
		}
		if (f->state == S_LINE && buf[i] != '\r') { /* the header section, not the trailer */
			size_t next = fast_line(f, buf, i, len);

			if (f->status != 0) {
				i = next;
				break;
			}
			if (next > i) {
				i = next - 1;
				continue;
			}
		}
		if (st == S_VALUE && f->field == FLD_OTHER) {
			i = skip_value(f, buf, i, len, &mark);
			if (i == len)
				break;
		}
		if (++f->head_bytes > f->lim->max_head) {
			fail(f, 431, "head over the limit");
			break;
		}
		if (head_byte(f, st, buf, i, &mark, name, &nlen) == -1)
			break;
	}
	st = f->state & ~TRAILER;
	if (st == S_NAME && f->status == 0) {
		memcpy(f->val, name, nlen);
		f->val_len = nlen;
	}
	/* the piece of a name or value that goes on in the next call */
	if (k != NULL && f->status == 0 && mark != SIZE_MAX && i > mark &&
	    (st == S_NAME || st == S_VALUE))
		report(f, st == S_NAME ? k->name : k->value, buf, mark, i);
	return i;
}

/* One byte of a chunk-size line (RFC 9112 section 7.1); returns the next state or -1. */
static int
chunk_line_byte(struct lg_frame *f, int st, unsigned char c)
{
	int h = lg_hexval(c);

	if (++f->line_len > LG_FRAME_CHUNK_LINE)
		return fail(f, 400, "chunk-size line too long");
	switch (st) {
	case S_CSIZE0:
		if (h < 0)
			return fail(f, 400, "invalid chunk size");
		f->remaining = (uint64_t)h;
		return S_CSIZE;
	case S_CSIZE:
		if (h >= 0) {
			if (f->remaining > (UINT64_MAX >> 4) - 1)
				return fail(f, 400, "chunk size overflows");
			f->remaining = f->remaining * 16 + (uint64_t)h;
			return S_CSIZE;
		}
		/* what may follow the size */
		__attribute__((fallthrough));
	case S_CBWS:
		if (c == ' ' || c == '\t') /* BWS (RFC 9112 section 7.1.1) */
			return S_CBWS;
		if (c == ';')
			return S_CEXT_NAME;
		if (c == '\r' && st == S_CSIZE)
			return S_CSIZE_LF;
		return fail(f, 400, "invalid chunk size or extension");
	case S_CEXT_NAME: /* chunk-ext = *( BWS ";" BWS chunk-ext-name ... ) (RFC 9112 7.1.1) */
		if (c == ' ' || c == '\t')
			return S_CEXT_NAME;
		if (!lg_ch(c, LG_CH_TCHAR))
			return fail(f, 400, "a chunk extension without a name");
		return S_CEXT;
	case S_CEXT:
		if (c == '\r')
			return S_CSIZE_LF;
		if (!lg_ch(c, LG_CH_VALUE))
			return fail(f, 400, c == '\n' ? "bare LF in a chunk extension" :
			    "control character in a chunk extension");
		return S_CEXT;
	default: /* S_CSIZE_LF */
		if (c != '\n')
			return fail(f, 400, "CR not followed by LF");
		f->line_len = 0;
		/* Refuse a chunk that would pass the body limit when its size arrives, not
		 * after the client has sent (and we have read) that many bytes. */
		if (f->lim->max_body && (f->remaining > f->lim->max_body ||
		    f->body_bytes > f->lim->max_body - f->remaining))
			return fail(f, 413, "chunked body over the limit");
		if (f->remaining > 0)
			return S_CDATA;
		f->head_bytes = 0; /* the trailer section has the head's limits */
		f->nfields = 0;
		return S_LINE | TRAILER;
	}
}

size_t
lg_frame_body(struct lg_frame *f, const char *buf, size_t len)
{
	size_t i = 0;

	while (i < len && f->status == 0 && f->state != S_MSG_DONE) {
		unsigned char c = (unsigned char)buf[i];
		int st = f->state;

		if (st == S_LENGTH || st == S_CDATA) {
			uint64_t n = len - i < f->remaining ? len - i : f->remaining;

			if (f->hooks != NULL && f->hooks->data != NULL &&
			    f->hooks->data(f->ctx, buf + i, (size_t)n) == -1) {
				hook_stopped(f);
				break;
			}
			f->remaining -= n;
			f->body_bytes += n;
			i += (size_t)n;
			if (f->remaining == 0)
				f->state = st == S_LENGTH ? S_MSG_DONE : S_CDATA_CR;
			continue;
		}
		if (st & TRAILER) {
			i += lg_frame_head(f, buf + i, len - i);
			continue;
		}
		i++;
		if (st == S_CDATA_CR || st == S_CDATA_LF) {
			if (c != (st == S_CDATA_CR ? '\r' : '\n')) {
				fail(f, 400, "chunk data not followed by CRLF");
				break;
			}
			f->state = st == S_CDATA_CR ? S_CDATA_LF : S_CSIZE0;
		} else {
			st = chunk_line_byte(f, st, c);
			if (st == -1)
				break;
			f->state = st;
		}
	}
	return i;
}
