/* Unit tests for sizing/memsize.c: the memory limit read through lg_sizing_read from the
 * fixture trees under tests/fixtures/sizing (the same roots as the CPU quota), the budget
 * decision and its overrides, the OOM-kill counter and the JSON keys. Run from the repo root,
 * or set LG_SIZING_FIXTURES to the fixture directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "sizing/memsize.h"
#include "sizing/sizing.h"

#define UNUSED __attribute__((unused))
#define MIB (1ull << 20)
#define NONE LG_MEM_NONE

/* What one fixture's memory inputs must be. */
struct mem_case {
	const char *name;
	uint64_t total, cgroup_limit;
	const char *source;       /* "" when no limit */
	const char *events;       /* the OOM counter file, without the sysroot; "" when none */
	long long oom_kills;      /* its value, -1 when absent */
	int warnings;
};

#define V1MEM "/sys/fs/cgroup/memory/process_api"
#define V1LEAF V1MEM "/773139230ff5b7c57d739155d421b40f"
#define SVC "/sys/fs/cgroup/system.slice/lagless.service"

static const struct mem_case cases[] = {
	/* memory.high 192M on the slice is below memory.max 256M on the service */
	{ "v2_memory_high", 16307412ull * 1024, 192 * MIB, "/sys/fs/cgroup/system.slice/memory.high",
	  SVC "/memory.events", 2, 0 },
	/* "max" everywhere: no cgroup limit, MemTotal bounds */
	{ "v2_memory_max", 2000000ull * 1024, NONE, "", SVC "/memory.events", -1, 0 },
	{ "corrupt_v2_memory", NONE, NONE, "", SVC "/memory.events", -1, 1 },
	/* v1 (this VM): the parent's 160M under the leaf's 256M, the root's 2^63 - 4096 is none */
	{ "v1_memory_nested", 24683448ull * 1024, 160 * MIB, V1MEM "/memory.limit_in_bytes",
	  V1LEAF "/memory.oom_control", 5, 0 },
	/* this VM as the CPU tests know it: no memory files, not even the leaf directory (no
	 * warning; the mount point is the closest directory, as for the CPU hierarchies) */
	{ "hybrid_this_vm", NONE, NONE, "", "/sys/fs/cgroup/memory/memory.oom_control", -1, 0 },
	/* v2 fixtures of the CPU tests without memory files */
	{ "nested_v2", NONE, NONE, "", SVC "/memory.events", -1, 0 },
	{ "missing_proc", NONE, NONE, "", "", -1, 1 },
};

static const char *
fixtures_dir(void)
{
	const char *d = getenv("LG_SIZING_FIXTURES");

	return d != NULL && d[0] != '\0' ? d : "tests/fixtures/sizing";
}

static void
test_fixtures(void **state UNUSED)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct mem_case *c = &cases[i];
		char root[PATH_MAX], events[PATH_MAX];
		struct lg_sizing s;

		snprintf(root, sizeof(root), "%s/%s", fixtures_dir(), c->name);
		lg_sizing_read(root, &s);
		if (s.mem.total != c->total || s.mem.cgroup_limit != c->cgroup_limit ||
		    strcmp(s.mem.source, c->source) != 0 || s.warnings != c->warnings)
			fail_msg("%s: total %llu limit %llu source \"%s\" warnings %d", c->name,
			    (unsigned long long)s.mem.total, (unsigned long long)s.mem.cgroup_limit,
			    s.mem.source, s.warnings);
		snprintf(events, sizeof(events), "%s%s", c->events[0] ? root : "", c->events);
		if (strcmp(s.mem.events, events) != 0)
			fail_msg("%s: events \"%s\", expected \"%s\"", c->name, s.mem.events, events);
		if (lg_memsize_oom_kills(s.mem.events) != c->oom_kills)
			fail_msg("%s: oom_kill %lld", c->name, lg_memsize_oom_kills(s.mem.events));
	}
}

static struct lg_config
config(void)
{
	struct lg_config c;

	memset(&c, 0, sizeof(c));
	c.flights.cache_bytes = 64 * MIB;
	return c;
}

static struct lg_memsize
measured(uint64_t total, uint64_t cgroup)
{
	struct lg_memsize m;

	lg_memsize_init(&m);
	m.total = total;
	m.cgroup_limit = cgroup;
	return m;
}

/* The limit is the smaller of MemTotal and the cgroup's; the budget leaves the reserve
 * (32M + 8M per loop + 24M per compute), the fixed part and the cache when a route caches. */
