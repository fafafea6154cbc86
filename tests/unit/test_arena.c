/* Unit tests for shm/arena.c: the memfd arena, on real memfds and real forks. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/arena.h"

#define MIB (1024u * 1024u)

static void
test_create_destroy(void **state)
{
	struct lg_arena a;
	struct stat st;

	assert_int_equal(lg_arena_create(&a, 3, 5, 1, LG_PAGE + 1), 0);
	assert_true(a.fd >= 0);
	assert_non_null(a.base);
	assert_int_equal(a.nslots, 3);
	assert_int_equal(a.nprocs, 5);
	assert_int_equal(a.in_cap, LG_PAGE);        /* rounded up to whole pages */
	assert_int_equal(a.out_cap, 2 * LG_PAGE);
	assert_int_equal(a.hdr->magic, LG_ARENA_MAGIC);
	assert_int_equal(a.hdr->version, LG_ARENA_VERSION);
	assert_int_equal(a.hdr->nslots, 3);
	assert_int_equal(a.hdr->nprocs, 5);
	assert_int_equal(a.hdr->in_cap, a.in_cap);
	assert_int_equal(a.hdr->out_cap, a.out_cap);
	assert_int_equal(a.hdr->total_size, a.size);
	assert_int_equal(fstat(a.fd, &st), 0);
	assert_int_equal((uint64_t)st.st_size, a.size);
	assert_true(fcntl(a.fd, F_GETFD) & FD_CLOEXEC); /* children exec nothing, but be safe */
	for (uint32_t i = 0; i < a.nprocs; i++) {
		assert_int_equal(atomic_load(&a.procs[i].pid), 0);
		assert_int_equal(atomic_load(&a.procs[i].job), LG_NO_JOB);
	}
	for (uint32_t i = 0; i < a.nslots; i++)
		assert_int_equal(atomic_load(&a.slots[i].word), 0); /* FREE, generation 0 */
	lg_arena_destroy(&a);
	assert_int_equal(a.fd, -1);
	assert_null(a.base);
	lg_arena_destroy(&a); /* twice is harmless */
}

/* "safe on a zeroed arena": a zeroed struct has fd 0, which is stdin, not an arena. */
static void
test_destroy_zeroed_keeps_fd0(void **state)
{
	struct lg_arena z;
	int opened = -1;

	if (fcntl(0, F_GETFD) == -1)
		opened = open("/dev/null", O_RDONLY); /* make sure fd 0 exists to be (not) closed */
	memset(&z, 0, sizeof(z));
	lg_arena_destroy(&z);
	assert_int_not_equal(fcntl(0, F_GETFD), -1);
	if (opened == 0)
		close(opened);
}

static void
check_layout(const struct lg_arena *a)
{
	const struct lg_arena_hdr *h = a->hdr;
	uint64_t end;

	assert_int_equal(h->procs_off % LG_PAGE, 0);
	assert_int_equal(h->slots_off % LG_PAGE, 0);
	assert_int_equal(h->regions_off % LG_PAGE, 0);
	assert_true(h->procs_off >= sizeof(*h));
	assert_int_equal(h->master_off, LG_PAGE); /* right after the header page */
	assert_true(h->procs_off >= h->master_off + sizeof(struct lg_master_page));
	assert_ptr_equal((void *)a->master, (void *)(a->base + h->master_off));
	assert_true(h->slots_off >= h->procs_off + (uint64_t)a->nprocs * LG_PROC_PAGE);
	assert_true(h->regions_off >= h->slots_off + (uint64_t)a->nslots * sizeof(struct lg_slot));
	end = h->regions_off;
	for (uint32_t i = 0; i < a->nslots; i++) {
		uint64_t in = lg_arena_in_off(a, i), out = lg_arena_out_off(a, i);

		assert_int_equal(in % LG_PAGE, 0);
		assert_int_equal(out % LG_PAGE, 0);
		assert_true(in >= end);                 /* after the previous region */
		assert_true(out >= in + a->in_cap);     /* input and output do not overlap */
		end = out + a->out_cap;
		assert_ptr_equal(lg_arena_in(a, i), a->base + in);
		assert_ptr_equal(lg_arena_out(a, i), a->base + out);
	}
	assert_true(end <= a->size);
}

