/* Unit tests for sizing/sizing.c: every fixture tree under tests/fixtures/sizing (see the README
 * there) with both roundings, the override rules, the cpulist parser and the JSON output.
 * Run from the repo root, or set LG_SIZING_FIXTURES to the fixture directory. LG_TEST_LOG=1
 * shows the warnings the reader logs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "sizing/sizing.h"

/* What one fixture must produce. quota < 0 means "no limit found". */
struct fixture_case {
	const char *name;
	const char *cgroup;
	int online, cpuset;
	double quota;
	const char *source;       /* quota_source, "" when none */
	int floor_budget, ceil_budget;
	int warnings;
};

/* cmocka hands every test a state pointer; most ignore it. */
#define UNUSED __attribute__((unused))

#define SVC_MAX "/sys/fs/cgroup/system.slice/lagless.service/cpu.max"
#define V1_CPU "/sys/fs/cgroup/cpu,cpuacct"

static const struct fixture_case cases[] = {
	{ "v2_quota_0.25", "v2", 16, -1, 0.25, SVC_MAX, 1, 1, 0 },
	{ "v2_quota_0.5", "v2", 16, -1, 0.5, SVC_MAX, 1, 1, 0 },
	{ "v2_quota_1.5", "v2", 16, -1, 1.5, SVC_MAX, 1, 2, 0 },
	{ "v2_quota_1.999", "v2", 16, -1, 1.999, SVC_MAX, 1, 2, 0 },
	{ "v2_max", "v2", 16, -1, -1, "", 16, 16, 0 },
	{ "v1_quota_0.5", "v1", 16, 16, 0.5, V1_CPU "/user.slice/lagless/cpu.cfs_quota_us", 1, 1, 0 },
	{ "v1_unlimited", "v1", 16, 16, -1, "", 16, 16, 0 },
	{ "v2_ns_root", "v2", 16, -1, 2, "/sys/fs/cgroup/cpu.max", 2, 2, 0 },
	{ "v2_ns_container_path", "v2", 16, -1, 3, "/sys/fs/cgroup/cpu.max", 3, 3, 0 },
	{ "v1_docker", "v1", 16, 16, 1.5, V1_CPU "/cpu.cfs_quota_us", 1, 2, 0 },
	{ "cpuset_8-15", "v2", 32, 8, -1, "", 8, 8, 0 },
	{ "cpuset_quota", "v2", 16, 8, 2, SVC_MAX, 2, 2, 0 },
	{ "nested_v2", "v2", 16, -1, 1, "/sys/fs/cgroup/system.slice/cpu.max", 1, 1, 0 },
	{ "nested_v1", "v1", 16, 16, 0.5, V1_CPU "/user.slice/cpu.cfs_quota_us", 1, 1, 0 },
	{ "v2_two_mounts", "v2", 16, -1, 1, "/sys/fs/cgroup/system.slice/cpu.max", 1, 1, 0 },
	{ "v2_escaped_mountpoint", "v2", 16, -1, 3, "/mnt/cgroup two/lagless/cpu.max", 3, 3, 0 },
	{ "hybrid_this_vm", "hybrid", 2, 2, -1, "", 2, 2, 0 },
	{ "v1_cpuset_cpus_only", "v1", 16, 6, -1, "", 6, 6, 0 },
	{ "corrupt_v2_zero_period", "v2", 16, -1, -1, "", 16, 16, 1 },
	{ "corrupt_v2_garbage", "v2", 16, -1, -1, "", 16, 16, 1 },
	{ "corrupt_v1_zero_period", "v1", 16, 16, -1, "", 16, 16, 1 },
	{ "corrupt_v1_garbage_quota", "v1", 16, 16, -1, "", 16, 16, 1 },
	{ "corrupt_cpuset", "v2", 16, -1, -1, "", 16, 16, 1 },
	{ "corrupt_proc_cgroup", "none", 16, -1, -1, "", 16, 16, 1 },
	{ "missing_v1_period", "v1", 16, 16, -1, "", 16, 16, 1 },
	{ "missing_proc", "none", 16, -1, -1, "", 16, 16, 1 },
	{ "missing_cgroup_dir", "v1", 16, 16, 2, V1_CPU "/cpu.cfs_quota_us", 2, 2, 1 },
	{ "missing_online", "v2", -1, -1, 3, SVC_MAX, 3, 3, 1 },
	/* memory limits (their values: tests/unit/test_memsize.c) */
	{ "v2_memory_high", "v2", 16, -1, -1, "", 16, 16, 0 },
	{ "v2_memory_max", "v2", 16, -1, -1, "", 16, 16, 0 },
	{ "corrupt_v2_memory", "v2", 16, -1, -1, "", 16, 16, 1 },
	{ "v1_memory_nested", "hybrid", 2, 2, -1, "", 2, 2, 0 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static const char *
fixtures_dir(void)
{
	const char *d = getenv("LG_SIZING_FIXTURES");

	return d != NULL && d[0] != '\0' ? d : "tests/fixtures/sizing";
}

static void
read_fixture(const char *name, struct lg_sizing *s)
{
	char root[PATH_MAX];

	assert_true(snprintf(root, sizeof(root), "%s/%s", fixtures_dir(), name) < (int)sizeof(root));
	lg_sizing_read(root, s);
}

static struct lg_config
default_config(void)
{
	struct lg_config c;

	memset(&c, 0, sizeof(c));
	c.jobs.queue_capacity = -1;
	return c;
}

/* ---- a minimal JSON checker: one flat object of strings, numbers, null, true, false ---- */

#define JMAX 32

struct jobj {
	int n;
	char key[JMAX][64];
	char val[JMAX][1024];   /* raw token; strings decoded, without quotes, prefixed by '"' */
};

static const char *
skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Decodes a JSON string at p (at the opening quote) into out; returns the end or NULL. */
static const char *
parse_jstring(const char *p, char *out, size_t cap)
{
	size_t n = 0;

	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		unsigned c = (unsigned char)*p++;

		if (c == '\0' || c < 0x20 || n + 2 >= cap)
			return NULL;
		if (c == '\\') {
			c = (unsigned char)*p++;
			if (c == 'u') {
				unsigned v;

				if (sscanf(p, "%4x", &v) != 1 || v > 0x7f)
					return NULL;
				c = v;
				p += 4;
			} else if (c == 'n') {
				c = '\n';
			} else if (c == 't') {
				c = '\t';
			} else if (c != '"' && c != '\\' && c != '/') {
				return NULL;
			}
		}
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return p + 1;
}

/* A JSON number per RFC 8259 section 6, or a literal; copied raw. */
static const char *
parse_jscalar(const char *p, char *out, size_t cap)
{
	const char *start = p;

	if (strncmp(p, "null", 4) == 0 || strncmp(p, "true", 4) == 0)
		p += 4;
	else if (strncmp(p, "false", 5) == 0)
		p += 5;
	else {
		if (*p == '-')
			p++;
		if (*p == '0')
			p++;
		else if (*p >= '1' && *p <= '9')
			while (*p >= '0' && *p <= '9')
				p++;
		else
			return NULL;
		if (*p == '.') {
			if (*++p < '0' || *p > '9')
				return NULL;
			while (*p >= '0' && *p <= '9')
				p++;
		}
		if (*p == 'e' || *p == 'E') {
			p++;
			if (*p == '+' || *p == '-')
				p++;
			if (*p < '0' || *p > '9')
				return NULL;
			while (*p >= '0' && *p <= '9')
				p++;
		}
	}
	if ((size_t)(p - start) >= cap)
		return NULL;
	memcpy(out, start, (size_t)(p - start));
	out[p - start] = '\0';
	return p;
}

/* Returns 0 if text is exactly one flat JSON object with unique keys. */
static int
parse_jobj(const char *text, struct jobj *o)
{
	const char *p = skip_ws(text);

	memset(o, 0, sizeof(*o));
	if (*p++ != '{')
		return -1;
	p = skip_ws(p);
	if (*p == '}')
		return *skip_ws(p + 1) == '\0' ? 0 : -1;
	for (;;) {
		if (o->n == JMAX || (p = parse_jstring(p, o->key[o->n], sizeof(o->key[0]))) == NULL)
			return -1;
		for (int i = 0; i < o->n; i++)
			if (strcmp(o->key[i], o->key[o->n]) == 0)
				return -1;
		p = skip_ws(p);
		if (*p++ != ':')
			return -1;
		p = skip_ws(p);
		if (*p == '"') {
			o->val[o->n][0] = '"';
			p = parse_jstring(p, o->val[o->n] + 1, sizeof(o->val[0]) - 1);
		} else {
			p = parse_jscalar(p, o->val[o->n], sizeof(o->val[0]));
		}
		if (p == NULL)
			return -1;
		o->n++;
		p = skip_ws(p);
		if (*p == '}')
			return *skip_ws(p + 1) == '\0' ? 0 : -1;
		if (*p++ != ',')
			return -1;
		p = skip_ws(p);
	}
}

static const char *
jget(const struct jobj *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->key[i], key) == 0)
			return o->val[i];
	fail_msg("key %s missing", key);
	return NULL;
}

