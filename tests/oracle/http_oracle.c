/* The server's side of the differential oracle (http_oracle.h), and the comparison. */
#include "tests/oracle/http_oracle.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

unsigned long lg_oracle_compared;

void
orc_put(struct orc_msg *m, const void *p, size_t len)
{
	char *d = realloc(m->desc, m->desc_len + len + 1);

	if (d == NULL)
		abort();
	memcpy(d + m->desc_len, p, len);
	m->desc = d;
	m->desc_len += len;
}

void
orc_free(struct orc_reading *rd)
{
	for (unsigned i = 0; i < ORC_MSGS; i++)
		free(rd->msg[i].desc);
	free(rd->payload);
	memset(rd, 0, sizeof(*rd));
}

struct lg_side {
	struct orc_reading *rd;
	const unsigned char *base;
	struct orc_msg *m;
};

/* The kept fields in order, lower-case names, values trimmed and HTAB shown as SP (what
 * http-parser is shown), then the target, into m->desc. */
static int
side_head(struct lg_http *h, void *ctx)
{
	struct lg_side *s = ctx;
	const struct lg_http_req *r = &h->req;
	struct orc_msg *m = s->m;

	snprintf(m->method, sizeof(m->method), "%s", lg_http_method_str(r->method));
	m->minor = r->minor;
	m->connect = r->method == HTTP_CONNECT;
	m->content_length = r->content_length;
	m->chunked = r->chunked;
	m->fields_short = r->kept_short;
	orc_put(m, "T:", 2);
	orc_put(m, r->target, r->target_len);
	for (unsigned i = 0; i < r->nkept; i++) {
		const struct lg_http_field *f = &r->kept[i];
		const char *v = r->fbuf + f->value_off;
		size_t vl = f->value_len;

		orc_put(m, "\nF:", 3);
		for (unsigned j = 0; j < f->name_len; j++) {
			char c = (char)tolower((unsigned char)r->fbuf[f->name_off + j]);
			orc_put(m, &c, 1);
		}
		while (vl > 0 && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		orc_put(m, "=", 1);
		for (size_t j = 0; j < vl; j++)
			orc_put(m, v[j] == '\t' ? " " : &v[j], 1);
	}
	orc_put(m, "\nB:", 3);
	return LG_HTTP_BODY_PARSER;
}

static int
side_body(struct lg_http *h, void *ctx, const char *at, size_t len)
{
	struct lg_side *s = ctx;

	memset(s->rd->payload + ((const unsigned char *)at - s->base), 1, len);
	orc_put(s->m, at, len);
	return 0;
}

void
orc_read_lagless(struct orc_reading *rd, const unsigned char *data, size_t size,
    const struct lg_http_limits *lim)
{
	static struct lg_http h; /* 13 KiB */
	struct lg_side s = { rd, data, NULL };
	size_t off = 0;

	memset(rd, 0, sizeof(*rd));
	if ((rd->payload = calloc(size + 1, 1)) == NULL)
		abort();
	lg_http_init(&h, lim);
	h.on_body = side_body;
	h.ctx = &s;
	while (rd->nmsg < ORC_MSGS) {
		size_t used;

		s.m = &rd->msg[rd->nmsg];
		if (lg_http_feed(&h, (const char *)data + off, size - off, &used) ==
		    LG_HTTP_HEAD_DONE) { /* the head in: its body goes to side_body */
			off += used;
			lg_http_body_to(&h, side_head(&h, &s));
			lg_http_feed(&h, (const char *)data + off, size - off, &used);
		}
		off += used;
		if (h.status) {
			rd->verdict = -1;
			rd->status = h.status;
			rd->why = h.why;
			return;
		}
		if (!h.complete)
			return; /* pending */
		s.m->end = off;
		rd->nmsg++;
		lg_http_next(&h);
	}
	rd->verdict = 1;
}

/* Where the server may read a message that http-parser 2.9.4 does not: none is known today;
 * a case found by the fuzzer is named here with the reason, or becomes a rule of the server. */
static const char *
explained(const struct orc_reading *l, const struct orc_reading *p, unsigned i)
{
	return NULL;
}

static int
differ(char *why, size_t cap, unsigned i, const char *what)
{
	snprintf(why, cap, "message %u: %s", i + 1, what);
	return 1;
}

/* Message i, completed by both. */
static int
same_msg(const struct orc_msg *a, const struct orc_msg *b, unsigned i, char *why, size_t cap)
{
	if (a->end != b->end)
		return differ(why, cap, i, "ends at another byte");
	if (strcmp(a->method, b->method) != 0 || a->minor != b->minor)
		return differ(why, cap, i, "another method or version");
	if (a->chunked != b->chunked || a->content_length != b->content_length)
		return differ(why, cap, i, "another framing (Content-Length, chunked)");
	/* the kept fields are compared only when the server kept them all */
	size_t al = a->desc_len, bl = b->desc_len;
	if (!a->fields_short && (al != bl || memcmp(a->desc, b->desc, al) != 0)) {
		snprintf(why, cap, "message %u: target, kept fields or body differ:\n"
		    "server:      %.*s\nhttp-parser: %.*s", i + 1, (int)(al < 400 ? al : 400),
		    a->desc, (int)(bl < 400 ? bl : 400), b->desc);
		return 1;
	}
	return 0;
}

int
lg_oracle_check(const unsigned char *data, size_t size, const struct lg_http_limits *lim,
    char *why, size_t cap)
{
	struct orc_reading l, p;
	unsigned char *shown = malloc(size + 1);
	int bad = 0;

	if (shown == NULL)
		abort();
	orc_read_lagless(&l, data, size, lim);
	for (size_t i = 0; i < size; i++)
		shown[i] = data[i] == '\t' && !l.payload[i] ? ' ' : data[i];
	orc_read_hp(&p, shown, size, lim->keep ? (const char (*)[64])lim->keep->names : NULL,
	    lim->keep ? lim->keep->n : 0, lim->keep_slashes);
	unsigned n = l.nmsg < p.nmsg ? l.nmsg : p.nmsg;
	lg_oracle_compared += n;
	for (unsigned i = 0; i < n && !bad; i++)
		bad = same_msg(&l.msg[i], &p.msg[i], i, why, cap);
	if (!bad && l.nmsg > p.nmsg && !explained(&l, &p, p.nmsg)) {
		snprintf(why, cap, "message %u: the server read it whole, http-parser %s (%s at "
		    "byte %zu)", p.nmsg + 1, p.verdict == -1 ? "refused it" : "did not finish it",
		    p.why ? p.why : "-", p.err_at);
		bad = 1;
	}
	if (!bad && p.nmsg > l.nmsg && l.verdict == 0) {
		snprintf(why, cap, "message %u: http-parser read it whole, the server waits for more",
		    l.nmsg + 1);
		bad = 1;
	}
	orc_free(&l);
	orc_free(&p);
	free(shown);
	return bad;
}
