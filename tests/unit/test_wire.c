/* Unit tests for shm/wire.c: the msgpack channel headers.
 *
 * Every decode reads from a heap copy of exactly the bytes under test, so ASan reports any read
 * past the datagram. Hostile headers are built with msgpack-c's own packer (and by hand where a
 * packer would not produce the bytes), so the tests do not share the encoder under test. */
#include <errno.h>
#include <msgpack.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/wire_assert.h"

#include "shm/arena.h"
#include "shm/wire.h"

/* Element counts per type, including version and type (shm/wire.h). */
#define JOB_N  13
#define DONE_N 8
#define KILL_N 4
#define RETIRE_N 3

static int
decode_exact(const void *src, size_t len, struct lg_msg *m)
{
	char *copy = malloc(len ? len : 1);
	int rc, saved;

	assert_non_null(copy);
	memcpy(copy, src, len);
	rc = lg_wire_decode(copy, len, m);
	saved = errno;
	free(copy);
	errno = saved;
	return rc;
}

/* A message of type t whose own fields are all v32 (32-bit) or v64 (64-bit), others zero. */
static struct lg_msg
filled(uint32_t t, uint32_t v32, uint64_t v64)
{
	struct lg_msg m;

	memset(&m, 0, sizeof(m));
	m.type = t;
	m.gen = v32;
	if (t != LG_MSG_RETIRE)
		m.slot = v32;
	if (t == LG_MSG_JOB) {
		m.kind = m.owner = v32;
		m.in_off = m.in_len = m.out_off = m.out_cap = v64;
		m.arg = m.deadline_ns = m.enqueue_ns = v64;
	} else if (t == LG_MSG_DONE) {
		m.status = v32;
		m.out_len = m.queue_ns = m.run_ns = v64;
	}
	return m;
}

static void
round_trip(const struct lg_msg *m)
{
	char buf[LG_WIRE_MAX];
	struct lg_msg out;
	int n = lg_wire_encode(m, buf, sizeof(buf));

	assert_true(n > 0 && n <= LG_WIRE_MAX);
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(decode_exact(buf, (size_t)n, &out), 0);
	assert_msg_equal(&out, m);
}

static void
test_round_trip_edges(void **state)
{
	static const uint32_t types[] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE };
	static const struct { uint32_t v32; uint64_t v64; } vals[] = {
		{ 0, 0 }, { 1, 1 }, { 127, 127 }, { 128, 128 }, { 255, 256 }, { 65535, 65536 },
		{ UINT32_MAX - 1, (uint64_t)UINT32_MAX + 1 }, { UINT32_MAX, UINT64_MAX },
	};

	for (size_t t = 0; t < 4; t++)
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			struct lg_msg m = filled(types[t], vals[i].v32, vals[i].v64);

			round_trip(&m);
		}
}

static void
test_round_trip_distinct_fields(void **state)
{
	/* Distinct values catch two fields swapped in the positional layout. */
	struct lg_msg job = { .type = LG_MSG_JOB, .slot = 1, .gen = 2, .kind = 3, .owner = 4,
		.in_off = 5, .in_len = 6, .out_off = 7, .out_cap = 8, .arg = 9,
		.deadline_ns = 10, .enqueue_ns = 11 };
	struct lg_msg done = { .type = LG_MSG_DONE, .slot = 21, .gen = 22, .status = 23,
		.out_len = 24, .queue_ns = 25, .run_ns = 26 };
	struct lg_msg kill = { .type = LG_MSG_KILL, .slot = 31, .gen = 32 };
	struct lg_msg retire = { .type = LG_MSG_RETIRE, .gen = 41 };
	char buf[LG_WIRE_MAX];

	struct lg_msg wake = { .type = LG_MSG_WAKE, .slot = 41, .gen = 42, .status = 200,
		.out_len = 44, .arg = 1ull << 40, .queue_ns = 46, .run_ns = 47 };
	struct lg_msg unwanted = { .type = LG_MSG_UNWANTED, .slot = 51, .gen = 52 };

	round_trip(&job);
	round_trip(&done);
	round_trip(&kill);
	round_trip(&retire);
	/* RETIRE is [1, 4, seq]: fixarray(3) and three positive fixints, no slot. */
	retire.slot = 7;
	assert_int_equal(lg_wire_encode(&retire, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "\x93\x01\x04\x29", 4);
	round_trip(&wake);
	round_trip(&unwanted);
}

static void
test_encode_own_fields_only(void **state)
{
	struct lg_msg m = filled(LG_MSG_JOB, 77, 88), out;
	char buf[LG_WIRE_MAX];
	int n;

	m.type = LG_MSG_KILL;
	m.status = 5;
	m.out_len = 6;
	n = lg_wire_encode(&m, buf, sizeof(buf));
	/* fixarray(4), 1, 3, 77, 88 as positive fixints: five bytes, nothing of JOB/DONE. */
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "\x94\x01\x03\x4d\x4d", 5);
	assert_int_equal(decode_exact(buf, (size_t)n, &out), 0);
	assert_int_equal(out.kind, 0);
	assert_int_equal(out.in_off, 0);
	assert_int_equal(out.status, 0);
	assert_int_equal(out.out_len, 0);
}

