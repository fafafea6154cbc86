/* http-parser's side of the differential oracle (http_oracle.h): the reading of nodejs
 * http-parser 2.9.4 in HTTP_REQUEST mode, pausing after each message. */
#include <ctype.h>
#include <http_parser.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/path.h"
#include "tests/oracle/http_oracle.h"

struct hp_side {
	struct orc_reading *rd;
	const char (*keep)[64];
	unsigned nkeep;
	int head_done;
	int in_value;             /* the last piece was of a value */
	char name[64];            /* the field being read (lower case), truncated */
	size_t name_len;
	int name_long;
	char value[8192];
	size_t value_len;
	char fields[16384];       /* "\nF:name=value" of the kept ones */
	size_t fields_len;
	char target[16384];
	size_t target_len;
	int keep_slashes;         /* the server's lim->keep_slashes (http/path.h) */
};

static struct orc_msg *
cur(http_parser *p)
{
	struct hp_side *s = p->data;

	return &s->rd->msg[s->rd->nmsg];
}

static int
kept(const struct hp_side *s)
{
	if (s->name_long)
		return 0;
	if (s->keep == NULL)
		return 1;
	for (unsigned i = 0; i < s->nkeep; i++)
		if (strlen(s->keep[i]) == s->name_len && memcmp(s->keep[i], s->name, s->name_len) == 0)
			return 1;
	return 0;
}

static void
field_end(struct hp_side *s)
{
	const char *v = s->value;
	size_t vl = s->value_len;

	if (!s->in_value || !kept(s))
		return;
	while (vl > 0 && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	int n = snprintf(s->fields + s->fields_len, sizeof(s->fields) - s->fields_len,
	    "\nF:%.*s=%.*s", (int)s->name_len, s->name, (int)vl, v);
	if (n > 0 && (size_t)n < sizeof(s->fields) - s->fields_len)
		s->fields_len += (size_t)n;
}

static int
on_begin(http_parser *p)
{
	struct hp_side *s = p->data;

	s->head_done = s->in_value = 0;
	s->name_len = s->value_len = s->fields_len = s->target_len = 0;
	s->name_long = 0;
	return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
	struct hp_side *s = p->data;

	if (len > sizeof(s->target) - s->target_len)
		len = sizeof(s->target) - s->target_len;
	memcpy(s->target + s->target_len, at, len);
	s->target_len += len;
	return 0;
}

static int
on_field(http_parser *p, const char *at, size_t len)
{
	struct hp_side *s = p->data;

	if (s->head_done)
		return 0; /* trailer fields are not kept */
	if (s->in_value) {
		field_end(s);
		s->in_value = 0;
		s->name_len = s->value_len = 0;
		s->name_long = 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (s->name_len < sizeof(s->name))
			s->name[s->name_len++] = (char)tolower((unsigned char)at[i]);
		else
			s->name_long = 1;
	}
	return 0;
}

static int
on_value(http_parser *p, const char *at, size_t len)
{
	struct hp_side *s = p->data;

	if (s->head_done)
		return 0;
	s->in_value = 1;
	if (len > sizeof(s->value) - s->value_len)
		len = sizeof(s->value) - s->value_len;
	memcpy(s->value + s->value_len, at, len);
	s->value_len += len;
	return 0;
}

/* http-parser's target as the server keeps its own: the path normalized (http/path.h, the one
 * form the server routes), the rest as read. A path with no normal form the server refuses,
 * and then no message of it is compared; http-parser's target is shown as it is. */
static void
show_target(const struct hp_side *s, struct orc_msg *m)
{
	static char t[sizeof(s->target)];
	const char *end = s->target + s->target_len, *p = s->target, *q;
	const char *why;

	if (s->target_len > 0 && s->target[0] != '/') { /* absolute-form: past the authority */
		const char *auth = memmem(p, s->target_len, "://", 3);

		for (p = auth ? auth + 3 : end; p < end && *p != '/' && *p != '?'; p++)
			;
	}
	q = memchr(p, '?', (size_t)(end - p));
	size_t len = (size_t)((q ? q : end) - p);

	memcpy(t, s->target, s->target_len);
	if (len == 0 || *p != '/' ||
	    lg_path_normalize(t + (p - s->target), &len, s->keep_slashes, &why) == -1) {
		orc_put(m, s->target, s->target_len);
		return;
	}
	orc_put(m, t, (size_t)(p - s->target) + len);
	orc_put(m, q ? q : end, (size_t)(end - (q ? q : end)));
}

static int
on_headers(http_parser *p)
{
	struct hp_side *s = p->data;
	struct orc_msg *m = cur(p);

	field_end(s);
	s->head_done = 1;
	snprintf(m->method, sizeof(m->method), "%s", http_method_str(p->method));
	m->minor = p->http_major == 1 ? p->http_minor : 100 + p->http_major;
	m->connect = p->method == HTTP_CONNECT;
	m->chunked = (p->flags & F_CHUNKED) != 0;
	m->content_length = m->chunked || p->content_length == ULLONG_MAX ? UINT64_MAX :
	    p->content_length;
	orc_put(m, "T:", 2);
	show_target(s, m);
	orc_put(m, s->fields, s->fields_len);
	orc_put(m, "\nB:", 3);
	return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
	orc_put(cur(p), at, len);
	return 0;
}

static int
on_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_begin, .on_url = on_url, .on_header_field = on_field,
	.on_header_value = on_value, .on_headers_complete = on_headers, .on_body = on_body,
	.on_message_complete = on_complete,
};

void
orc_read_hp(struct orc_reading *rd, const unsigned char *data, size_t size,
    const char (*keep)[64], unsigned nkeep, int keep_slashes)
{
	static struct hp_side s;
	http_parser p;
	size_t off = 0;

	memset(rd, 0, sizeof(*rd));
	memset(&s, 0, offsetof(struct hp_side, name));
	s.rd = rd;
	s.keep = keep;
	s.nkeep = nkeep;
	s.keep_slashes = keep_slashes;
	http_parser_set_max_header_size(2u << 20); /* the server's limits are its own */
	http_parser_init(&p, HTTP_REQUEST);
	p.data = &s;
	while (rd->nmsg < ORC_MSGS) {
		off += http_parser_execute(&p, &settings, (const char *)data + off, size - off);
		enum http_errno e = HTTP_PARSER_ERRNO(&p);

		if (e == HPE_PAUSED) {
			rd->msg[rd->nmsg++].end = off;
			http_parser_pause(&p, 0);
			continue;
		}
		if (e != HPE_OK) {
			rd->verdict = -1;
			rd->status = (int)e;
			rd->why = http_errno_name(e);
			rd->err_at = off;
		}
		return;
	}
	rd->verdict = 1;
}