static void
test_layout(void **state)
{
	static const struct { uint32_t nslots, nprocs; uint64_t in, out; } cases[] = {
		{ 1, 0, 1, 1 }, { 1, 1, 0, 0 }, { 4, 2, MIB, MIB }, { 33, 7, 5000, 70000 },
		{ 100, 3, LG_PAGE, 3 * LG_PAGE },
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct lg_arena a;

		assert_int_equal(lg_arena_create(&a, cases[k].nslots, cases[k].nprocs, cases[k].in,
		    cases[k].out), 0);
		check_layout(&a);
		lg_arena_destroy(&a);
	}
}

static void
test_regions_writable(void **state)
{
	struct lg_arena a;

	assert_int_equal(lg_arena_create(&a, 4, 3, 64 * 1024, 128 * 1024), 0);
	for (uint32_t i = 0; i < a.nprocs; i++)
		memset(&a.procs[i], 0x11, sizeof(a.procs[i]));
	memset(a.slots, 0x22, a.nslots * sizeof(struct lg_slot));
	for (uint32_t i = 0; i < a.nslots; i++) {
		memset(lg_arena_in(&a, i), (int)(0x30 + i), a.in_cap);
		memset(lg_arena_out(&a, i), (int)(0x40 + i), a.out_cap);
	}
	/* Each region kept its own bytes: nothing overlapped, header untouched. */
	for (uint32_t i = 0; i < a.nslots; i++) {
		assert_int_equal(lg_arena_in(&a, i)[0], 0x30 + i);
		assert_int_equal(lg_arena_in(&a, i)[a.in_cap - 1], 0x30 + i);
		assert_int_equal(lg_arena_out(&a, i)[0], 0x40 + i);
		assert_int_equal(lg_arena_out(&a, i)[a.out_cap - 1], 0x40 + i);
	}
	assert_int_equal(a.hdr->magic, LG_ARENA_MAGIC);
	assert_int_equal(((unsigned char *)&a.procs[a.nprocs - 1])[LG_PROC_PAGE - 1], 0x11);
	lg_arena_destroy(&a);
}

static void
expect_create_error(uint32_t nslots, uint32_t nprocs, uint64_t in, uint64_t out, int err)
{
	struct lg_arena a;

	errno = 0;
	assert_int_equal(lg_arena_create(&a, nslots, nprocs, in, out), -1);
	assert_int_equal(errno, err);
	assert_int_equal(a.fd, -1);
	assert_null(a.base);
	lg_arena_destroy(&a);
}

/* lg_arena_size is the layout lg_arena_create maps, and refuses what cannot be mapped. */
static void
test_size_matches_create(void **state)
{
	struct lg_arena a;
	uint64_t size;

	(void)state;
	assert_int_equal(lg_arena_create_sized(&a, 5, 3, 10000, 70000, 7, 2), 0);
	assert_int_equal(lg_arena_size(5, 3, 10000, 70000, 7, 2, &size), 0);
	assert_int_equal(size, a.size);
	lg_arena_destroy(&a);
	errno = 0;
	assert_int_equal(lg_arena_size(768, 64, 1ull << 40, 1ull << 40, 1, 1, &size), -1);
	assert_int_equal(errno, EOVERFLOW);
	assert_true(size > LG_ARENA_MAX_SIZE && size != UINT64_MAX);
	assert_int_equal(lg_arena_size(2, 1, UINT64_MAX, 0, 1, 1, &size), -1);
	assert_int_equal(size, UINT64_MAX);
	expect_create_error(768, 64, 1ull << 40, 1ull << 40, EOVERFLOW); /* never tried: ENOMEM */
}

static void
test_overflow(void **state)
{
	expect_create_error(1, 1, UINT64_MAX, 0, EOVERFLOW);      /* rounding up overflows */
	expect_create_error(1, 1, 0, UINT64_MAX - 100, EOVERFLOW);
	expect_create_error(1, 1, 1ull << 63, 1ull << 63, EOVERFLOW); /* in + out overflows */
	expect_create_error(UINT32_MAX, 1, 1ull << 40, 1ull << 40, EOVERFLOW); /* x nslots */
	expect_create_error(2, 1, 1ull << 62, 0, EOVERFLOW);      /* > INT64_MAX for off_t */
	expect_create_error(1, UINT32_MAX, 1ull << 62, 1ull << 62, EOVERFLOW);
}

