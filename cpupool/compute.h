/* The compute process: takes JOB headers from the job channel in arrival order, runs one job at
 * a time, and reports to the owning loop worker. It holds no client socket, no listen socket and
 * no lock while a job runs, so the master may kill it at any instant and lose only that job. */
#ifndef LG_CPUPOOL_COMPUTE_H
#define LG_CPUPOOL_COMPUTE_H

#include <stdint.h>

#include "common/config.h"
#include "shm/arena.h"
#include "shm/channel.h"

struct lg_compute_env {
	const struct lg_config *cfg;
	struct lg_arena *arena;      /* shared, mapped by the master */
	struct lg_channels *ch;      /* already reduced with lg_channels_keep(ch, 'c', index) */
	uint32_t index;              /* compute index, 0..C-1 over every pool */
	uint32_t pool;               /* the pool it serves: cfg->jobs.pools[pool], master->pools[pool] */
	struct lg_proc_page *page;   /* this process's page; pid already set by the master */
};

/* The OOM killer should pick a compute process, which loses one job, before a loop worker,
 * which loses every connection it holds, or the master (proc(5), oom_score_adj 1000; raising
 * it needs no privilege). The child calls it first thing after fork, before it unmaps and
 * closes what it does not keep: a compute process respawned under memory pressure would
 * otherwise hold the master's value for those milliseconds, lower than a loop worker's, and
 * with its small resident set the OOM killer could choose a loop worker. A failure is logged. */
void lg_compute_prefer_oom_kill(void);

/* Runs the compute loop until the job channel fails. Never returns on the normal path; the
 * process ends by signal (SIGTERM from the master). Returns an exit status on a fatal channel
 * error (EBADF, ENOTSOCK), logged once. */
int lg_compute_main(const struct lg_compute_env *env);

/* The exit status of a compute process that recycled itself between jobs (its pool's max_jobs
 * or max_rss): the master replaces it at once, as a planned exit, not a crash. */
#define LG_COMPUTE_RECYCLE 75

#endif