static void
test_encode_unknown_type(void **state)
{
	static const uint32_t bad[] = { 0, 7, 255, UINT32_MAX };
	char buf[LG_WIRE_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lg_msg m = filled(LG_MSG_JOB, 1, 1);

		m.type = bad[i];
		errno = 0;
		assert_int_equal(lg_wire_encode(&m, buf, sizeof(buf)), -1);
		assert_int_equal(errno, EINVAL);
	}
}

static void
test_encode_enospc(void **state)
{
	static const uint32_t types[] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE };

	for (size_t t = 0; t < 4; t++) {
		struct lg_msg m = filled(types[t], UINT32_MAX, UINT64_MAX);
		char buf[LG_WIRE_MAX + 16];
		int full = lg_wire_encode(&m, buf, LG_WIRE_MAX);

		assert_true(full > 0);
		for (size_t cap = 0; cap < (size_t)full; cap++) {
			memset(buf, 0xee, sizeof(buf));
			errno = 0;
			assert_int_equal(lg_wire_encode(&m, buf, cap), -1);
			assert_int_equal(errno, ENOSPC);
			for (size_t k = cap; k < sizeof(buf); k++)
				assert_int_equal((unsigned char)buf[k], 0xee);
		}
		assert_int_equal(lg_wire_encode(&m, buf, (size_t)full), full);
	}
}

static void
test_wire_max_enough(void **state)
{
	struct lg_msg m = filled(LG_MSG_JOB, UINT32_MAX, UINT64_MAX);
	char buf[1024];
	int n = lg_wire_encode(&m, buf, sizeof(buf));

	/* 1 (fixarray) + 2 (version, type) + 4 x 5 (uint 32) + 7 x 9 (uint 64). */
	assert_int_equal(n, 86);
	assert_true(n <= LG_WIRE_MAX);
	assert_int_equal(lg_wire_encode(&m, buf, LG_WIRE_MAX), n);
}

static void
test_truncations(void **state)
{
	static const uint32_t types[] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE };

	for (size_t t = 0; t < 4; t++)
		for (int big = 0; big < 2; big++) {
			struct lg_msg m = big ? filled(types[t], UINT32_MAX, UINT64_MAX) :
			    filled(types[t], 0, 0), out;
			char buf[LG_WIRE_MAX];
			int n = lg_wire_encode(&m, buf, sizeof(buf));

			assert_true(n > 0);
			for (size_t len = 0; len < (size_t)n; len++) {
				errno = 0;
				assert_int_equal(decode_exact(buf, len, &out), -1);
				assert_int_equal(errno, EBADMSG);
			}
		}
}

static void
test_trailing_bytes(void **state)
{
	struct lg_msg m = filled(LG_MSG_DONE, 3, 4), out;
	char buf[2 * LG_WIRE_MAX];
	int n = lg_wire_encode(&m, buf, LG_WIRE_MAX), n2;

	buf[n] = 0;
	errno = 0;
	assert_int_equal(decode_exact(buf, (size_t)n + 1, &out), -1);
	assert_int_equal(errno, EBADMSG);
	/* Two whole headers in one datagram are not two messages. */
	n2 = lg_wire_encode(&m, buf + n, LG_WIRE_MAX);
	errno = 0;
	assert_int_equal(decode_exact(buf, (size_t)(n + n2), &out), -1);
	assert_int_equal(errno, EBADMSG);
}

/* Hostile headers, built with msgpack-c's sbuffer so the encoder under test is not involved. */
enum el_kind { EL_UINT, EL_STR, EL_NEG, EL_FLOAT, EL_DOUBLE, EL_NIL, EL_BOOL, EL_ARRAY, EL_MAP,
	EL_BIN, EL_EXT, EL_KINDS };

