/* Unit tests for http/authority.c: the uri-host [ ":" port ] grammar of Host values and
 * absolute-form authorities (RFC 3986 section 3.2.2-3.2.3). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/authority.h"

static int
ok(const char *v)
{
	for (const char *p = v; *p; p++)
		if (!lg_host_char((unsigned char)*p))
			return 0;
	return lg_host_syntax_ok(v, strlen(v));
}

static void
test_valid_forms(void **state)
{
	static const char *good[] = {
		"", "a", "example.com", "example.com:80", "a:", "127.0.0.1:8080", "[::1]", "[::1]:80",
		"[v1.x]", "a%41b", "xn--bcher-kva.example",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(ok(good[i]));
}

static void
test_invalid_forms(void **state)
{
	static const char *bad[] = {
		"a:80:90", "[::1", "a]", "[::1]x", "a:x", "a%zz", "a%4", "[zz]", "[v.x]", "a/b",
		"a@b", "[::1]:8x",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(ok(bad[i]));
}

static void
test_authority_chars(void **state)
{
	assert_true(lg_authority_char('a') && lg_authority_char('[') && lg_authority_char('%'));
	assert_false(lg_authority_char('/') || lg_authority_char('?') || lg_authority_char(' '));
	assert_false(lg_host_char(0x80) || lg_host_char('"') || lg_host_char('\\'));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_forms),
		cmocka_unit_test(test_invalid_forms),
		cmocka_unit_test(test_authority_chars),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
