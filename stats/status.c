#include "stats/status.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "shm/codel.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "stats/poolview.h"

#define P(...) lg_buf_printf(b, __VA_ARGS__)

static const char *const slot_state_names[LG_SLOT_STATES] = {
	"free", "claimed", "queued", "running", "done", "failed", "abandoned", "reclaiming",
};

size_t
lg_status_bound(uint32_t nprocs)
{
	return 4096 + LG_MAX_POOLS * 640 + (size_t)nprocs * 384;
}

int
lg_status_ready(const struct lg_master_page *mp, int draining)
{
	return atomic_load(&mp->ready) && !atomic_load(&mp->stopping) && !draining;
}

static void
sizing(struct lg_buf *b, const struct lg_master_page *mp)
{
	P("\"sizing\":{\"budget\":%u,\"online\":%d,\"affinity\":%d,\"cpuset\":%d,", mp->budget,
	    mp->online, mp->affinity, mp->cpuset);
	double quota = atomic_load(&mp->quota);

	if (quota < 0)
		P("\"quota\":null,");
	else
		P("\"quota\":%g,", quota);
	if (mp->cpus_override > 0)
		P("\"cpus_override\":%g,", mp->cpus_override);
	else
		P("\"cpus_override\":null,");
	P("\"cgroup\":\"");
	lg_buf_json_chars(b, mp->cgroup, strnlen(mp->cgroup, sizeof(mp->cgroup)));
	P("\",\"rounding\":\"%s\",\"loop_workers\":%u,\"compute_workers\":%u,\"queue_capacity\":%u},",
	    mp->rounding[0] == 'c' ? "ceil" : "floor", mp->loop_workers,
	    atomic_load(&mp->compute_workers), atomic_load(&mp->queue_capacity));
}

/* A byte count, or null for "no bound". */
static void
bytes_or_null(struct lg_buf *b, const char *key, uint64_t v)
{
	if (v == UINT64_MAX)
		P("\"%s\":null,", key);
	else
		P("\"%s\":%" PRIu64 ",", key, v);
}

/* The memory budget (sizing/memsize.h): the limit, the transit budget, what is charged now,
 * what the arena holds, and OOM kills of compute processes. */
static void
memory(struct lg_buf *b, const struct lg_master_page *mp)
{
	P("\"memory\":{");
	bytes_or_null(b, "limit", atomic_load(&mp->mem_limit));
	bytes_or_null(b, "shm_budget", atomic_load(&mp->shm_budget));
	P("\"shm_charged\":%" PRIu64 ",\"shm_in_use\":%" PRIu64 ",\"oom_kills\":%" PRIu64 "},",
	    atomic_load(&mp->shm_charged), atomic_load(&mp->shm_bytes), atomic_load(&mp->oom_kills));
}

/* Live resize (master/resize.c): whether the counts follow the budget, how often it changed,
 * and the processes started and retired for it. */
static void
resize(struct lg_buf *b, const struct lg_master_page *mp)
{
	uint64_t when = atomic_load(&mp->budget_changed_unix_ms);

	P("\"resize\":{\"enabled\":%s,\"budget_changes\":%" PRIu64 ",\"spawned\":%" PRIu64
	    ",\"retired\":%" PRIu64 ",\"compute_max\":%u,\"queue_max\":%u,\"last_change\":",
	    atomic_load(&mp->live_resize) ? "true" : "false", atomic_load(&mp->budget_changes),
	    atomic_load(&mp->resize_spawned), atomic_load(&mp->resize_retired), mp->compute_max,
	    mp->queue_max);
	if (when)
		P("%.3f},", (double)when / 1e3);
	else
		P("null},");
}

/* The default pool's queue-wait admission (shm/codel.h), kept at the top level for readers
 * of a server without pools; every pool's is in "pools". */
static void
admission(struct lg_buf *b, const struct lg_master_page *mp)
{
	const struct lg_codel *c = &mp->pools[0].codel;

	P("\"admission\":{\"queue_wait_target_ms\":%.3f,\"interval_ms\":%.3f,\"overloaded\":%s,"
	    "\"refused\":%" PRIu64 ",\"shed\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"intervals\":%"
	    PRIu64 ",\"overloaded_intervals\":%" PRIu64 "},", (double)c->target_ns / 1e6,
	    (double)c->interval_ns / 1e6, lg_codel_overloaded(c) ? "true" : "false",
	    atomic_load(&c->refused), atomic_load(&c->shed), atomic_load(&c->samples),
	    atomic_load(&c->intervals), atomic_load(&c->overloaded_intervals));
}

