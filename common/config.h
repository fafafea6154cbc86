/* The settings every process role reads: one struct per room (common/cfg_*.h), gathered in
 * struct lg_config. Filled by the master from flags before forking; children get a copy through
 * fork and never change it. A room's code reads its own member (docs/ARCHITECTURE.md
 * "Configuration per room") and, where it can, takes only that struct. Types only. */
#ifndef LG_COMMON_CONFIG_H
#define LG_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfg_conn.h"
#include "common/cfg_flight.h"
#include "common/cfg_http.h"
#include "common/cfg_job.h"
#include "common/cfg_master.h"
#include "common/limits.h"

struct lg_registry; /* kinds/registry.h: kinds, modules and routes, built from the file */

struct lg_config {
	struct lg_master_cfg master;   /* listeners, admin, agent, pid file, drain, log, apps */
	struct lg_sizing_cfg sizing;   /* CPU and memory budget inputs (sizing/) */
	struct lg_http_cfg http;       /* HTTP limits and timeouts (docs/HTTP.md) */
	struct lg_conn_cfg conn;       /* connections of a loop worker (worker/core) */
	struct lg_loop_cfg loop;       /* the loop's watch: lag probe, slow callbacks, stuck loops */
	struct lg_job_cfg jobs;        /* pools, deadlines, admission, compute, transit (worker/job) */
	struct lg_flight_cfg flights;  /* single-flight and result cache (worker/flight) */
	struct lg_cluster_cfg cluster; /* the cluster scope's Redis (worker/flight/cluster.c) */
	/* job modules and routes (docs/MODULES.md) */
	struct lg_registry *reg;   /* built by the master before fork; never freed while used */
	int enable_test_jobs;      /* 1: serve the /test/ fault-injection routes (never in production) */
	int inline_heavy;          /* run /heavy on the loop (demonstrates what lag looks like) */
	int demo_routes;           /* serve the built-in kinds' default routes (/heavy, /hash, ...) */
};

#endif
