/* Unit tests for the flight room's waiters (worker/flight/coalesce.c lg_coal_park,
 * lg_coal_unpark): parking puts a connection on its flight's list, holds it (the core tells the
 * flight when it closes), and has the core wait for the job with the route's deadline armed;
 * leaving the list from any place keeps it whole and stops the timer. No server: a bare worker
 * (tests/unit/rooms_rig.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/rooms_rig.h"
#include "worker/flight/coalesce_int.h"

static void
check_list(const struct lg_lflight *f, struct lg_conn *const *want, unsigned n)
{
	struct lg_conn *c = f->waiters, *prev = NULL;

	assert_int_equal(f->nwait, n);
	for (unsigned i = 0; i < n; i++) {
		assert_ptr_equal(c, want[i]);
		assert_ptr_equal(LG_FLIGHT(c)->fl_prev, prev);
		assert_ptr_equal(LG_FLIGHT(c)->fl, f);
		prev = c;
		c = LG_FLIGHT(c)->fl_next;
	}
	assert_null(c);
}

static void
test_park_and_unpark(void **state)
{
	struct rig r;
	struct lg_lflight f;
	struct lg_conn *c[3];

	assert_int_equal(rig_init(&r), 0);
	memset(&f, 0, sizeof(f));
	f.w = r.w;
	for (int i = 0; i < 3; i++) {
		assert_non_null(c[i] = rig_conn(&r, 250));
		lg_flight_init(c[i]);
		lg_coal_park(c[i], &f, "miss");
		assert_true(lg_flight_parked(c[i]));
		assert_true(lg_conn_parked(c[i]));
		assert_int_equal(c[i]->state, LG_CONN_JOB);
		assert_true(ev_is_active(&c[i]->timer));
		/* the route's deadline, 250 ms, armed by the core */
		assert_true(ev_timer_remaining(r.w->ev, &c[i]->timer) > 0.2);
		assert_true(ev_timer_remaining(r.w->ev, &c[i]->timer) <= 0.25);
	}
	check_list(&f, (struct lg_conn *[]){ c[2], c[1], c[0] }, 3);
	lg_coal_unpark(c[1]); /* the middle */
	assert_false(lg_flight_parked(c[1]));
	assert_int_equal(c[1]->held, 0);
	assert_false(ev_is_active(&c[1]->timer));
	check_list(&f, (struct lg_conn *[]){ c[2], c[0] }, 2);
	lg_coal_unpark(c[2]); /* the head */
	check_list(&f, (struct lg_conn *[]){ c[0] }, 1);
	lg_coal_unpark(c[0]); /* the last */
	check_list(&f, NULL, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(c[i]->held, 0);
		assert_false(ev_is_active(&c[i]->timer));
		free(c[i]);
	}
	rig_fini(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_park_and_unpark),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