/* The apps the master runs (shm/layout.h lg_app_row; names are [a-z0-9_-]). */
static void
app_rows(struct lg_buf *b, const struct lg_master_page *mp)
{
	uint32_t n = atomic_load(&mp->napps);

	P("\"apps\":[");
	for (uint32_t i = 0; i < n && i < LG_APP_ROWS; i++) {
		const struct lg_app_row *r = &mp->apps[i];

		P("%s{\"name\":\"%.23s\",\"processes\":%u,\"running\":%u,\"ready\":%u,"
		    "\"restarts\":%" PRIu64 "}", i ? "," : "", r->name,
		    (unsigned)atomic_load(&r->processes), (unsigned)atomic_load(&r->running),
		    (unsigned)__builtin_popcount(atomic_load(&r->ready_mask)), atomic_load(&r->restarts));
	}
	P("],");
}

static void
slots_and_queue(struct lg_buf *b, const struct lg_arena *a, const struct lg_stats_names *nm,
    uint32_t nloops, uint64_t now_ns)
{
	uint32_t n[LG_SLOT_STATES], busy = 0, open = atomic_load(&a->master->compute_workers) +
	    atomic_load(&a->master->queue_capacity);
	uint32_t used = lg_jobslot_in_use(&a->jobs, a);

	lg_slot_census(a, n);
	for (uint32_t k = nloops; k < a->nprocs; k++)
		busy += atomic_load(&a->procs[k].pid) != 0 && atomic_load(&a->procs[k].job) != LG_NO_JOB;
	P("\"queue\":{\"depth\":%u,\"capacity\":%u,\"busy\":%u},",
	    n[LG_SLOT_QUEUED], atomic_load(&a->master->queue_capacity), busy);
	/* The agreed slot model: job slots (admission: C + Q jobs waiting for or running on
	 * compute) and transit buffers (bodies and results in shared memory), each by state. */
	P("\"slots\":{\"total\":%u,\"free\":%u,\"in_use\":%u,\"queued\":%u,\"running\":%u,"
	    "\"abandoned\":%u},", open, used < open ? open - used : 0, used, n[LG_SLOT_QUEUED],
	    n[LG_SLOT_RUNNING], n[LG_SLOT_ABANDONED]);
	P("\"transit_buffers\":{\"total\":%u", a->nslots);
	for (int i = 0; i < LG_SLOT_STATES; i++)
		P(",\"%s\":%u", slot_state_names[i], n[i]);
	P(",\"uploading\":%u,\"writing\":%u}", n[LG_SLOT_CLAIMED],
	    n[LG_SLOT_DONE] + n[LG_SLOT_FAILED]);
	P(",\"restarts\":{");
	for (int role = 0; role < LG_ROLES; role++) {
		P("%s\"%s\":{", role ? "," : "", role ? "compute" : "loop");
		for (unsigned r = 0; r < LG_RESTART_REASONS; r++)
			P("%s\"%s\":%" PRIu64, r ? "," : "", lg_stats_restart_reason(r),
			    atomic_load(&a->master->restarts[role][r]));
		P("}");
	}
	P("},\"job_kinds\":[");
	for (unsigned i = 0; i < LG_KIND_HEALTH; i++) {
		const struct lg_kind_health *h = &a->master->kinds[i];
		uint32_t kind = atomic_load_explicit(&h->kind, memory_order_acquire);

		if (kind == 0)
			break;
		P("%s{\"kind\":\"%s\",\"route\":\"%s\",\"process_deaths\":%" PRIu64
		    ",\"quarantines\":%" PRIu64 ",\"quarantined_ms\":%.0f}", i ? "," : "",
		    lg_stats_kind_name(nm, kind), h->route < nm->nroutes && nm->route[h->route] ?
		    nm->route[h->route] : "unknown", atomic_load(&h->deaths),
		    atomic_load(&h->quarantines),
		    (double)lg_stats_quarantine_left(a->master, kind, h->route, now_ns) / 1e6);
	}
	P("],");
	app_rows(b, a->master);
}

