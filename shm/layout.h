/* Shared-memory layout: types only (haproxy's *-t.h habit). Every field has a fixed width and
 * the sizes are pinned with _Static_assert, because processes of one server read these bytes
 * with the same binary but the layout is also documented in docs/ARCHITECTURE.md.
 *
 * Arena (one memfd_create(2) file, mapped MAP_SHARED by the master before any fork):
 *
 *   [ struct lg_arena_hdr | pad to 4 KiB ]
 *   [ struct lg_master_page (4 KiB)       ]   written by the master only
 *   [ struct lg_proc_page x nprocs        ]   8 KiB per child-table entry, one writer each
 *   [ struct lg_slot x nslots | pad to 4 KiB ]   transit buffers: a request's job state
 *   [ stats block x nprocs: route rows, then kind rows, each block page-rounded ]
 *   [ job-slot tokens: uint64 x nslots | pad to 4 KiB ]   admission (C + Q of them valid)
 *   [ slot 0 input region | slot 0 output region | guard page | slot 1 input ... ]
 *   page-aligned, lazily backed; the guard pages are PROT_NONE in every process
 */
#ifndef LG_SHM_LAYOUT_H
#define LG_SHM_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

#define LG_ARENA_MAGIC   0x4c41474cu /* "LGAL" */
#define LG_ARENA_VERSION 1u
#define LG_PAGE          4096u

/* Slot states. The 64-bit slot word is (generation << 32) | (owner << 8) | state, owner being
 * the index of the loop worker that claimed it; every change is one
 * compare-and-swap on the whole word, so a process killed at any instruction leaves the slot in
 * a state another process can read and recover, and a stale actor (older generation) cannot
 * move it. The generation is bumped on every claim. See docs/ARCHITECTURE.md for the diagram. */
enum lg_slot_state {
	LG_SLOT_FREE = 0,       /* nobody owns it */
	LG_SLOT_CLAIMED = 1,    /* a loop worker owns it and reads the request body into it */
	LG_SLOT_QUEUED = 2,     /* its job header is on the job channel */
	LG_SLOT_RUNNING = 3,    /* a compute process runs the job */
	LG_SLOT_DONE = 4,       /* output written; the owner loop sends it, then frees */
	LG_SLOT_FAILED = 5,     /* the job failed or its process died; the owner answers 5xx */
	LG_SLOT_ABANDONED = 6,  /* the owner stopped waiting while it ran; the finisher frees */
	LG_SLOT_RECLAIMING = 7, /* the master is releasing the slot's pages (hole punch) */
};
_Static_assert(LG_SLOT_RECLAIMING + 1 == LG_SLOT_STATES, "common/limits.h LG_SLOT_STATES");

/* Job outcome, set with the DONE/FAILED transition and carried in the completion header. */
enum lg_job_status {
	LG_JOB_OK = 0,
	LG_JOB_BAD_INPUT = 1,   /* the job kind rejected its input: 400 */
	LG_JOB_ERROR = 2,       /* the job kind failed (e.g. output too large): 500 */
	LG_JOB_CRASHED = 3,     /* the compute process died while running it: 502 */
	LG_JOB_NO_SPACE = 4,    /* shared memory for its output could not be backed: 503 */
	LG_JOB_QUARANTINED = 5, /* its kind was quarantined while it waited (not run): 503 */
	LG_JOB_SHED = 6,        /* it waited past the queue-wait limit (shm/codel.h; not run): 503 */
	LG_JOB_TOO_LARGE = 7,   /* the kind's answer or input is over its limit: 413 */
	LG_JOB_UNAVAILABLE = 8, /* its module's init failed or crashed (not run): 503 */
};

struct lg_arena_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t nslots;
	uint32_t nprocs;
	uint64_t in_cap;        /* bytes per input region (page multiple) */
	uint64_t out_cap;       /* bytes per output region (page multiple) */
	uint64_t procs_off;     /* byte offsets from the arena base */
	uint64_t slots_off;
	uint64_t regions_off;
	uint64_t total_size;
	uint64_t master_off;
	uint64_t stats_off;     /* the per-process route and kind statistics */
	uint64_t stats_stride;  /* bytes of one process's block (page multiple) */
	uint32_t stat_routes;   /* route rows per process (the routes, then "none") */
	uint32_t stat_kinds;    /* kind rows per process (by kind id; row 0 unused) */
	uint64_t jobs_off;      /* job-slot token table (nslots words) */
};
_Static_assert(sizeof(struct lg_arena_hdr) == 104, "arena header layout");

