/* Unit tests for master/agent.c: the agent's line (haproxy configuration manual 5.2
 * "agent-check": words separated by spaces, ended by a newline) and the drain delay default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "master/agent.h"
#include "master/options.h"

static void
test_line_states_weights_and_maxconn(void **state)
{
	struct lg_agent ag = { .fd = -1 };
	char buf[64];

	(void)state;
	assert_int_equal(lg_agent_line(&ag, 0, 0.2, 6, buf, sizeof(buf)), strlen("ready 100%\n"));
	assert_string_equal(buf, "ready 100%\n");
	lg_agent_line(&ag, 0, 2.0, 6, buf, sizeof(buf));
	assert_string_equal(buf, "ready 25%\n");
	lg_agent_line(&ag, 1, 2.02, 6, buf, sizeof(buf)); /* damped: the weight stays */
	assert_string_equal(buf, "drain 25%\n");
	ag.maxconn = 30;
	lg_agent_line(&ag, 0, 0.0, 6, buf, sizeof(buf));
	assert_string_equal(buf, "ready 100% maxconn:36\n");
	/* never up or down: health stays with the HTTP check */
	assert_null(strstr(buf, "up"));
}

static void
test_drain_delay_default_follows_the_agent(void **state)
{
	struct lg_config cfg;

	(void)state;
	lg_options_defaults(&cfg);
	assert_int_equal(lg_agent_drain_delay_ms(&cfg.master), 0);
	strcpy(cfg.master.agent_listen, "127.0.0.1:8081");
	assert_int_equal(lg_agent_drain_delay_ms(&cfg.master), 2500);
	cfg.master.drain_delay_ms = 0; /* given: kept, even 0 */
	assert_int_equal(lg_agent_drain_delay_ms(&cfg.master), 0);
	cfg.master.drain_delay_ms = 7000;
	assert_int_equal(lg_agent_drain_delay_ms(&cfg.master), 7000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_states_weights_and_maxconn),
		cmocka_unit_test(test_drain_delay_default_follows_the_agent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