struct el {
	enum el_kind kind;
	uint64_t v;
};

static void
pack_el(msgpack_packer *pk, const struct el *e)
{
	switch (e->kind) {
	case EL_UINT: msgpack_pack_uint64(pk, e->v); break;
	case EL_STR: msgpack_pack_str_with_body(pk, "1", 1); break;
	case EL_NEG: msgpack_pack_int64(pk, -1); break;
	case EL_FLOAT: msgpack_pack_float(pk, 1.0f); break;
	case EL_DOUBLE: msgpack_pack_double(pk, 1.0); break;
	case EL_NIL: msgpack_pack_nil(pk); break;
	case EL_BOOL: msgpack_pack_true(pk); break;
	case EL_ARRAY: msgpack_pack_array(pk, 1); msgpack_pack_uint64(pk, 1); break;
	case EL_MAP:
		msgpack_pack_map(pk, 1); msgpack_pack_uint64(pk, 1); msgpack_pack_uint64(pk, 1);
		break;
	case EL_BIN: msgpack_pack_bin_with_body(pk, "1", 1); break;
	case EL_EXT: msgpack_pack_ext_with_body(pk, "1", 1, 1); break;
	default: fail();
	}
}

/* Packs an array of n elements and decodes it; returns decode's result, errno preserved. */
static int
decode_els(const struct el *els, size_t n)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct lg_msg out;
	int rc, saved;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, n);
	for (size_t i = 0; i < n; i++)
		pack_el(&pk, &els[i]);
	errno = 0;
	rc = decode_exact(sb.data, sb.size, &out);
	saved = errno;
	msgpack_sbuffer_destroy(&sb);
	errno = saved;
	return rc;
}

/* A valid element list for type t, small values. */
static size_t
valid_els(uint32_t t, struct el *els)
{
	size_t n = t == LG_MSG_JOB ? JOB_N : t == LG_MSG_DONE ? DONE_N : t == LG_MSG_KILL ? KILL_N :
	    RETIRE_N;

	for (size_t i = 0; i < n; i++)
		els[i] = (struct el){ EL_UINT, i };
	els[0].v = LG_WIRE_VERSION;
	els[1].v = t;
	return n;
}

static void
test_hostile_builder_accepts_valid(void **state)
{
	static const uint32_t types[] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE };
	struct el els[JOB_N + 1];

	/* The builder itself makes good headers, so the rejections below are for the reason
	 * each test names. */
	for (size_t t = 0; t < 4; t++)
		assert_int_equal(decode_els(els, valid_els(types[t], els)), 0);
}

static void
test_wrong_version(void **state)
{
	static const uint64_t bad[] = { 0, 2, 255, UINT32_MAX, UINT64_MAX };
	struct el els[JOB_N];
	size_t n = valid_els(LG_MSG_JOB, els);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		els[0].v = bad[i];
		assert_int_equal(decode_els(els, n), -1);
		assert_int_equal(errno, EPROTO);
		/* Another version may have another shape: EPROTO whatever follows. */
		assert_int_equal(decode_els(els, 1), -1);
		assert_int_equal(errno, EPROTO);
		assert_int_equal(decode_els(els, 7), -1);
		assert_int_equal(errno, EPROTO);
	}
}

static void
test_unknown_type(void **state)
{
	static const uint64_t bad[] = { 0, 7, 255, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
		(uint64_t)UINT32_MAX + LG_MSG_JOB, UINT64_MAX };
	struct el els[JOB_N];
	size_t n = valid_els(LG_MSG_JOB, els);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		els[1].v = bad[i];
		assert_int_equal(decode_els(els, n), -1);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(decode_els(els, 2), -1);
		assert_int_equal(errno, EINVAL);
	}
}

static void
test_wrong_counts(void **state)
{
	static const uint32_t types[] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE };
	struct el els[JOB_N + 2];

	for (size_t t = 0; t < 4; t++) {
		size_t n = valid_els(types[t], els);

		els[n] = els[n + 1] = (struct el){ EL_UINT, 0 };
		for (size_t k = 0; k <= n + 1; k++) {
			if (k == n)
				continue;
			assert_int_equal(decode_els(els, k), -1);
			assert_int_equal(errno, EBADMSG);
		}
	}
}

