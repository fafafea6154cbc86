#include "kinds/answer.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Fields a kind may not send: hop-by-hop ones (RFC 9110 section 7.6.1; Trailer announces the
 * framing's trailer section, section 6.6.2, and the host frames the message) and those the
 * host writes itself in every response head (worker/core/conn_head.c, worker/job/offload.c). */
static const char *const refused[] = {
	"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
	"upgrade",
	"content-length", "content-type", "date", "server", "x-queue-ms", "x-run-ms",
	"x-request-id", "x-cache",
};

int
lg_answer_status_ok(int code, int st)
{
	int ok2 = (code >= 200 && code <= 299) || (code >= 300 && code <= 303) || code == 307 ||
	    code == 308;
	int bad4 = code >= 400 && code <= 499;
	int err5 = code >= 500 && code <= 504;

	switch (st) {
	case -1:
		return ok2 || bad4 || err5;
	case LAGLESS_OK:
		return ok2;
	case LAGLESS_BAD_INPUT:
		return bad4;
	case LAGLESS_ERROR:
		return err5;
	default:
		return 0;
	}
}

/* tchar of RFC 9110 section 5.6.2. */
static int
is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	    (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

int
lg_answer_field_check(const char *name, size_t name_len, const char *value, size_t value_len,
    const char **why)
{
	if (name_len == 0) {
		*why = "an empty field name";
		return -1;
	}
	for (size_t i = 0; i < name_len; i++)
		if (!is_tchar((unsigned char)name[i])) {
			*why = "a field name is a token (RFC 9110 section 5.6.2): no CR, LF, NUL, "
			    "space, colon or other separator";
			return -1;
		}
	for (size_t i = 0; i < value_len; i++) {
		unsigned char ch = (unsigned char)value[i];

		if ((ch < 0x20 && ch != '\t') || ch > 0x7e) {
			*why = "a field value is visible ASCII, space and tab (RFC 9110 section 5.5): "
			    "no CR, LF, NUL or other control character";
			return -1;
		}
	}
	if (value_len > 0 && (value[0] == ' ' || value[0] == '\t' || value[value_len - 1] == ' ' ||
	    value[value_len - 1] == '\t')) {
		*why = "a field value has no white space at either end (RFC 9110 section 5.5)";
		return -1;
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (strlen(refused[i]) == name_len && strncasecmp(refused[i], name, name_len) == 0) {
			*why = i < 7 ? "a hop-by-hop field (RFC 9110 section 7.6.1): the host frames "
			    "the connection" : "a field the host writes itself (Content-Type: "
			    "set_ctype)";
			return -1;
		}
	return 0;
}

/* Records the first refusal of meta's answer: flag and reason, naming the field. */
static int
refuse(struct lg_out_meta *meta, const char *name, size_t name_len, const char *why)
{
	if (!(meta->flags & LG_OUT_BAD_FIELD))
		snprintf(meta->bad, sizeof(meta->bad), "field '%.*s': %s",
		    (int)(name_len < 40 ? name_len : 40), name, why);
	meta->flags |= LG_OUT_BAD_FIELD;
	return -1;
}

int
lg_answer_field_add(struct lg_out_meta *meta, const char *name, size_t name_len,
    const char *value, size_t value_len)
{
	const char *why;
	size_t line = name_len + 2 + value_len + 2, used = meta->fields_len;

	if (lg_answer_field_check(name, name_len, value, value_len, &why) == -1)
		return refuse(meta, name, name_len, why);
	if (meta->nfields >= LAGLESS_MAX_ANSWER_FIELDS)
		return refuse(meta, name, name_len, "more fields than an answer may add "
		    "(LAGLESS_MAX_ANSWER_FIELDS)");
	if (used > sizeof(meta->fields) || line > sizeof(meta->fields) - used)
		return refuse(meta, name, name_len, "the answer's fields pass "
		    "LAGLESS_ANSWER_FIELDS_BYTES");
	char *p = meta->fields + used;
	memcpy(p, name, name_len);
	memcpy(p + name_len, ": ", 2);
	memcpy(p + name_len + 2, value, value_len);
	memcpy(p + name_len + 2 + value_len, "\r\n", 2);
	meta->fields_len = (uint32_t)(used + line);
	meta->nfields++;
	return 0;
}

/* Checks one "name: value" CRLF line of n bytes at p (CRLF included). */
static int
check_line(const char *p, size_t n, const char **why)
{
	const char *colon = n >= 4 ? memchr(p, ':', n - 2) : NULL;

	if (colon == NULL || p[n - 2] != '\r' || p[n - 1] != '\n' ||
	    (size_t)(colon - p) + 2 > n - 2 || colon[1] != ' ') {
		*why = "a malformed field line in the answer's metadata";
		return -1;
	}
	return lg_answer_field_check(p, (size_t)(colon - p), colon + 2,
	    n - 2 - (size_t)(colon - p) - 2, why);
}

static int
needs_location(int code)
{
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308;
}

long
lg_answer_fields(const struct lg_out_meta *meta, int code, char *dst, size_t cap, char *why,
    size_t whycap)
{
	uint32_t len = meta->fields_len, n = meta->nfields, seen = 0;
	const char *reason = NULL;

	if (meta->flags & LG_OUT_BAD_FIELD) {
		char bad[sizeof(meta->bad)];

		memcpy(bad, meta->bad, sizeof(bad));
		bad[sizeof(bad) - 1] = '\0'; /* another process wrote it */
		snprintf(why, whycap, "%s", bad);
		return -1;
	}
	if (len > sizeof(meta->fields) || len >= cap || n > LAGLESS_MAX_ANSWER_FIELDS) {
		snprintf(why, whycap, "the answer's fields are over their bounds");
		return -1;
	}
	memcpy(dst, meta->fields, len); /* copied once, then checked: no change under us */
	dst[len] = '\0';
	for (size_t off = 0; off < len; seen++) {
		const char *nl = memchr(dst + off, '\n', len - off);
		size_t line = nl ? (size_t)(nl - (dst + off)) + 1 : len - off;

		if (check_line(dst + off, line, &reason) == -1) {
			snprintf(why, whycap, "field line %u: %s", seen + 1, reason);
			return -1;
		}
		off += line;
	}
	if (seen != n) {
		snprintf(why, whycap, "the answer's field count does not match its lines");
		return -1;
	}
	if (needs_location(code) && !lg_answer_has_field(dst, "location")) {
		snprintf(why, whycap, "a %d without a Location field (RFC 9110 section 10.2.2)",
		    code);
		return -1;
	}
	return (long)len;
}

int
lg_answer_has_field(const char *block, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = block; *p != '\0';) {
		if (strncasecmp(p, name, n) == 0 && p[n] == ':')
			return 1;
		const char *nl = strchr(p, '\n');
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	return 0;
}
