/* Unit tests for common/pool.c: blocks are reused while in demand and unmapped once they went
 * unused for a whole trim period, down to the number kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/pool.h"

#if LG_POOL_POISONS
#include <sanitizer/asan_interface.h>
#endif

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

#if LG_POOL_POISONS
/* Runs a write into block b (given back already) in a child and returns what the child wrote on
 * stderr (ASan's report) into out, NUL-terminated; *status is the child's wait status. */
static void
write_in_child(unsigned char *b, size_t off, char *out, size_t cap, int *status)
{
	int fd[2];
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe(fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		((volatile unsigned char *)b)[off] = 1; /* ASan reports and exits here */
		_exit(0);
	}
	close(fd[1]);
	while (got < cap - 1 && (n = read(fd[0], out + got, cap - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd[0]);
	assert_int_equal(waitpid(pid, status, 0), pid);
}
#endif

/* The ASan build poisons a block while it is free: every byte of it, its first word (the free
 * list's link, a connection's w pointer) included, so a use of a closed connection is a report
 * in any test run; a block handed out again is whole and writable. */
static void
test_free_blocks_poisoned_under_asan(void **state)
{
#if LG_POOL_POISONS
	struct lg_pool p;
	unsigned char *b, *c;
	char report[8192];
	int status;

	lg_pool_init(&p, 10000, 0);
	b = lg_pool_get(&p);
	c = lg_pool_get(&p);
	assert_null(__asan_region_is_poisoned(b, p.size));
	lg_pool_put(&p, b);
	assert_true(__asan_address_is_poisoned(b));
	assert_true(__asan_address_is_poisoned(b + sizeof(void *)));
	assert_true(__asan_address_is_poisoned(b + p.size - 1));
	assert_ptr_equal(__asan_region_is_poisoned(b, p.size), b);
	assert_null(__asan_region_is_poisoned(c, p.size)); /* the one in use is not */
	/* a write into the given-back block is caught */
	write_in_child(b, 64, report, sizeof(report), &status);
	assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_non_null(strstr(report, "use-after-poison"));
	/* handed out again: whole */
	assert_ptr_equal(lg_pool_get(&p), b);
	assert_null(__asan_region_is_poisoned(b, p.size));
	memset(b, 0x5a, p.size);
	lg_pool_put(&p, b);
	lg_pool_put(&p, c);
	/* a block unmapped by the trim leaves no poison behind for a later mapping there, and
	 * gives back the shadow pages its poisoning made resident */
	size_t scale, offset, page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec[1];

	__asan_get_shadow_mapping(&scale, &offset);
	void *shadow = (void *)(((uintptr_t)b >> scale) + offset);
	assert_int_equal((uintptr_t)shadow % page, 0);
	assert_int_equal(mincore(shadow, page, vec), 0);
	assert_true(vec[0] & 1);
	assert_int_equal(lg_pool_trim(&p), 0);
	assert_int_equal(lg_pool_trim(&p), 2);
	assert_int_equal(mincore(shadow, page, vec), 0); /* before reading it maps a zero page */
	assert_false(vec[0] & 1);
	assert_false(__asan_address_is_poisoned(b));
	assert_false(__asan_address_is_poisoned(c + p.size - 1));
#else
	skip(); /* only the ASan build (make SAN=1) poisons */
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_round_to_pages),
		cmocka_unit_test(test_reuse_then_decay),
		cmocka_unit_test(test_free_blocks_poisoned_under_asan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
