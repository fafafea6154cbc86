/* Unit tests for stats/metrics.c (and the /status renderer beside it): a real arena with pages
 * written the way the processes write them, rendered and checked line by line. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/arena.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "stats/metrics.h"
#include "stats/status.h"

#define MS 1000000ull
#define NLOOPS 2
#define NCOMP  2

static const struct lg_stats_names names;

struct fx {
	struct lg_arena a;
	char *text;
	size_t cap;
	char statfile[256];
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(lg_arena_create(&f->a, 4, NLOOPS + NCOMP, LG_PAGE, LG_PAGE), 0);
	f->a.master->loop_workers = NLOOPS;
	f->a.master->compute_workers = NCOMP;
	f->a.master->queue_capacity = 2;
	f->a.master->budget = 2;
	f->a.master->quota = -1;
	for (uint32_t k = 0; k < NLOOPS + NCOMP; k++)
		atomic_store(&f->a.procs[k].pid, (int32_t)(1000 + k));
	f->cap = lg_metrics_bound(NLOOPS, &names);
	f->text = malloc(f->cap);
	assert_non_null(f->text);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	if (f->statfile[0])
		unlink(f->statfile);
	lg_arena_destroy(&f->a);
	free(f->text);
	free(f);
	return 0;
}

/* The renderer's labels, as a router would give them: a full table of rows, the last "none". */
static const char *const route_labels[LG_STATS_ROUTES] = {
	"/ping", "/health", "/ready", "/metrics", "/status", "/heavy", "/compress", "/r7", "/r8",
	"/r9", "/r10", "/r11", "/r12", "/r13", "/r14", "none",
};
static const char *const kind_labels[] = { NULL, "heavy", "compress" };
static const struct lg_stats_names names = { LG_STATS_ROUTES, route_labels, 3, kind_labels };

static const char *
render(struct fx *f)
{
	struct lg_buf b;

	lg_buf_init(&b, f->text, f->cap);
	assert_int_equal(lg_metrics_render(&b, &f->a, &names, 0), 0);
	return f->text;
}

/* The value of the sample line that starts with `series ` (exact name and labels). */
static double
sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	fail_msg("no sample %s", series);
	return -1;
}