static void
test_wrong_element_types(void **state)
{
	static const uint32_t types[] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE };
	struct el els[JOB_N];

	for (size_t t = 0; t < 4; t++) {
		size_t n = valid_els(types[t], els);

		for (size_t pos = 0; pos < n; pos++)
			for (int k = EL_STR; k < EL_KINDS; k++) {
				struct el keep = els[pos];

				els[pos] = (struct el){ (enum el_kind)k, 0 };
				assert_int_equal(decode_els(els, n), -1);
				assert_int_equal(errno, EBADMSG);
				els[pos] = keep;
			}
	}
}

static void
test_overflow_32(void **state)
{
	struct el els[JOB_N];
	size_t n;

	/* JOB: slot, gen, kind, owner are 32-bit (elements 2-5); the rest take 64 bits. */
	n = valid_els(LG_MSG_JOB, els);
	for (size_t pos = 2; pos < n; pos++) {
		els[pos].v = (uint64_t)UINT32_MAX + 1;
		assert_int_equal(decode_els(els, n), pos <= 5 ? -1 : 0);
		if (pos <= 5)
			assert_int_equal(errno, EBADMSG);
		els[pos].v = UINT32_MAX;
		assert_int_equal(decode_els(els, n), 0);
	}
	/* DONE: slot, gen, status are 32-bit (elements 2-4). */
	n = valid_els(LG_MSG_DONE, els);
	for (size_t pos = 2; pos < n; pos++) {
		els[pos].v = UINT64_MAX;
		assert_int_equal(decode_els(els, n), pos <= 4 ? -1 : 0);
		els[pos].v = 0;
	}
	n = valid_els(LG_MSG_KILL, els);
	els[3].v = (uint64_t)UINT32_MAX + 1;
	assert_int_equal(decode_els(els, n), -1);
	assert_int_equal(errno, EBADMSG);
}

static void
test_not_an_array(void **state)
{
	static const struct { const char *b; size_t n; } cases[] = {
		{ "", 0 },                      /* empty datagram */
		{ "\x01", 1 },                  /* positive fixint */
		{ "\xc0", 1 },                  /* nil */
		{ "\x81\x01\x01", 3 },          /* fixmap {1: 1} */
		{ "\xa3" "abc", 4 },            /* fixstr */
		{ "\x90", 1 },                  /* empty array */
		{ "\xdc\x00", 2 },              /* array 16 with half its length */
		{ "\xdd\x00\x00\x00", 4 },      /* array 32 with part of its length */
		{ "\xc1", 1 },                  /* "never used" byte */
	};
	struct lg_msg out;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		errno = 0;
		assert_int_equal(decode_exact(cases[i].b, cases[i].n, &out), -1);
		assert_int_equal(errno, EBADMSG);
	}
}

/* Containers that declare far more entries than the datagram holds: msgpack-c would allocate
 * them up front (hundreds of MiB, or an ASan abort), so they must be refused without that. */
static void
test_huge_declared_counts(void **state)
{
	static const struct { const char *b; size_t n; } cases[] = {
		{ "\xdd\xff\xff\xff\xff", 5 },
		{ "\xdd\x01\x00\x00\x00\x01\x01", 7 },
		{ "\xdc\xff\xff\x01\x01", 5 },
		{ "\x94\x01\x03\xdd\xff\xff\xff\xff", 8 },          /* nested array 32 */
		{ "\x94\x01\x03\xdf\xff\xff\xff\xff", 8 },          /* nested map 32 */
		{ "\x94\x01\x03\x01\xde\xff\xff", 7 },              /* nested map 16 */
		{ "\x94\xdd\xff\xff\xff\xff", 6 },                  /* in the version position */
	};
	struct lg_msg out;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		errno = 0;
		assert_int_equal(decode_exact(cases[i].b, cases[i].n, &out), -1);
		assert_int_equal(errno, EBADMSG);
	}
}

/* The spec lets a peer use any format of the Integer family and a longer array header than
 * needed; such headers mean the same message and are accepted. */
static void
test_non_shortest_formats(void **state)
{
	/* KILL [1, 3, 5, 6]: array 16, version as uint 64, type as int 8, slot as uint 16. */
	static const char b[] = "\xdc\x00\x04" "\xcf\0\0\0\0\0\0\0\x01" "\xd0\x03" "\xcd\x00\x05"
	    "\x06";
	struct lg_msg out;

	assert_int_equal(decode_exact(b, sizeof(b) - 1, &out), 0);
	assert_int_equal(out.type, LG_MSG_KILL);
	assert_int_equal(out.slot, 5);
	assert_int_equal(out.gen, 6);
}