#define LG_NO_JOB UINT64_MAX

/* Statistics (shm/stats.h has the bucket tables and the writers). Histograms count into
 * non-cumulative buckets; the renderer accumulates them for Prometheus. */
#define LG_STATS_BOUNDS 18     /* finite upper bounds a histogram may have; +Inf is one more */
#define LG_STATS_ROUTES 16     /* route rows of lg_arena_create (the sized form takes a count) */
#define LG_STATS_CODES  20     /* status codes counted by value (shm/stats.c), the last "other" */
#define LG_STATS_KINDS  4      /* kind rows of lg_arena_create (the sized form takes a count) */
#define LG_LAG_BOUNDS   16     /* loop lag bounds: 50 us .. 5 s */
#define LG_LAG_WINDOWS  6      /* 10 s windows kept for /status (the last minute) */

struct lg_hist {
	_Atomic uint64_t bucket[LG_STATS_BOUNDS + 1]; /* counts per bucket, the last is +Inf */
	_Atomic uint64_t sum_ns;                      /* sum of the observed values */
};
_Static_assert(sizeof(struct lg_hist) == 160, "histogram layout");

struct lg_lag_window {
	_Atomic uint32_t epoch;                       /* 10 s window number + 1; 0 = never used */
	_Atomic uint32_t max_us;                      /* largest lag seen in the window */
	_Atomic uint32_t count[LG_LAG_BOUNDS + 1];
	uint32_t pad;
};
_Static_assert(sizeof(struct lg_lag_window) == 80, "lag window layout");

/* Queue-wait admission state of one pool (shm/codel.c): written by every loop worker and
 * compute process of the pool, each field by compare-and-swap or exchange, so a process killed
 * at any instruction leaves a state the next caller continues from. */
struct lg_codel {
	_Atomic uint64_t interval_end_ns; /* CLOCK_MONOTONIC end of the current interval; 0 = none */
	_Atomic uint64_t min_wait_ns;     /* smallest queue wait recorded in it; UINT64_MAX = none */
	_Atomic uint32_t overloaded;      /* verdict of the last interval judged: its minimum wait
	                                   * was above the target */
	uint32_t pad;
	_Atomic uint64_t intervals;       /* intervals judged */
	_Atomic uint64_t overloaded_intervals; /* ... of which overloaded */
	_Atomic uint64_t refused;         /* new jobs answered 503 at admission while overloaded */
	_Atomic uint64_t shed;            /* queued jobs answered 503 for waiting past the limit */
	_Atomic uint64_t samples;         /* queue waits recorded (jobs that ran and were answered) */
	uint64_t target_ns, interval_ns;  /* the settings, written once, for /status and /metrics */
};
_Static_assert(sizeof(struct lg_codel) == 80, "codel state layout");

#define LG_SHM_POOL_NAME 32

/* One compute pool, a bulkhead (master/gen.c makes them from the configuration): its part of
 * the slot table, its compute rows, its live targets, its admission state and the counters
 * PHP-FPM's status page shows per pool. The static fields are written by the master before
 * the first fork; the targets by the master (live resize); the counters by whoever counts. */
struct lg_pool_page {
	char name[LG_SHM_POOL_NAME];
	uint32_t first_slot, nslots;      /* its slots: [first_slot, first_slot + nslots) */
	uint32_t first_row, nrows;        /* its compute processes' proc pages */
	_Atomic uint32_t slot_limit;      /* slots from first_slot that take claims now */
	_Atomic uint32_t compute_target;  /* compute processes it is sized for now */
	_Atomic uint32_t queue_capacity;  /* waiting jobs allowed now */
	_Atomic uint32_t max_depth;       /* largest queue depth seen (loops, on each queue) */
	_Atomic uint64_t full;            /* 503: every job slot of the pool was taken (loops) */
	_Atomic uint64_t slow_jobs;       /* jobs that ran longer than slow_ns (compute) */
	_Atomic uint64_t restarts;        /* its compute processes the master respawned */
	uint64_t slow_ns;                 /* a job running longer than this is slow */
	struct lg_codel codel;            /* queue-wait admission (shm/codel.h) */
	_Atomic uint32_t target_warned;   /* 1 once a job ran far longer than the queue-wait
	                                   * target (logged once, cpupool/compute.c) */
	_Atomic uint32_t offered_milli;   /* smoothed offered load x 1000 (stats/offered.h; the
	                                   * master is the one writer) */
	uint8_t pad[8];
};
_Static_assert(sizeof(struct lg_pool_page) == 192, "pool page layout");

