#include "stats/metrics.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/version.h"
#include "stats/offered.h"
#include "stats/poolview.h"
#include "shm/slot.h"
#include "shm/stats.h"

#define P(...) lg_buf_printf(b, __VA_ARGS__)

/* A histogram summed over pages: counts per bucket (non-cumulative) and the sum in ns. */
struct hsum {
	uint64_t bucket[LG_STATS_BOUNDS + 1];
	uint64_t sum_ns;
};

/* A series line: its name, the fixed labels, a value of 20 digits or a %g bound and the
 * punctuation fit in this many bytes, plus the route or kind label itself. */
#define SERIES_LINE 160

size_t
lg_metrics_bound(uint32_t nloops, const struct lg_stats_names *nm)
{
	/* 64 KiB covers every family that does not grow with the registry; one lag histogram is
	 * 19 lines of < 100 bytes. A route has at most LG_STATS_CODES counter lines and one
	 * duration histogram (LG_STATS_BOUNDS + 3 lines); a kind two job histograms and a line in
	 * each of the three health families. */
	size_t n = 64 * 1024 + (size_t)nloops * 2560, maxr = 0, maxk = 0, len;

	for (unsigned r = 0; r < nm->nroutes; r++) {
		len = nm->route[r] ? strlen(nm->route[r]) : 0;
		maxr = len > maxr ? len : maxr;
		n += (size_t)(LG_STATS_CODES + LG_STATS_BOUNDS + 3) * (SERIES_LINE + len);
	}
	for (unsigned k = 0; k < nm->nkinds; k++) {
		len = nm->kind[k] ? strlen(nm->kind[k]) : 0;
		maxk = len > maxk ? len : maxk;
		n += (size_t)(2 * (LG_STATS_BOUNDS + 3) + 3) * (SERIES_LINE + len);
	}
	/* the health families' rows are (kind, route) pairs, both labels on each line */
	return n + (size_t)3 * LG_KIND_HEALTH * (SERIES_LINE + maxr + maxk);
}

