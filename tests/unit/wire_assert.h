/* Shared by the unit tests that compare decoded headers (test_wire, test_channel): the type and
 * every field of that type's payload struct, so a field the codec drops shows up in both.
 * Include after <cmocka.h>. */
#ifndef LG_TESTS_WIRE_ASSERT_H
#define LG_TESTS_WIRE_ASSERT_H

#include "shm/wire.h"

static inline void
assert_msg_equal(const struct lg_msg *a, const struct lg_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case LG_MSG_JOB:
		assert_int_equal(a->job.slot, b->job.slot);
		assert_int_equal(a->job.gen, b->job.gen);
		break;
	case LG_MSG_DONE:
		assert_int_equal(a->done.slot, b->done.slot);
		assert_int_equal(a->done.gen, b->done.gen);
		break;
	case LG_MSG_KILL:
		assert_int_equal(a->kill.slot, b->kill.slot);
		assert_int_equal(a->kill.gen, b->kill.gen);
		break;
	case LG_MSG_RETIRE:
		assert_int_equal(a->retire.seq, b->retire.seq);
		break;
	case LG_MSG_WAKE:
		assert_int_equal(a->wake.flight, b->wake.flight);
		assert_int_equal(a->wake.flight_gen, b->wake.flight_gen);
		assert_int_equal(a->wake.http_status, b->wake.http_status);
		assert_int_equal(a->wake.cache_idx, b->wake.cache_idx);
		assert_int_equal(a->wake.cache_word, b->wake.cache_word);
		assert_int_equal(a->wake.queue_ns, b->wake.queue_ns);
		assert_int_equal(a->wake.run_ns, b->wake.run_ns);
		break;
	case LG_MSG_UNWANTED:
		assert_int_equal(a->unwanted.flight, b->unwanted.flight);
		assert_int_equal(a->unwanted.flight_gen, b->unwanted.flight_gen);
		break;
	case LG_MSG_UPWAKE:
		assert_int_equal(a->upwake.upstream, b->upwake.upstream);
		break;
	default:
		fail_msg("unknown message type %u", a->type);
	}
}

#endif