/* What a process says it is doing (its own view; pid 0 means no process). */
enum lg_proc_state {
	LG_PROC_DOWN = 0,       /* no process, or not started its role yet */
	LG_PROC_RUNNING = 1,    /* loop: accepting; compute: taking jobs */
	LG_PROC_DRAINING = 2,   /* loop: graceful stop in progress */
	LG_PROC_RETIRED = 3,    /* compute: left after a RETIRE header (live resize); the master
	                         * keeps the row parked, so /status and /metrics skip it */
};

#define LG_PROC_PAGE (2 * LG_PAGE)

/* One per child-table entry (loop workers first, then compute processes); written only by the
 * process that currently holds the entry, read by everyone. Counters and histograms are kept
 * across respawns (the new incarnation continues them, so sums never go backwards); gauges are
 * reset by each new incarnation. 8 KiB: the fields take less than one page, the rest is
 * reserved for fields to come without moving the layout. */
struct lg_proc_page {
	_Atomic int32_t pid;            /* 0 while the entry has no process */
	uint32_t role;                  /* enum lg_role (common/limits.h) */
	_Atomic uint64_t heartbeat_ns;  /* CLOCK_MONOTONIC of the last loop iteration / job pick-up */
	_Atomic uint64_t job;           /* compute: (slot << 32 | generation) it runs, LG_NO_JOB if idle */
	_Atomic uint64_t requests;      /* requests answered (loop) or jobs run (compute) */
	_Atomic uint64_t bad_headers;   /* channel messages dropped because they failed to decode */
	_Atomic uint64_t rejected_full; /* 503 answers because no slot was free (loop) */
	_Atomic uint64_t timed_out;     /* 504 answers (loop) */
	/* gauges */
	_Atomic uint32_t state;         /* enum lg_proc_state */
	_Atomic uint32_t inflight;      /* loop: requests received and not yet answered */
	_Atomic uint32_t connections;   /* loop: open client connections */
	_Atomic uint32_t job_kind;      /* compute: kind of the job named in `job` (valid with it) */
	_Atomic uint64_t job_since_ns;  /* compute: CLOCK_MONOTONIC when the current job started */
	/* counters (loop) */
	_Atomic uint64_t rejected_large; /* 413: body over --max-body */
	_Atomic uint64_t failed_crash;   /* 502: the compute process died running the job */
	_Atomic uint64_t cancelled;      /* jobs given up because the client left */
	_Atomic uint64_t slow_callbacks; /* loop callbacks over --slow-callback-ms */
	_Atomic uint64_t failed_error;   /* 400/500: the job kind refused its input or failed */
	/* histograms */
	struct lg_hist lag;                              /* loop: timer lateness */
	struct lg_lag_window lag_recent[LG_LAG_WINDOWS]; /* loop: the same, by 10 s window */
	_Atomic uint64_t rejected_quarantine; /* loop: 503 for a quarantined job kind */
	_Atomic uint64_t rejected_transit;    /* loop: 503 because no transit buffer was free */
	_Atomic uint64_t rejected_memory;     /* loop: 503 because shared memory could not be backed */
	_Atomic uint64_t slow_uploads;        /* loop: 408 for a body below --min-upload-rate */
	_Atomic uint64_t slow_downloads;      /* loop: closed for a response below --min-download-rate */
	_Atomic uint64_t conns_refused;       /* loop: connections over --max-conns answered 503 */
	_Atomic uint64_t begun;               /* loop: requests whose first byte arrived; the master
	                                       * compares it across an incarnation to tell a loop
	                                       * that died serving from one that cannot start */
	_Atomic uint64_t rejected_client;     /* loop: 503 because the client address holds its
	                                       * share of transit buffers (shm/share.h) */
	_Atomic uint64_t rejected_module;     /* loop: 503 because the kind's module init failed */
	_Atomic uint64_t jobs_client_error;   /* loop: jobs the kind answered with a 4xx */
	_Atomic uint32_t in_init;             /* 1 + module index while that module's init runs */
	uint32_t pad_init;
	_Atomic uint64_t rejected_query;      /* loop: 400 before admission because a query argument
	                                       * the kind declares is malformed or out of range */
	_Atomic uint32_t conn_buffers;        /* loop: struct lg_conn blocks held by connections
	                                       * with bytes in flight (refreshed each 100 ms tick) */
	_Atomic uint32_t conn_buffers_free;   /* loop: blocks mapped and free in the pool until a
	                                       * trim unmaps them (same tick) */
	_Atomic uint32_t job_route;           /* compute: registry route index of the job named in
	                                       * `job` (valid with it, as job_kind) */
	uint32_t pad_route;
	/* The statistics by route and by kind are not here: their number comes from the
	 * configuration, so they sit in the arena's stats area (struct lg_route_stats /
	 * lg_kind_stats, lg_arena_route_stats / lg_arena_kind_stats), one block per page. */
	uint8_t reserved[LG_PROC_PAGE - 872];
};
_Static_assert(offsetof(struct lg_proc_page, reserved) == 872, "proc page fields");
_Static_assert(sizeof(struct lg_proc_page) == LG_PROC_PAGE, "proc page is two pages");

