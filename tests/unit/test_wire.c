/* Unit tests for shm/wire.c: the msgpack channel headers.
 *
 * Every decode reads from a heap copy of exactly the bytes under test, so ASan reports any read
 * past the datagram. Hostile headers are built with msgpack-c's own packer (and by hand where a
 * packer would not produce the bytes), so the tests do not share the encoder under test. */
#include <errno.h>
#include <msgpack.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/wire_assert.h"

#include "shm/arena.h"
#include "shm/slot.h"
#include "shm/wire.h"

/* Element counts per type, including version and type (shm/wire.h). */
#define JOB_N      4
#define DONE_N     4
#define KILL_N     4
#define RETIRE_N   3
#define WAKE_N     9
#define UNWANTED_N 4
#define MAX_N      WAKE_N

#define UPWAKE_N   3
#define NTYPES 7
static const uint32_t types[NTYPES] = { LG_MSG_JOB, LG_MSG_DONE, LG_MSG_KILL, LG_MSG_RETIRE,
	LG_MSG_WAKE, LG_MSG_UNWANTED, LG_MSG_UPWAKE };

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

/* A message of type t whose payload fields are all v32 (32-bit) or v64 (64-bit), the rest of
 * the struct zero. */
static struct lg_msg
filled(uint32_t t, uint32_t v32, uint64_t v64)
{
	struct lg_msg m;

	memset(&m, 0, sizeof(m));
	m.type = t;
	switch (t) {
	case LG_MSG_JOB: m.job = (struct lg_msg_job){ v32, v32 }; break;
	case LG_MSG_DONE: m.done = (struct lg_msg_done){ v32, v32 }; break;
	case LG_MSG_KILL: m.kill = (struct lg_msg_kill){ v32, v32 }; break;
	case LG_MSG_RETIRE: m.retire.seq = v32; break;
	case LG_MSG_WAKE:
		m.wake = (struct lg_msg_wake){ v32, v32, v32, v32, v64, v64, v64 };
		break;
	case LG_MSG_UNWANTED: m.unwanted = (struct lg_msg_unwanted){ v32, v32 }; break;
	case LG_MSG_UPWAKE: m.upwake.upstream = v32; break;
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
	static const struct { uint32_t v32; uint64_t v64; } vals[] = {
		{ 0, 0 }, { 1, 1 }, { 127, 127 }, { 128, 128 }, { 255, 256 }, { 65535, 65536 },
		{ UINT32_MAX - 1, (uint64_t)UINT32_MAX + 1 }, { UINT32_MAX, UINT64_MAX },
	};

	for (size_t t = 0; t < NTYPES; t++)
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			struct lg_msg m = filled(types[t], vals[i].v32, vals[i].v64);

			round_trip(&m);
		}
}

