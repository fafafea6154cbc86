/* Unit tests for common/pool.c: blocks are reused while in demand and unmapped once they went
 * unused for a whole trim period, down to the number kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/pool.h"

static void
test_sizes_round_to_pages(void **state)
{
	struct lg_pool p;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	lg_pool_init(&p, 1, 0);
	assert_int_equal(p.size, page);
	lg_pool_init(&p, page + 1, 0);
	assert_int_equal(p.size, 2 * page);
}

static void
test_reuse_then_decay(void **state)
{
	struct lg_pool p;
	void *b[8];

	lg_pool_init(&p, 10000, 1);
	for (int i = 0; i < 8; i++) {
		b[i] = lg_pool_get(&p);
		assert_non_null(b[i]);
		memset(b[i], 0xa5, p.size); /* the whole block is writable */
	}
	assert_int_equal(p.mapped, 8);
	for (int i = 0; i < 8; i++)
		lg_pool_put(&p, b[i]);
	assert_int_equal(p.len, 8);
	/* Steady demand of 3 blocks per period: only the 5 never needed go, over two trims (the
	 * first trim only starts the period; none was taken before it). */
	assert_int_equal(lg_pool_trim(&p), 0);
	for (int round = 0; round < 3; round++) {
		void *t[3];

		for (int i = 0; i < 3; i++)
			t[i] = lg_pool_get(&p);
		assert_ptr_not_equal(t[0], t[1]);
		for (int i = 0; i < 3; i++)
			lg_pool_put(&p, t[i]);
		lg_pool_trim(&p);
	}
	assert_int_equal(p.mapped, 3);
	/* no demand at all: down to `keep` */
	lg_pool_trim(&p);
	assert_int_equal(p.mapped, 1);
	assert_int_equal(p.len, 1);
	/* a block taken and given back within the period is reused, not mapped again */
	void *x = lg_pool_get(&p);
	assert_int_equal(p.mapped, 1);
	lg_pool_put(&p, x);
	void *y = lg_pool_get(&p);
	void *z = lg_pool_get(&p); /* the pool is empty: a fresh, zeroed mapping */
	assert_ptr_equal(x, y);
	assert_int_equal(p.mapped, 2);
	assert_int_equal(((unsigned char *)z)[p.size - 1], 0);
	lg_pool_put(&p, y);
	lg_pool_put(&p, z);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_round_to_pages),
		cmocka_unit_test(test_reuse_then_decay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