/* One route's statistics in one loop worker's block of the stats area (single writer). */
struct lg_route_stats {
	_Atomic uint64_t responses[LG_STATS_CODES]; /* responses by status (shm/stats.c columns) */
	struct lg_hist duration;        /* request time, first byte to last response byte */
	/* Requests that reached the route's handler (inline answer, or job queued): what the
	 * HTTP conformance tests and /health read to show that a refused request reached no
	 * handler. responses counts answers. */
	_Atomic uint64_t hits;
	uint64_t pad;
};
_Static_assert(sizeof(struct lg_route_stats) == 336, "route stats row");

/* One job kind's statistics in one compute process's block of the stats area. */
struct lg_kind_stats {
	struct lg_hist queue_wait;      /* time between QUEUED and RUNNING */
	struct lg_hist run;             /* time between RUNNING and DONE/FAILED */
};
_Static_assert(sizeof(struct lg_kind_stats) == 320, "kind stats row");

/* Why the master restarted a process (lagless_process_restarts_total{reason}). */
enum lg_restart_reason {
	LG_RESTART_CRASH = 0,      /* killed by a signal the master did not send */
	LG_RESTART_EXIT = 1,       /* exited on its own */
	LG_RESTART_DEADLINE = 2,   /* killed by the master: its job passed the deadline */
	LG_RESTART_JOB = 3,        /* a compute process died of the job it ran (crash, OOM kill) */
	LG_RESTART_CLIENT_GONE = 4, /* killed by the master: its job's client left (on-client-gone kill) */
	LG_RESTART_STUCK = 5,      /* a loop worker killed for a stale heartbeat */
	LG_RESTART_REASONS = 6,
};

/* (Job kind, route) pairs whose compute process deaths the master tracks (a pair past the
 * table shares no row and is never quarantined). */
#define LG_KIND_HEALTH 8

/* What the master knows of the job kinds that killed their compute process, by kind and
 * route (module ABI 1.2: every Python route runs the one kind python.call, and one route's
 * crashes must not quarantine the others): written by the master only, read by the loops
 * (head-time quarantine check) and the compute processes (a queued job of a quarantined
 * pair is not run). */
struct lg_kind_health {
	_Atomic uint32_t kind;          /* job kind of the row; 0 = unused (written after route) */
	uint32_t route;                 /* registry route index of the row */
	uint32_t recent;                /* master only: deaths since window_ns */
	uint32_t pad;
	uint64_t window_ns;             /* master only: start of the counting window */
	_Atomic uint64_t deaths;        /* compute processes that died running a job of the kind */
	_Atomic uint64_t quarantines;   /* times the kind was quarantined */
	_Atomic uint64_t until_ns;      /* CLOCK_MONOTONIC end of its quarantine; 0 = none */
};
_Static_assert(sizeof(struct lg_kind_health) == 48, "kind health row");

/* Modules whose init health is shared (a module's registry index is its row; the registry
 * holds at most this many modules, built-in ones included: kinds/registry.h LG_MODULES_MAX). */
#define LG_MODULE_HEALTH 32

/* A module whose init failed (returned -1) or crashed (abort, _exit) in some process: its
 * routes answer 503 until the master's probe (an init in a child of its own, retried with a
 * back-off) succeeds. Written by the process that saw the failure (one CAS on failed) and by
 * the master; read by the loops (head-time refusal) and compute processes (init skipped). */
