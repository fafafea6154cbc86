/* Unit tests for kinds/argon2.c: the /hash and /verify cores.
 *
 * The hash is checked against the reference implementation's published argon2id vector
 * (phc-winner-argon2 src/test.c: "password", "somesalt", t=2, m=2^16, p=1), which the `argon2`
 * command prints for the same input, so the check shares no code path with our encoding.
 * Output buffers carry canaries on both sides: the cores write cap bytes and no more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kinds/argon2.h"

#define CANARY 0xA5
#define GUARD  32

static const char vector[] =
    "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc";
/* Small parameters keep the other tests fast; argon2 needs at least 8 KiB per lane. */
static const struct lg_argon2_params small = { .m_kib = 64, .t = 1, .p = 1 };
static const struct lg_argon2_params limits = { .m_kib = 65536, .t = 4, .p = 4 };

static char *
buf_alloc(size_t cap)
{
	char *b = malloc(cap + 2 * GUARD);

	assert_non_null(b);
	memset(b, CANARY, cap + 2 * GUARD);
	return b + GUARD;
}

static void
buf_free(char *b, size_t cap)
{
	for (size_t i = 0; i < GUARD; i++) {
		assert_int_equal((unsigned char)b[-1 - (ptrdiff_t)i], CANARY);
		assert_int_equal((unsigned char)b[cap + i], CANARY);
	}
	free(b - GUARD);
}

static void
test_hash_reference_vector(void **state)
{
	struct lg_argon2_params p = { .m_kib = 65536, .t = 2, .p = 1 };
	char *out = buf_alloc(LG_ARGON2_PHC_MAX), err[128];
	size_t n = 99;

	assert_int_equal(lg_argon2_hash(&p, "password", 8, (const unsigned char *)"somesalt", 8,
	    out, LG_ARGON2_PHC_MAX, &n, err, sizeof(err)), 0);
	assert_int_equal(n, strlen(vector) + 1);
	assert_memory_equal(out, vector, strlen(vector));
	assert_int_equal(out[n - 1], '\n');
	buf_free(out, LG_ARGON2_PHC_MAX);
}

/* The largest parameters with a 16-byte salt still fit LG_ARGON2_PHC_MAX. */
static void
test_hash_phc_max(void **state)
{
	struct lg_argon2_params p = { .m_kib = 8 * LG_ARGON2_MAX_P, .t = LG_ARGON2_MAX_T,
	    .p = LG_ARGON2_MAX_P };
	unsigned char salt[LG_ARGON2_SALT_LEN] = { 0 };
	char *out = buf_alloc(LG_ARGON2_PHC_MAX), err[128];
	size_t n;

	/* The length depends on the digits, not on the work: hash with t=1 and m=512 KiB, then
	 * add the 3 more digits of t=1000 and the 4 more of m=4194304. */
	p.t = 1;
	assert_int_equal(lg_argon2_hash(&p, "x", 1, salt, sizeof(salt), out, LG_ARGON2_PHC_MAX,
	    &n, err, sizeof(err)), 0);
	assert_true(n + 3 + 4 <= LG_ARGON2_PHC_MAX);
	buf_free(out, LG_ARGON2_PHC_MAX);
}

static void
test_hash_cap_too_small(void **state)
{
	unsigned char salt[LG_ARGON2_SALT_LEN] = { 1 };
	char *out = buf_alloc(40), err[128];
	size_t n = 99;

	assert_int_equal(lg_argon2_hash(&small, "pw", 2, salt, sizeof(salt), out, 40, &n, err,
	    sizeof(err)), 500);
	assert_int_equal(n, 0);
	assert_non_null(strstr(err, "output bytes needed"));
	buf_free(out, 40);
}

