/* Unit tests for cpupool/jobs.c: the job kinds a compute process runs.
 *
 * The heavy loop is checked against its closed form rather than a second copy of the loop, and
 * compression against libzstd's own decoder, so neither check shares code with what it tests.
 * Output regions carry canaries on both sides: a job may write out_cap bytes and no more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include <cmocka.h>

#include "cpupool/jobs.h"

#define CANARY 0xA5
#define GUARD  64 /* canary bytes each side of an output region */

/* x = sum of 7*i for i < n, reduced mod 1000003 at every step in the job; reduction commutes
 * with addition, so the sum is 7 * n(n-1)/2 mod 1000003. 128-bit for n up to the job's limit. */
static uint64_t
heavy_closed_form(uint64_t n)
{
	unsigned __int128 s = (unsigned __int128)n * (n ? n - 1 : 0) / 2;

	return (uint64_t)(s * 7 % 1000003);
}

/* An output region of cap bytes with canaries around it; free with out_free. */
static unsigned char *
out_alloc(size_t cap)
{
	unsigned char *b = malloc(cap + 2 * GUARD);

	assert_non_null(b);
	memset(b, CANARY, cap + 2 * GUARD);
	return b + GUARD;
}

static void
out_free(unsigned char *out, size_t cap)
{
	for (size_t i = 0; i < GUARD; i++) {
		assert_int_equal(out[-1 - (ptrdiff_t)i], CANARY);
		assert_int_equal(out[cap + i], CANARY);
	}
	free(out - GUARD);
}

static void
test_heavy_values(void **state)
{
	static const uint64_t ns[] = { 0, 1, 2, 3, 1000, 123457 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		assert_int_equal(lg_jobs_heavy(ns[i]), heavy_closed_form(ns[i]));
	assert_int_equal(lg_jobs_heavy(0), 0);
	assert_int_equal(lg_jobs_heavy(3), 21); /* 0 + 7 + 14 */
}

/* Values published with the Node.js and Python comparisons; a change here would make the
 * benchmark compare different work. */
static void
test_heavy_known(void **state)
{
	assert_int_equal(lg_jobs_heavy(1000000), 42);
	assert_int_equal(heavy_closed_form(1000000), 42);
	assert_int_equal(lg_jobs_heavy(LG_HEAVY_DEFAULT_ITERATIONS), 114030);
	assert_int_equal(heavy_closed_form(LG_HEAVY_DEFAULT_ITERATIONS), 114030);
}

static void
test_run_heavy(void **state)
{
	unsigned char *out = out_alloc(8);
	struct lg_job j = { .in = NULL, .in_len = 0, .out = out, .out_cap = 8, .arg = 123457 };
	uint64_t x;

	j.out_len = 99;
	assert_int_equal(lg_jobs_run(LG_KIND_HEAVY, &j), LG_JOB_OK);
	assert_int_equal(j.out_len, 8);
	memcpy(&x, out, sizeof(x));
	assert_int_equal(x, heavy_closed_form(123457));
	out_free(out, 8);

	/* A larger region still gets exactly 8 bytes. */
	out = out_alloc(64);
	j.out = out;
	j.out_cap = 64;
	j.arg = 1000000;
	assert_int_equal(lg_jobs_run(LG_KIND_HEAVY, &j), LG_JOB_OK);
	assert_int_equal(j.out_len, 8);
	memcpy(&x, out, sizeof(x));
	assert_int_equal(x, 42);
	for (size_t i = 8; i < 64; i++)
		assert_int_equal(out[i], CANARY);
	out_free(out, 64);
}

static void
test_run_heavy_bad_input(void **state)
{
	unsigned char *out = out_alloc(8);
	struct lg_job j = { .out = out, .out_cap = 8 };

	/* Past the limit: refused before a single iteration (LG_HEAVY_MAX_ITERATIONS + 1 would
	 * otherwise run for hours). */
	j.arg = LG_HEAVY_MAX_ITERATIONS + 1;
	j.out_len = 99;
	assert_int_equal(lg_jobs_run(LG_KIND_HEAVY, &j), LG_JOB_BAD_INPUT);
	assert_int_equal(j.out_len, 0);
	j.arg = UINT64_MAX;
	assert_int_equal(lg_jobs_run(LG_KIND_HEAVY, &j), LG_JOB_BAD_INPUT);
	/* No room for the 8-byte result. */
	j.arg = 10;
	j.out_cap = 7;
	assert_int_equal(lg_jobs_run(LG_KIND_HEAVY, &j), LG_JOB_BAD_INPUT);
	assert_int_equal(j.out_len, 0);
	out_free(out, 8);
}

static void
test_run_bad_kind(void **state)
{
	static const uint32_t kinds[] = { 0, LG_KIND_MAX, 99, UINT32_MAX };
	unsigned char *out = out_alloc(16);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct lg_job j = { .out = out, .out_cap = 16, .arg = 1, .out_len = 99 };

		assert_int_equal(lg_jobs_run(kinds[i], &j), LG_JOB_BAD_INPUT);
		assert_int_equal(j.out_len, 0);
	}
	for (size_t i = 0; i < 16; i++)
		assert_int_equal(out[i], CANARY);
	out_free(out, 16);
}