static void
family(struct lg_buf *b, const char *name, const char *type, const char *help)
{
	P("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
hsum_add(struct hsum *s, const struct lg_hist *h, unsigned nb)
{
	for (unsigned i = 0; i <= nb; i++)
		s->bucket[i] += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
	s->sum_ns += atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}

/* One histogram's samples; labels is "" or `name="value",` (with the trailing comma). */
static void
hist(struct lg_buf *b, const char *name, const char *labels, const struct hsum *s,
    const uint64_t *bounds, unsigned nb)
{
	uint64_t cum = 0;
	size_t ll = strlen(labels);

	for (unsigned i = 0; i < nb; i++) {
		cum += s->bucket[i];
		P("%s_bucket{%sle=\"%g\"} %" PRIu64 "\n", name, labels, (double)bounds[i] / 1e9, cum);
	}
	cum += s->bucket[nb];
	P("%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, cum);
	/* _sum and _count carry the same labels without the trailing comma */
	P("%s_sum{%.*s} %.9f\n", name, ll ? (int)ll - 1 : 0, labels, (double)s->sum_ns / 1e9);
	P("%s_count{%.*s} %" PRIu64 "\n", name, ll ? (int)ll - 1 : 0, labels, cum);
}

static uint64_t
sum_field(const struct lg_arena *a, uint32_t from, uint32_t to, size_t off)
{
	uint64_t n = 0;

	for (uint32_t k = from; k < to; k++)
		n += atomic_load_explicit((const _Atomic uint64_t *)((const char *)&a->procs[k] + off),
		    memory_order_relaxed);
	return n;
}

#define SUM(a, from, to, field) sum_field(a, from, to, offsetof(struct lg_proc_page, field))

static void
lag_family(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops)
{
	family(b, "lagless_loop_lag_seconds", "histogram",
	    "How late the loop's repeating probe timer fired, per loop worker.");
	for (uint32_t k = 0; k < nloops; k++) {
		struct hsum s = { { 0 }, 0 };
		char labels[32];

		hsum_add(&s, &a->procs[k].lag, LG_LAG_BOUNDS);
		snprintf(labels, sizeof(labels), "worker=\"%u\",", k);
		hist(b, "lagless_loop_lag_seconds", labels, &s, lg_stats_lag_bounds, LG_LAG_BOUNDS);
	}
}

static void
request_families(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops,
    const struct lg_stats_names *nm)
{
	unsigned nroutes = nm->nroutes < a->stat_routes ? nm->nroutes : a->stat_routes;

	family(b, "lagless_requests_total", "counter", "Responses written, by route and status.");
	for (unsigned r = 0; r < nroutes; r++)
		for (unsigned i = 0; i < LG_STATS_CODES; i++) {
			uint64_t n = 0;
			for (uint32_t k = 0; k < nloops; k++)
				n += atomic_load_explicit(&lg_arena_route_stats(a, k, r)->responses[i],
				    memory_order_relaxed);
			int code = lg_stats_code_at(i);

			if (n == 0)
				continue;
			if (code)
				P("lagless_requests_total{route=\"%s\",code=\"%d\"} %" PRIu64 "\n",
				    nm->route[r], code, n);
			else
				P("lagless_requests_total{route=\"%s\",code=\"other\"} %" PRIu64 "\n",
				    nm->route[r], n);
		}
	family(b, "lagless_request_duration_seconds", "histogram",
	    "Time from a request's first byte to its response's last byte, by route.");
	for (unsigned r = 0; r < nroutes; r++) {
		struct hsum s = { { 0 }, 0 };
		char labels[300];

		for (uint32_t k = 0; k < nloops; k++)
			hsum_add(&s, &lg_arena_route_stats(a, k, r)->duration, LG_STATS_BOUNDS);
		uint64_t n = 0;
		for (unsigned i = 0; i <= LG_STATS_BOUNDS; i++)
			n += s.bucket[i];
		if (n == 0)
			continue; /* a route never asked for has no series */
		snprintf(labels, sizeof(labels), "route=\"%s\",", nm->route[r]);
		hist(b, "lagless_request_duration_seconds", labels, &s, lg_stats_time_bounds,
		    LG_STATS_BOUNDS);
	}
}

static void
job_hist(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops,
    const struct lg_stats_names *nm, const char *name, int run)
{
	for (uint32_t kind = 1; kind < a->stat_kinds && kind < nm->nkinds; kind++) {
		struct hsum s = { { 0 }, 0 };
		char labels[160]; /* kind="module.kind", names of up to 2 x 64 bytes */

		for (uint32_t k = nloops; k < a->nprocs; k++) {
			const struct lg_kind_stats *ks = lg_arena_kind_stats(a, k, kind);

			hsum_add(&s, run ? &ks->run : &ks->queue_wait, LG_STATS_BOUNDS);
		}
		if (nm->kind[kind] == NULL)
			continue;
		snprintf(labels, sizeof(labels), "kind=\"%s\",", nm->kind[kind]);
		hist(b, name, labels, &s, lg_stats_time_bounds, LG_STATS_BOUNDS);
	}
}

/* The label of route index `route` in nm, "unknown" when nm has none for it. */
static const char *
route_label(const struct lg_stats_names *nm, uint32_t route)
{
	return route < nm->nroutes && nm->route[route] ? nm->route[route] : "unknown";
}

/* Deaths of compute processes charged to the job kind they ran, and quarantines, by kind and
 * route (a row of the master page's table is a pair). */
static void
kind_health_families(struct lg_buf *b, const struct lg_master_page *mp,
    const struct lg_stats_names *nm, uint64_t now_ns)
{
	static const struct { const char *name, *type, *help; } fam[3] = {
		{ "lagless_job_process_deaths_total", "counter",
		  "Compute processes that died (crash) while running a job, by its kind and route." },
		{ "lagless_job_kind_quarantines_total", "counter",
		  "Times a job kind was quarantined on a route for killing compute processes "
		  "(--quarantine-deaths)." },
		{ "lagless_job_kind_quarantined", "gauge",
		  "1 while a job kind is quarantined on a route: its requests there get 503." },
	};

	for (int f = 0; f < 3; f++) {
		family(b, fam[f].name, fam[f].type, fam[f].help);
		for (unsigned i = 0; i < LG_KIND_HEALTH; i++) {
			const struct lg_kind_health *h = &mp->kinds[i];
			uint32_t kind = atomic_load_explicit(&h->kind, memory_order_acquire);
			uint64_t v = f == 0 ? atomic_load(&h->deaths) : f == 1 ?
			    atomic_load(&h->quarantines) :
			    lg_stats_quarantine_left(mp, kind, h->route, now_ns) > 0;

			if (kind == 0)
				break;
			P("%s{kind=\"%s\",route=\"%s\"} %" PRIu64 "\n", fam[f].name,
			    lg_stats_kind_name(nm, kind), route_label(nm, h->route), v);
		}
	}
}

static void
job_families(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops,
    const struct lg_stats_names *nm, uint64_t now_ns)
{
	family(b, "lagless_job_queue_wait_seconds", "histogram",
	    "Time a job waited in the queue before a compute process started it, by kind.");
	job_hist(b, a, nloops, nm, "lagless_job_queue_wait_seconds", 0);
	family(b, "lagless_job_run_seconds", "histogram", "Time a job ran, by kind.");
	job_hist(b, a, nloops, nm, "lagless_job_run_seconds", 1);
	family(b, "lagless_jobs_rejected_total", "counter",
	    "Requests refused before running: queue_full (503: every job slot taken), transit_full "
	    "(503: every transit buffer taken), client_share (503: the client address holds its "
	    "share of transit buffers, or its slow upload was cut), memory (503: shared memory "
	    "could not be backed), too_large (413), quarantined (503: the job kind keeps killing "
	    "compute processes), queue_wait (503 at admission: the shortest queue wait stayed above "
	    "--queue-wait-target-ms), queue_wait_shed (503: waited past the limit in the queue), "
	    "module_init (503: the kind's module init failed or crashed; retried in the background), "
	    "bad_query (400 on the loop before admission: a query argument the kind declares is "
	    "malformed or out of range).");
	P("lagless_jobs_rejected_total{reason=\"queue_full\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_full));
	P("lagless_jobs_rejected_total{reason=\"queue_wait\"} %" PRIu64 "\n",
	    lg_poolview_queue_wait(a, 0));
	P("lagless_jobs_rejected_total{reason=\"queue_wait_shed\"} %" PRIu64 "\n",
	    lg_poolview_queue_wait(a, 1));
	P("lagless_jobs_rejected_total{reason=\"transit_full\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_transit));
	P("lagless_jobs_rejected_total{reason=\"client_share\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_client));
	P("lagless_jobs_rejected_total{reason=\"memory\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_memory));
	P("lagless_jobs_rejected_total{reason=\"quarantined\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_quarantine));
	P("lagless_jobs_rejected_total{reason=\"too_large\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_large));
	P("lagless_jobs_rejected_total{reason=\"module_init\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_module));
	P("lagless_jobs_rejected_total{reason=\"bad_query\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, rejected_query));
	family(b, "lagless_jobs_timed_out_total", "counter",
	    "Jobs answered 504 because they passed the deadline (queue wait included).");
	P("lagless_jobs_timed_out_total %" PRIu64 "\n", SUM(a, 0, nloops, timed_out));
	family(b, "lagless_jobs_failed_total", "counter",
	    "Jobs that failed: crash (502, the compute process died), error (the job failed), "
	    "bad_header (a channel header failed validation and was dropped).");
	P("lagless_jobs_failed_total{reason=\"crash\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, failed_crash));
	P("lagless_jobs_failed_total{reason=\"error\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, failed_error));
	P("lagless_jobs_failed_total{reason=\"bad_header\"} %" PRIu64 "\n",
	    SUM(a, 0, a->nprocs, bad_headers));
	family(b, "lagless_jobs_client_errors_total", "counter",
	    "Jobs the kind answered with a 4xx (it refused the request's input; also counted in "
	    "lagless_jobs_failed_total{reason=\"error\"}). Logged at debug level only.");
	P("lagless_jobs_client_errors_total %" PRIu64 "\n", SUM(a, 0, nloops, jobs_client_error));
	kind_health_families(b, a->master, nm, now_ns);
	family(b, "lagless_jobs_cancelled_total", "counter",
	    "Jobs given up because the client closed the connection while they were queued or ran.");
	P("lagless_jobs_cancelled_total %" PRIu64 "\n", SUM(a, 0, nloops, cancelled));
}

void
lg_metrics_parse_cpu_stat(const char *text, size_t len, struct lg_cpu_stat *out)
{
	const char *p = text, *end = text + len;
	int have_nr = 0, have_time = 0;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		const char *sp = memchr(p, ' ', (size_t)(stop - p));
		uint64_t v = 0;

		if (sp != NULL) {
			for (const char *d = sp + 1; d < stop && *d >= '0' && *d <= '9'; d++)
				v = v * 10 + (uint64_t)(*d - '0');
			size_t kl = (size_t)(sp - p);
			if (kl == 12 && memcmp(p, "nr_throttled", 12) == 0) {
				out->nr_throttled = v;
				have_nr = 1;
			} else if (kl == 14 && memcmp(p, "throttled_usec", 14) == 0) {
				out->throttled_ns = v * 1000u;
				have_time = 1;
			} else if (kl == 14 && memcmp(p, "throttled_time", 14) == 0) {
				out->throttled_ns = v;
				have_time = 1;
			}
		}
		p = stop + 1;
	}
	out->have = have_nr && have_time;
}

/* The only system calls of a scrape: open, read and close of cpu.stat (a few hundred bytes). */
static void
read_cpu_stat(const char *path, struct lg_cpu_stat *out)
{
	char text[2048];
	ssize_t n;
	int fd;

	memset(out, 0, sizeof(*out));
	if (path[0] == '\0' || (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n > 0)
		lg_metrics_parse_cpu_stat(text, (size_t)n, out);
}

/* A byte count, or +Inf for "no bound" (UINT64_MAX). */
static void
bytes_gauge(struct lg_buf *b, const char *name, uint64_t v)
{
	if (v == UINT64_MAX)
		P("%s +Inf\n", name);
	else
		P("%s %" PRIu64 "\n", name, v);
}

/* The memory budget (sizing/memsize.h) and what is charged against it. */
static void
memory_families(struct lg_buf *b, const struct lg_master_page *mp)
{
	family(b, "lagless_memory_limit_bytes", "gauge",
	    "Memory the server may use: the tightest cgroup limit, MemTotal or --memory-limit.");
	bytes_gauge(b, "lagless_memory_limit_bytes", atomic_load(&mp->mem_limit));
	family(b, "lagless_shm_budget_bytes", "gauge",
	    "Request bodies and results that may be backed in shared memory at once.");
	bytes_gauge(b, "lagless_shm_budget_bytes", atomic_load(&mp->shm_budget));
	family(b, "lagless_shm_charged_bytes", "gauge",
	    "Bytes charged against the shared-memory budget now (given back with the pages).");
	P("lagless_shm_charged_bytes %" PRIu64 "\n", atomic_load(&mp->shm_charged));
	family(b, "lagless_oom_kills_total", "counter",
	    "Compute processes killed by the kernel's OOM killer (503 memory, not charged to a kind).");
	P("lagless_oom_kills_total %" PRIu64 "\n", atomic_load(&mp->oom_kills));
}

static void
sizing_families(struct lg_buf *b, const struct lg_master_page *mp, uint64_t now_ns)
{
	struct lg_cpu_stat cs;

	family(b, "lagless_build_info", "gauge", "Always 1; the version is in the label.");
	P("lagless_build_info{version=\"%s\"} 1\n", LG_VERSION);
	family(b, "lagless_start_time_seconds", "gauge", "Start time of the server, Unix seconds.");
	P("lagless_start_time_seconds %.3f\n", (double)mp->start_unix_ms / 1e3);
	family(b, "lagless_cpu_budget", "gauge", "CPU budget the server sized itself for (a live "
	    "resize follows a changed quota).");
	P("lagless_cpu_budget %u\n", atomic_load(&mp->budget));
	family(b, "lagless_live_resize", "gauge",
	    "1 when the compute processes and queue follow a CPU budget that changes.");
	P("lagless_live_resize %u\n", atomic_load(&mp->live_resize));
	family(b, "lagless_cpu_budget_changes_total", "counter",
	    "Changes of the CPU budget applied at run time (each seen in two readings in a row).");
	P("lagless_cpu_budget_changes_total %" PRIu64 "\n", atomic_load(&mp->budget_changes));
	family(b, "lagless_resize_processes_total", "counter",
	    "Compute processes started (grow) or retired after their job (shrink) by a live resize.");
	P("lagless_resize_processes_total{action=\"grow\"} %" PRIu64 "\n",
	    atomic_load(&mp->resize_spawned));
	P("lagless_resize_processes_total{action=\"shrink\"} %" PRIu64 "\n",
	    atomic_load(&mp->resize_retired));
	family(b, "lagless_compute_processes_target", "gauge",
	    "Compute processes the pool is sized for now.");
	P("lagless_compute_processes_target %u\n", atomic_load(&mp->compute_workers));
	family(b, "lagless_cgroup_cpu_quota", "gauge",
	    "Tightest cgroup CPU quota in CPUs (quota / period); +Inf when there is none.");
	double quota = atomic_load(&mp->quota);

	if (quota < 0)
		P("lagless_cgroup_cpu_quota +Inf\n");
	else
		P("lagless_cgroup_cpu_quota %g\n", quota);
	read_cpu_stat(mp->cpu_stat, &cs);
	if (cs.have) {
		family(b, "lagless_cgroup_throttled_periods_total", "counter",
		    "Quota periods in which the cgroup was throttled (cpu.stat nr_throttled).");
		P("lagless_cgroup_throttled_periods_total %" PRIu64 "\n", cs.nr_throttled);
		family(b, "lagless_cgroup_throttled_seconds_total", "counter",
		    "Time the cgroup was throttled by its CPU quota (cpu.stat).");
		P("lagless_cgroup_throttled_seconds_total %.6f\n", (double)cs.throttled_ns / 1e9);
	}
	family(b, "lagless_shm_bytes_in_use", "gauge",
	    "Bytes of the shared-memory arena backed by memory (refreshed every 250 ms).");
	P("lagless_shm_bytes_in_use %" PRIu64 "\n", atomic_load(&mp->shm_bytes));
	memory_families(b, mp);
	family(b, "lagless_ready", "gauge", "1 when /ready answers 200.");
	P("lagless_ready %d\n", atomic_load(&mp->ready) && !atomic_load(&mp->stopping));
	(void)now_ns;
}

/* The apps the master runs ([app NAME], shm/layout.h lg_app_row). */
static void
app_families(struct lg_buf *b, const struct lg_master_page *mp)
{
	uint32_t n = atomic_load(&mp->napps);

	if (n == 0)
		return;
	family(b, "lagless_app_restarts_total", "counter",
	    "Processes of an [app] the master restarted (they died or were not ready in time).");
	for (uint32_t i = 0; i < n && i < LG_APP_ROWS; i++)
		P("lagless_app_restarts_total{app=\"%.23s\"} %" PRIu64 "\n", mp->apps[i].name,
		    atomic_load(&mp->apps[i].restarts));
	family(b, "lagless_app_processes", "gauge",
	    "Processes of an [app]: configured, running, and ready (past the readiness probe).");
	for (uint32_t i = 0; i < n && i < LG_APP_ROWS; i++) {
		const struct lg_app_row *r = &mp->apps[i];

		P("lagless_app_processes{app=\"%.23s\",state=\"configured\"} %u\n", r->name,
		    (unsigned)atomic_load(&r->processes));
		P("lagless_app_processes{app=\"%.23s\",state=\"running\"} %u\n", r->name,
		    (unsigned)atomic_load(&r->running));
		P("lagless_app_processes{app=\"%.23s\",state=\"ready\"} %u\n", r->name,
		    (unsigned)__builtin_popcount(atomic_load(&r->ready_mask)));
	}
}

static void
process_families(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops)
{
	uint32_t loops = 0, computes = 0, busy = 0, inflight = 0, conns = 0, cbuf = 0, cfree = 0;

	for (uint32_t k = 0; k < a->nprocs; k++) {
		const struct lg_proc_page *p = &a->procs[k];

		if (atomic_load_explicit(&p->pid, memory_order_relaxed) == 0)
			continue;
		if (k < nloops) {
			loops++;
			inflight += atomic_load_explicit(&p->inflight, memory_order_relaxed);
			conns += atomic_load_explicit(&p->connections, memory_order_relaxed);
			cbuf += atomic_load_explicit(&p->conn_buffers, memory_order_relaxed);
			cfree += atomic_load_explicit(&p->conn_buffers_free, memory_order_relaxed);
		} else {
			computes++;
			busy += atomic_load_explicit(&p->job, memory_order_relaxed) != LG_NO_JOB;
		}
	}
	family(b, "lagless_loop_workers", "gauge", "Loop worker processes alive.");
	P("lagless_loop_workers %u\n", loops);
	family(b, "lagless_compute_processes", "gauge", "Compute processes alive.");
	P("lagless_compute_processes %u\n", computes);
	family(b, "lagless_compute_busy", "gauge", "Compute processes running a job.");
	P("lagless_compute_busy %u\n", busy);
	family(b, "lagless_inflight_requests", "gauge", "Requests received and not yet answered.");
	P("lagless_inflight_requests %u\n", inflight);
	family(b, "lagless_connections_open", "gauge", "Open client connections.");
	P("lagless_connections_open %u\n", conns);
	family(b, "lagless_connection_buffers", "gauge",
	    "Connection buffers (one block of about 33 KiB of address space each) of all loops: "
	    "in_use, held by a connection with bytes in flight; free, kept for reuse until a "
	    "trim unmaps them. An idle keep-alive connection holds none. Refreshed each 100 ms.");
	P("lagless_connection_buffers{state=\"in_use\"} %u\n", cbuf);
	P("lagless_connection_buffers{state=\"free\"} %u\n", cfree);
	family(b, "lagless_connections_refused_total", "counter",
	    "Connections accepted over --max-conns and answered 503 at once (Retry-After: 1), "
	    "then closed.");
	P("lagless_connections_refused_total %" PRIu64 "\n", SUM(a, 0, nloops, conns_refused));
	family(b, "lagless_process_restarts_total", "counter",
	    "Processes the master restarted, by role and reason (crash: killed by a signal; exit: "
	    "exited by itself; deadline: killed for a job past its deadline; job: died of the job "
	    "it ran; client_gone: killed because its job's client left; stuck: a loop worker "
	    "killed for a stale heartbeat).");
	for (int role = 0; role < LG_ROLES; role++)
		for (int r = 0; r < LG_RESTART_REASONS; r++)
			P("lagless_process_restarts_total{role=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
			    role == 0 ? "loop" : "compute", lg_stats_restart_reason((unsigned)r),
			    atomic_load(&a->master->restarts[role][r]));
	app_families(b, a->master);
}

static void
queue_families(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops)
{
	uint32_t n[LG_SLOT_STATES];

	lg_slot_census(a, n);
	lg_poolview_metrics(b, a);
	lg_offered_metrics(b, a);
	family(b, "lagless_queue_depth", "gauge", "Jobs waiting for a compute process.");
	P("lagless_queue_depth %u\n", n[LG_SLOT_QUEUED]);
	family(b, "lagless_queue_capacity", "gauge",
	    "Jobs that may wait beyond the running ones before requests are refused with 503.");
	P("lagless_queue_capacity %u\n", atomic_load(&a->master->queue_capacity));
	family(b, "lagless_job_slots", "gauge",
	    "Job slots (compute processes + queue capacity): jobs admitted at once.");
	P("lagless_job_slots %u\n", atomic_load(&a->master->compute_workers) +
	    atomic_load(&a->master->queue_capacity));
	family(b, "lagless_job_slots_in_use", "gauge",
	    "Job slots held by jobs waiting for or running on compute.");
	P("lagless_job_slots_in_use %u\n", lg_jobslot_in_use(&a->jobs, a));
	family(b, "lagless_transit_buffers", "gauge",
	    "Transit buffers (--transit-buffers): request bodies and results in shared memory.");
	P("lagless_transit_buffers %u\n", a->nslots);
	family(b, "lagless_transit_buffers_in_use", "gauge",
	    "Transit buffers held, by what holds them: uploading (a body arrives), queued, running, "
	    "abandoned (running, its client gone), writing (a result or error being sent).");
	P("lagless_transit_buffers_in_use{state=\"uploading\"} %u\n", n[LG_SLOT_CLAIMED]);
	P("lagless_transit_buffers_in_use{state=\"queued\"} %u\n", n[LG_SLOT_QUEUED]);
	P("lagless_transit_buffers_in_use{state=\"running\"} %u\n", n[LG_SLOT_RUNNING]);
	P("lagless_transit_buffers_in_use{state=\"abandoned\"} %u\n", n[LG_SLOT_ABANDONED]);
	P("lagless_transit_buffers_in_use{state=\"writing\"} %u\n",
	    n[LG_SLOT_DONE] + n[LG_SLOT_FAILED]);
	family(b, "lagless_slow_clients_total", "counter",
	    "Connections cut for a transfer below --min-upload-rate (408) or --min-download-rate.");
	P("lagless_slow_clients_total{direction=\"upload\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, slow_uploads));
	P("lagless_slow_clients_total{direction=\"download\"} %" PRIu64 "\n",
	    SUM(a, 0, nloops, slow_downloads));
	family(b, "lagless_slow_callbacks_total", "counter",
	    "Loop callbacks that ran longer than --slow-callback-ms.");
	P("lagless_slow_callbacks_total %" PRIu64 "\n", SUM(a, 0, nloops, slow_callbacks));
}

int
lg_metrics_render(struct lg_buf *b, const struct lg_arena *a,
    const struct lg_stats_names *names, uint64_t now_ns)
{
	uint32_t nloops = a->master->loop_workers;

	if (nloops > a->nprocs)
		nloops = a->nprocs;
	sizing_families(b, a->master, now_ns);
	process_families(b, a, nloops);
	queue_families(b, a, nloops);
	request_families(b, a, nloops, names);
	lag_family(b, a, nloops);
	job_families(b, a, nloops, names, now_ns);
	return b->overflow ? -1 : 0;
}