struct lg_module_health {
	_Atomic uint32_t failed;        /* 1 while its routes are refused */
	_Atomic int32_t cause;          /* 0 init returned -1; > 0 killed by that signal; < 0
	                                 * exited with status -cause - 1 */
	_Atomic uint64_t failures;      /* failed or crashed inits seen (processes and probes) */
	_Atomic uint64_t retry_ns;      /* CLOCK_MONOTONIC of the master's next probe */
	uint64_t backoff_ns;            /* master only: the current back-off */
};
_Static_assert(sizeof(struct lg_module_health) == 32, "module health row");

/* Apps the master runs ([app NAME], master/app.h) shown by /status and /metrics. */
#define LG_APP_ROWS 8

/* One app's row in a generation's page: the processes of the run that generation routes to
 * (master/app.h lg_app_publish). Written by the master only, read by the loops. */
struct lg_app_row {
	char name[24];                  /* NUL-terminated (an app name is at most 23 bytes) */
	_Atomic uint16_t processes;     /* its process count (at most 32) */
	_Atomic uint16_t running;       /* of them running now */
	_Atomic uint32_t ready_mask;    /* bit k: its process k runs and passed its readiness
	                                 * probe (an upstream sends only to those) */
	_Atomic uint64_t restarts;      /* processes of it the master restarted */
};
_Static_assert(sizeof(struct lg_app_row) == 40, "app row");

/* The master's own page, page 1 of the arena: the static fields are written once before the
 * first fork, the atomic ones by the master while it runs; everyone else only reads. */
struct lg_master_page {
	_Atomic int32_t pid;
	_Atomic uint32_t ready;         /* 1 once every loop worker has started (latched) */
	_Atomic uint32_t stopping;      /* 0 running, 1 draining, 2 stopping at once */
	_Atomic uint32_t budget;        /* CPU budget, whole CPUs (a live resize changes it) */
	uint64_t start_unix_ms;         /* CLOCK_REALTIME at start-up */
	uint64_t start_mono_ns;         /* CLOCK_MONOTONIC at start-up */
	_Atomic double quota;           /* CPUs of the tightest cgroup quota; < 0 when none */
	double cpus_override;           /* --cpus; <= 0 when not given */
	int32_t online, affinity, cpuset; /* sizing inputs at start-up; -1 when unknown */
	uint32_t loop_workers;
	_Atomic uint32_t compute_workers, queue_capacity; /* current targets, summed over the pools */
	_Atomic uint64_t shm_bytes;     /* bytes of the arena backed by memory, refreshed each second */
	_Atomic uint64_t restarts[LG_ROLES][LG_RESTART_REASONS]; /* [role - 1][reason] */
	char cgroup[8];                 /* "v1", "v2", "hybrid", "none" */
	char rounding[8];               /* "floor", "ceil" */
	char cpu_stat[512];             /* cpu.stat beside the tightest quota (sysroot-prefixed); "" if none */
	struct lg_kind_health kinds[LG_KIND_HEALTH];
	/* live resize (master/resize.c) */
	uint32_t npools;                /* pool pages in use; 0 = none (the whole table, tests) */
	_Atomic uint32_t live_resize;   /* 1 when the counts follow the CPU budget */
	uint32_t compute_max, queue_max; /* what the arena and child table have room for */
	_Atomic uint64_t budget_changes;  /* budget changes applied (seen twice in a row) */
	_Atomic uint64_t resize_spawned;  /* compute processes started to grow the pool */
	_Atomic uint64_t resize_retired;  /* compute processes retired after their job to shrink it */
	_Atomic uint64_t budget_changed_unix_ms; /* CLOCK_REALTIME of the last change; 0 = none */
	struct lg_pool_page pools[LG_MAX_POOLS];
	struct lg_module_health modules[LG_MODULE_HEALTH];
	/* memory budget (sizing/memsize.h, shm/arena.h lg_arena_charge) */
	_Atomic uint64_t mem_limit;     /* bytes the server may use; UINT64_MAX = unknown */
	_Atomic uint64_t shm_budget;    /* transit bytes that may be backed at once;
	                                 * UINT64_MAX = no bound */
	_Atomic uint64_t shm_charged;   /* transit bytes charged now (slots' `charged` summed) */
	_Atomic uint64_t oom_kills;     /* compute processes the kernel's OOM killer took */
	_Atomic uint32_t napps;         /* rows of apps in use */
	uint32_t pad_apps;
	struct lg_app_row apps[LG_APP_ROWS];
	uint8_t reserved[LG_PAGE - 792 - 48 * LG_KIND_HEALTH - 192 * LG_MAX_POOLS -
	    32 * LG_MODULE_HEALTH - 40 * LG_APP_ROWS];
};
_Static_assert(offsetof(struct lg_master_page, reserved) ==
    792 + 48 * LG_KIND_HEALTH + 192 * LG_MAX_POOLS + 32 * LG_MODULE_HEALTH + 40 * LG_APP_ROWS,
    "master page fields");