static const char *
state_name(const struct lg_proc_page *p, int loop)
{
	if (atomic_load(&p->pid) == 0)
		return "down";
	switch (atomic_load(&p->state)) {
	case LG_PROC_RUNNING:
		return loop ? "running" : atomic_load(&p->job) != LG_NO_JOB ? "busy" : "idle";
	case LG_PROC_DRAINING:
		return "draining";
	default:
		return "starting";
	}
}

static void
loop_row(struct lg_buf *b, const struct lg_proc_page *p, uint64_t now_ns)
{
	struct lg_lag_summary lag;

	lg_stats_lag_recent(p, now_ns, &lag);
	P(",\"inflight\":%u,\"connections\":%u,\"lag\":{\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
	    "\"max_ms\":%.3f,\"samples\":%" PRIu64 "}}", atomic_load(&p->inflight),
	    atomic_load(&p->connections), lag.p50 * 1e3, lag.p99 * 1e3, lag.max * 1e3, lag.count);
}

static void
compute_row(struct lg_buf *b, const struct lg_arena *a, const struct lg_stats_names *nm,
    const struct lg_proc_page *p, uint64_t now_ns)
{
	uint64_t job = atomic_load(&p->job), since = atomic_load(&p->job_since_ns);
	uint32_t slot = (uint32_t)(job >> 32), k = (uint32_t)(p - a->procs);

	for (uint32_t i = 0; i < a->master->npools && i < LG_MAX_POOLS; i++) {
		const struct lg_pool_page *pp = &a->master->pools[i];

		if (k >= pp->first_row && k < pp->first_row + pp->nrows)
			P(",\"pool\":\"%s\"", pp->name);
	}

	if (job == LG_NO_JOB || atomic_load(&p->pid) == 0 || slot >= a->nslots) {
		P(",\"job\":null}");
		return;
	}
	uint32_t kind = a->slots[slot].job.kind;
	P(",\"job\":{\"slot\":%u,\"kind\":\"%s\",\"age_ms\":%.3f}}", slot,
	    lg_stats_kind_name(nm, kind), since && now_ns > since ? (double)(now_ns - since) / 1e6 : 0.);
}

static void
processes(struct lg_buf *b, const struct lg_arena *a, const struct lg_stats_names *nm,
    uint32_t nloops, uint64_t now_ns)
{
	int first = 1;

	P("\"processes\":[");
	for (uint32_t k = 0; k < a->nprocs; k++) {
		const struct lg_proc_page *p = &a->procs[k];
		int loop = k < nloops;

		if (atomic_load(&p->pid) == 0 && atomic_load(&p->state) == LG_PROC_RETIRED)
			continue; /* a row parked by a live resize: no process belongs there */
		P("%s{\"role\":\"%s\",\"index\":%u,\"pid\":%d,\"state\":\"%s\",\"requests\":%" PRIu64,
		    first ? "" : ",", loop ? "loop" : "compute", loop ? k : k - nloops,
		    (int)atomic_load(&p->pid), state_name(p, loop), atomic_load(&p->requests));
		first = 0;
		if (loop)
			loop_row(b, p, now_ns);
		else
			compute_row(b, a, nm, p, now_ns);
	}
	P("]");
}

int
lg_status_render(struct lg_buf *b, const struct lg_arena *a,
    const struct lg_stats_names *names, uint64_t now_ns, int draining)
{
	const struct lg_master_page *mp = a->master;
	uint32_t nloops = mp->loop_workers < a->nprocs ? mp->loop_workers : a->nprocs;

	P("{\"version\":\"%s\",\"pid\":%d,\"start_time\":%.3f,\"uptime_s\":%.3f,\"ready\":%s,"
	    "\"stopping\":%s,", LG_VERSION, (int)atomic_load(&mp->pid),
	    (double)mp->start_unix_ms / 1e3,
	    now_ns > mp->start_mono_ns ? (double)(now_ns - mp->start_mono_ns) / 1e9 : 0.,
	    lg_status_ready(mp, draining) ? "true" : "false",
	    atomic_load(&mp->stopping) || draining ? "true" : "false");
	sizing(b, mp);
	memory(b, mp);
	resize(b, mp);
	admission(b, mp);
	slots_and_queue(b, a, names, nloops, now_ns);
	if (a->master->npools > 0) {
		lg_poolview_status(b, a);
		P(",");
	}
	processes(b, a, names, nloops, now_ns);
	P("}\n");
	return b->overflow ? -1 : 0;
}