static int
jint(const struct jobj *o, const char *key)
{
	return atoi(jget(o, key));
}

/* Serialises s, checks the shape and the keys, and that every value matches the struct. */
static void
check_json(const struct lg_sizing *s)
{
	static const char *const keys[] = { "online", "affinity", "cpuset", "quota",
		"quota_source", "cgroup", "rounding", "cpus_override", "budget", "loop_workers",
		"compute_workers", "queue_capacity", "live_resize", "compute_max", "queue_max",
		"warnings", "memory_total", "memory_cgroup_limit", "memory_limit", "memory_reserve",
		"shm_fixed", "shm_cache", "memory_proxy", "shm_budget", "memory_limit_source" };
	char buf[4096];
	struct jobj o;
	int n = lg_sizing_json(s, buf, sizeof(buf));

	assert_int_equal(n, (int)strlen(buf));
	if (parse_jobj(buf, &o) != 0)
		fail_msg("not a flat JSON object: %s", buf);
	/* a quota (or --cpus) under one CPU adds a "note" after them (lg_sizing_note) */
	char note[256];
	int noted = lg_sizing_note(s, note, sizeof(note));
	double cpus = s->cpus_override > 0 ? s->cpus_override : s->quota;

	assert_int_equal(noted, (cpus > 0 && cpus < 1 && s->budget == 1) ||
	    (s->mem.proxy > 0 && s->mem.budget == 0 && !s->mem.budget_override));
	assert_int_equal(o.n, (int)(sizeof(keys) / sizeof(keys[0])) + noted);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_string_equal(o.key[i], keys[i]);
	if (noted)
		assert_string_equal(o.key[o.n - 1], "note");
	assert_int_equal(jint(&o, "online"), s->online);
	assert_int_equal(jint(&o, "affinity"), s->affinity);
	assert_int_equal(jint(&o, "cpuset"), s->cpuset);
	if (s->quota > 0)
		assert_true(fabs(strtod(jget(&o, "quota"), NULL) - s->quota) < 1e-9);
	else
		assert_string_equal(jget(&o, "quota"), "null");
	if (s->quota_source[0] != '\0')
		assert_string_equal(jget(&o, "quota_source") + 1, s->quota_source);
	else
		assert_string_equal(jget(&o, "quota_source"), "null");
	assert_string_equal(jget(&o, "cgroup") + 1, s->cgroup_version);
	assert_string_equal(jget(&o, "rounding"),
	    s->rounding == LG_ROUND_CEIL ? "\"ceil" : "\"floor");
	assert_int_equal(jint(&o, "budget"), s->budget);
	assert_int_equal(jint(&o, "loop_workers"), s->loop_workers);
	assert_int_equal(jint(&o, "compute_workers"), s->compute_workers);
	assert_int_equal(jint(&o, "queue_capacity"), s->queue_capacity);
	assert_string_equal(jget(&o, "live_resize"), s->live_resize ? "true" : "false");
	assert_int_equal(jint(&o, "compute_max"), s->compute_max);
	assert_int_equal(jint(&o, "queue_max"), s->queue_max);
	assert_int_equal(jint(&o, "warnings"), s->warnings);
}

