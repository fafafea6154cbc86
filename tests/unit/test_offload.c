/* Unit tests for the job room's part of a connection (worker/job/job.h, worker/job/offload.c):
 * a slot held, handed over to a flight or released, moves the connection's held bit, the
 * loop's pending table and the slot word together; the body sink gives out the slot's input
 * region in order and says when the body is complete. No server: a bare worker and arena
 * (tests/unit/rooms_rig.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shm/slot.h"
#include "tests/unit/rooms_rig.h"
#include "worker/job/offload.h"

/* c claims a slot of r's arena as lg_offload_claim does, minus admission and the view. */
static int
claim(struct rig *r, struct lg_conn *c)
{
	uint32_t gen = 0;
	int i = lg_slot_claim(&r->arena, 0, &gen);

	assert_true(i >= 0);
	LG_JOB(c)->slot = i;
	LG_JOB(c)->gen = gen;
	lg_conn_hold(c, LG_CONN_HELD_BUFFER);
	r->pending[i] = c;
	return i;
}

static void
test_release_frees_everything(void **state)
{
	struct rig r;
	struct lg_conn *c;
	int i;

	assert_int_equal(rig_init(&r), 0);
	c = rig_conn(&r, 1000);
	assert_false(lg_job_held(c));
	i = claim(&r, c);
	assert_true(lg_job_held(c));
	assert_int_equal(lg_slot_state(atomic_load(&r.arena.slots[i].word)), LG_SLOT_CLAIMED);
	assert_int_equal(lg_offload_release(c), LG_SLOT_FREE);
	assert_false(lg_job_held(c));
	assert_int_equal(c->held & LG_CONN_HELD_BUFFER, 0);
	assert_null(r.pending[i]);
	assert_int_equal(lg_slot_state(atomic_load(&r.arena.slots[i].word)), LG_SLOT_FREE);
	free(c);
	rig_fini(&r);
}

/* Handing the slot to a flight: completions for it no longer find c, c holds nothing, and
 * the slot stays claimed (the flight owns it now). */
static void
test_hand_over(void **state)
{
	struct rig r;
	struct lg_conn *c, *other;
	int i;

	assert_int_equal(rig_init(&r), 0);
	c = rig_conn(&r, 1000);
	other = rig_conn(&r, 1000);
	i = claim(&r, c);
	assert_int_equal(lg_job_slot(c), i);
	lg_job_hand_over(c);
	assert_false(lg_job_held(c));
	assert_int_equal(lg_job_slot(c), -1);
	assert_int_equal(c->held, 0);
	assert_null(r.pending[i]);
	assert_int_equal(lg_slot_state(atomic_load(&r.arena.slots[i].word)), LG_SLOT_CLAIMED);
	/* the pending entry is cleared only when it is c's */
	i = claim(&r, c);
	r.pending[i] = other;
	lg_job_hand_over(c);
	assert_ptr_equal(r.pending[i], other);
	free(c);
	free(other);
	rig_fini(&r);
}

/* The body sink: windows in order, the bytes land in the slot's input region, completion is
 * said exactly once the Content-Length is reached. */
static void
test_body_sink(void **state)
{
	struct rig r;
	struct lg_conn *c;
	unsigned char *dst;
	const unsigned char *p = NULL;
	uint64_t n = 0;
	size_t len;

	assert_int_equal(rig_init(&r), 0);
	c = rig_conn(&r, 1000);
	claim(&r, c);
	LG_JOB(c)->job.body_off = 128;
	LG_JOB(c)->body_need = 10;
	LG_JOB(c)->body_got = 0;
	LG_JOB(c)->reserved = 4u << 20; /* backed far ahead: no window is asked of the helper */
	assert_true(lg_job_body_expected(c));
	assert_int_equal(lg_offload_body_buf(c, &dst, &len), 0);
	assert_int_equal(len, 10);
	memcpy(dst, "abc", 3);
	assert_int_equal(lg_offload_body_took(c, 3), 0);
	assert_int_equal(lg_offload_body_got(c), 3);
	assert_int_equal(lg_offload_body_buf(c, &dst, &len), 0);
	assert_int_equal(len, 7);
	memcpy(dst, "defghij", 7);
	assert_int_equal(lg_offload_body_took(c, 7), 1);
	assert_int_equal(lg_job_body(c, &p, &n), 0);
	assert_int_equal(n, 10);
	assert_memory_equal(p, "abcdefghij", 10);
	assert_ptr_equal(p, lg_arena_in(&r.arena, (uint32_t)lg_job_slot(c)) + 128);
	lg_offload_release(c);
	assert_int_equal(lg_job_body(c, &p, &n), -1); /* no slot, no body */
	free(c);
	rig_fini(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_frees_everything),
		cmocka_unit_test(test_hand_over),
		cmocka_unit_test(test_body_sink),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
