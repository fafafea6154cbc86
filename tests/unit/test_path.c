/* Unit tests for http/path.c, request path normalization (RFC 3986 section 6.2.2): a table of
 * paths with the normal form each must take, or the refusal it must get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* Never longer than the input and never reads past it: every path of up to five bytes over an
 * alphabet of the bytes that matter, each in a buffer exactly its size. */
static void
test_exhaustive_short(void **state)
{
	static const char alpha[] = { '/', '.', 'a', '%' };
	(void)state;
	for (unsigned n = 1; n <= 5; n++) {
		unsigned total = 1;
		for (unsigned k = 1; k < n; k++)
			total *= 4;
		for (unsigned m = 0; m < total; m++) {
			char in[8], buf[8];
			unsigned v = m;
			in[0] = '/';
			for (unsigned k = 1; k < n; k++, v /= 4)
				in[k] = alpha[v % 4];
			/* a '%' must start a well-formed encoding (the request-line rules): skip */
			if (memchr(in, '%', n) != NULL)
				continue;
			memcpy(buf, in, n);
			size_t len = n;
			const char *why;
			if (lg_path_normalize(buf, &len, (int)(m & 1), &why) == 0) {
				assert_true(len >= 1 && len <= n);
				assert_true(buf[0] == '/');
			}
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