/* ---- fixtures ---- */

static void
check_defaults(const struct lg_sizing *s, int budget)
{
	assert_int_equal(s->budget, budget);
	assert_int_equal(s->loop_workers, budget);
	assert_int_equal(s->compute_workers, budget > 1 ? budget - 1 : 1);
	assert_int_equal(s->queue_capacity, 2 * s->compute_workers);
}

static void
test_fixture(void **state)
{
	const struct fixture_case *c = *state;
	struct lg_config cfg = default_config();
	struct lg_sizing s;

	read_fixture(c->name, &s);
	assert_string_equal(s.cgroup_version, c->cgroup);
	assert_int_equal(s.online, c->online);
	assert_int_equal(s.affinity, -1);	/* never read under a sysroot */
	assert_int_equal(s.cpuset, c->cpuset);
	if (c->quota < 0)
		assert_true(s.quota < 0);
	else if (fabs(s.quota - c->quota) > 1e-9)
		fail_msg("%s: quota %g, want %g", c->name, s.quota, c->quota);
	assert_string_equal(s.quota_source, c->source);
	assert_int_equal(s.warnings, c->warnings);

	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.rounding, LG_ROUND_FLOOR);
	check_defaults(&s, c->floor_budget);
	check_json(&s);

	cfg.sizing.rounding = LG_ROUND_CEIL;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.rounding, LG_ROUND_CEIL);
	check_defaults(&s, c->ceil_budget);
	check_json(&s);
}

