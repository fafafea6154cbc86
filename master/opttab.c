/* The option tables (master/opttab.h): one row per setting, in --help order. */
#include "master/opttab.h"


#include "master/master.h"

#define F(field) offsetof(struct lg_config, field)
#define SZ(field) sizeof(((struct lg_config *)0)->field)
#define PF(field) offsetof(struct lg_pool_cfg, field)

const struct lg_opt lg_opts[] = {
	{ "listen", K_LISTEN, 0, 0, 0, "0.0.0.0:8080", "[ADDR:]PORT ...",
	  "listeners, blank-separated (or --listen again): [ADDR:]PORT, [::1]:PORT, HOST:PORT, "
	  "unix:/path[,mode=0660][,owner=USER[:GROUP]], each [,proxy] (PROXY header first); port 0 "
	  "picks a free port" },
	{ "port", K_INT, F(master.port), 0, 65535, NULL, "N", "listen port (short form of listen)" },
	{ "admin-listen", K_ADDR, F(master.admin_listen), 0, SZ(master.admin_listen),
	  "", "ADDR:PORT", "a listener for /metrics, /status, /health, /ready and /ping only, which "
	  "the others then no longer answer for /metrics and /status; \"\" = none" },
	{ "agent-listen", K_ADDR, F(master.agent_listen), 0, SZ(master.agent_listen),
	  "", "ADDR:PORT", "HAProxy agent-check listener (the master's): one line, ready|drain and "
	  "a weight NN% from the offered load; \"\" = none" },
	{ "agent-maxconn", K_INT, F(master.agent_maxconn), 0, 1000000, "0", "N",
	  "N > 0: the agent also says maxconn:(job slots + N), HAProxy's per-server limit; "
	  "0 = not sent" },
	{ "loop-workers", K_INT, F(sizing.loop_workers), 0, 1024, "0", "N",
	  "event-loop processes; 0 = the CPU budget" },
	{ "compute-workers", K_COMPUTE, F(jobs.compute_workers), 0, 1024, "0", "N|P%",
	  "compute processes: a count, or a share of the CPU budget (100% = one per CPU, at least "
	  "1); 0 = max(1, budget - 1)" },
	{ "queue", K_INT, F(jobs.queue_capacity), 0, 100000, NULL, "N",
	  "waiting jobs beyond the running ones; unset = 2 x compute-workers" },
	{ "cpus", K_CPUS, F(sizing.cpus), 0, 1024, "0", "X", "CPU budget to use instead of measuring it; 0 = measure" },
	{ "cpu-rounding", K_ROUNDING, F(sizing.rounding), 0, 0, "floor", "floor|ceil",
	  "how a fractional CPU quota rounds (never below 1)" },
	{ "max-body", K_SIZE, F(http.max_body), 0, 1ull << 40, "64M", "BYTES",
	  "largest request body (K/M/G suffixes); 413 above it" },
	{ "max-discard", K_SIZE, F(http.max_discard), 0, 1ull << 30, "64K", "BYTES",
	  "largest body read and dropped to keep the connection open after a refusal (503 for a "
	  "full queue, 404, 405) or by a route that takes none; a longer one closes it" },
	{ "deadline-ms", K_MS, F(jobs.deadline_ms), 1, 86400000, "30000", "MS",
	  "per offloaded job, queue wait included; 504 past it" },
	{ "drain-timeout-ms", K_MS, F(master.drain_timeout_ms), 0, 86400000, "30000", "MS",
	  "graceful stop: time left to in-flight requests" },
	{ "drain-delay-ms", K_MS, F(master.drain_delay_ms), 0, 3600000, NULL, "MS",
	  "graceful stop: after SIGTERM, /ready 503 and agent drain at once, still serving this "
	  "long (a load balancer stops sending), then the drain; unset: 2500 with agent, else 0" },
	{ "kill-grace-ms", K_MS, F(jobs.kill_grace_ms), 0, 60000, "200", "MS",
	  "SIGTERM to SIGKILL grace for a compute process past its deadline" },
	{ "max-conns", K_INT, F(conn.max_conns), 1, 1000000, "10000", "N",
	  "open connections per loop worker" },
	{ "max-head", K_SIZE, F(http.max_head), 256, 1ull << 20, "16K", "BYTES",
	  "request line + header section (docs/HTTP.md); 431 above it" },
	{ "max-uri", K_SIZE, F(http.max_uri), 16, 8192, "8192", "BYTES",
	  "request-target length, at most 8192; 414 above it" },
	{ "max-fields", K_INT, F(http.max_fields), 1, 10000, "100", "N",
	  "header field lines; 431 above it" },
	{ "merge-slashes", K_BOOL, F(http.merge_slashes), 0, 0, "yes", "[=yes|no]",
	  "a run of '/' in a request path is one '/' before routing (nginx's merge_slashes); the "
	  "path is otherwise normalized always (docs/HTTP.md)" },
	{ "head-timeout-ms", K_MS, F(http.head_timeout_ms), 1, 86400000, "10000", "MS",
	  "time to receive a whole request head (from its first byte, or accept); 408" },
	{ "body-timeout-ms", K_MS, F(http.body_timeout_ms), 1, 86400000, "15000", "MS",
	  "longest silence while a request body arrives; 408" },
	{ "body-deadline-ms", K_MS, F(http.body_deadline_ms), 1, 86400000, "60000", "MS",
	  "whole body of an offloaded request, which holds a job slot; 408" },
	{ "request-deadline-ms", K_MS, F(http.request_deadline_ms), 0, 86400000, "0", "MS",
	  "whole request (head, body and trailers) from its first byte, on every path (also a "
	  "body read and dropped); 408; 0 = head-timeout-ms + body-deadline-ms" },
	{ "keepalive-timeout-ms", K_MS, F(conn.keepalive_timeout_ms), 1, 86400000, "60000", "MS",
	  "idle time between requests before the connection is closed" },
	{ "lingering-time-ms", K_MS, F(conn.lingering_time_ms), 0, 3600000, "30000", "MS",
	  "after a refusal that closes with the body unread (503, 413), read and drop the rest "
	  "this long at most, so the client reads the answer (lingering_time); 0 = no wait" },
	{ "lingering-timeout-ms", K_MS, F(conn.lingering_timeout_ms), 1, 3600000, "5000", "MS",
	  "while lingering, the longest silence before the close (nginx's lingering_timeout)" },
	{ "lingering-bytes", K_SIZE, F(conn.lingering_bytes), 0, 1ull << 40, "64M", "BYTES",
	  "while lingering, the most input read and dropped before the close" },
	{ "write-timeout-ms", K_MS, F(conn.write_timeout_ms), 1, 86400000, "30000", "MS",
	  "longest stall of a response write before the connection is closed" },
	{ "transit-buffers", K_INT, F(jobs.transit_buffers), 0, 100000, "0", "N",
	  "request bodies and results held in shared memory at once (each takes a buffer from the "
	  "head of an offloaded request to its last response byte); 0 = 4 x (compute + queue); "
	  "503 when none is free" },
	{ "min-upload-rate", K_U64, F(http.min_upload_rate), 0, 1ull << 40, "1024", "BYTES/S",
	  "an offloaded request body must arrive at this average rate once body-timeout-ms has "
	  "passed (each byte buys 1/rate s more); 408 below it; 0 = off" },
	{ "min-download-rate", K_U64, F(conn.min_download_rate), 0, 1ull << 40, "1024", "BYTES/S",
	  "a response must be read at this average rate once write-timeout-ms has passed; the "
	  "connection is closed below it; 0 = off" },
	{ "transit-share-pct", K_INT, F(jobs.transit_share_pct), 1, 100, "50", "PCT",
	  "most of a pool's transit buffers one client address (IPv6: its /64) may hold, never "
	  "fewer than the pool's job slots (behind a trusted proxy: its client's); 503 over it; "
	  "100 = no limit" },
	{ "evict-upload-rate", K_U64, F(jobs.evict_upload_rate), 0, 1ull << 40, "32768", "BYTES/S",
	  "when a request finds every transit buffer held, the slowest upload averaging below "
	  "this (held 1 s or more) is cut with 408 to free its buffer; 0 = never" },
	{ "log-level", K_LOGLEVEL, F(master.log_level), 0, 0, "info", "LEVEL",
	  "error, warn, info or debug" },
	{ "error-log", K_PATH, F(master.error_log), 0, SZ(master.error_log), "",
	  "FILE", "append log lines to FILE instead of stderr; reopened on SIGUSR1" },
	{ "pid-file", K_PATH, F(master.pid_file), 0, SZ(master.pid_file), "",
	  "FILE", "write the master's pid to FILE (removed at exit), and each reload's outcome to "
	  "FILE.reload, for lagless -s reload" },
	{ "lag-interval-ms", K_MS, F(loop.lag_interval_ms), 1, 60000, "10", "MS",
	  "loop-lag probe period" },
	{ "slow-callback-ms", K_MS, F(loop.slow_callback_ms), 0, 3600000, "50", "MS",
	  "log a loop callback that runs longer, naming its request; 0 = off" },
	{ "access-log", K_BOOL, F(conn.access_log), 0, 0, "no", "[=yes|no]",
	  "log one line per response (method, path, status, bytes, times, client, query, "
	  "user agent, request id)" },
	{ "access-log-json", K_BOOL, F(conn.access_log_json), 0, 0, "no", "[=yes|no]",
	  "write the access log as JSON lines, one object per response" },
	{ "request-id", K_BOOL, F(conn.request_id), 0, 0, "no", "[=yes|no]",
	  "answer with X-Request-Id: the request's own (1-128 of A-Za-z0-9._:-) or a generated one"
	  "; the access log names it either way" },
	{ "trusted-proxies", K_CIDRS, F(conn.trusted_proxies), 0,
	  SZ(conn.trusted_proxies), "", "CIDR ...",
	  "peers whose X-Forwarded-For (rightmost untrusted entry) or PROXY header names the "
	  "client, for the access log and the per-client rules, e.g. 10.0.0.0/8 ::1" },
	{ "inline-heavy", K_BOOL, F(inline_heavy), 0, 0, "no", "[=yes|no]",
	  "run /heavy on the loop instead of the pool, to demonstrate a blocking handler" },
	{ "demo-routes", K_BOOL, F(demo_routes), 0, 0, "yes", "[=yes|no]",
	  "serve the built-in kinds' routes /heavy, /compress, /decompress, /hash and /verify; no "
	  "in production: only the routes [route] sections declare, and the loop's own" },
	{ "stuck-loop-ms", K_MS, F(loop.stuck_loop_ms), 300, 3600000, "5000", "MS",
	  "replace a loop worker whose heartbeat is this old" },
	{ "on-client-gone", K_GONE, F(jobs.on_client_gone), 0, 0, "kill", "finish|kill",
	  "running job of a departed client: kill its compute process (no other request waits on "
	  "it) or let it finish" },
	{ "quarantine-deaths", K_INT, F(jobs.quarantine_deaths), 0, 1000000, "5", "N",
	  "compute process deaths by one job kind on one route within quarantine-ms that "
	  "quarantine the kind on that route "
	  "(503 for it); 0 = never" },
	{ "quarantine-ms", K_MS, F(jobs.quarantine_ms), 1, 86400000, "10000", "MS",
	  "how long a quarantined job kind is refused, and the window its deaths are counted in" },
	{ "queue-wait-target-ms", K_MS, F(jobs.queue_wait_target_ms), 0, 86400000, "0", "MS",
	  "admission by queue wait (CoDel): while the shortest wait over an interval stays above "
	  "this, new jobs get 503 at once and queued ones waiting longer are shed; 0 = off" },
	{ "queue-wait-interval-ms", K_MS, F(jobs.queue_wait_interval_ms), 1, 86400000, "100", "MS",
	  "the CoDel interval (at least the target); a queued job may wait this long while not "
	  "overloaded" },
	{ "live-resize", K_BOOL, F(sizing.live_resize), 0, 0, "yes", "[=yes|no]",
	  "follow a CPU quota that changes at run time (read each second), resizing the compute "
	  "processes and queue that were not given as counts" },
	{ "coalesce", K_RULES, F(flights.coalesce), 0, SZ(flights.coalesce), "",
	  "RULES", "per-route single-flight and cache rules, e.g. \"/heavy ttl=5000 "
	  "query=iterations\", or the same as keys of the route's section (docs/CACHE.md); "
	  "\"\" = none" },
	{ "cache-bytes", K_SIZE, F(flights.cache_bytes), 0, 1ull << 40, "64M", "BYTES",
	  "shared-memory result cache for routes with a ttl (K/M/G suffixes)" },
	{ "cache-max-entry", K_SIZE, F(flights.cache_max_entry), 1024, 32ull << 20, "1M", "BYTES",
	  "largest answer the cache stores" },
	{ "cache-jitter-pct", K_INT, F(flights.cache_jitter_pct), 0, 100, "10", "PCT",
	  "TTLs are shortened by up to this share at random, so entries filled together do not "
	  "expire together" },
	{ "redis", K_REDIS, F(cluster.redis), 0, SZ(cluster.redis), "",
	  "unix:/PATH|ADDR:PORT", "Redis shared by the replicas for rules with scope=cluster "
	  "(docs/CACHE.md, \"Across replicas\"); \"\" = none: every rule is local" },
	{ "redis-budget-ms", K_MS, F(cluster.redis_budget_ms), 1, 60000, "5", "MS",
	  "time allowed to connect to Redis, and to each command; past it the breaker opens" },
	{ "redis-breaker-ms", K_MS, F(cluster.redis_breaker_ms), 1, 3600000, "1000", "MS",
	  "after a Redis error, lost connection or command over budget, cluster keys stay local "
	  "this long before Redis is tried again" },
	{ "redis-lease-ms", K_MS, F(cluster.redis_lease_ms), 0, 86400000, "0", "MS",
	  "lease on a cold cluster key, renewed while its job runs; 0 = twice the kind's p99 "
	  "run time (2000 before it ran); at most the route's deadline" },
	{ "redis-prefix", K_PATH, F(cluster.redis_prefix), 0, SZ(cluster.redis_prefix),
	  "lagless:", "TEXT", "prefix of every Redis key and channel" },
	{ "cluster-max-value", K_SIZE, F(cluster.cluster_max_value), 0, 512ull << 20, "1M", "BYTES",
	  "largest answer stored in Redis for other replicas (larger ones stay local)" },
	{ "enable-test-jobs", K_INT, F(enable_test_jobs), 0, 1, "0", "0|1",
	  "serve the /test/ fault-injection routes (never in production)" },
	{ "max-output", K_SIZE, F(jobs.max_output), 0, 1ull << 40, "0", "BYTES",
	  "largest answer of a job (its output region, rounded up to whole 4 KiB pages); 0 = "
	  "max-body plus 1/256 and 128K" },
	{ "compute-memory", K_SIZE, F(jobs.compute_memory), 0, 1ull << 50, "0", "BYTES",
	  "data-size limit of each compute process (RLIMIT_DATA); 0 = none" },
	{ "compute-max-jobs", K_U64, F(jobs.compute_max_jobs), 0, 1ull << 40, "0", "N",
	  "replace a compute process once it has run N jobs (after its job; for code that leaks); "
	  "0 = never" },
	{ "compute-max-rss", K_SIZE, F(jobs.compute_max_rss), 0, 1ull << 50, "0", "BYTES",
	  "replace a compute process whose private memory (RssAnon) passed this after a job; 0 = "
	  "never" },
	{ "memory-limit", K_SIZE, F(sizing.memory_limit), 0, 1ull << 50, "0", "BYTES",
	  "memory the server may use, instead of the tightest cgroup limit (memory.max, "
	  "memory.high, v1 memory.limit_in_bytes) or MemTotal; 0 = measure" },
	{ "memory-reserve", K_SIZE, F(sizing.memory_reserve), 0, 1ull << 50, "0", "BYTES",
	  "part of the memory limit left to the processes' own memory; 0 = 32M + 8M per loop "
	  "worker + max(compute-memory, 24M) per compute process" },
	{ "shm-budget", K_SIZE, F(sizing.shm_budget), 0, 1ull << 50, "0", "BYTES",
	  "request bodies and results backed in shared memory at once; 0 = the memory limit less "
	  "the reserve, the fixed shared memory and the cache; beyond it 503 (reason memory)" },
	{ "compute-policy", K_SCHED, F(jobs.compute_policy), 0, 0, "normal", "normal|batch|idle",
	  "compute processes' scheduling policy (sched(7)): normal, batch: shared by nice; idle: "
	  "any woken task preempts a job at once (a machine with nothing but lagless)" },
	{ "compute-slice-ms", K_MS, F(jobs.compute_slice_ms), 0, 100, "0", "MS",
	  "compute processes' time slice (sched_setattr(2), Linux 6.12+): above the default "
	  "(<= 3 ms), a woken task preempts a job at once, its share kept; 0 = the kernel's" },
};