_Static_assert(sizeof(struct lg_master_page) == LG_PAGE, "master page is one page");

/* A job's one record, from the router to the kind (docs/ARCHITECTURE.md "A job's path"): the
 * router fills it from the route (worker/route/routes.c), the owner loop keeps it in the
 * connection until the slot is claimed, writes it into the slot (struct lg_slot job) at claim
 * time and completes it when it queues the job; whichever runs the job reads it from there (a
 * compute process after checking it as untrusted input, shm/slot.h lg_slot_job_read; the owner
 * loop for a where=loop kind) and hands the kind what it names (kinds/run.c). */
struct lg_job {
	uint32_t kind;                  /* kind id in the registry (kinds/registry.h), 0 none */
	uint32_t route;                 /* the route's index in the registry: keys and config */
	uint32_t pool;                  /* the pool that runs it (cfg->jobs.pools, master->pools) */
	uint32_t where;                 /* LAGLESS_WHERE_POOL or LAGLESS_WHERE_LOOP (module.h) */
	uint64_t deadline_ms;           /* of the job, queue wait included */
	uint64_t in_len;                /* body bytes, at body_off in the input region */
	uint32_t body_off;              /* bytes before the body: the request view, then the
	                                 * parsed query arguments */
	uint32_t args_off;              /* the kind's query struct parsed by the loop (ABI 1.2
	                                 * rq->query_args), then its strings, at args_off in the
	                                 * input region, args_len bytes; 0: none was parsed */
	uint32_t args_len;
	uint32_t pad;
	uint64_t enqueue_ns;            /* CLOCK_MONOTONIC when QUEUED (0 for where=loop) */
	uint64_t deadline_ns;           /* ... past which the owner answers 504 */
};

struct lg_slot {
	_Atomic uint64_t word;          /* (generation << 32) | (owner loop << 8) | state */
	_Atomic uint32_t client;        /* owner loop: tag of the client address holding it
	                                 * (shm/share.h), 0 = none; meaningful while not FREE */
	_Atomic int32_t runner_pid;     /* compute pid that moved it to RUNNING (informational) */
	uint32_t status;                /* enum lg_job_status, valid in DONE/FAILED */
	uint32_t pad_status;
	uint64_t out_len;               /* bytes of output in the output region */
	uint64_t start_ns;              /* CLOCK_MONOTONIC when RUNNING */
	uint64_t end_ns;                /* ... when DONE/FAILED */
	uint64_t touched;               /* bytes dirtied in the regions since the last hole punch */
	uint64_t trim_seen;             /* master only: (gen << 1 | 1) when the last trim pass saw
	                                 * the slot FREE at that generation, else 0 */
	/* Per-address share and slow-upload cuts (shm/share.h) */
	_Atomic uint64_t up_bytes;      /* owner loop: body bytes received while CLAIMED */
	_Atomic uint64_t up_start_ns;   /* owner loop: CLOCK_MONOTONIC of the claim */
	_Atomic uint32_t cut_gen;       /* any loop: the owner is asked to cut the upload of this
	                                 * generation (408), 0 = none */
	_Atomic uint32_t cut_client;    /* owner loop: tag of the address whose slow upload it cut
	                                 * last, refused a buffer until cut_until_ns */
	_Atomic uint64_t cut_until_ns;
	/* Memory budget: bytes of each region beyond the kept view counted in the master page's
	 * shm_charged, and their sum (the holder of the slot's current stage writes them; the
	 * master zeroes them after punching the pages out). */
	uint64_t in_charged, out_charged;
	_Atomic uint64_t charged;
	struct lg_job job;              /* the job's record: written by the owner loop */
	uint8_t pad[8];
};
_Static_assert(sizeof(struct lg_slot) == 192, "slot is three cache lines");

#define LG_MAX_LOOPS 65535 /* the owner field of the slot word is 24 bits; keep it sane */

static inline uint64_t
lg_slot_word(uint32_t gen, uint32_t owner, enum lg_slot_state st)
{
	return ((uint64_t)gen << 32) | ((uint64_t)(owner & 0xffffffu) << 8) | (uint32_t)st;
}

#endif