/* Every fixture directory has a row in cases[], so none goes untested. */
static void
test_every_fixture_listed(void **state UNUSED)
{
	DIR *d = opendir(fixtures_dir());
	struct dirent *e;
	int dirs = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		size_t i;

		if (e->d_name[0] == '.' || e->d_type != DT_DIR)
			continue;
		dirs++;
		for (i = 0; i < NCASES && strcmp(cases[i].name, e->d_name) != 0; i++)
			;
		if (i == NCASES)
			fail_msg("fixture %s has no expected values", e->d_name);
	}
	closedir(d);
	assert_int_equal(dirs, (int)NCASES);
}

static void
test_missing_sysroot(void **state UNUSED)
{
	struct lg_sizing s;

	read_fixture("no-such-fixture", &s);
	assert_int_equal(s.online, -1);	/* no sysconf fallback under a sysroot */
	assert_int_equal(s.affinity, -1);
	assert_string_equal(s.cgroup_version, "none");
	assert_int_equal(s.warnings, 2);	/* online, /proc/self/cgroup */
	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 1);
	check_json(&s);
}

/* The real machine: whatever it is, the reader must not fail and the budget must be sane. */
static void
test_real_root(void **state UNUSED)
{
	struct lg_sizing a, b;

	lg_sizing_read(NULL, &a);
	lg_sizing_read("", &b);
	assert_true(a.online >= 1);
	assert_true(a.affinity >= 1);
	assert_int_equal(a.online, b.online);
	assert_int_equal(a.affinity, b.affinity);
	assert_string_equal(a.cgroup_version, b.cgroup_version);
	lg_sizing_decide(&a, NULL);
	assert_true(a.budget >= 1 && a.budget <= a.online && a.budget <= a.affinity);
	check_json(&a);
}