static void
test_nslots_zero(void **state)
{
	expect_create_error(0, 1, LG_PAGE, LG_PAGE, EINVAL);
}

static void
test_failure_leaks_no_fd(void **state)
{
	struct lg_arena a;
	int before = open("/dev/null", O_RDONLY), after;

	/* memfd_create succeeds, then ftruncate fails (a file size limit below the arena: EFBIG,
	 * SIGXFSZ ignored), and the memfd must be closed again. Sizes over LG_ARENA_MAX_SIZE
	 * never get that far (EOVERFLOW, test_size_matches_create). */
	struct rlimit old, low;

	close(before);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	low = old;
	low.rlim_cur = 1u << 20;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &low), 0);
	errno = 0;
	int r = lg_arena_create(&a, 1, 0, 64u << 20, 0);
	int saved = errno;

	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	if (r == 0) {
		lg_arena_destroy(&a);
		fail(); /* created beyond RLIMIT_FSIZE */
	}
	errno = saved;
	assert_true(errno == ENOMEM || errno == EFBIG || errno == EINVAL);
	after = open("/dev/null", O_RDONLY);
	close(after);
	assert_int_equal(after, before);
}

static void
test_shared_across_fork(void **state)
{
	struct lg_arena a;
	pid_t pid;
	int status;

	assert_int_equal(lg_arena_create(&a, 2, 2, LG_PAGE, LG_PAGE), 0);
	memcpy(lg_arena_in(&a, 1), "from parent", 12);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int ok = memcmp(lg_arena_in(&a, 1), "from parent", 12) == 0;

		memcpy(lg_arena_out(&a, 1), "from child", 11);
		atomic_store(&a.procs[1].pid, (int32_t)getpid());
		atomic_store(&a.slots[0].word, 42);
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_memory_equal(lg_arena_out(&a, 1), "from child", 11);
	assert_int_equal(atomic_load(&a.procs[1].pid), pid);
	assert_int_equal(atomic_load(&a.slots[0].word), 42);
	lg_arena_destroy(&a);
}

static uint64_t
blocks(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_blocks; /* 512-byte units actually backed */
}

static void
test_release_pages(void **state)
{
	struct lg_arena a;
	uint64_t b0, b1, b2, region_blocks;

	assert_int_equal(lg_arena_create(&a, 3, 1, MIB, MIB), 0);
	b0 = blocks(a.fd);
	for (uint32_t i = 0; i < 3; i++) {
		memset(lg_arena_in(&a, i), 0x5a, a.in_cap);
		memset(lg_arena_out(&a, i), 0xa5, a.out_cap);
	}
	b1 = blocks(a.fd);
	region_blocks = (a.in_cap + a.out_cap) / 512;
	assert_true(b1 >= b0 + 3 * region_blocks); /* the file is sparse until written */
	assert_int_equal(lg_arena_release_pages(&a, 1), 0);
	b2 = blocks(a.fd);
	assert_true(b1 - b2 >= region_blocks);
	/* The punched region reads as zeros and is usable again; its neighbours kept their data. */
	for (uint64_t k = 0; k < a.in_cap; k += LG_PAGE)
		assert_int_equal(lg_arena_in(&a, 1)[k], 0);
	assert_int_equal(lg_arena_out(&a, 1)[a.out_cap - 1], 0);
	assert_int_equal(lg_arena_out(&a, 0)[a.out_cap - 1], 0xa5);
	assert_int_equal(lg_arena_in(&a, 2)[0], 0x5a);
	lg_arena_in(&a, 1)[0] = 1;
	assert_int_equal(a.hdr->magic, LG_ARENA_MAGIC);
	assert_true(blocks(a.fd) > b2);
	lg_arena_destroy(&a);
}

/* lg_arena_keep backs the start of every input region at once (the request views' pages) and
 * release_pages leaves it: a loop worker writes a view there without fallocate(2). */
