/* Unit tests for kinds/answer.c: the rules of a kind's response header fields and statuses
 * (module ABI 1.2), as the compute process applies them when a kind adds a field and as the
 * loop applies them again to a metadata page it cannot trust. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kinds/answer.h"

static int
add(struct lg_out_meta *m, const char *name, const char *value)
{
	return lg_answer_field_add(m, name, strlen(name), value, strlen(value));
}

static int
check(const char *name, const char *value)
{
	const char *why;

	return lg_answer_field_check(name, strlen(name), value, strlen(value), &why);
}

static void
test_field_rules(void **state)
{
	const char *why = NULL;

	(void)state;
	assert_int_equal(check("Location", "/a?b=c"), 0);
	assert_int_equal(check("X-Thing", ""), 0);
	assert_int_equal(check("WWW-Authenticate", "Bearer realm=\"a b\"\tx"), 0);
	/* hop-by-hop (RFC 9110 section 7.6.1), in any case */
	const char *hop[] = { "Connection", "keep-alive", "PROXY-CONNECTION", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade" };
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++) {
		assert_int_equal(lg_answer_field_check(hop[i], strlen(hop[i]), "x", 1, &why), -1);
		assert_non_null(strstr(why, "hop-by-hop"));
	}
	/* the host's own */
	const char *own[] = { "Content-Length", "content-type", "Date", "Server", "X-Queue-Ms",
		"X-Run-Ms", "X-Request-Id", "X-Cache" };
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		assert_int_equal(lg_answer_field_check(own[i], strlen(own[i]), "1", 1, &why), -1);
		assert_non_null(strstr(why, "writes itself"));
	}
	/* CR, LF, NUL, controls, non-ASCII, white space at the ends, bad names */
	assert_int_equal(check("X-A", "a\r\nX-B: 1"), -1);
	assert_int_equal(check("X-A", "a\nb"), -1);
	assert_int_equal(lg_answer_field_check("X-A", 3, "a\0b", 3, &why), -1);
	assert_int_equal(lg_answer_field_check("X\0A", 3, "a", 1, &why), -1);
	assert_int_equal(check("X-A", "caf\xc3\xa9"), -1);
	assert_int_equal(check("X-A", " a"), -1);
	assert_int_equal(check("X-A", "a\t"), -1);
	assert_int_equal(check("", "a"), -1);
	assert_int_equal(check("X A", "a"), -1);
	assert_int_equal(check("X:A", "a"), -1);
	assert_int_equal(check("X-A\r\nX-B", "a"), -1);
	/* a prefix or extension of a refused name is another name */
	assert_int_equal(check("Connections", "a"), 0);
	assert_int_equal(check("Dat", "a"), 0);
}

static void
test_status_rules(void **state)
{
	(void)state;
	assert_true(lg_answer_status_ok(204, LAGLESS_OK));
	assert_true(lg_answer_status_ok(302, LAGLESS_OK));
	assert_true(lg_answer_status_ok(308, LAGLESS_OK));
	assert_false(lg_answer_status_ok(304, LAGLESS_OK));
	assert_false(lg_answer_status_ok(305, LAGLESS_OK));
	assert_false(lg_answer_status_ok(404, LAGLESS_OK));
	assert_true(lg_answer_status_ok(422, LAGLESS_BAD_INPUT));
	assert_false(lg_answer_status_ok(502, LAGLESS_BAD_INPUT));
	assert_true(lg_answer_status_ok(502, LAGLESS_ERROR));
	assert_true(lg_answer_status_ok(504, LAGLESS_ERROR));
	assert_false(lg_answer_status_ok(505, LAGLESS_ERROR));
	assert_false(lg_answer_status_ok(200, LAGLESS_ERROR));
	assert_true(lg_answer_status_ok(503, -1));
	assert_false(lg_answer_status_ok(199, -1));
	assert_false(lg_answer_status_ok(600, -1));
}