static void
test_decide(void **state UNUSED)
{
	struct lg_config cfg = config();
	struct lg_memsize m = measured(16384 * MIB, 256 * MIB);

	lg_memsize_decide(&m, &cfg, 2, 1, 1 * MIB, 0, 0);
	assert_int_equal(m.limit, 256 * MIB);
	assert_int_equal(m.reserve, (32 + 16 + 24) * MIB);
	assert_int_equal(m.cache, 0);
	assert_int_equal(m.budget, (256 - 72 - 1) * MIB);
	lg_memsize_decide(&m, &cfg, 2, 1, 1 * MIB, 1, 0);
	assert_int_equal(m.cache, 64 * MIB);
	assert_int_equal(m.budget, (256 - 72 - 1 - 64) * MIB);
	lg_memsize_decide(&m, &cfg, 2, 1, 1 * MIB, 1, 3 * MIB); /* proxying's part too */
	assert_int_equal(m.proxy, 3 * MIB);
	assert_int_equal(m.budget, (256 - 72 - 1 - 64 - 3) * MIB);

	m = measured(512 * MIB, NONE); /* no cgroup limit: MemTotal */
	lg_memsize_decide(&m, &cfg, 1, 1, 0, 0, 0);
	assert_int_equal(m.limit, 512 * MIB);
	assert_int_equal(m.budget, (512 - 64) * MIB);

	m = measured(NONE, NONE); /* nothing known: no bound */
	lg_memsize_decide(&m, &cfg, 1, 1, 0, 0, 0);
	assert_true(m.limit == NONE && m.budget == NONE);

	m = measured(NONE, 64 * MIB); /* a limit below the reserve: nothing may be backed */
	lg_memsize_decide(&m, &cfg, 4, 3, 0, 0, 0);
	assert_int_equal(m.budget, 0);

	cfg.jobs.compute_memory = 100 * MIB; /* RLIMIT_DATA above the default share of a compute */
	m = measured(NONE, 1024 * MIB);
	lg_memsize_decide(&m, &cfg, 2, 3, 0, 0, 0);
	assert_int_equal(m.reserve, (32 + 16 + 300) * MIB);
}

static void
test_overrides(void **state UNUSED)
{
	struct lg_config cfg = config();
	struct lg_memsize m = measured(16384 * MIB, 256 * MIB);

	cfg.sizing.memory_limit = 1024 * MIB;
	lg_memsize_decide(&m, &cfg, 2, 1, 0, 0, 0);
	assert_int_equal(m.limit, 1024 * MIB);
	assert_true(m.limit_override);
	assert_int_equal(m.budget, (1024 - 72) * MIB);
	cfg.sizing.memory_reserve = 24 * MIB;
	lg_memsize_decide(&m, &cfg, 2, 1, 0, 0, 0);
	assert_int_equal(m.budget, 1000 * MIB);
	cfg.sizing.shm_budget = 5 * MIB;
	lg_memsize_decide(&m, &cfg, 2, 1, 0, 0, 0);
	assert_int_equal(m.budget, 5 * MIB);
	assert_true(m.budget_override);
	m = measured(NONE, NONE); /* --shm-budget bounds even without a known limit */
	lg_memsize_decide(&m, &cfg, 2, 1, 0, 0, 0);
	assert_int_equal(m.budget, 5 * MIB);
}

static void
test_json(void **state UNUSED)
{
	struct lg_config cfg = config();
	struct lg_memsize m = measured(NONE, 256 * MIB);
	char buf[1024];
	int n;

	strcpy(m.source, "/sys/fs/cgroup/memory.max");
	lg_memsize_decide(&m, &cfg, 2, 1, 1 * MIB, 0, 0);
	n = lg_memsize_json(&m, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n == strlen(buf));
	assert_non_null(strstr(buf, ",\"memory_total\":null"));
	assert_non_null(strstr(buf, ",\"memory_limit\":268435456"));
	assert_non_null(strstr(buf, ",\"shm_budget\":191889408"));
	assert_non_null(strstr(buf, ",\"memory_proxy\":0"));
	assert_non_null(strstr(buf, ",\"memory_limit_source\":\"/sys/fs/cgroup/memory.max\""));
	for (int cap = 0; cap < n; cap += 7)
		assert_int_equal(lg_memsize_json(&m, buf, (size_t)cap), -1);
}

static void
test_oom_counter_absent(void **state UNUSED)
{
	assert_int_equal(lg_memsize_oom_kills(""), -1);
	assert_int_equal(lg_memsize_oom_kills("/nonexistent/memory.events"), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures),
		cmocka_unit_test(test_decide),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_oom_counter_absent),
	};

	if (getenv("LG_TEST_LOG") == NULL)
		lg_log_level = LG_LOG_ERROR + 1; /* the readers' warnings are expected here */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