/* ---- decision and overrides ---- */

static struct lg_sizing
measured(int online, int affinity, int cpuset, double quota)
{
	struct lg_sizing s;

	memset(&s, 0, sizeof(s));
	s.online = online;
	s.affinity = affinity;
	s.cpuset = cpuset;
	s.quota = quota;
	strcpy(s.cgroup_version, "v2");
	return s;
}

static void
test_budget_is_minimum(void **state UNUSED)
{
	struct lg_sizing s = measured(16, 4, 8, 6.0);

	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 4);		/* affinity */
	s = measured(16, 12, 8, 6.0);
	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 6);		/* quota */
	s = measured(16, 12, 5, 6.0);
	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 5);		/* cpuset */
	s = measured(3, -1, -1, -1);
	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 3);		/* online, unknowns skipped */
	s = measured(-1, -1, -1, -1);
	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 1);		/* nothing known */
	s = measured(-1, -1, -1, 0.01);
	lg_sizing_decide(&s, NULL);
	check_defaults(&s, 1);		/* never below 1 */
}

static void
test_rounding(void **state UNUSED)
{
	struct lg_config cfg = default_config();
	struct lg_sizing s = measured(16, 16, -1, 2.0);

	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.budget, 2);
	cfg.sizing.rounding = LG_ROUND_CEIL;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.budget, 2);	/* an exact quotient is not rounded up */
	s = measured(2, 2, -1, 2.5);
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.budget, 2);	/* ceil still capped by online */
}

static void
test_worker_overrides(void **state UNUSED)
{
	struct lg_config cfg = default_config();
	struct lg_sizing s = measured(8, 8, -1, -1);

	cfg.sizing.loop_workers = 3;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.budget, 8);
	assert_int_equal(s.loop_workers, 3);
	assert_int_equal(s.compute_workers, 7);
	assert_int_equal(s.queue_capacity, 14);

	cfg.jobs.compute_workers = 2;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.compute_workers, 2);
	assert_int_equal(s.queue_capacity, 4);	/* 2 x the C actually run */

	cfg.jobs.queue_capacity = 0;			/* 0 is a real value: no waiting jobs */
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.queue_capacity, 0);
	cfg.jobs.queue_capacity = 100;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.queue_capacity, 100);

	cfg = default_config();
	cfg.sizing.loop_workers = -5;			/* not set */
	cfg.jobs.compute_workers = INT_MAX;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.loop_workers, 8);
	assert_int_equal(s.queue_capacity, INT_MAX);	/* saturates, no overflow */
}

static void
test_cpus_override(void **state UNUSED)
{
	struct lg_config cfg = default_config();
	struct lg_sizing s = measured(16, 2, 4, 1.5);

	cfg.sizing.cpus = 2.5;
	lg_sizing_decide(&s, &cfg);
	assert_true(s.cpus_override == 2.5);
	check_defaults(&s, 2);			/* replaces the measured budget of 1 */
	check_json(&s);
	cfg.sizing.rounding = LG_ROUND_CEIL;
	lg_sizing_decide(&s, &cfg);
	check_defaults(&s, 3);			/* more than affinity: the operator said so */
	cfg.sizing.cpus = 0.3;
	lg_sizing_decide(&s, &cfg);
	check_defaults(&s, 1);
	cfg.sizing.rounding = LG_ROUND_FLOOR;
	lg_sizing_decide(&s, &cfg);
	check_defaults(&s, 1);
	cfg.sizing.cpus = 1e300;
	lg_sizing_decide(&s, &cfg);
	assert_true(s.budget >= 1 && s.budget <= 65536);	/* capped, no int overflow */
	cfg.sizing.cpus = INFINITY;			/* not a usable value: ignored */
	lg_sizing_decide(&s, &cfg);
	assert_true(s.cpus_override == 0);
	check_defaults(&s, 1);
	cfg.sizing.cpus = NAN;
	lg_sizing_decide(&s, &cfg);
	check_defaults(&s, 1);
	check_json(&s);
	cfg.sizing.cpus = 0;
	lg_sizing_decide(&s, &cfg);
	assert_true(s.cpus_override == 0);
	check_defaults(&s, 1);
}