/* Compresses len bytes at level with an output region of compress_bound bytes, then checks
 * the frame with ZSTD_decompress: it declares and decodes to exactly the input. */
static void
round_trip(const unsigned char *in, size_t len, int level)
{
	size_t cap = (size_t)lg_jobs_compress_bound(len);
	unsigned char *out = out_alloc(cap);
	unsigned char *back = malloc(len + 1);
	struct lg_job j = { .in = in, .in_len = len, .out = out, .out_cap = cap, .arg = (uint64_t)level };
	size_t n;

	assert_non_null(back);
	assert_int_equal(lg_jobs_run(LG_KIND_COMPRESS, &j), LG_JOB_OK);
	assert_true(j.out_len > 0);
	assert_true(j.out_len <= cap);
	assert_int_equal(ZSTD_getFrameContentSize(out, j.out_len), len);
	assert_int_equal(ZSTD_findFrameCompressedSize(out, j.out_len), j.out_len);
	/* One byte of room more than needed: a longer decode would show. */
	n = ZSTD_decompress(back, len + 1, out, j.out_len);
	assert_false(ZSTD_isError(n));
	assert_int_equal(n, len);
	if (len > 0)
		assert_memory_equal(back, in, len);
	free(back);
	out_free(out, cap);
}

/* Reproducible input: xorshift64 noise, with every other 4 KiB block English-like text, so both
 * the entropy coder and the match finder have work. */
static unsigned char *
mixed_input(size_t len)
{
	static const char text[] = "The quick brown fox jumps over the lazy dog; "
	    "pack my box with five dozen liquor jugs. ";
	unsigned char *b = malloc(len ? len : 1);
	uint64_t s = 0x9E3779B97F4A7C15ull;

	assert_non_null(b);
	for (size_t i = 0; i < len; i++) {
		if ((i / 4096) % 2 == 0) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			b[i] = (unsigned char)s;
		} else {
			b[i] = (unsigned char)text[i % (sizeof(text) - 1)];
		}
	}
	return b;
}

static void
test_compress_round_trip(void **state)
{
	static const int levels[] = { LG_COMPRESS_MIN_LEVEL, LG_COMPRESS_DEFAULT_LEVEL, 19 };
	const char *small = "hello hello hello hello hello";
	size_t big = 1u << 20;
	unsigned char *in = mixed_input(big);

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		round_trip((const unsigned char *)small, strlen(small), levels[i]);
		round_trip(in, big, levels[i]);
	}
	free(in);
}

/* An empty body is a valid input: an empty frame, with in allowed to be NULL. */
static void
test_compress_empty(void **state)
{
	static const int levels[] = { 1, 3, 19 };
	unsigned char dummy[1] = { 0 };

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		size_t cap = (size_t)lg_jobs_compress_bound(0);
		unsigned char *out = out_alloc(cap);
		struct lg_job j = { .in = NULL, .in_len = 0, .out = out, .out_cap = cap,
		    .arg = (uint64_t)levels[i] };
		unsigned char back[1];

		assert_int_equal(lg_jobs_run(LG_KIND_COMPRESS, &j), LG_JOB_OK);
		assert_true(j.out_len > 0);
		assert_int_equal(ZSTD_getFrameContentSize(out, j.out_len), 0);
		assert_int_equal(ZSTD_decompress(back, sizeof(back), out, j.out_len), 0);
		out_free(out, cap);
		round_trip(dummy, 0, levels[i]);
	}
}