static void
test_add_then_loop_check(void **state)
{
	struct lg_out_meta m;
	char dst[LAGLESS_ANSWER_FIELDS_BYTES + 1], why[192];

	(void)state;
	memset(&m, 0, sizeof(m));
	assert_int_equal(lg_answer_fields(&m, 200, dst, sizeof(dst), why, sizeof(why)), 0);
	assert_string_equal(dst, "");
	assert_int_equal(add(&m, "Location", "/x"), 0);
	assert_int_equal(add(&m, "Set-Cookie", "a=1"), 0);
	assert_int_equal(add(&m, "set-cookie", "b=2"), 0);
	assert_int_equal(lg_answer_fields(&m, 302, dst, sizeof(dst), why, sizeof(why)),
	    (long)strlen("Location: /x\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n"));
	assert_string_equal(dst, "Location: /x\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n");
	assert_true(lg_answer_has_field(dst, "location"));
	assert_true(lg_answer_has_field(dst, "SET-COOKIE"));
	assert_false(lg_answer_has_field(dst, "retry-after"));
	/* a refused field: refused at add, and the answer as a whole is a 502 */
	assert_int_equal(add(&m, "Connection", "close"), -1);
	assert_int_equal(add(&m, "Upgrade", "h2c"), -1);
	assert_true(m.flags & LG_OUT_BAD_FIELD);
	assert_int_equal(lg_answer_fields(&m, 200, dst, sizeof(dst), why, sizeof(why)), -1);
	assert_non_null(strstr(why, "field 'Connection': a hop-by-hop")); /* the first one */
}

static void
test_bounds(void **state)
{
	struct lg_out_meta m;
	char big[LAGLESS_ANSWER_FIELDS_BYTES], dst[LAGLESS_ANSWER_FIELDS_BYTES + 1], why[192];

	(void)state;
	memset(&m, 0, sizeof(m));
	for (int i = 0; i < LAGLESS_MAX_ANSWER_FIELDS; i++)
		assert_int_equal(add(&m, "X-N", "1"), 0);
	assert_int_equal(add(&m, "X-N", "1"), -1);
	assert_non_null(strstr(m.bad, "more fields"));
	memset(&m, 0, sizeof(m));
	memset(big, 'v', sizeof(big));
	big[sizeof(big) - 8] = '\0'; /* "X: " + value + CRLF: 1021 bytes, fits */
	assert_int_equal(lg_answer_field_add(&m, "X", 1, big, strlen(big)), 0);
	assert_int_equal(add(&m, "Y", "1234"), -1);
	assert_non_null(strstr(m.bad, "LAGLESS_ANSWER_FIELDS_BYTES"));
	/* 3xx that need a Location (RFC 9110 section 10.2.2) */
	memset(&m, 0, sizeof(m));
	assert_int_equal(add(&m, "X-A", "1"), 0);
	assert_int_equal(lg_answer_fields(&m, 301, dst, sizeof(dst), why, sizeof(why)), -1);
	assert_non_null(strstr(why, "Location"));
	assert_true(lg_answer_fields(&m, 300, dst, sizeof(dst), why, sizeof(why)) > 0);
	/* a small destination is refused, never overrun */
	assert_int_equal(lg_answer_fields(&m, 200, dst, 4, why, sizeof(why)), -1);
}

/* What another process may have written: every lie is a 502, never a malformed head. */
static void
test_untrusted_page(void **state)
{
	struct lg_out_meta m;
	char dst[LAGLESS_ANSWER_FIELDS_BYTES + 1], why[192];
	static const char *const lies[] = {
		"X-A: 1\r\nX-B: 2\r\n",     /* count 1 below, two lines */
		"X-A: 1\r\n\r\nX-B: 2\r\n", /* an empty line: the end of the head */
		"X-A: 1\n",                 /* bare LF */
		"X-A: 1\r\nConnection: close\r\n",
		"X-A:1\r\n",                /* no space: not the host's own form */
		"X-A: a\rb\r\n",            /* bare CR in a value */
		"X-A: 1",                   /* unterminated */
		": 1\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		memset(&m, 0, sizeof(m));
		memcpy(m.fields, lies[i], strlen(lies[i]));
		m.fields_len = (uint32_t)strlen(lies[i]);
		m.nfields = 1;
		assert_int_equal(lg_answer_fields(&m, 200, dst, sizeof(dst), why, sizeof(why)), -1);
	}
	memset(&m, 0, sizeof(m));
	m.fields_len = sizeof(m.fields) + 1; /* over the page's field */
	assert_int_equal(lg_answer_fields(&m, 200, dst, sizeof(dst), why, sizeof(why)), -1);
	memset(&m, 0, sizeof(m));
	m.nfields = LAGLESS_MAX_ANSWER_FIELDS + 1;
	assert_int_equal(lg_answer_fields(&m, 200, dst, sizeof(dst), why, sizeof(why)), -1);
	memset(&m, 0, sizeof(m));
	m.flags = LG_OUT_BAD_FIELD;
	memset(m.bad, 'z', sizeof(m.bad)); /* no NUL: cut, not read past */
	assert_int_equal(lg_answer_fields(&m, 200, dst, sizeof(dst), why, sizeof(why)), -1);
	assert_int_equal(strlen(why), sizeof(m.bad) - 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_field_rules),
		cmocka_unit_test(test_status_rules),
		cmocka_unit_test(test_add_then_loop_check),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_untrusted_page),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