static void
test_round_trip_distinct_fields(void **state)
{
	/* Distinct values catch two fields swapped in the positional layout. */
	struct lg_msg job = { .type = LG_MSG_JOB, .job = { .slot = 1, .gen = 2 } };
	struct lg_msg done = { .type = LG_MSG_DONE, .done = { .slot = 21, .gen = 22 } };
	struct lg_msg kill = { .type = LG_MSG_KILL, .kill = { .slot = 31, .gen = 32 } };
	struct lg_msg retire = { .type = LG_MSG_RETIRE, .retire = { .seq = 41 } };
	struct lg_msg wake = { .type = LG_MSG_WAKE, .wake = { .flight = 41, .flight_gen = 42,
		.http_status = 200, .cache_idx = 44, .cache_word = 1ull << 40, .queue_ns = 46,
		.run_ns = 47 } };
	struct lg_msg unwanted = { .type = LG_MSG_UNWANTED,
		.unwanted = { .flight = 51, .flight_gen = 52 } };
	char buf[LG_WIRE_MAX];

	round_trip(&job);
	round_trip(&done);
	round_trip(&kill);
	round_trip(&retire);
	round_trip(&wake);
	round_trip(&unwanted);
	/* RETIRE is [2, 4, seq]: fixarray(3) and three positive fixints. */
	assert_int_equal(lg_wire_encode(&retire, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "\x93\x02\x04\x29", 4);
	/* JOB is [2, 1, slot, gen]: a doorbell, the job itself is in the slot. */
	assert_int_equal(lg_wire_encode(&job, buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "\x94\x02\x01\x01\x02", 5);
	/* WAKE in declaration order: flight, flight_gen, http_status, cache_idx, cache_word
	 * (uint 64: 0xcf), queue_ns, run_ns. */
	assert_int_equal(lg_wire_encode(&wake, buf, sizeof(buf)), 3 + 2 + 2 + 1 + 9 + 2);
	assert_memory_equal(buf, "\x99\x02\x05\x29\x2a\xcc\xc8\x2c"
	    "\xcf\x00\x00\x01\x00\x00\x00\x00\x00\x2e\x2f", 19);
}

static void
test_encode_own_fields_only(void **state)
{
	struct lg_msg m = filled(LG_MSG_WAKE, 77, 88), out;
	char buf[LG_WIRE_MAX];
	int n;

	/* The union holds a whole WAKE; as a KILL only the kill payload is sent. */
	m.type = LG_MSG_KILL;
	n = lg_wire_encode(&m, buf, sizeof(buf));
	/* fixarray(4), 2, 3, 77, 77 as positive fixints: five bytes, nothing of WAKE. */
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "\x94\x02\x03\x4d\x4d", 5);
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(decode_exact(buf, (size_t)n, &out), 0);
	assert_int_equal(out.kill.slot, 77);
	assert_int_equal(out.kill.gen, 77);
	/* Decoding zeroes what lies outside the payload. */
	assert_int_equal(out.wake.http_status, 0);
	assert_int_equal(out.wake.cache_idx, 0);
	assert_int_equal(out.wake.cache_word, 0);
	assert_int_equal(out.wake.run_ns, 0);
}

static void
test_encode_unknown_type(void **state)
{
	static const uint32_t bad[] = { 0, 8, 255, UINT32_MAX };
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

	for (size_t t = 0; t < NTYPES; t++) {
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
	struct lg_msg m = filled(LG_MSG_WAKE, UINT32_MAX, UINT64_MAX);
	char buf[1024];
	int n = lg_wire_encode(&m, buf, sizeof(buf));

	/* The longest header, WAKE: 1 (fixarray) + 2 (version, type) + 4 x 5 (uint 32) +
	 * 3 x 9 (uint 64). */
	assert_int_equal(n, 50);
	assert_true(n <= LG_WIRE_MAX);
	assert_int_equal(lg_wire_encode(&m, buf, LG_WIRE_MAX), n);
}

static void
test_truncations(void **state)
{

	for (size_t t = 0; t < NTYPES; t++)
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
	    t == LG_MSG_RETIRE ? RETIRE_N : t == LG_MSG_WAKE ? WAKE_N :
	    t == LG_MSG_UPWAKE ? UPWAKE_N : UNWANTED_N;

	for (size_t i = 0; i < n; i++)
		els[i] = (struct el){ EL_UINT, i };
	els[0].v = LG_WIRE_VERSION;
	els[1].v = t;
	return n;
}

static void
test_hostile_builder_accepts_valid(void **state)
{
	struct el els[MAX_N + 1];

	/* The builder itself makes good headers, so the rejections below are for the reason
	 * each test names. */
	for (size_t t = 0; t < NTYPES; t++)
		assert_int_equal(decode_els(els, valid_els(types[t], els)), 0);
}

static void
test_wrong_version(void **state)
{
	/* 1: the wire before the slot became the one record of a job (13-element JOB). */
	static const uint64_t bad[] = { 0, 1, 3, 255, UINT32_MAX, UINT64_MAX };
	struct el els[MAX_N];
	size_t n = valid_els(LG_MSG_WAKE, els);

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
	static const uint64_t bad[] = { 0, 8, 255, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
		(uint64_t)UINT32_MAX + LG_MSG_JOB, UINT64_MAX };
	struct el els[MAX_N];
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
	struct el els[MAX_N + 2];

	for (size_t t = 0; t < NTYPES; t++) {
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
	struct el els[MAX_N];

	for (size_t t = 0; t < NTYPES; t++) {
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
	struct el els[MAX_N];
	size_t n;

	/* WAKE: flight, flight_gen, http_status, cache_idx are 32-bit (elements 2-5); cache_word,
	 * queue_ns, run_ns take 64 bits. */
	n = valid_els(LG_MSG_WAKE, els);
	for (size_t pos = 2; pos < n; pos++) {
		els[pos].v = (uint64_t)UINT32_MAX + 1;
		assert_int_equal(decode_els(els, n), pos <= 5 ? -1 : 0);
		if (pos <= 5)
			assert_int_equal(errno, EBADMSG);
		els[pos].v = UINT32_MAX;
		assert_int_equal(decode_els(els, n), 0);
	}
	/* Every other payload is 32-bit only. */
	for (size_t t = 0; t < NTYPES; t++) {
		if (types[t] == LG_MSG_WAKE)
			continue;
		n = valid_els(types[t], els);
		for (size_t pos = 2; pos < n; pos++) {
			els[pos].v = (uint64_t)UINT32_MAX + 1;
			assert_int_equal(decode_els(els, n), -1);
			assert_int_equal(errno, EBADMSG);
			els[pos].v = UINT32_MAX;
			assert_int_equal(decode_els(els, n), 0);
		}
	}
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
		{ "\xdd\x01\x00\x00\x00\x02\x01", 7 },
		{ "\xdc\xff\xff\x02\x01", 5 },
		{ "\x94\x02\x03\xdd\xff\xff\xff\xff", 8 },          /* nested array 32 */
		{ "\x94\x02\x03\xdf\xff\xff\xff\xff", 8 },          /* nested map 32 */
		{ "\x94\x02\x03\x01\xde\xff\xff", 7 },              /* nested map 16 */
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
	/* KILL [2, 3, 5, 6]: array 16, version as uint 64, type as int 8, slot as uint 16. */
	static const char b[] = "\xdc\x00\x04" "\xcf\0\0\0\0\0\0\0\x02" "\xd0\x03" "\xcd\x00\x05"
	    "\x06";
	struct lg_msg out;

	assert_int_equal(decode_exact(b, sizeof(b) - 1, &out), 0);
	assert_int_equal(out.type, LG_MSG_KILL);
	assert_int_equal(out.kill.slot, 5);
	assert_int_equal(out.kill.gen, 6);
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

/* lg_wire_check_job against a real arena of 4 slots, 1 MiB regions: slot i at generation 7. */
static void
arena_at_gen7(struct lg_arena *a)
{
	assert_int_equal(lg_arena_create(a, 4, 2, 1 << 20, 1 << 20), 0);
	for (uint32_t i = 0; i < 4; i++)
		atomic_store(&a->slots[i].word, lg_slot_word(7, 2, LG_SLOT_QUEUED));
}

static struct lg_msg
good_job(uint32_t slot)
{
	struct lg_msg m = { .type = LG_MSG_JOB, .job = { .slot = slot, .gen = 7 } };

	return m;
}

static void
expect_refused(const struct lg_msg *m, const struct lg_arena *a, int err)
{
	errno = 0;
	assert_int_equal(lg_wire_check_job(m, a), -1);
	assert_int_equal(errno, err);
}

static void
test_check_job(void **state)
{
	struct lg_arena a;
	struct lg_msg m;

	arena_at_gen7(&a);
	for (uint32_t i = 0; i < 4; i++) {
		m = good_job(i);
		assert_int_equal(lg_wire_check_job(&m, &a), 0);
	}
	/* A slot out of range, or another type: no loop of ours wrote it. */
	m = good_job(4);
	expect_refused(&m, &a, ERANGE);
	m = good_job(UINT32_MAX);
	expect_refused(&m, &a, ERANGE);
	m = good_job(1);
	m.type = LG_MSG_DONE;
	expect_refused(&m, &a, ERANGE);
	m.type = LG_MSG_KILL;
	expect_refused(&m, &a, ERANGE);
	/* Another generation: the job was cancelled and its slot reused (or a forged gen). */
	m = good_job(1);
	m.job.gen = 6;
	expect_refused(&m, &a, ESTALE);
	m.job.gen = 8;
	expect_refused(&m, &a, ESTALE);
	m.job.gen = UINT32_MAX;
	expect_refused(&m, &a, ESTALE);
	lg_arena_destroy(&a);
}

/* A JOB that survives encode -> decode -> check is what a compute process would start. */
static void
test_check_job_after_round_trip(void **state)
{
	struct lg_arena a;
	struct lg_msg m, out;
	char buf[LG_WIRE_MAX];
	int n;

	arena_at_gen7(&a);
	m = good_job(3);
	n = lg_wire_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(decode_exact(buf, (size_t)n, &out), 0);
	assert_int_equal(lg_wire_check_job(&out, &a), 0);
	lg_arena_destroy(&a);
}

/* What a compute process runs is the slot's record, read once the slot is RUNNING and bounded
 * like any input (shm/slot.h lg_slot_job_read). */
static void
test_slot_job_read(void **state)
{
	struct lg_arena a;
	struct lg_job j;
	struct lg_slot *s;
	uint32_t owner = 99;

	arena_at_gen7(&a);
	s = &a.slots[2];
	s->job.kind = 3;
	s->job.route = 1u << 30;
	s->job.in_len = a.in_cap - 64;
	s->job.body_off = 64;
	s->job.args_off = 48;
	s->job.args_len = 16;
	s->job.deadline_ns = 10;
	s->job.enqueue_ns = 11;
	/* QUEUED: not started, so not ours to read. */
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_slot_start(s, 7, 1, 5), 0);
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), 0);
	assert_int_equal(owner, 2);
	assert_int_equal(j.kind, 3);
	assert_int_equal(j.route, 1u << 30);
	assert_int_equal(j.in_len, a.in_cap - 64);
	assert_int_equal(j.body_off, 64);
	assert_int_equal(j.args_off, 48);
	assert_int_equal(j.args_len, 16);
	assert_int_equal(j.deadline_ns, 10);
	assert_int_equal(j.enqueue_ns, 11);
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 6, 3, &j, &owner), -1);
	assert_int_equal(errno, ESTALE);
	/* An owner that is no loop of ours, an input longer than the region, query arguments
	 * that run into the body or start past it. */
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 2, &j, &owner), -1);
	assert_int_equal(errno, ERANGE);
	assert_int_equal(owner, 2);
	s->job.in_len = a.in_cap - 63;
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), -1);
	assert_int_equal(errno, ERANGE);
	s->job.in_len = 0;
	s->job.args_len = 17;
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), -1);
	assert_int_equal(errno, ERANGE);
	s->job.args_len = 0;
	s->job.args_off = 65;
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), -1);
	assert_int_equal(errno, ERANGE);
	s->job.args_off = 0;
	s->job.body_off = (uint32_t)a.in_cap + 1;
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), -1);
	assert_int_equal(errno, ERANGE);
	s->job.body_off = 0;
	/* ABANDONED while it runs: still ours until we finish it. */
	assert_int_equal(lg_slot_release(s, 7), LG_SLOT_ABANDONED);
	assert_int_equal(lg_slot_job_read(&a, 2, 7, 3, &j, &owner), 0);
	errno = 0;
	assert_int_equal(lg_slot_job_read(&a, 4, 7, 3, &j, &owner), -1);
	assert_int_equal(errno, ERANGE);
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
		cmocka_unit_test(test_slot_job_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