/* Counts for a live resize: a share follows the budget, a count never moves, and the reserve
 * is the counts at every online CPU. */
static void
test_counts_and_resize_reserve(void **state UNUSED)
{
	struct lg_config cfg = default_config();
	struct lg_sizing s = measured(16, 16, -1, 2.0);
	int c, q;

	cfg.sizing.live_resize = 1;
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.live_resize, 1);
	assert_int_equal(s.compute_workers, 1);
	assert_int_equal(s.compute_max, 15);	/* budget - 1 at 16 online CPUs */
	assert_int_equal(s.queue_max, 30);
	cfg.jobs.compute_share = 1.0;		/* 100% */
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.compute_workers, 2);
	assert_int_equal(s.queue_capacity, 4);
	assert_int_equal(s.compute_max, 16);
	lg_sizing_counts(&cfg.jobs, 1, &c, &q);
	assert_int_equal(c, 1);
	assert_int_equal(q, 2);
	cfg.jobs.compute_share = 0.3;		/* floor(0.3 x 10) = 3, not 2 */
	lg_sizing_counts(&cfg.jobs, 10, &c, &q);
	assert_int_equal(c, 3);
	lg_sizing_counts(&cfg.jobs, 1, &c, &q);
	assert_int_equal(c, 1);			/* never below 1 */
	cfg.jobs.queue_capacity = 5;			/* a given queue stays */
	lg_sizing_counts(&cfg.jobs, 10, &c, &q);
	assert_int_equal(q, 5);
	assert_int_equal(lg_sizing_resizable(&cfg.sizing), 1);
	cfg.jobs.compute_workers = 3;		/* a count wins over a share, and is fixed */
	lg_sizing_counts(&cfg.jobs, 10, &c, &q);
	assert_int_equal(c, 3);
	assert_int_equal(lg_sizing_resizable(&cfg.sizing), 1); /* the budget is still followed */
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.compute_max, 3);
	assert_int_equal(s.queue_max, 5);
	cfg = default_config();
	cfg.sizing.live_resize = 1;
	cfg.sizing.cpus = 2;				/* --cpus: nothing is measured, nothing follows */
	assert_int_equal(lg_sizing_resizable(&cfg.sizing), 0);
	cfg.sizing.cpus = 0;
	cfg.sizing.live_resize = 0;
	assert_int_equal(lg_sizing_resizable(&cfg.sizing), 0);
	lg_sizing_decide(&s, &cfg);
	assert_int_equal(s.compute_max, s.compute_workers);
	check_json(&s);
}

/* ---- cpulist parser ---- */