static void
test_keep(void **state)
{
	struct lg_arena a;
	uint64_t b0, b1;

	assert_int_equal(lg_arena_create(&a, 3, 1, MIB, MIB), 0);
	b0 = blocks(a.fd);
	assert_int_equal(lg_arena_keep(&a, 5000), 0);
	assert_int_equal(a.keep, 2 * LG_PAGE);
	b1 = blocks(a.fd);
	assert_true(b1 >= b0 + 3 * 2 * LG_PAGE / 512 && b1 <= b0 + 3 * 3 * LG_PAGE / 512);
	for (uint32_t i = 0; i < 3; i++)
		memset(lg_arena_in(&a, i), 0x5a, a.in_cap);
	assert_int_equal(lg_arena_release_pages(&a, 1), 0);
	/* the kept pages of slot 1 still hold their bytes; the rest of it is a hole again (asked
	 * before reading it: reading a hole through a shared mapping backs a page) */
	assert_int_equal(lseek(a.fd, (off_t)lg_arena_in_off(&a, 1), SEEK_DATA),
	    (off_t)lg_arena_in_off(&a, 1));
	assert_int_equal(lseek(a.fd, (off_t)lg_arena_in_off(&a, 1), SEEK_HOLE),
	    (off_t)(lg_arena_in_off(&a, 1) + 2 * LG_PAGE));
	assert_int_equal(lg_arena_in(&a, 1)[2 * LG_PAGE - 1], 0x5a);
	assert_int_equal(lg_arena_in(&a, 1)[2 * LG_PAGE], 0);
	errno = 0;
	assert_int_equal(lg_arena_keep(&a, a.in_cap + 1), -1);
	assert_int_equal(errno, EINVAL);
	lg_arena_destroy(&a);
}

/* fallocate(2) backs the range without writing: blocks appear before any store, a second call
 * on backed pages succeeds, the data written afterwards is kept, and ranges outside the arena or
 * not page-aligned are EINVAL. */
static void
test_reserve(void **state)
{
	struct lg_arena a;
	uint64_t b0, b1;

	assert_int_equal(lg_arena_create(&a, 2, 1, MIB, MIB), 0);
	b0 = blocks(a.fd);
	assert_int_equal(lg_arena_reserve(&a, lg_arena_in_off(&a, 1), 100000), 0);
	b1 = blocks(a.fd);
	assert_true(b1 >= b0 + 100000 / 512);            /* rounded up to pages: 25 pages */
	assert_true(b1 <= b0 + 26 * (LG_PAGE / 512));    /* and no more than that */
	memset(lg_arena_in(&a, 1), 0x77, 100000);
	assert_int_equal(blocks(a.fd), b1);              /* writing faulted nothing new in */
	assert_int_equal(lg_arena_reserve(&a, lg_arena_in_off(&a, 1), 100000), 0);
	assert_int_equal(lg_arena_in(&a, 1)[99999], 0x77);
	assert_int_equal(lg_arena_reserve(&a, lg_arena_out_off(&a, 1), 0), 0);
	errno = 0;
	/* the last output region, its guard page, and one byte past the arena */
	assert_int_equal(lg_arena_reserve(&a, lg_arena_out_off(&a, 1), a.out_cap + LG_PAGE + 1),
	    -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lg_arena_reserve(&a, lg_arena_in_off(&a, 1) + 1, 10), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lg_arena_reserve(&a, a.size, 1), -1);
	assert_int_equal(errno, EINVAL);
	lg_arena_destroy(&a);
}

/* Writing one byte past an output region faults on its guard page (in any process forked from
 * the creator) instead of reaching the next slot's input region. */
/* The memory budget (issue 18): charges are bounded by shm_budget, counted once per page a
 * slot may back, given back by lg_arena_uncharge, and rebuilt from the slots by a recount. */
