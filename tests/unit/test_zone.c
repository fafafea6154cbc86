/* Unit tests for shm/zone.c: a zone is a shared, zero-filled memfd mapping that a forked
 * process sees, backed up front when asked, and a failure leaves nothing open. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/zone.h"

#define SIZE (64u * 4096u)

static void
test_zero_filled_and_shared(void **state)
{
	unsigned char *base;
	int fd, status;
	pid_t pid;

	assert_int_equal(lg_zone_map("test-zone", SIZE, 0, &fd, &base), 0);
	assert_true(fd >= 0);
	assert_non_null(base);
	for (size_t i = 0; i < SIZE; i += 4096)
		assert_int_equal(base[i], 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		base[SIZE - 1] = 42; /* a child's write shows in the parent: MAP_SHARED */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(base[SIZE - 1], 42);
	munmap(base, SIZE);
	close(fd);
}

static void
test_backed_up_front(void **state)
{
	unsigned char *base;
	struct stat st;
	int fd;

	assert_int_equal(lg_zone_map("test-zone", SIZE, 0, &fd, &base), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_blocks, 0); /* sparse until touched */
	munmap(base, SIZE);
	close(fd);
	assert_int_equal(lg_zone_map("test-zone", SIZE, SIZE / 2, &fd, &base), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true((uint64_t)st.st_blocks * 512u >= SIZE / 2);
	assert_true((uint64_t)st.st_size == SIZE);
	munmap(base, SIZE);
	close(fd);
}

static void
test_failure_leaves_nothing_open(void **state)
{
	unsigned char *base = (unsigned char *)1;
	int fd = 7;

	/* More than a mapping can hold: ftruncate or mmap refuses it. */
	assert_int_equal(lg_zone_map("test-zone", UINT64_MAX / 2, 0, &fd, &base), -1);
	assert_true(errno != 0);
	assert_int_equal(fd, -1);
	assert_null(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_filled_and_shared),
		cmocka_unit_test(test_backed_up_front),
		cmocka_unit_test(test_failure_leaves_nothing_open),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
