/* Unit tests for load/steps.c: the knee is where the 2xx rate stops following the offer (the
 * capacity a k6 or vegeta user means), not the highest level whose verdicts pass, which is
 * named for what it is; both in the text and in the JSON; the knee plot's script. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "load/jw.h"
#include "load/steps.h"

/* The run: levels 0.5x..3x of 6/s against a server whose 2xx rate peaked at 5.8/s,
 * refusing the rest fast, so that every level's verdicts passed. */
static void
fill(struct ll_steps *st)
{
	static const double lv[] = { 0.5, 1, 1.5, 2, 3 };
	static const double ok[] = { 3, 5.8, 5.7, 5.6, 5.5 };
	unsigned i;

	memset(st, 0, sizeof(*st));
	st->n = 5;
	st->seconds = 5;
	for (i = 0; i < st->n; i++) {
		st->s[i].level = (struct ll_rate){ lv[i], 1 };
		st->s[i].offered_rps = 6 * lv[i];
		st->s[i].ok_rps = ok[i];
		st->s[i].capacity_rps = 6;
		st->s[i].cheap_p99_ms = 1;
		st->s[i].pass = 1;
	}
}

static char *
text(const struct ll_steps *st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	ll_steps_text(f, st);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static char *
json(const struct ll_steps *st)
{
	char *buf = NULL, err[160];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct ll_jw w;

	assert_non_null(f);
	assert_int_equal(ll_jw_start(&w, f), 0);
	ll_jw_map(&w, NULL);
	ll_steps_json(&w, st);
	ll_jw_end_map(&w);
	assert_int_equal(ll_jw_finish(&w, err, sizeof(err)), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void
test_knee_is_where_2xx_stops_following(void **state)
{
	struct ll_steps st;
	char *t, *j;

	fill(&st);
	ll_steps_knee(&st);
	t = text(&st);
	/* 5.7 of 9 offered at 1.5x: the first level under 90 % of its offer */
	assert_non_null(strstr(t, "knee: level 1.5x, 9.0/s offered, 5.7 2xx/s"));
	assert_non_null(strstr(t, "capacity: 5.8 2xx/s"));
	assert_non_null(strstr(t, "highest level that degrades gracefully: 3x, 18.0/s offered"));
	assert_null(strstr(t, "knee: level 3x"));
	j = json(&st);
	assert_non_null(strstr(j, "\"knee\":{\"level\":2,\"offered_per_s\":9,\"ok_per_s\":5.7,"));
	assert_non_null(strstr(j, "\"capacity\":{\"ok_per_s\":5.8,\"level\":1,\"reached\":true}"));
	assert_non_null(strstr(j, "\"graceful_level\":4"));
	assert_non_null(strstr(j, "\"goodput_threshold\":0.9"));
	free(t);
	free(j);
}

static void
test_knee_not_reached_and_none_graceful(void **state)
{
	struct ll_steps st;
	unsigned i;
	char *t, *j;

	fill(&st);
	for (i = 0; i < st.n; i++) {
		st.s[i].ok_rps = st.s[i].offered_rps * 0.97;
		st.s[i].pass = i != 0;       /* a failed lowest level: nothing degrades gracefully */
	}
	ll_steps_knee(&st);
	t = text(&st);
	assert_non_null(strstr(t, "knee: not reached"));
	assert_non_null(strstr(t, "capacity: at least 17.5 2xx/s"));
	assert_non_null(strstr(t, "highest level that degrades gracefully: none"));
	j = json(&st);
	assert_non_null(strstr(j, "\"knee\":null"));
	assert_non_null(strstr(j, "\"graceful_level\":null"));
	free(t);
	free(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_knee_is_where_2xx_stops_following),
		cmocka_unit_test(test_knee_not_reached_and_none_graceful),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
