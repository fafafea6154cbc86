/* Unit tests for load/tmpl.c: per-request path templates ({seq}, {rand:N}, {hit:R}, {key},
 * {run}, {{), their errors, and the keys file. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "load/tmpl.h"

static void
test_seq_and_literals(void **state)
{
	struct ll_tmpl t;
	char out[128], err[256];

	assert_true(ll_tmpl_has("/a{seq}"));
	assert_false(ll_tmpl_has("/a"));
	assert_int_equal(ll_tmpl_parse(&t, "/item/{seq}?run={run}&j={{x}", 1, 77, err,
	                               sizeof(err)), 0);
	assert_int_equal(ll_tmpl_expand(&t, out, sizeof(out)), strlen("/item/0?run=77&j={x}"));
	assert_string_equal(out, "/item/0?run=77&j={x}");
	ll_tmpl_expand(&t, out, sizeof(out));
	assert_string_equal(out, "/item/1?run=77&j={x}");
	/* too small a buffer */
	errno = 0;
	assert_int_equal(ll_tmpl_expand(&t, out, 8), -1);
	assert_int_equal(errno, ENOSPC);
	ll_tmpl_free(&t);
}

/* {rand:N}: N distinct keys, each drawn, none outside [0, N), reproducible from the seed */
static void
test_rand_keys(void **state)
{
	struct ll_tmpl t, u;
	char out[64], again[64], err[256];
	unsigned seen[10] = { 0 }, i, distinct = 0;

	assert_int_equal(ll_tmpl_parse(&t, "/k{rand:10}", 5, 0, err, sizeof(err)), 0);
	assert_int_equal(ll_tmpl_parse(&u, "/k{rand:10}", 5, 0, err, sizeof(err)), 0);
	for (i = 0; i < 2000; i++) {
		unsigned k;

		ll_tmpl_expand(&t, out, sizeof(out));
		ll_tmpl_expand(&u, again, sizeof(again));
		assert_string_equal(out, again);
		assert_int_equal(sscanf(out, "/k%u", &k), 1);
		assert_true(k < 10);
		seen[k]++;
	}
	for (i = 0; i < 10; i++) {
		distinct += seen[i] > 0;
		assert_true(seen[i] > 120 && seen[i] < 280);   /* 200 expected, sd ~13 */
	}
	assert_int_equal(distinct, 10);
	ll_tmpl_free(&t);
	ll_tmpl_free(&u);
}

/* {hit:R}: the hot key "0" about R of the time, every other draw a key not seen before */
static void
test_hit_ratio(void **state)
{
	struct ll_tmpl t;
	char out[64], err[256];
	unsigned i, hot = 0, last = 0, k;

	assert_int_equal(ll_tmpl_parse(&t, "/c?k={hit:0.9}", 3, 0, err, sizeof(err)), 0);
	for (i = 0; i < 10000; i++) {
		ll_tmpl_expand(&t, out, sizeof(out));
		assert_int_equal(sscanf(out, "/c?k=%u", &k), 1);
		if (k == 0) {
			hot++;
			continue;
		}
		assert_int_equal(k, last + 1);   /* a miss is always a new key */
		last = k;
	}
	assert_true(hot > 8850 && hot < 9150);   /* 9000 expected, sd 30 */
	ll_tmpl_free(&t);
}

static void
test_keys_file(void **state)
{
	char path[] = "/tmp/test_load_tmpl.XXXXXX", out[64], err[256];
	struct ll_tmpl t;
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	fputs("alpha\r\n\nbeta\ngamma", f);
	fclose(f);
	assert_int_equal(ll_tmpl_parse(&t, "/u/{key}", 1, 0, err, sizeof(err)), 0);
	errno = 0;
	assert_int_equal(ll_tmpl_expand(&t, out, sizeof(out)), -1);   /* no keys yet */
	assert_int_equal(ll_tmpl_keys(&t, path, err, sizeof(err)), 0);
	assert_int_equal(t.nkeys, 3);
	ll_tmpl_expand(&t, out, sizeof(out));
	assert_string_equal(out, "/u/alpha");
	ll_tmpl_expand(&t, out, sizeof(out));
	ll_tmpl_expand(&t, out, sizeof(out));
	assert_string_equal(out, "/u/gamma");
	ll_tmpl_expand(&t, out, sizeof(out));
	assert_string_equal(out, "/u/alpha");   /* from the first again */
	ll_tmpl_free(&t);
	f = fopen(path, "w");
	fputs("has space\n", f);
	fclose(f);
	assert_int_equal(ll_tmpl_parse(&t, "/u/{key}", 1, 0, err, sizeof(err)), 0);
	assert_int_equal(ll_tmpl_keys(&t, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "line 1"));
	ll_tmpl_free(&t);
	unlink(path);
}

static void
test_errors(void **state)
{
	static const char *const bad[] = {
		"/x{nope}", "/x{rand:0}", "/x{rand:1.5}", "/x{rand:}", "/x{hit:1.5}", "/x{hit:-0.1}",
		"/x{seq", "/x{rand:1e13}",
	};
	struct ll_tmpl t;
	char err[256];
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(ll_tmpl_parse(&t, bad[i], 1, 0, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
		ll_tmpl_free(&t);
	}
}

/* The value a warning sets latency against: the first {seq}, {rand:N} or {key}, as a number */
static void
test_value(void **state)
{
	struct ll_tmpl t;
	char out[128], err[256], name[32], *q;
	int i;

	assert_int_equal(ll_tmpl_parse(&t, "/d?h={hit:0.5}&ms={rand:100}&n={seq}", 3, 0, err,
	                               sizeof(err)), 0);
	assert_int_equal(t.value_part, 3);
	assert_string_equal(ll_tmpl_part_name(&t, 3, name, sizeof(name)), "{rand:100}");
	for (i = 0; i < 20; i++) {
		assert_true(ll_tmpl_expand(&t, out, sizeof(out)) > 0);
		q = strstr(out, "ms=") + 3;
		assert_true(t.value == strtod(q, NULL));
	}
	ll_tmpl_free(&t);
	assert_int_equal(ll_tmpl_parse(&t, "/a/{run}/{hit:0.1}", 3, 5, err, sizeof(err)), 0);
	assert_int_equal(t.value_part, -1);
	assert_true(isnan(t.value));
	ll_tmpl_free(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_and_literals),
		cmocka_unit_test(test_rand_keys),
		cmocka_unit_test(test_hit_ratio),
		cmocka_unit_test(test_keys_file),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_value),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
