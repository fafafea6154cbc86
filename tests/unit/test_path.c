/* Unit tests for http/path.c, request path normalization (RFC 3986 section 6.2.2): a table of
 * paths with the normal form each must take, or the refusal it must get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/path.h"

struct want {
	const char *in;
	const char *out;       /* NULL: refused */
	int keep_slashes;
};

static const struct want cases[] = {
	/* unchanged: the fast path */
	{ "/", "/", 0 },
	{ "/ping", "/ping", 0 },
	{ "/api/v1/items", "/api/v1/items", 0 },
	{ "/a.b/c..d/.e/..f", "/a.b/c..d/.e/..f", 0 },
	{ "/.well-known/x", "/.well-known/x", 0 },
	/* step 1: unreserved decoded, the rest upper-cased and kept */
	{ "/p/%65xact", "/p/exact", 0 },
	{ "/%41%5a%61%7A%30%39%2D%2E%5F%7E", "/AZaz09-._~", 0 },
	{ "/a%2ab", "/a%2Ab", 0 },
	{ "/a%20b%3f", "/a%20b%3F", 0 },
	{ "/%2565", "/%2565", 0 },   /* decoded once: the literal "%65" */
	{ "/%c3%a9", "/%C3%A9", 0 },
	/* step 2: dot segments */
	{ "/p/./exact", "/p/exact", 0 },
	{ "/p/../v", "/v", 0 },
	{ "/a/b/../c", "/a/c", 0 },
	{ "/a/b/..", "/a/", 0 },
	{ "/a/..", "/", 0 },
	{ "/a/.", "/a/", 0 },
	{ "/.", "/", 0 },
	{ "/./", "/", 0 },
	{ "/a/./b/./", "/a/b/", 0 },
	{ "/p/%2e%2E/v", "/v", 0 },
	{ "/p/%2e/exact", "/p/exact", 0 },
	{ "/a/b/c/../../d", "/a/d", 0 },
	{ "/../x", NULL, 0 },
	{ "/..", NULL, 0 },
	{ "/a/../../x", NULL, 0 },
	{ "/%2e%2e/x", NULL, 0 },
	/* step 3: merged slashes, by the setting */
	{ "/p//x", "/p/x", 0 },
	{ "//p///exact//", "/p/exact/", 0 },
	{ "/a/.//b", "/a/b", 0 },
	{ "/p//x", "/p//x", 1 },
	{ "/a//..", "/a/", 1 },
	{ "/a//../b", "/a/b", 1 },
	/* refused */
	{ "/a%2Fb", NULL, 0 },
	{ "/a%2fb", NULL, 0 },
	{ "/a%00b", NULL, 0 },
	/* not "%" HEXDIG HEXDIG: the request-line rules refuse it first; refused here too */
	{ "/a%zz", NULL, 0 },
	{ "/a%e", NULL, 0 },
	{ "/a%", NULL, 0 },
	{ "/%g0", NULL, 0 },
};

static void
test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct want *c = &cases[i];
		char buf[128];
		size_t len = strlen(c->in);
		const char *why = NULL;

		memcpy(buf, c->in, len + 1);
		int rc = lg_path_normalize(buf, &len, c->keep_slashes, &why);
		if (c->out == NULL) {
			if (rc != -1 || why == NULL)
				fail_msg("%s: accepted as %.*s", c->in, (int)len, buf);
			continue;
		}
		if (rc != 0)
			fail_msg("%s: refused (%s)", c->in, why);
		if (len != strlen(c->out) || memcmp(buf, c->out, len) != 0)
			fail_msg("%s: %.*s, want %s", c->in, (int)len, buf, c->out);
		/* idempotent: a normal form is its own normal form */
		size_t again = len;
		assert_int_equal(lg_path_normalize(buf, &again, c->keep_slashes, &why), 0);
		assert_int_equal(again, len);
		assert_memory_equal(buf, c->out, len);
	}
}

/* Never longer than the input, never reads past it (the ASan build sees that: each path is in
 * a block of exactly its size), and a normal form is its own: every path of up to six bytes over
 * an alphabet of the bytes that matter ("%2e" is '.', a '%' may lack its hex digits), both
 * ways of slashes. */
static void
test_exhaustive_short(void **state)
{
	static const char alpha[] = { '/', '.', '%', '2', 'e' };
	(void)state;
	for (unsigned n = 1; n <= 6; n++) {
		unsigned total = 1;
		for (unsigned k = 1; k < n; k++)
			total *= 5;
		for (unsigned m = 0; m < 2 * total; m++) {
			char *buf = malloc(n);
			unsigned v = m / 2;
			const char *why;
			size_t len = n;

			assert_non_null(buf);
			buf[0] = '/';
			for (unsigned k = 1; k < n; k++, v /= 5)
				buf[k] = alpha[v % 5];
			if (lg_path_normalize(buf, &len, (int)(m & 1), &why) == 0) {
				size_t again = len;

				assert_true(len >= 1 && len <= n && buf[0] == '/');
				assert_int_equal(lg_path_normalize(buf, &again, (int)(m & 1), &why), 0);
				assert_int_equal(again, len);
			}
			free(buf);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_exhaustive_short),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
