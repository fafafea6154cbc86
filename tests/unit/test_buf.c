/* Unit tests for common/buf.c: bounded appends and JSON string escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

static void
test_append_and_overflow(void **state)
{
	char mem[16];
	struct lg_buf b;

	lg_buf_init(&b, mem, sizeof(mem));
	assert_int_equal(b.len, 0);
	assert_string_equal(mem, "");
	assert_int_equal(lg_buf_printf(&b, "%s=%d;", "ab", 12), 0);
	assert_string_equal(mem, "ab=12;");
	/* 15 bytes of room: "ab=12;" (6) + 9 fit, 10 do not, and a failed append leaves no trace */
	assert_int_equal(lg_buf_printf(&b, "%s", "0123456789"), -1);
	assert_true(b.overflow);
	assert_int_equal(b.len, 6);
	assert_string_equal(mem, "ab=12;");
	/* sticky: even a short append is refused afterwards */
	assert_int_equal(lg_buf_printf(&b, "x"), -1);
	assert_string_equal(mem, "ab=12;");
}

static void
test_exact_fit(void **state)
{
	char mem[4];
	struct lg_buf b;

	lg_buf_init(&b, mem, sizeof(mem));
	assert_int_equal(lg_buf_printf(&b, "abc"), 0); /* 3 bytes + NUL */
	assert_int_equal(b.len, 3);
	assert_false(b.overflow);
	assert_int_equal(lg_buf_printf(&b, "d"), -1);
}

static void
test_json_chars(void **state)
{
	char mem[64];
	struct lg_buf b;
	const char in[] = "a\"b\\c\n\x01\x7f/é";

	lg_buf_init(&b, mem, sizeof(mem));
	assert_int_equal(lg_buf_json_chars(&b, in, sizeof(in) - 1), 0);
	assert_string_equal(mem, "a\\\"b\\\\c\\u000a\\u0001\\u007f/é");
	lg_buf_init(&b, mem, 5);
	assert_int_equal(lg_buf_json_chars(&b, "\"\"\"", 3), -1);
	assert_true(b.overflow);
}

/* The escaper under the access log: with LG_JSON_ASCII well-formed UTF-8 as its code point
 * and any other byte above 0x7f as its Latin-1 character, an escape never split at the end,
 * the count of input bytes written returned. */
static void
test_json_escape(void **state)
{
	char out[64], *at = out;
	const char in[] = "a\"\xc3\xa9\x1f";
	static const struct { const char *in, *want; } ascii[] = {
		{ "\xe9", "\\u00e9" },                          /* a lone Latin-1 byte */
		{ "\xe2\x82\xac", "\\u20ac" },                  /* the euro sign */
		{ "\xf0\x9f\x98\x80", "\\ud83d\\ude00" },        /* past U+FFFF: a pair */
		{ "\xc0\xaf", "\\u00c0\\u00af" },                /* overlong: bytes */
		{ "\xed\xa0\x80", "\\u00ed\\u00a0\\u0080" },      /* a surrogate: bytes */
		{ "\xf4\x90\x80\x80", "\\u00f4\\u0090\\u0080\\u0080" }, /* past U+10FFFF */
		{ "x\xe2\x82", "x\\u00e2\\u0082" },              /* cut short at the end */
	};

	assert_int_equal(lg_json_escape(&at, out + sizeof(out), in, 5, LG_JSON_ASCII), 5);
	assert_int_equal(at - out, 1 + 2 + 6 + 6);
	assert_memory_equal(out, "a\\\"\\u00e9\\u001f", 15);
	at = out;
	assert_int_equal(lg_json_escape(&at, out + 8, in, 5, LG_JSON_ASCII), 2); /* 3 + 6 > 8 */
	assert_int_equal(at - out, 3);
	for (size_t i = 0; i < sizeof(ascii) / sizeof(ascii[0]); i++) {
		at = out;
		assert_int_equal(lg_json_escape(&at, out + sizeof(out), ascii[i].in,
		    strlen(ascii[i].in), LG_JSON_ASCII), strlen(ascii[i].in));
		*at = '\0';
		assert_string_equal(out, ascii[i].want);
	}
	at = out; /* a pair is not split: 11 bytes of room take none of it */
	assert_int_equal(lg_json_escape(&at, out + 11, "\xf0\x9f\x98\x80", 4, LG_JSON_ASCII), 0);
	at = out;
	assert_int_equal(lg_json_escape(&at, out + 5, in, 4, 0), 4); /* UTF-8 as it is */
	assert_memory_equal(out, "a\\\"\xc3\xa9", 5);
	assert_int_equal(lg_json_escape(&at, out + 5, in, 4, 0), 0); /* full: nothing */
}

static void
test_fmt_u64(void **state)
{
	static const struct { uint64_t v; const char *s; } cases[] = {
		{ 0, "0" }, { 7, "7" }, { 10, "10" }, { 503, "503" }, { 4294967296ull, "4294967296" },
		{ UINT64_MAX, "18446744073709551615" },
	};
	char out[LG_FMT_U64_MAX + 1];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(out, 'x', sizeof(out));
		size_t n = lg_fmt_u64(out, cases[i].v);

		assert_int_equal(n, strlen(cases[i].s));
		assert_memory_equal(out, cases[i].s, n);
		assert_int_equal(out[n], 'x'); /* no terminator written */
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_and_overflow),
		cmocka_unit_test(test_exact_fit),
		cmocka_unit_test(test_json_chars),
		cmocka_unit_test(test_json_escape),
		cmocka_unit_test(test_fmt_u64),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