_Static_assert(sizeof(lg_opts) / sizeof(lg_opts[0]) == LG_NOPTS, "LG_NOPTS counts lg_opts");

const struct lg_pool_opt lg_pool_opts[] = {
	{ { "compute", K_POOL_COMPUTE, PF(compute), 1, 1024, NULL, "N|P%",
	    "compute processes: a count or a share of the CPU budget (required)" },
	  "compute-workers" },
	{ { "queue", K_INT, PF(queue), 0, 100000, NULL, "N",
	    "waiting jobs beyond the running ones (default 2 x compute)" }, "queue" },
	{ { "deadline-ms", K_MS, PF(deadline_ms), 1, 86400000, NULL, "MS",
	    "per job, queue wait included" }, "deadline-ms" },
	{ { "on-client-gone", K_GONE, PF(on_client_gone), 0, 0, NULL, "finish|kill",
	    "running job of a departed client" }, "on-client-gone" },
	{ { "queue-wait-target-ms", K_MS, PF(queue_wait_target_ms), 0, 86400000, NULL, "MS",
	    "CoDel target; 0 = off" }, "queue-wait-target-ms" },
	{ { "queue-wait-interval-ms", K_MS, PF(queue_wait_interval_ms), 1, 86400000, NULL, "MS",
	    "CoDel interval" }, "queue-wait-interval-ms" },
	{ { "nice", K_INT, PF(nice), 0, 19, NULL, "N",
	    "nice(2) increment of its compute processes (default 5; weighs only under policy "
	    "batch or normal)" }, NULL },
	{ { "policy", K_SCHED, PF(policy), 0, 0, NULL, "idle|batch|normal",
	    "scheduling policy of its compute processes" }, "compute-policy" },
	{ { "slice-ms", K_MS, PF(slice_ms), 0, 100, NULL, "MS",
	    "time slice its compute processes ask of the scheduler; 0 = the kernel's" },
	  "compute-slice-ms" },
	{ { "memory", K_SIZE, PF(memory), 0, 1ull << 50, NULL, "BYTES",
	    "data-size limit (RLIMIT_DATA) of each of its compute processes; 0 = none" },
	  "compute-memory" },
	{ { "max-jobs", K_U64, PF(max_jobs), 0, 1ull << 40, NULL, "N",
	    "replace each of its compute processes after N jobs; 0 = never" }, "compute-max-jobs" },
	{ { "max-rss", K_SIZE, PF(max_rss), 0, 1ull << 50, NULL, "BYTES",
	    "replace one whose private memory passed this after a job; 0 = never" },
	  "compute-max-rss" },
	{ { "oversubscribe", K_BOOL, PF(oversubscribe), 0, 0, NULL, "yes|no",
	    "leave its processes out of the CPU budget check" }, NULL },
	{ { "routes", K_PATH, PF(routes), 0, sizeof(((struct lg_pool_cfg *)0)->routes), NULL,
	    "PATH ...", "offloaded routes it serves (the others go to the default pool)" }, NULL },
};

_Static_assert(sizeof(lg_pool_opts) / sizeof(lg_pool_opts[0]) == LG_NPOOL_OPTS,
    "LG_NPOOL_OPTS counts lg_pool_opts");
