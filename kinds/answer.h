/* The rules of a kind's answer beyond its body (module ABI 1.2): the response header fields it
 * adds (host->add_field) and the statuses it may choose (host->set_status). One set of rules,
 * applied twice: by the compute process when the kind adds a field (so add_field can refuse
 * it) and by the loop worker when it builds the response from the metadata page (written by
 * another process: nothing in it is trusted). Depends on kinds/host.h only. */
#ifndef LG_KINDS_ANSWER_H
#define LG_KINDS_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "kinds/host.h"

/* Whether a kind may set HTTP status code with run's return st (an enum lagless_status):
 * 2xx and 300-303, 307, 308 with LAGLESS_OK, 4xx with LAGLESS_BAD_INPUT, 500-504 with
 * LAGLESS_ERROR. With st -1: whether set_status accepts code at all (any of these). */
int lg_answer_status_ok(int code, int st);

/* Checks one field a kind adds, name_len and value_len bytes (no NUL needed): name a token
 * (RFC 9110 section 5.1), value field-vchar, SP and HTAB with no white space at either end
 * (section 5.5), the name not hop-by-hop (section 7.6.1, and Trailer) nor one the host writes
 * (Content-Length, Content-Type, Date, Server, X-Queue-Ms, X-Run-Ms, X-Request-Id, X-Cache).
 * Returns 0, or -1 with *why set to a static sentence. */
int lg_answer_field_check(const char *name, size_t name_len, const char *value,
    size_t value_len, const char **why);

/* Appends the field to meta's block as "name: value" CRLF after lg_answer_field_check and the
 * count and byte bounds (LAGLESS_MAX_ANSWER_FIELDS, LAGLESS_ANSWER_FIELDS_BYTES). Returns 0,
 * or -1: meta->flags gets LG_OUT_BAD_FIELD and meta->bad the reason with the field's name
 * (the first such reason is kept). */
int lg_answer_field_add(struct lg_out_meta *meta, const char *name, size_t name_len,
    const char *value, size_t value_len);

/* The loop's check of a finished answer's fields: meta is a metadata page another process
 * wrote, code the HTTP status the answer will have. Copies the field lines, checked one by
 * one as lg_answer_field_check does, into dst (cap bytes, at least
 * LAGLESS_ANSWER_FIELDS_BYTES + 1), NUL-terminated, for the response head. Returns their
 * length (0: none), or -1 with the reason in why (whycap bytes) when the answer must be a
 * 502 instead: a field the kind was refused (LG_OUT_BAD_FIELD), a malformed block, or a 301,
 * 302, 303, 307 or 308 without a Location field (RFC 9110 section 10.2.2). */
long lg_answer_fields(const struct lg_out_meta *meta, int code, char *dst, size_t cap,
    char *why, size_t whycap);

/* Whether the field lines at block (as lg_answer_fields copies them) hold a field of this
 * name (case-insensitive). */
int lg_answer_has_field(const char *block, const char *name);

#endif