static void
test_sums_over_pages(void **state)
{
	struct fx *f = *state;
	const char *t;
	unsigned heavy = 0;

	while (strcmp(route_labels[heavy], "/heavy") != 0)
		heavy++;
	for (uint32_t k = 0; k < NLOOPS; k++) {
		lg_stats_add(&lg_arena_route_stats(&f->a, k, heavy)->responses[lg_stats_code_index(200)], 3 + k);
		lg_stats_add(&lg_arena_route_stats(&f->a, k, heavy)->responses[lg_stats_code_index(299)], 1);
		lg_hist_observe(&lg_arena_route_stats(&f->a, k, heavy)->duration, lg_stats_time_bounds,
		    LG_STATS_BOUNDS, 7 * MS);
		lg_stats_add(&f->a.procs[k].rejected_full, 2);
		lg_stats_add(&f->a.procs[k].rejected_query, 1 + k);
		atomic_store(&f->a.procs[k].inflight, 5);
		atomic_store(&f->a.procs[k].connections, 10);
	}
	lg_stats_lag(&f->a.procs[1], 0, 30 * MS);
	atomic_store(&f->a.procs[NLOOPS].job, 1);                  /* compute[0] busy */
	lg_hist_observe(&lg_arena_kind_stats(&f->a, NLOOPS + 1, 1)->run, lg_stats_time_bounds,
	    LG_STATS_BOUNDS, 2000 * MS);
	lg_stats_add(&f->a.procs[NLOOPS + 1].bad_headers, 4);
	lg_stats_add(&f->a.master->restarts[1][LG_RESTART_DEADLINE], 1);
	assert_int_equal(lg_slot_claim(&f->a, 0, &(uint32_t){ 0 }), 0);
	assert_int_equal(lg_slot_move(&f->a.slots[0], 1, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	t = render(f);
	assert_true(sample(t, "lagless_requests_total{route=\"/heavy\",code=\"200\"}") == 7);
	assert_true(sample(t, "lagless_requests_total{route=\"/heavy\",code=\"other\"}") == 2);
	assert_null(strstr(t, "route=\"/ping\",code=")); /* never asked: no series */
	assert_true(sample(t, "lagless_request_duration_seconds_count{route=\"/heavy\"}") == 2);
	assert_true(sample(t, "lagless_request_duration_seconds_bucket{route=\"/heavy\",le=\"0.005\"}") == 0);
	assert_true(sample(t, "lagless_request_duration_seconds_bucket{route=\"/heavy\",le=\"0.01\"}") == 2);
	assert_true(sample(t, "lagless_request_duration_seconds_sum{route=\"/heavy\"}") > 0.0139);
	assert_true(sample(t, "lagless_jobs_rejected_total{reason=\"queue_full\"}") == 4);
	assert_true(sample(t, "lagless_jobs_rejected_total{reason=\"bad_query\"}") == 3);
	assert_true(sample(t, "lagless_inflight_requests") == 10);
	assert_true(sample(t, "lagless_connections_open") == 20);
	assert_true(sample(t, "lagless_compute_busy") == 1);
	assert_true(sample(t, "lagless_compute_processes") == NCOMP);
	assert_true(sample(t, "lagless_loop_workers") == NLOOPS);
	assert_true(sample(t, "lagless_queue_depth") == 1);
	assert_true(sample(t, "lagless_queue_capacity") == 2);
	assert_true(sample(t, "lagless_loop_lag_seconds_count{worker=\"0\"}") == 0);
	assert_true(sample(t, "lagless_loop_lag_seconds_count{worker=\"1\"}") == 1);
	assert_true(sample(t, "lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.025\"}") == 0);
	assert_true(sample(t, "lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"0.05\"}") == 1);
	assert_true(sample(t, "lagless_loop_lag_seconds_bucket{worker=\"1\",le=\"+Inf\"}") == 1);
	assert_true(sample(t, "lagless_job_run_seconds_bucket{kind=\"heavy\",le=\"2.5\"}") == 1);
	assert_true(sample(t, "lagless_job_run_seconds_bucket{kind=\"heavy\",le=\"1\"}") == 0);
	assert_true(sample(t, "lagless_jobs_failed_total{reason=\"bad_header\"}") == 4);
	assert_true(sample(t, "lagless_process_restarts_total{role=\"compute\",reason=\"deadline\"}") == 1);
	assert_true(sample(t, "lagless_process_restarts_total{role=\"loop\",reason=\"crash\"}") == 0);
	assert_true(sample(t, "lagless_cgroup_cpu_quota") > 1e308); /* +Inf: no quota */
	assert_null(strstr(t, "throttled"));                       /* no cpu.stat configured */
	/* a dead process's gauges stop counting */
	atomic_store(&f->a.procs[0].pid, 0);
	t = render(f);
	assert_true(sample(t, "lagless_inflight_requests") == 5);
	assert_true(sample(t, "lagless_loop_workers") == NLOOPS - 1);
}

/* Every family has HELP and TYPE before its samples, and appears once. */
static void
test_families_well_formed(void **state)
{
	struct fx *f = *state;
	const char *t = render(f);
	char seen[64][64];
	int nseen = 0;

	for (const char *p = t; *p; p = strchr(p, '\n') + 1) {
		char name[64];

		if (strncmp(p, "# TYPE ", 7) == 0) {
			assert_int_equal(sscanf(p + 7, "%63s", name), 1);
			for (int i = 0; i < nseen; i++)
				assert_string_not_equal(seen[i], name);
			assert_true(nseen < 64);
			strcpy(seen[nseen++], name);
		}
		assert_non_null(strchr(p, '\n'));
	}
	assert_true(nseen >= 25);
	assert_non_null(strstr(t, "# HELP lagless_loop_lag_seconds "));
	assert_non_null(strstr(t, "lagless_build_info{version=\""));
}

static void
test_cpu_stat(void **state)
{
	struct fx *f = *state;
	struct lg_cpu_stat cs;
	static const char v2[] = "usage_usec 100\nnr_periods 50\nnr_throttled 7\nthrottled_usec 1500\n"
	    "nr_bursts 0\n";
	static const char v1[] = "nr_periods 9\nnr_throttled 3\nthrottled_time 2000000000\n";
	const char *t;
	int fd;

	lg_metrics_parse_cpu_stat(v2, sizeof(v2) - 1, &cs);
	assert_true(cs.have);
	assert_int_equal(cs.nr_throttled, 7);
	assert_int_equal(cs.throttled_ns, 1500000);
	lg_metrics_parse_cpu_stat(v1, sizeof(v1) - 1, &cs);
	assert_true(cs.have);
	assert_int_equal(cs.nr_throttled, 3);
	assert_int_equal(cs.throttled_ns, 2000000000);
	lg_metrics_parse_cpu_stat("usage_usec 5\n", 13, &cs); /* no cpu controller: nothing */
	assert_false(cs.have);
	lg_metrics_parse_cpu_stat("nr_throttled", 12, &cs);
	assert_false(cs.have);
	/* rendered from the file named in the master page */
	snprintf(f->statfile, sizeof(f->statfile), "%s/lagless-cpustat-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(f->statfile);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, v2, sizeof(v2) - 1), (ssize_t)sizeof(v2) - 1);
	close(fd);
	snprintf(f->a.master->cpu_stat, sizeof(f->a.master->cpu_stat), "%s", f->statfile);
	f->a.master->quota = 1.5;
	t = render(f);
	assert_true(sample(t, "lagless_cgroup_throttled_periods_total") == 7);
	assert_true(sample(t, "lagless_cgroup_throttled_seconds_total") == 0.0015);
	assert_true(sample(t, "lagless_cgroup_cpu_quota") == 1.5);
}

/* The bound holds the largest rendering: every route x code, every histogram filled. */
static void
test_bound_holds_everything(void **state)
{
	struct fx *f = *state;
	struct lg_buf b;

	for (uint32_t k = 0; k < NLOOPS; k++)
		for (unsigned r = 0; r < names.nroutes; r++) {
			for (unsigned i = 0; i < LG_STATS_CODES; i++)
				lg_stats_add(&lg_arena_route_stats(&f->a, k, r)->responses[i], UINT64_MAX / 8);
			lg_hist_observe(&lg_arena_route_stats(&f->a, k, r)->duration, lg_stats_time_bounds,
			    LG_STATS_BOUNDS, UINT64_MAX / 8);
		}
	render(f);
	/* too small a buffer reports overflow instead of serving a cut text */
	lg_buf_init(&b, f->text, 1000);
	assert_int_equal(lg_metrics_render(&b, &f->a, &names, 0), -1);
}

/* The bound grows with the registry: 100 routes and 64 kinds with the longest names, every
 * series present and every counter at its widest, fit (a fixed 64 KiB once made /metrics a
 * 500 past about 27 routes or 14 kinds). */
static void
test_bound_counts_routes_and_kinds(void **state)
{
	enum { NR = 101, NK = 65 };
	static char rname[NR][256], kname[NK][128];
	static const char *rl[NR], *kl[NK];
	struct lg_stats_names nm = { NR, rl, NK, kl };
	struct lg_arena a;
	struct lg_buf b;
	size_t cap;
	char *text;

	(void)state;
	for (unsigned r = 0; r < NR; r++) {
		snprintf(rname[r], sizeof(rname[r]), "/%03u", r);
		memset(rname[r] + 4, 'x', sizeof(rname[r]) - 5);
		rl[r] = rname[r];
	}
	kl[0] = NULL;
	for (unsigned k = 1; k < NK; k++) {
		snprintf(kname[k], sizeof(kname[k]), "m%02u.", k);
		memset(kname[k] + 4, 'k', sizeof(kname[k]) - 5);
		kl[k] = kname[k];
	}
	assert_int_equal(lg_arena_create_sized(&a, 4, NLOOPS + NCOMP, LG_PAGE, LG_PAGE, NR, NK), 0);
	a.master->loop_workers = NLOOPS;
	for (uint32_t k = 0; k < NLOOPS + NCOMP; k++) {
		for (unsigned r = 0; r < NR; r++) {
			for (unsigned i = 0; i < LG_STATS_CODES; i++)
				lg_stats_add(&lg_arena_route_stats(&a, k, r)->responses[i], UINT64_MAX / 8);
			lg_hist_observe(&lg_arena_route_stats(&a, k, r)->duration, lg_stats_time_bounds,
			    LG_STATS_BOUNDS, UINT64_MAX / 8);
		}
		for (unsigned i = 1; i < NK; i++) {
			lg_hist_observe(&lg_arena_kind_stats(&a, k, i)->run, lg_stats_time_bounds,
			    LG_STATS_BOUNDS, UINT64_MAX / 8);
			lg_hist_observe(&lg_arena_kind_stats(&a, k, i)->queue_wait,
			    lg_stats_time_bounds, LG_STATS_BOUNDS, UINT64_MAX / 8);
		}
	}
	cap = lg_metrics_bound(NLOOPS, &nm);
	assert_non_null(text = malloc(cap));
	lg_buf_init(&b, text, cap);
	assert_int_equal(lg_metrics_render(&b, &a, &nm, 0), 0);
	assert_non_null(strstr(text, rname[NR - 1]));
	assert_non_null(strstr(text, kname[NK - 1]));
	free(text);
	lg_arena_destroy(&a);
}

static void
test_status_and_ready(void **state)
{
	struct fx *f = *state;
	size_t cap = lg_status_bound(f->a.nprocs);
	char *s = malloc(cap);
	struct lg_buf b;

	assert_non_null(s);
	assert_false(lg_status_ready(f->a.master, 0));          /* starting */
	atomic_store(&f->a.master->ready, 1);
	assert_true(lg_status_ready(f->a.master, 0));
	assert_false(lg_status_ready(f->a.master, 1));          /* this loop drains */
	atomic_store(&f->a.master->stopping, 1);
	assert_false(lg_status_ready(f->a.master, 0));          /* the server drains */
	atomic_store(&f->a.master->stopping, 0);
	atomic_store(&f->a.procs[0].state, LG_PROC_RUNNING);
	atomic_store(&f->a.procs[NLOOPS + 1].state, LG_PROC_RUNNING);
	atomic_store(&f->a.procs[NLOOPS + 1].job, (2ull << 32) | 1);
	atomic_store(&f->a.procs[NLOOPS + 1].job_since_ns, 1000 * MS);
	f->a.slots[2].job.kind = 2; /* "compress" in kind_labels */
	lg_stats_lag(&f->a.procs[0], 1500 * MS, 3 * MS);
	lg_buf_init(&b, s, cap);
	assert_int_equal(lg_status_render(&b, &f->a, &names, 1500 * MS, 0), 0);
	assert_non_null(strstr(s, "\"ready\":true"));
	assert_non_null(strstr(s, "\"role\":\"loop\",\"index\":0,\"pid\":1000,\"state\":\"running\""));
	assert_non_null(strstr(s, "\"role\":\"compute\",\"index\":1,\"pid\":1003,\"state\":\"busy\""));
	assert_non_null(strstr(s, "\"job\":{\"slot\":2,\"kind\":\"compress\",\"age_ms\":500.000}"));
	assert_non_null(strstr(s, "\"max_ms\":3.000,\"samples\":1"));
	assert_non_null(strstr(s, "\"quota\":null"));
	assert_int_equal(s[b.len - 1], '\n');
	lg_buf_init(&b, s, 200);
	assert_int_equal(lg_status_render(&b, &f->a, &names, 0, 0), -1);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sums_over_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_families_well_formed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cpu_stat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound_holds_everything, setup, teardown),
		cmocka_unit_test(test_bound_counts_routes_and_kinds),
		cmocka_unit_test_setup_teardown(test_status_and_ready, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