static void
test_cpulist_valid(void **state UNUSED)
{
	static const struct { const char *text; int n; } ok[] = {
		{ "0-3,8-11", 8 }, { "5", 1 }, { "", 0 }, { "\n", 0 }, { "0-15\n", 16 },
		{ "0,2,4", 3 }, { "0-0", 1 }, { "0-3,2-5", 6 }, { "3,3", 1 },
		{ "0-16383", 16384 }, { "8-15", 8 }, { "0-1,3,5-7\n", 6 }, { "007", 1 },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (lg_sizing_parse_cpulist(ok[i].text) != ok[i].n)
			fail_msg("\"%s\": got %d, want %d", ok[i].text,
			    lg_sizing_parse_cpulist(ok[i].text), ok[i].n);
}

static void
test_cpulist_malformed(void **state UNUSED)
{
	static const char *const bad[] = {
		"a", "3-1", "1-", "-1", ",", "1,,2", "1,", ",1", "0-3 4", "0-8:2/4", "16384",
		"99999999999999999999", "0-99999999999999999999", "1 2", "0x1", "+1", " -1",
		"1-2-3", "0,a", "1.5", "0--3",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		if (lg_sizing_parse_cpulist(bad[i]) != -1 || errno != EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
	}
	errno = 0;
	assert_int_equal(lg_sizing_parse_cpulist(NULL), -1);
	assert_int_equal(errno, EINVAL);
}

/* ---- JSON ---- */

static void
test_json_values(void **state UNUSED)
{
	struct lg_config cfg = default_config();
	struct lg_sizing s = measured(16, 16, -1, 1.5);
	char buf[4096];
	struct jobj o;

	strcpy(s.quota_source, "/sys/fs/cgroup/a \"quoted\"\\dir\n/cpu.max");
	lg_sizing_decide(&s, &cfg);
	assert_true(lg_sizing_json(&s, buf, sizeof(buf)) > 0);
	assert_int_equal(parse_jobj(buf, &o), 0);
	assert_string_equal(jget(&o, "quota"), "1.5");
	assert_string_equal(jget(&o, "cpus_override"), "null");
	assert_non_null(strstr(buf, "\"quota_source\":\"/sys/fs/cgroup/a \\\"quoted\\\"\\\\dir\\u000a"));
	check_json(&s);

	s = measured(16, 16, -1, 1.999);
	cfg.sizing.cpus = 0.5;
	lg_sizing_decide(&s, &cfg);
	lg_sizing_json(&s, buf, sizeof(buf));
	assert_int_equal(parse_jobj(buf, &o), 0);
	assert_string_equal(jget(&o, "quota"), "1.999");
	assert_string_equal(jget(&o, "cpus_override"), "0.5");
	assert_string_equal(jget(&o, "quota_source"), "null");
}

static void
test_json_enospc(void **state UNUSED)
{
	struct lg_sizing s = measured(16, 16, -1, -1);
	char buf[4096];
	int n;

	lg_sizing_decide(&s, NULL);
	n = lg_sizing_json(&s, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(lg_sizing_json(&s, buf, (size_t)n + 1), n);	/* exactly fits */
	memset(buf, 'x', sizeof(buf));
	errno = 0;
	assert_int_equal(lg_sizing_json(&s, buf, (size_t)n), -1);	/* no room for the NUL */
	assert_int_equal(errno, ENOSPC);
	assert_string_equal(buf, "");
	errno = 0;
	assert_int_equal(lg_sizing_json(&s, NULL, 0), -1);
	assert_int_equal(errno, ENOSPC);
}

int
main(void)
{
	static struct CMUnitTest tests[NCASES + 16];
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_every_fixture_listed),
		cmocka_unit_test(test_missing_sysroot),
		cmocka_unit_test(test_real_root),
		cmocka_unit_test(test_budget_is_minimum),
		cmocka_unit_test(test_rounding),
		cmocka_unit_test(test_worker_overrides),
		cmocka_unit_test(test_cpus_override),
		cmocka_unit_test(test_counts_and_resize_reserve),
		cmocka_unit_test(test_cpulist_valid),
		cmocka_unit_test(test_cpulist_malformed),
		cmocka_unit_test(test_json_values),
		cmocka_unit_test(test_json_enospc),
	};
	size_t n = 0;

	_Static_assert(sizeof(fixed) / sizeof(fixed[0]) <= 16, "grow tests[]");
	lg_log_level = getenv("LG_TEST_LOG") != NULL ? LG_LOG_DEBUG : LG_LOG_ERROR;
	/* One named test per fixture, so a failure names the tree. */
	for (size_t i = 0; i < NCASES; i++) {
		tests[n].name = cases[i].name;
		tests[n].test_func = test_fixture;
		tests[n].initial_state = (void *)&cases[i];
		n++;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		tests[n++] = fixed[i];
	return _cmocka_run_group_tests("sizing", tests, n, NULL, NULL);
}
