/* Unit tests for kinds/heavy.c: the reference CPU loop (checked against its closed form, not a
 * second copy of the loop) and the JSON answer of /heavy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kinds/heavy.h"

/* x = sum of 7*i for i < n, reduced mod 1000003 at every step in the loop; reduction commutes
 * with addition, so the sum is 7 * n(n-1)/2 mod 1000003. */
static uint64_t
closed_form(uint64_t n)
{
	unsigned __int128 s = (unsigned __int128)n * (n ? n - 1 : 0) / 2;

	return (uint64_t)(s * 7 % 1000003);
}

static void
test_loop(void **state)
{
	static const uint64_t ns[] = { 0, 1, 2, 3, 1000, 123457, 1000000 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		assert_int_equal(lg_heavy_loop(ns[i]), closed_form(ns[i]));
	/* The values published with the Node.js and Python comparisons. */
	assert_int_equal(lg_heavy_loop(1000000), 42);
	assert_int_equal(closed_form(LG_HEAVY_DEFAULT_N), 114030);
}

static void
test_json(void **state)
{
	char out[LG_HEAVY_JSON_MAX];
	size_t n = lg_heavy_json(out, sizeof(out), 1000000, 42, 1500000, 2250);

	assert_string_equal(out,
	    "{\"iterations\":1000000,\"result\":42,\"queue_ms\":1.500,\"run_ms\":0.002}\n");
	assert_int_equal(n, strlen(out));
	/* The longest answer fits LG_HEAVY_JSON_MAX; one byte short of an answer is 0. */
	n = lg_heavy_json(out, sizeof(out), LG_HEAVY_MAX_N, 1000002, UINT64_MAX, UINT64_MAX);
	assert_true(n > 0 && n < LG_HEAVY_JSON_MAX);
	assert_int_equal(lg_heavy_json(out, n, LG_HEAVY_MAX_N, 1000002, UINT64_MAX, UINT64_MAX),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop),
		cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