static void
test_failed_decode_leaves_msg(void **state)
{
	struct lg_msg m = filled(LG_MSG_JOB, 9, 9), out, before;
	char buf[LG_WIRE_MAX];
	int n = lg_wire_encode(&m, buf, sizeof(buf));

	memset(&out, 0x5a, sizeof(out));
	memcpy(&before, &out, sizeof(out));
	assert_int_equal(decode_exact(buf, (size_t)n - 1, &out), -1);
	assert_memory_equal(&out, &before, sizeof(out));
}

/* lg_wire_check_job against a real arena: 4 slots, 1 MiB regions, 3 loop workers. */
static struct lg_msg
good_job(const struct lg_arena *a, uint32_t slot)
{
	struct lg_msg m = { .type = LG_MSG_JOB, .slot = slot, .gen = 7, .kind = 1, .owner = 2,
		.in_off = lg_arena_in_off(a, slot), .in_len = a->in_cap,
		.out_off = lg_arena_out_off(a, slot), .out_cap = a->out_cap, .arg = 3 };

	return m;
}

static void
expect_erange(const struct lg_msg *m, const struct lg_arena *a)
{
	errno = 0;
	assert_int_equal(lg_wire_check_job(m, a, 3), -1);
	assert_int_equal(errno, ERANGE);
}

static void
test_check_job(void **state)
{
	struct lg_arena a;
	struct lg_msg m;

	assert_int_equal(lg_arena_create(&a, 4, 2, 1 << 20, 1 << 20), 0);
	for (uint32_t i = 0; i < 4; i++) {
		m = good_job(&a, i);
		assert_int_equal(lg_wire_check_job(&m, &a, 3), 0);
		m.in_len = 0;
		assert_int_equal(lg_wire_check_job(&m, &a, 3), 0);
		m.owner = 0;
		assert_int_equal(lg_wire_check_job(&m, &a, 3), 0);
	}
	m = good_job(&a, 1);
	m.slot = 4;
	expect_erange(&m, &a);
	m.slot = UINT32_MAX;
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.slot = 2; /* offsets of slot 1 under slot 2's name */
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.in_off += LG_PAGE;
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.in_off = m.out_off;
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.out_off = lg_arena_in_off(&a, 2);
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.in_len = a.in_cap + 1;
	expect_erange(&m, &a);
	m.in_len = UINT64_MAX;
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.out_cap = a.out_cap - 1;
	expect_erange(&m, &a);
	m.out_cap = a.out_cap + LG_PAGE;
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.owner = 3;
	expect_erange(&m, &a);
	m.owner = UINT32_MAX;
	expect_erange(&m, &a);
	m = good_job(&a, 1);
	m.type = LG_MSG_DONE;
	expect_erange(&m, &a);
	lg_arena_destroy(&a);
}

/* A JOB that survives encode -> decode -> check is what a compute process would run. */
static void
test_check_job_after_round_trip(void **state)
{
	struct lg_arena a;
	struct lg_msg m, out;
	char buf[LG_WIRE_MAX];
	int n;

	assert_int_equal(lg_arena_create(&a, 4, 2, 1 << 20, 1 << 20), 0);
	m = good_job(&a, 3);
	n = lg_wire_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(decode_exact(buf, (size_t)n, &out), 0);
	assert_int_equal(lg_wire_check_job(&out, &a, 3), 0);
	lg_arena_destroy(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_edges),
		cmocka_unit_test(test_round_trip_distinct_fields),
		cmocka_unit_test(test_encode_own_fields_only),
		cmocka_unit_test(test_encode_unknown_type),
		cmocka_unit_test(test_encode_enospc),
		cmocka_unit_test(test_wire_max_enough),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_trailing_bytes),
		cmocka_unit_test(test_hostile_builder_accepts_valid),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_unknown_type),
		cmocka_unit_test(test_wrong_counts),
		cmocka_unit_test(test_wrong_element_types),
		cmocka_unit_test(test_overflow_32),
		cmocka_unit_test(test_not_an_array),
		cmocka_unit_test(test_huge_declared_counts),
		cmocka_unit_test(test_non_shortest_formats),
		cmocka_unit_test(test_failed_decode_leaves_msg),
		cmocka_unit_test(test_check_job),
		cmocka_unit_test(test_check_job_after_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