static void
test_check_bounds(void **state)
{
	static const struct lg_argon2_params bad[] = {
		{ .m_kib = 64, .t = 1, .p = 0 }, { .m_kib = 64, .t = 0, .p = 1 },
		{ .m_kib = 7, .t = 1, .p = 1 }, { .m_kib = 31, .t = 1, .p = 4 },
		{ .m_kib = LG_ARGON2_MAX_M_KIB + 1, .t = 1, .p = 1 },
		{ .m_kib = 64, .t = LG_ARGON2_MAX_T + 1, .p = 1 },
		{ .m_kib = 8 * 65, .t = 1, .p = LG_ARGON2_MAX_P + 1 },
	};
	struct lg_argon2_params def = { LG_ARGON2_DEFAULT_M_KIB, LG_ARGON2_DEFAULT_T,
	    LG_ARGON2_DEFAULT_P };
	unsigned char salt[LG_ARGON2_SALT_LEN] = { 0 };
	char out[LG_ARGON2_PHC_MAX], err[128];
	size_t n;

	assert_int_equal(lg_argon2_check(&def, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(lg_argon2_check(&bad[i], err, sizeof(err)), -1);
		assert_true(strlen(err) > 0);
		assert_int_equal(lg_argon2_hash(&bad[i], "pw", 2, salt, sizeof(salt), out,
		    sizeof(out), &n, err, sizeof(err)), 400);
	}
	/* A salt shorter than libargon2's 8-byte minimum. */
	assert_int_equal(lg_argon2_hash(&small, "pw", 2, salt, 7, out, sizeof(out), &n, err,
	    sizeof(err)), 400);
}

static void
test_salt_random(void **state)
{
	unsigned char a[LG_ARGON2_SALT_LEN], b[LG_ARGON2_SALT_LEN];

	assert_int_equal(lg_argon2_salt(a, sizeof(a)), 0);
	assert_int_equal(lg_argon2_salt(b, sizeof(b)), 0);
	/* 2^-128 chance of a false failure. */
	assert_memory_not_equal(a, b, sizeof(a));
}

/* body = phc + "\n" + password, in a heap buffer of exactly that size (ASan sees overreads). */
static int
verify(const struct lg_argon2_params *max, const char *phc, size_t phc_len, const void *pw,
    size_t pw_len, int *match, char *err)
{
	size_t len = phc_len + 1 + pw_len;
	char *body = malloc(len);
	int r;

	assert_non_null(body);
	memcpy(body, phc, phc_len);
	body[phc_len] = '\n';
	memcpy(body + phc_len + 1, pw, pw_len);
	r = lg_argon2_verify(max, body, len, match, err, 128);
	free(body);
	return r;
}

static void
test_verify_round_trip(void **state)
{
	static const char pw[] = "pass\nword\0with\r\nbytes"; /* only the first LF splits */
	unsigned char salt[LG_ARGON2_SALT_LEN];
	char out[LG_ARGON2_PHC_MAX], err[128];
	size_t n;
	int match = -1;

	assert_int_equal(lg_argon2_salt(salt, sizeof(salt)), 0);
	assert_int_equal(lg_argon2_hash(&small, pw, sizeof(pw), salt, sizeof(salt), out,
	    sizeof(out), &n, err, sizeof(err)), 0);
	/* The answer's own '\n' is the separator: /hash output + password is a /verify body. */
	assert_int_equal(verify(&limits, out, n - 1, pw, sizeof(pw), &match, err), 0);
	assert_int_equal(match, 1);
	assert_int_equal(verify(&limits, out, n - 1, pw, sizeof(pw) - 1, &match, err), 0);
	assert_int_equal(match, 0);
	assert_int_equal(verify(&limits, out, n - 1, "", 0, &match, err), 0);
	assert_int_equal(match, 0);
	/* A CRLF after the hash is accepted too. */
	out[n - 1] = '\r';
	assert_int_equal(verify(&limits, out, n, pw, sizeof(pw), &match, err), 0);
	assert_int_equal(match, 1);
}

static void
test_verify_reference_vector(void **state)
{
	int match = -1;
	char err[128];

	assert_int_equal(verify(&limits, vector, strlen(vector), "password", 8, &match, err), 0);
	assert_int_equal(match, 1);
	assert_int_equal(verify(&limits, vector, strlen(vector), "passwore", 8, &match, err), 0);
	assert_int_equal(match, 0);
}

/* A stored hash naming more memory, passes or lanes than the route allows is refused before
 * libargon2 allocates anything. */
static void
test_verify_limits(void **state)
{
	static const char *over[] = {
		"$argon2id$v=19$m=65537,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
		"$argon2id$v=19$m=4294967295,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
		"$argon2id$v=19$m=99999999999999999999,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y",
		"$argon2id$v=19$m=1024,t=5,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
		"$argon2id$v=19$m=1024,t=2,p=5$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
	};
	int match = -1;
	char err[128];

	for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		assert_int_equal(verify(&limits, over[i], strlen(over[i]), "password", 8, &match,
		    err), 400);
		assert_non_null(strstr(err, "limits"));
		assert_int_equal(match, 0);
	}
}

static void
test_verify_malformed(void **state)
{
	static const char *bad[] = {
		"", "$argon2i$v=19$m=64,t=1,p=1$c29tZXNhbHQ$AAAA", "$argon2id$v=16$m=64,t=1,p=1$x$y",
		"$argon2id$v=19$m=64,t=1$c29tZXNhbHQ$AAAA", "$argon2id$v=19$m=,t=1,p=1$x$y",
		"$argon2id$v=19$m=64,t=1,p=1", "$argon2id$v=19$m=64,t=1,p=1$!!!$???",
		"$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHQ$", "$argon2id$v=19$t=1,m=64,p=1$x$y",
	};
	int match = -1;
	char err[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(verify(&limits, bad[i], strlen(bad[i]), "pw", 2, &match, err),
		    400);
		assert_int_equal(match, 0);
	}
	/* No line break at all, and a NUL inside the hash line. */
	assert_int_equal(lg_argon2_verify(&limits, vector, strlen(vector), &match, err,
	    sizeof(err)), 400);
	assert_int_equal(lg_argon2_verify(&limits, "$argon2id\0\n", 11, &match, err,
	    sizeof(err)), 400);
	assert_int_equal(lg_argon2_verify(&limits, NULL, 0, &match, err, sizeof(err)), 400);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_reference_vector),
		cmocka_unit_test(test_hash_phc_max),
		cmocka_unit_test(test_hash_cap_too_small),
		cmocka_unit_test(test_check_bounds),
		cmocka_unit_test(test_salt_random),
		cmocka_unit_test(test_verify_round_trip),
		cmocka_unit_test(test_verify_reference_vector),
		cmocka_unit_test(test_verify_limits),
		cmocka_unit_test(test_verify_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
