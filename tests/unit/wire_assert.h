/* Shared by the unit tests that compare decoded headers (test_wire, test_channel): every field
 * of struct lg_msg, so a field the codec drops shows up in both. Include after <cmocka.h>. */
#ifndef LG_TESTS_WIRE_ASSERT_H
#define LG_TESTS_WIRE_ASSERT_H

#include "shm/wire.h"

static inline void
assert_msg_equal(const struct lg_msg *a, const struct lg_msg *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->slot, b->slot);
	assert_int_equal(a->gen, b->gen);
	assert_int_equal(a->kind, b->kind);
	assert_int_equal(a->owner, b->owner);
	assert_int_equal(a->in_off, b->in_off);
	assert_int_equal(a->in_len, b->in_len);
	assert_int_equal(a->out_off, b->out_off);
	assert_int_equal(a->out_cap, b->out_cap);
	assert_int_equal(a->arg, b->arg);
	assert_int_equal(a->deadline_ns, b->deadline_ns);
	assert_int_equal(a->enqueue_ns, b->enqueue_ns);
	assert_int_equal(a->status, b->status);
	assert_int_equal(a->out_len, b->out_len);
	assert_int_equal(a->queue_ns, b->queue_ns);
	assert_int_equal(a->run_ns, b->run_ns);
}

#endif