static void
test_compress_bad_level(void **state)
{
	static const uint64_t levels[] = { 0, LG_COMPRESS_MAX_LEVEL + 1, 22,
		(uint64_t)1 << 32, UINT64_MAX };
	const char *in = "data";
	unsigned char *out = out_alloc(256);

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		struct lg_job j = { .in = (const unsigned char *)in, .in_len = 4, .out = out,
		    .out_cap = 256, .arg = levels[i], .out_len = 99 };

		assert_int_equal(lg_jobs_run(LG_KIND_COMPRESS, &j), LG_JOB_BAD_INPUT);
		assert_int_equal(j.out_len, 0);
	}
	for (size_t i = 0; i < 256; i++)
		assert_int_equal(out[i], CANARY);
	out_free(out, 256);
}

/* Output that does not fit is the kind failing (500), not bad input, and nothing is written
 * past the region. */
static void
test_compress_too_small(void **state)
{
	size_t len = 64 * 1024;
	unsigned char *in = mixed_input(len);
	static const size_t caps[] = { 0, 1, 16, 1024 };

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		unsigned char *out = out_alloc(caps[i]);
		struct lg_job j = { .in = in, .in_len = len, .out = out, .out_cap = caps[i],
		    .arg = 3, .out_len = 99 };

		assert_int_equal(lg_jobs_run(LG_KIND_COMPRESS, &j), LG_JOB_ERROR);
		assert_int_equal(j.out_len, 0);
		out_free(out, caps[i]);
	}
	/* The context survives a failure: the next job in the process still works. */
	round_trip(in, len, 3);
	free(in);
}

static void
test_compress_bound(void **state)
{
	static const uint64_t lens[] = { 0, 1, 100, 4096, 1u << 20, 64u << 20 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		assert_true(lg_jobs_compress_bound(lens[i]) >= lens[i]);
		assert_int_equal(lg_jobs_compress_bound(lens[i]), ZSTD_compressBound(lens[i]));
	}
	assert_true(lg_jobs_compress_bound(0) > 0); /* even an empty frame has a header */
}

/* Incompressible input at the bound fits: the bound is what output regions are sized by. */
static void
test_compress_bound_suffices(void **state)
{
	size_t len = 256 * 1024;
	unsigned char *in = malloc(len);
	uint64_t s = 88172645463325252ull;

	assert_non_null(in);
	for (size_t i = 0; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		in[i] = (unsigned char)(s >> 24);
	}
	round_trip(in, len, 1);
	round_trip(in, len, 19);
	free(in);
}

static void
test_names(void **state)
{
	assert_string_equal(lg_jobs_name(LG_KIND_HEAVY), "heavy");
	assert_string_equal(lg_jobs_name(LG_KIND_COMPRESS), "compress");
	assert_string_equal(lg_jobs_name(0), "unknown");
	assert_string_equal(lg_jobs_name(LG_KIND_MAX), "unknown");
	assert_string_equal(lg_jobs_name(UINT32_MAX), "unknown");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heavy_values),
		cmocka_unit_test(test_heavy_known),
		cmocka_unit_test(test_run_heavy),
		cmocka_unit_test(test_run_heavy_bad_input),
		cmocka_unit_test(test_run_bad_kind),
		cmocka_unit_test(test_compress_round_trip),
		cmocka_unit_test(test_compress_empty),
		cmocka_unit_test(test_compress_bad_level),
		cmocka_unit_test(test_compress_too_small),
		cmocka_unit_test(test_compress_bound),
		cmocka_unit_test(test_compress_bound_suffices),
		cmocka_unit_test(test_names),
	};

	alarm(10); /* watchdog: a job that never returns fails the run instead of hanging it */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