static void
test_charge(void **state)
{
	struct lg_arena a;
	_Atomic uint64_t *charged;

	(void)state;
	assert_int_equal(lg_arena_create(&a, 3, 1, 4 * MIB, 4 * MIB), 0);
	charged = &a.master->shm_charged;
	/* as created: no bound, charges only counted */
	assert_int_equal(atomic_load(&a.master->shm_budget), UINT64_MAX);
	assert_int_equal(lg_arena_charge_in(&a, 0, 3 * MIB), 0);
	assert_int_equal(atomic_load(charged), 3 * MIB);
	lg_arena_uncharge(&a, 0);
	assert_int_equal(atomic_load(charged), 0);

	assert_int_equal(lg_arena_keep(&a, 2 * LG_PAGE), 0);
	atomic_store(&a.master->shm_budget, 5 * MIB);
	/* the kept view is paid for already; the rest rounds up to pages */
	assert_int_equal(lg_arena_charge_in(&a, 0, LG_PAGE), 0);
	assert_int_equal(atomic_load(charged), 0);
	assert_int_equal(lg_arena_charge_in(&a, 0, 2 * MIB + 1), 0);
	assert_int_equal(atomic_load(charged), 2 * MIB + LG_PAGE - 2 * LG_PAGE);
	/* asking again for what the slot holds costs nothing; more costs the difference */
	assert_int_equal(lg_arena_charge_in(&a, 0, MIB), 0);
	assert_int_equal(lg_arena_charge_out(&a, 0, MIB), 0);
	assert_int_equal(atomic_load(charged), 3 * MIB - LG_PAGE);
	/* past the budget: ENOMEM, nothing charged */
	errno = 0;
	assert_int_equal(lg_arena_charge_in(&a, 1, 3 * MIB), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(atomic_load(charged), 3 * MIB - LG_PAGE);
	assert_int_equal(a.slots[1].charged, 0);
	assert_int_equal(lg_arena_charge_out(&a, 1, 2 * MIB), 0); /* exactly to the budget */
	assert_int_equal(atomic_load(charged), 5 * MIB - LG_PAGE);
	errno = 0;
	assert_int_equal(lg_arena_charge_out(&a, 2, 2 * LG_PAGE), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(lg_arena_charge_in(&a, 0, 5 * MIB), -1); /* past the region */
	assert_int_equal(errno, EINVAL);
	/* a charge leaked by a process killed before it reached its slot is recounted away */
	atomic_fetch_add(charged, 7 * LG_PAGE);
	lg_arena_recount(&a);
	assert_int_equal(atomic_load(charged), 5 * MIB - LG_PAGE);
	lg_arena_uncharge(&a, 0);
	assert_int_equal(atomic_load(charged), 2 * MIB);
	assert_true(a.slots[0].charged == 0 && a.slots[0].in_charged == 0);
	assert_int_equal(lg_arena_charge_out(&a, 2, 2 * LG_PAGE), 0); /* room again */
	/* a budget of 0: nothing beyond the kept view */
	atomic_store(&a.master->shm_budget, 0);
	assert_int_equal(lg_arena_charge_in(&a, 0, LG_PAGE), 0);
	assert_int_equal(lg_arena_charge_in(&a, 0, 3 * LG_PAGE), -1);
	lg_arena_destroy(&a);
}

static void
test_guard_page_after_output(void **state)
{
	struct lg_arena a;
	int status;
	pid_t pid;

	assert_int_equal(lg_arena_create(&a, 2, 1, MIB, MIB), 0);
	assert_int_equal(lg_arena_reserve(&a, lg_arena_in_off(&a, 1), LG_PAGE), 0);
	lg_arena_in(&a, 1)[0] = 0x11;
	assert_true(lg_arena_in(&a, 1) >= lg_arena_out(&a, 0) + a.out_cap + LG_PAGE);
	if ((pid = fork()) == 0) {
		signal(SIGSEGV, SIG_DFL);                 /* not cmocka's handler */
		lg_arena_out(&a, 0)[a.out_cap - 1] = 1;   /* the last byte is the region's */
		volatile unsigned char *past = lg_arena_out(&a, 0) + a.out_cap;
		for (uint64_t i = 0; i < LG_PAGE + 1; i++)
			past[i] = 0x22;                    /* a sequential overrun */
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
	assert_int_equal(lg_arena_in(&a, 1)[0], 0x11);
	lg_arena_destroy(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_destroy),
		cmocka_unit_test(test_guard_page_after_output),
		cmocka_unit_test(test_destroy_zeroed_keeps_fd0),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_regions_writable),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_size_matches_create),
		cmocka_unit_test(test_nslots_zero),
		cmocka_unit_test(test_failure_leaks_no_fd),
		cmocka_unit_test(test_shared_across_fork),
		cmocka_unit_test(test_release_pages),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_charge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
