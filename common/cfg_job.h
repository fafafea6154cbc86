/* The job room's settings (struct lg_config's jobs member): the compute pools, their jobs'
 * deadline and admission, the compute processes and the transit buffers (worker/job, cpupool/,
 * shm/codel.h). Filled by the master (master/opttab.c); pools[] from the [pool NAME]
 * sections. Types only. */
#ifndef LG_COMMON_CFG_JOB_H
#define LG_COMMON_CFG_JOB_H

#include <stdint.h>

#include "common/limits.h"

/* What happens to a RUNNING job whose client disconnected (a queued one is always cancelled). */
enum lg_client_gone { LG_GONE_FINISH = 0, LG_GONE_KILL = 1 };

#define LG_POOL_NAME 32  /* bytes of a pool name, NUL included */

/* One compute pool (a bulkhead): its own compute processes, job slots, job channel, deadline
 * and admission. Declared with a [pool NAME] section (master/options.c); pools[0] is always
 * "default", the pool of every route that names none, sized from the server-wide settings
 * unless a [pool default] section says otherwise. After loading, every field is resolved:
 * nothing is left "unset" except compute/share (see lg_sizing_pool_counts). */
struct lg_pool_cfg {
	char name[LG_POOL_NAME];
	int compute;               /* processes; 0 = from share, else max(1, budget - 1) */
	double share;              /* > 0: floor(share x budget), at least 1 */
	int queue;                 /* waiting jobs beyond the running ones; -1 = 2 x compute */
	uint64_t deadline_ms;      /* per job, queue wait included */
	enum lg_client_gone on_client_gone;
	int nice;                  /* nice(2) increment of its compute processes */
	int policy;                /* their scheduling policy: SCHED_IDLE, SCHED_BATCH or
	                            * SCHED_OTHER (sched(7)) */
	uint64_t slice_ms;         /* their requested time slice (sched_setattr(2)
	                            * sched_runtime); 0 = the kernel's */
	uint64_t memory;           /* RLIMIT_DATA of each of its compute processes; 0 = none */
	uint64_t max_jobs;         /* a compute process that ran this many jobs is replaced; 0 off */
	uint64_t max_rss;          /* ... or whose private memory (RssAnon) passed this; 0 off */
	uint64_t queue_wait_target_ms;   /* CoDel target (shm/codel.h); 0 = off */
	uint64_t queue_wait_interval_ms;
	int oversubscribe;         /* 1: not counted against the CPU budget */
	char routes[4096];         /* paths of the offloaded routes it serves, space-separated
	                            * (a file line may be that long: master/options.c) */
	uint32_t given;            /* loading only: bit k set when the section gave key k */
};

struct lg_job_cfg {
	uint64_t deadline_ms;      /* per offloaded job, queue wait included; past it 504 */
	int queue_capacity;        /* waiting jobs beyond the C running; -1 = 2 x C */
	uint64_t queue_wait_target_ms;   /* CoDel target (shm/codel.h); 0 = admission by count only */
	uint64_t queue_wait_interval_ms; /* CoDel interval; at least the target */
	int compute_workers;       /* C; 0 = from the sizing decision (or compute_share) */
	double compute_share;      /* > 0: C = max(1, floor(share x budget)); 0 = not set */
	int compute_nice;          /* nice(2) increment for compute processes */
	int compute_policy;        /* their scheduling policy (sched(7)); default SCHED_OTHER */
	uint64_t compute_slice_ms; /* their requested time slice, ms; 0 = the kernel's */
	uint64_t compute_max_jobs; /* the pools' max_jobs unless their section says (0 = off) */
	uint64_t compute_max_rss;  /* the pools' max_rss, bytes (0 = off) */
	uint64_t compute_memory;   /* RLIMIT_AS of a compute process, bytes; 0 = none */
	uint64_t kill_grace_ms;    /* SIGTERM -> SIGKILL grace for a compute process past deadline */
	enum lg_client_gone on_client_gone; /* running job of a departed client: finish or kill */
	int quarantine_deaths;     /* compute deaths by one job kind within quarantine_ms that
	                            * quarantine it; 0 = never */
	uint64_t quarantine_ms;    /* how long a quarantined kind is refused (503), and the window */
	uint64_t max_output;       /* bytes of a job's output region (its answer); 0 = from max_body */
	int transit_buffers;       /* bodies and results in transit; 0 = 4 x (C + Q) */
	int transit_share_pct;     /* most of a pool's transit buffers one client address holds,
	                            * percent (never below the pool's job slots); 100 = no limit */
	uint64_t evict_upload_rate; /* bytes/s: with every transit buffer held, the slowest upload
	                             * below it is cut (408); 0 = never */
	struct lg_pool_cfg pools[LG_MAX_POOLS]; /* [0] is "default" */
	int npools;                /* >= 1 after lg_options_load */
};

#endif
