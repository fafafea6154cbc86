#include "master/options.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strdist.h"
#include "kinds/builtin.h"
#include "master/master.h"
#include "master/optset.h"
#include "master/site.h"
#include "common/policy.h"


#define F(field) offsetof(struct lg_config, field)
#define PF(field) offsetof(struct lg_pool_cfg, field)

static const struct lg_opt opts[] = {
	{ "listen", K_LISTEN, 0, 0, 0, "0.0.0.0:8080", "[ADDR:]PORT ...",
	  "listeners, blank-separated (or --listen again): [ADDR:]PORT, [::1]:PORT, HOST:PORT, "
	  "unix:/path[,mode=0660][,owner=USER[:GROUP]]; port 0 picks a free port (logged)" },
	{ "port", K_INT, F(port), 0, 65535, NULL, "N", "listen port (short form of listen)" },
	{ "admin-listen", K_ADDR, F(admin_listen), 0, sizeof(((struct lg_config *)0)->admin_listen),
	  "", "ADDR:PORT", "a listener for /metrics, /status, /health, /ready and /ping only, which "
	  "the others then no longer answer for /metrics and /status; \"\" = none" },
	{ "agent-listen", K_ADDR, F(agent_listen), 0, sizeof(((struct lg_config *)0)->agent_listen),
	  "", "ADDR:PORT", "HAProxy agent-check listener (the master's): one line, ready|drain and "
	  "a weight NN% from the offered load; \"\" = none" },
	{ "agent-maxconn", K_INT, F(agent_maxconn), 0, 1000000, "0", "N",
	  "N > 0: the agent also says maxconn:(job slots + N), HAProxy's per-server limit; "
	  "0 = not sent" },
	{ "loop-workers", K_INT, F(loop_workers), 0, 1024, "0", "N",
	  "event-loop processes; 0 = the CPU budget" },
	{ "compute-workers", K_COMPUTE, F(compute_workers), 0, 1024, "0", "N|P%",
	  "compute processes: a count, or a share of the CPU budget (100% = one per CPU, at least "
	  "1); 0 = max(1, budget - 1)" },
	{ "queue", K_INT, F(queue_capacity), 0, 100000, NULL, "N",
	  "waiting jobs beyond the running ones; unset = 2 x compute-workers" },
	{ "cpus", K_CPUS, F(cpus), 0, 1024, "0", "X", "CPU budget to use instead of measuring it; 0 = measure" },
	{ "cpu-rounding", K_ROUNDING, F(rounding), 0, 0, "floor", "floor|ceil",
	  "how a fractional CPU quota rounds (never below 1)" },
	{ "max-body", K_SIZE, F(max_body), 0, 1ull << 40, "64M", "BYTES",
	  "largest request body (K/M/G suffixes); 413 above it" },
	{ "max-discard", K_SIZE, F(max_discard), 0, 1ull << 30, "64K", "BYTES",
	  "largest body read and dropped to keep the connection open after a refusal (503 for a "
	  "full queue, 404, 405) or by a route that takes none; a longer one closes it" },
	{ "deadline-ms", K_MS, F(deadline_ms), 1, 86400000, "30000", "MS",
	  "per offloaded job, queue wait included; 504 past it" },
	{ "drain-timeout-ms", K_MS, F(drain_timeout_ms), 0, 86400000, "30000", "MS",
	  "graceful stop: time left to in-flight requests" },
	{ "drain-delay-ms", K_MS, F(drain_delay_ms), 0, 3600000, NULL, "MS",
	  "graceful stop: after SIGTERM, /ready 503 and agent drain at once, still serving this "
	  "long (a load balancer stops sending), then the drain; unset: 2500 with agent, else 0" },
	{ "kill-grace-ms", K_MS, F(kill_grace_ms), 0, 60000, "200", "MS",
	  "SIGTERM to SIGKILL grace for a compute process past its deadline" },
	{ "max-conns", K_INT, F(max_conns), 1, 1000000, "10000", "N",
	  "open connections per loop worker" },
	{ "max-head", K_SIZE, F(max_head), 256, 1ull << 20, "16K", "BYTES",
	  "request line + header section (docs/HTTP.md); 431 above it" },
	{ "max-uri", K_SIZE, F(max_uri), 16, 8192, "8192", "BYTES",
	  "request-target length, at most 8192; 414 above it" },
	{ "max-fields", K_INT, F(max_fields), 1, 10000, "100", "N",
	  "header field lines; 431 above it" },
	{ "head-timeout-ms", K_MS, F(head_timeout_ms), 1, 86400000, "10000", "MS",
	  "time to receive a whole request head (from its first byte, or accept); 408" },
	{ "body-timeout-ms", K_MS, F(body_timeout_ms), 1, 86400000, "15000", "MS",
	  "longest silence while a request body arrives; 408" },
	{ "body-deadline-ms", K_MS, F(body_deadline_ms), 1, 86400000, "60000", "MS",
	  "whole body of an offloaded request, which holds a job slot; 408" },
	{ "request-deadline-ms", K_MS, F(request_deadline_ms), 0, 86400000, "0", "MS",
	  "whole request (head, body and trailers) from its first byte, on every path (also a "
	  "body read and dropped); 408; 0 = head-timeout-ms + body-deadline-ms" },
	{ "keepalive-timeout-ms", K_MS, F(keepalive_timeout_ms), 1, 86400000, "60000", "MS",
	  "idle time between requests before the connection is closed" },
	{ "write-timeout-ms", K_MS, F(write_timeout_ms), 1, 86400000, "30000", "MS",
	  "longest stall of a response write before the connection is closed" },
	{ "transit-buffers", K_INT, F(transit_buffers), 0, 100000, "0", "N",
	  "request bodies and results held in shared memory at once (each takes a buffer from the "
	  "head of an offloaded request to its last response byte); 0 = 4 x (compute + queue); "
	  "503 when none is free" },
	{ "min-upload-rate", K_U64, F(min_upload_rate), 0, 1ull << 40, "1024", "BYTES/S",
	  "an offloaded request body must arrive at this average rate once body-timeout-ms has "
	  "passed (each byte buys 1/rate s more); 408 below it; 0 = off" },
	{ "min-download-rate", K_U64, F(min_download_rate), 0, 1ull << 40, "1024", "BYTES/S",
	  "a response must be read at this average rate once write-timeout-ms has passed; the "
	  "connection is closed below it; 0 = off" },
	{ "transit-share-pct", K_INT, F(transit_share_pct), 1, 100, "50", "PCT",
	  "most of a pool's transit buffers one client address (IPv6: its /64) may hold, never "
	  "fewer than the pool's job slots; 503 over it; 100 = no limit (behind a proxy)" },
	{ "evict-upload-rate", K_U64, F(evict_upload_rate), 0, 1ull << 40, "32768", "BYTES/S",
	  "when a request finds every transit buffer held, the slowest upload averaging below "
	  "this (held 1 s or more) is cut with 408 to free its buffer; 0 = never" },
	{ "log-level", K_LOGLEVEL, F(log_level), 0, 0, "info", "LEVEL",
	  "error, warn, info or debug" },
	{ "error-log", K_PATH, F(error_log), 0, sizeof(((struct lg_config *)0)->error_log), "",
	  "FILE", "append log lines to FILE instead of stderr; reopened on SIGUSR1" },
	{ "pid-file", K_PATH, F(pid_file), 0, sizeof(((struct lg_config *)0)->pid_file), "",
	  "FILE", "write the master's pid to FILE (removed at exit), and each reload's outcome to "
	  "FILE.reload, for lagless -s reload" },
	{ "lag-interval-ms", K_MS, F(lag_interval_ms), 1, 60000, "10", "MS",
	  "loop-lag probe period" },
	{ "slow-callback-ms", K_MS, F(slow_callback_ms), 0, 3600000, "50", "MS",
	  "log a loop callback that runs longer, naming its request; 0 = off" },
	{ "access-log", K_BOOL, F(access_log), 0, 0, "no", "[=yes|no]",
	  "log one line per response (method, path, status, bytes, times, client, query, "
	  "user agent, request id)" },
	{ "access-log-json", K_BOOL, F(access_log_json), 0, 0, "no", "[=yes|no]",
	  "write the access log as JSON lines, one object per response" },
	{ "request-id", K_BOOL, F(request_id), 0, 0, "no", "[=yes|no]",
	  "answer with X-Request-Id: the request's own (1-128 of A-Za-z0-9._:-) or a generated one"
	  "; the access log names it either way" },
	{ "trusted-proxies", K_CIDRS, F(trusted_proxies), 0,
	  sizeof(((struct lg_config *)0)->trusted_proxies), "", "CIDR ...",
	  "peers whose X-Forwarded-For names the client in the access log (rightmost untrusted "
	  "entry), e.g. 10.0.0.0/8 ::1" },
	{ "inline-heavy", K_BOOL, F(inline_heavy), 0, 0, "no", "[=yes|no]",
	  "run /heavy on the loop instead of the pool, to demonstrate a blocking handler" },
	{ "demo-routes", K_BOOL, F(demo_routes), 0, 0, "yes", "[=yes|no]",
	  "serve the built-in kinds' routes /heavy, /compress, /decompress, /hash and /verify; no "
	  "in production: only the routes [route] sections declare, and the loop's own" },
	{ "stuck-loop-ms", K_MS, F(stuck_loop_ms), 300, 3600000, "5000", "MS",
	  "replace a loop worker whose heartbeat is this old" },
	{ "on-client-gone", K_GONE, F(on_client_gone), 0, 0, "finish", "finish|kill",
	  "running job of a departed client: finish or kill" },
	{ "quarantine-deaths", K_INT, F(quarantine_deaths), 0, 1000000, "5", "N",
	  "compute process deaths by one job kind within quarantine-ms that quarantine the kind "
	  "(503 for it); 0 = never" },
	{ "quarantine-ms", K_MS, F(quarantine_ms), 1, 86400000, "10000", "MS",
	  "how long a quarantined job kind is refused, and the window its deaths are counted in" },
	{ "queue-wait-target-ms", K_MS, F(queue_wait_target_ms), 0, 86400000, "0", "MS",
	  "admission by queue wait (CoDel): while the shortest wait over an interval stays above "
	  "this, new jobs get 503 at once and queued ones waiting longer are shed; 0 = off" },
	{ "queue-wait-interval-ms", K_MS, F(queue_wait_interval_ms), 1, 86400000, "100", "MS",
	  "the CoDel interval (at least the target); a queued job may wait this long while not "
	  "overloaded" },
	{ "live-resize", K_BOOL, F(live_resize), 0, 0, "yes", "[=yes|no]",
	  "follow a CPU quota that changes at run time (read each second), resizing the compute "
	  "processes and queue that were not given as counts" },
	{ "coalesce", K_RULES, F(coalesce), 0, sizeof(((struct lg_config *)0)->coalesce), "",
	  "RULES", "per-route single-flight and cache rules, e.g. \"/heavy ttl=5000 "
	  "query=iterations\", or the same as keys of the route's section (docs/CACHE.md); "
	  "\"\" = none" },
	{ "cache-bytes", K_SIZE, F(cache_bytes), 0, 1ull << 40, "64M", "BYTES",
	  "shared-memory result cache for routes with a ttl (K/M/G suffixes)" },
	{ "cache-max-entry", K_SIZE, F(cache_max_entry), 1024, 32ull << 20, "1M", "BYTES",
	  "largest answer the cache stores" },
	{ "cache-jitter-pct", K_INT, F(cache_jitter_pct), 0, 100, "10", "PCT",
	  "TTLs are shortened by up to this share at random, so entries filled together do not "
	  "expire together" },
	{ "redis", K_REDIS, F(redis), 0, sizeof(((struct lg_config *)0)->redis), "",
	  "unix:/PATH|ADDR:PORT", "Redis shared by the replicas for rules with scope=cluster "
	  "(docs/CACHE.md, \"Across replicas\"); \"\" = none: every rule is local" },
	{ "redis-budget-ms", K_MS, F(redis_budget_ms), 1, 60000, "5", "MS",
	  "time allowed to connect to Redis, and to each command; past it the breaker opens" },
	{ "redis-breaker-ms", K_MS, F(redis_breaker_ms), 1, 3600000, "1000", "MS",
	  "after a Redis error, lost connection or command over budget, cluster keys stay local "
	  "this long before Redis is tried again" },
	{ "redis-lease-ms", K_MS, F(redis_lease_ms), 0, 86400000, "0", "MS",
	  "lease on a cold cluster key, renewed while its job runs; 0 = twice the kind's p99 "
	  "run time (2000 before it ran); at most the route's deadline" },
	{ "redis-prefix", K_PATH, F(redis_prefix), 0, sizeof(((struct lg_config *)0)->redis_prefix),
	  "lagless:", "TEXT", "prefix of every Redis key and channel" },
	{ "cluster-max-value", K_SIZE, F(cluster_max_value), 0, 512ull << 20, "1M", "BYTES",
	  "largest answer stored in Redis for other replicas (larger ones stay local)" },
	{ "enable-test-jobs", K_INT, F(enable_test_jobs), 0, 1, "0", "0|1",
	  "serve the /test/ fault-injection routes (never in production)" },
	{ "max-output", K_SIZE, F(max_output), 0, 1ull << 40, "0", "BYTES",
	  "largest answer of a job (its output region, rounded up to whole 4 KiB pages); 0 = "
	  "max-body plus 1/256 and 128K" },
	{ "compute-memory", K_SIZE, F(compute_memory), 0, 1ull << 50, "0", "BYTES",
	  "data-size limit of each compute process (RLIMIT_DATA); 0 = none" },
	{ "compute-max-jobs", K_U64, F(compute_max_jobs), 0, 1ull << 40, "0", "N",
	  "replace a compute process once it has run N jobs (after its job; for code that leaks); "
	  "0 = never" },
	{ "compute-max-rss", K_SIZE, F(compute_max_rss), 0, 1ull << 50, "0", "BYTES",
	  "replace a compute process whose private memory (RssAnon) passed this after a job; 0 = "
	  "never" },
	{ "memory-limit", K_SIZE, F(memory_limit), 0, 1ull << 50, "0", "BYTES",
	  "memory the server may use, instead of the tightest cgroup limit (memory.max, "
	  "memory.high, v1 memory.limit_in_bytes) or MemTotal; 0 = measure" },
	{ "memory-reserve", K_SIZE, F(memory_reserve), 0, 1ull << 50, "0", "BYTES",
	  "part of the memory limit left to the processes' own memory; 0 = 32M + 8M per loop "
	  "worker + max(compute-memory, 24M) per compute process" },
	{ "shm-budget", K_SIZE, F(shm_budget), 0, 1ull << 50, "0", "BYTES",
	  "request bodies and results backed in shared memory at once; 0 = the memory limit less "
	  "the reserve, the fixed shared memory and the cache; beyond it 503 (reason memory)" },
	{ "compute-policy", K_SCHED, F(compute_policy), 0, 0, "normal", "normal|batch|idle",
	  "compute processes' scheduling policy (sched(7)): normal, batch: shared by nice; idle: "
	  "any woken task preempts a job at once (a machine with nothing but lagless)" },
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* Keys of a [pool NAME] section. `global` names the server-wide setting a key of
 * [pool default] stands for (so flags and environment still override it), or the value an
 * unset key of any pool takes; NULL: the key exists per pool only. */
struct pool_opt {
	struct lg_opt o;
	const char *global;
};

static const struct pool_opt pool_opts[] = {
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

#define NPOOLOPTS (sizeof(pool_opts) / sizeof(pool_opts[0]))

static int resolve_pools(struct lg_config *cfg, char *err, size_t cap);

void
lg_options_defaults(struct lg_config *cfg)
{
	const char *why;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NOPTS; i++)
		if (opts[i].def != NULL)
			lg_optset_apply(&opts[i], opts[i].def, cfg, &why);
	cfg->queue_capacity = -1;
	cfg->drain_delay_ms = LG_DRAIN_DELAY_AUTO;
	cfg->backlog = 4096;
	cfg->compute_nice = 5;
	cfg->npools = 1;
	snprintf(cfg->pools[0].name, sizeof(cfg->pools[0].name), "default");
	resolve_pools(cfg, NULL, 0); /* the default pool alone cannot fail */
}

static const struct lg_opt *
find_opt(const char *name, char dash)
{
	for (size_t i = 0; i < NOPTS; i++) {
		const char *a = opts[i].name, *b = name;

		while (*a && (*a == *b || (*a == '-' && *b == dash)))
			a++, b++;
		if (*a == '\0' && *b == '\0')
			return &opts[i];
	}
	return NULL;
}

struct file_ctx {
	struct lg_config *cfg;
	struct lg_site_src *site; /* [route] and [module] sections */
	FILE *fp;
	int line;          /* of the line inih last read */
	int sect_line;     /* of the last section header read */
	char *lbuf;        /* read_line's getline buffer (freed by load_file) */
	size_t lcap;
	int bad_line;      /* the error is at why_line, not where inih stopped (read_line refused
	                    * a line, or a section header is to blame) */
	char why[400];     /* the first error of a handler, formatted */
	int why_line;      /* the line of that error */
	struct seen_key { char key[96]; int line; } seen[256]; /* top-level and [pool] keys */
	int nseen;
};

/* Was key `name` of `section` given before in this file? ([lagless] is the top level; '-' and
 * '_' are the same in a key.) Records it otherwise. Returns the earlier line, or 0. A key is
 * given once, as in a [route] or [module] section (master/site.c): a repeat is more likely a
 * mistake than an override, and the last one winning in silence hides it. */
static int
seen_before(struct file_ctx *fc, const char *section, const char *name)
{
	char key[96];
	int n = snprintf(key, sizeof(key), "%s]%s", strcmp(section, "lagless") == 0 ? "" : section,
	    name);

	for (int i = 0; i < n && i < (int)sizeof(key); i++)
		if (key[i] == '-')
			key[i] = '_';
	for (int i = 0; i < fc->nseen; i++)
		if (strcmp(fc->seen[i].key, key) == 0)
			return fc->seen[i].line;
	if (fc->nseen < (int)(sizeof(fc->seen) / sizeof(fc->seen[0]))) {
		snprintf(fc->seen[fc->nseen].key, sizeof(fc->seen[0].key), "%s", key);
		fc->seen[fc->nseen++].line = fc->line;
	}
	return 0;
}

#define POOL_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_-" /* of a pool's name */
#define POOL_NAME_RULE "a pool name is 1 to 31 of a-z, 0-9, _ and -"

#define UNKNOWN_SECTION "unknown section (use [lagless], [route /path], [module name], " \
	"[pool NAME] or none)"

/* Is the header whose name starts at h (past its '[', up to ']' or the line's end) one of the
 * sections a file may hold? inih calls the handler only for keys, so without this an unknown
 * section with no keys (a typo such as [poolx]) would pass -t in silence. Their contents are
 * checked where they are read (pool_of, lg_site_collect). */
static int
known_section(const char *h)
{
	size_t n = strcspn(h, "]\r\n");

	return (n == 7 && strncmp(h, "lagless", 7) == 0) || strncmp(h, "pool ", 5) == 0 ||
	    strncmp(h, "route ", 6) == 0 || strncmp(h, "module ", 7) == 0;
}

/* inih's reader (fgets-like), counting lines so that route and module keys keep theirs.
 * inih reads at most size - 1 bytes of a line (INI_MAX_LINE, 200 in Debian's libinih) and
 * parses the rest as a line of its own, and a NUL byte would cut a value short in silence:
 * such a line is refused here (fc->bad_line, the reason in fc->why) and reading stops. The
 * flag and environment forms of an option have no such limit. */
static char *
read_line(char *buf, int size, void *stream)
{
	struct file_ctx *fc = stream;
	ssize_t n = getline(&fc->lbuf, &fc->lcap, fc->fp);
	const char *why = NULL, *h;
	size_t pn;

	if (n <= 0)
		return NULL;
	fc->line++;
	h = fc->lbuf + strspn(fc->lbuf, " \t");
	pn = strncmp(h, "[pool ", 6) == 0 ? strcspn(h + 6, "]\r\n") : SIZE_MAX;
	if (memchr(fc->lbuf, '\0', (size_t)n) != NULL)
		why = "a NUL byte in the line";
	else if (n > size - 1)
		why = "a line over the parser's limit of %d bytes (give a longer value by its flag or "
		    "LAGLESS_ environment variable)";
	else if (pn != SIZE_MAX && h[6 + pn] == ']' && (pn == 0 || pn >= LG_POOL_NAME ||
	    strspn(h + 6, POOL_CHARS) < pn)) { /* refused at its header, even without keys */
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "section [pool %.*s]: %s", (int)pn, h + 6,
			    POOL_NAME_RULE);
			fc->why_line = fc->line;
		}
		fc->bad_line = 1;
		return NULL;
	}
	if (why != NULL) {
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), why, size - 2);
			fc->why_line = fc->line;
		}
		fc->bad_line = 1;
		return NULL;
	}
	if (*h == '[' && !known_section(h + 1)) { /* refused at its header, even without keys */
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "section [%.*s]: %s", (int)strcspn(h + 1,
			    "]\r\n"), h + 1, UNKNOWN_SECTION);
			fc->why_line = fc->line;
		}
		fc->bad_line = 1;
		return NULL;
	}
	if (*h == '[')
		fc->sect_line = fc->line; /* a section header */
	memcpy(buf, fc->lbuf, (size_t)n + 1);
	return buf;
}

/* The pool named by section "pool NAME" (NAME: 1-31 of a-z 0-9 _ -), created on first use;
 * "default" is pools[0]. NULL with a reason when the name is bad or there are too many. */
static struct lg_pool_cfg *
pool_of(struct lg_config *cfg, const char *section, const char **why)
{
	const char *name = section + 5;
	size_t n = strlen(name);

	if (n == 0 || n >= LG_POOL_NAME || name[strspn(name, POOL_CHARS)]) {
		*why = POOL_NAME_RULE;
		return NULL;
	}
	for (int i = 0; i < cfg->npools; i++)
		if (strcmp(cfg->pools[i].name, name) == 0)
			return &cfg->pools[i];
	if (cfg->npools >= LG_MAX_POOLS) {
		*why = "too many pools (at most " LG_LIMIT_STR(LG_MAX_POOLS) ", default included)";
		return NULL;
	}
	struct lg_pool_cfg *p = &cfg->pools[cfg->npools++];
	memset(p, 0, sizeof(*p));
	memcpy(p->name, name, n + 1);
	return p;
}

/* key = value in [pool NAME], pool p (pool_of). A key of [pool default] that stands for a server-wide setting
 * is that setting's file value (flags and environment still win). Returns 0 or -1 + why. */
static int
pool_key(struct lg_config *cfg, struct lg_pool_cfg *p, const char *name, const char *value,
    const char **why)
{
	for (size_t k = 0; k < NPOOLOPTS; k++) {
		const struct pool_opt *po = &pool_opts[k];
		const char *a = po->o.name, *b = name;

		while (*a && (*a == *b || (*a == '-' && *b == '_')))
			a++, b++;
		if (*a != '\0' || *b != '\0')
			continue;
		p->given |= 1u << k;
		if (po->o.kind == K_POOL_COMPUTE && strspn(value, "0") == strlen(value)) {
			/* compute-workers = 0 sizes from the CPU budget, so [pool default] compute = 0
			 * was taken as max(1, budget - 1) in silence: a pool's count is refused */
			*why = "a pool runs at least 1 compute process (to size the default pool from "
			    "the CPU budget, leave compute out of [pool default])";
			return -1;
		}
		if (p == &cfg->pools[0] && po->global != NULL)
			return lg_optset_apply(find_opt(po->global, '-'), value, cfg, why);
		return lg_optset_apply(&po->o, value, p, why);
	}
	*why = "unknown key of a [pool] section";
	return -1;
}

/* inih handler (returns non-zero on success). Keys may sit before any section, in a
 * [lagless] section or in [pool NAME] sections; anything else is an error, so a typo never
 * passes silently. */
static int
file_handler(void *user, const char *section, const char *name, const char *value)
{
	struct file_ctx *fc = user;
	const struct lg_opt *o;
	const char *why = "unknown key";

	char swhy[200];
	int taken = lg_site_collect(fc->site, section, name, value, fc->line, swhy, sizeof(swhy));

	if (taken == 1)
		return 1;
	if (taken == -1) {
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "%s", swhy);
			fc->why_line = fc->line;
		}
		return 0;
	}
	int before = seen_before(fc, section, name);

	if (before > 0) {
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "key '%s' given twice%s%s%s (line %d; a key "
			    "is given once)", name, *section ? " in [" : "", section, *section ? "]" : "",
			    before);
			fc->why_line = fc->line;
		}
		return 0;
	}
	if (strncmp(section, "pool ", 5) == 0) {
		struct lg_pool_cfg *p = pool_of(fc->cfg, section, &why);

		if (p == NULL) { /* the section's fault, not the key's: blame its header */
			if (fc->why[0] == '\0') {
				snprintf(fc->why, sizeof(fc->why), "section [%s]: %s", section, why);
				fc->why_line = fc->sect_line;
				fc->bad_line = 1;
			}
			return 0;
		}
		if (pool_key(fc->cfg, p, name, value, &why) == 0)
			return 1;
	} else if (*section != '\0' && strcmp(section, "lagless") != 0)
		why = UNKNOWN_SECTION;
	else if ((o = find_opt(name, '_')) != NULL && lg_optset_apply(o, value, fc->cfg, &why) == 0)
		return 1;
	if (fc->why[0] == '\0') {
		snprintf(fc->why, sizeof(fc->why), "key '%s' = '%s': %s", name, value, why);
		fc->why_line = fc->line;
	}
	return 0;
}

static int
load_file(const char *path, int required, struct lg_config *cfg, struct lg_site_src **site,
    char *err, size_t cap)
{
	struct file_ctx fc = { .cfg = cfg };
	int line;

	struct stat st;

	if (!required && access(path, F_OK) == -1)
		return 0;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, cap, "%s: the configuration file is not a regular file", path);
		return -1;
	}
	if ((fc.site = *site = lg_site_new(path)) == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if ((fc.fp = fopen(path, "r")) == NULL)
		line = -1;
	else
		line = ini_parse_stream(read_line, &fc, file_handler, &fc);
	if (fc.fp != NULL)
		fclose(fc.fp);
	free(fc.lbuf);
	if (fc.bad_line && (line == 0 || line > fc.why_line))
		line = fc.why_line;
	if (line == 0)
		return 0;
	if (line < 0)
		snprintf(err, cap, "%s: cannot read the configuration file: %s", path,
		    line == -1 ? strerror(errno) : "out of memory");
	else if (fc.why[0] != '\0' && fc.why_line == line)
		snprintf(err, cap, "%s:%d: %s", path, line, fc.why);
	else /* inih's own: the first error it returns is an earlier line than any key's */
		snprintf(err, cap, "%s:%d: syntax error: a section header without ']', or a line that "
		    "is not 'key = value'", path, line);
	return -1;
}

/* name = LAGLESS_ + the flag upper-cased, '-' as '_' (64 bytes). */
static void
env_name(const struct lg_opt *o, char name[64])
{
	size_t n = strlen(strcpy(name, "LAGLESS_"));

	for (const char *p = o->name; *p && n < 63; p++)
		name[n++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	name[n] = '\0';
}

void
lg_options_warn_env(char *const envp[])
{
	static const char *const other[] = { "LAGLESS_SYSROOT", "LAGLESS_RUN_QUERY" };

	for (; *envp != NULL; envp++) {
		char var[64], name[64], best[64] = "";
		size_t len = strcspn(*envp, "="), bestd = 4, known = 0;

		if (strncmp(*envp, "LAGLESS_", 8) != 0 || len >= sizeof(var))
			continue;
		memcpy(var, *envp, len);
		var[len] = '\0';
		for (size_t i = 0; i < NOPTS + 2 && !known; i++) {
			if (i < NOPTS)
				env_name(&opts[i], name);
			else
				strcpy(name, other[i - NOPTS]);
			size_t d = lg_str_distance(var, name);
			known = d == 0;
			if (d < bestd)
				bestd = d, strcpy(best, name);
		}
		if (!known)
			log_warn("unknown environment variable %s ignored%s%s%s", var,
			    best[0] ? " (did you mean " : "", best, best[0] ? "?)" : "");
	}
}

static int
load_env(struct lg_config *cfg, char *err, size_t cap)
{
	for (size_t i = 0; i < NOPTS; i++) {
		char name[64];
		const char *v, *why;

		env_name(&opts[i], name);
		if ((v = getenv(name)) != NULL && lg_optset_apply(&opts[i], v, cfg, &why) == -1) {
			snprintf(err, cap, "environment %s='%s': %s", name, v, why);
			return -1;
		}
	}
	return 0;
}

#define GIVEN(p, key) ((p)->given & (1u << pool_key_index(key)))

static size_t
pool_key_index(const char *key)
{
	for (size_t k = 0; k < NPOOLOPTS; k++)
		if (strcmp(pool_opts[k].o.name, key) == 0)
			return k;
	return 31;
}

/* Every pool setting a section left out takes the server-wide one, once the file, the
 * environment and the flags are all in; the default pool is the server-wide settings. A named
 * pool must say how many compute processes it has. */
static int
resolve_pools(struct lg_config *cfg, char *err, size_t cap)
{
	for (int i = 0; i < cfg->npools; i++) {
		struct lg_pool_cfg *p = &cfg->pools[i];

		if (i == 0) {
			p->compute = cfg->compute_workers;
			p->share = cfg->compute_share;
			p->queue = cfg->queue_capacity;
		} else if (!GIVEN(p, "compute")) {
			snprintf(err, cap, "[pool %s]: compute = N or P%% is required", p->name);
			return -1;
		} else if (!GIVEN(p, "queue")) {
			p->queue = -1;
		}
		if (i == 0 || !GIVEN(p, "deadline-ms"))
			p->deadline_ms = cfg->deadline_ms;
		if (i == 0 || !GIVEN(p, "on-client-gone"))
			p->on_client_gone = cfg->on_client_gone;
		if (i == 0 || !GIVEN(p, "queue-wait-target-ms"))
			p->queue_wait_target_ms = cfg->queue_wait_target_ms;
		if (i == 0 || !GIVEN(p, "queue-wait-interval-ms"))
			p->queue_wait_interval_ms = cfg->queue_wait_interval_ms;
		if (!GIVEN(p, "nice"))
			p->nice = cfg->compute_nice;
		if (i == 0 || !GIVEN(p, "policy"))
			p->policy = cfg->compute_policy;
		if (i == 0 || !GIVEN(p, "memory"))
			p->memory = cfg->compute_memory;
		if (i == 0 || !GIVEN(p, "max-jobs"))
			p->max_jobs = cfg->compute_max_jobs;
		if (i == 0 || !GIVEN(p, "max-rss"))
			p->max_rss = cfg->compute_max_rss;
	}
	return 0;
}

enum { OPT_RUN_KIND = 998, OPT_PRINT_EXAMPLE = 999, OPT_PRINT_SIZING = 1000, OPT_FIRST = 1001 };

static void
build_longopts(struct option *lo)
{
	size_t n = 0;

	for (size_t i = 0; i < NOPTS; i++)
		lo[n++] = (struct option){ opts[i].name, opts[i].kind == K_BOOL ? optional_argument :
		    required_argument, NULL, OPT_FIRST + (int)i };
	lo[n++] = (struct option){ "print-sizing", no_argument, NULL, OPT_PRINT_SIZING };
	lo[n++] = (struct option){ "print-example-config", no_argument, NULL, OPT_PRINT_EXAMPLE };
	lo[n++] = (struct option){ "run-kind", required_argument, NULL, OPT_RUN_KIND };
	lo[n++] = (struct option){ "config", required_argument, NULL, 'c' };
	lo[n++] = (struct option){ "test-config", no_argument, NULL, 't' };
	lo[n++] = (struct option){ "signal", required_argument, NULL, 's' };
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n++] = (struct option){ "version", no_argument, NULL, 'V' };
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
}

/* One getopt pass. pass 0 reads the commands (-c, -t, ...), pass 1 applies the settings. */
static int
load_flags(int argc, char *const argv[], int pass, struct lg_config *cfg,
    struct lg_command *cmd, char *err, size_t cap)
{
	struct option lo[NOPTS + 9];
	int c, nlisten = 0;

	build_longopts(lo);
	optind = 0; /* GNU: full re-initialisation, so a reload can parse again */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:c:s:thV", lo, NULL)) != -1) {
		const struct lg_opt *o = c == 'p' ? find_opt("port", '-') :
		    c >= OPT_FIRST ? &opts[c - OPT_FIRST] : NULL;
		const char *why;

		if (c == '?' || c == ':') {
			snprintf(err, cap, "%s: %s", argv[optind - 1],
			    c == '?' ? "unknown option" : "missing value");
			return -1;
		}
		if (pass == 0) {
			cmd->config_path = c == 'c' ? optarg : cmd->config_path;
			cmd->config_given |= c == 'c';
			cmd->test_config |= c == 't';
			cmd->print_sizing |= c == OPT_PRINT_SIZING;
			cmd->print_example |= c == OPT_PRINT_EXAMPLE;
			cmd->run_kind = c == OPT_RUN_KIND ? optarg : cmd->run_kind;
			cmd->signal = c == 's' ? optarg : cmd->signal;
			cmd->help |= c == 'h';
			cmd->version |= c == 'V';
		} else if (o != NULL && o->kind == K_LISTEN && nlisten++ > 0) {
			/* a repeated --listen adds listeners (it replaced the first in silence) */
			if (lg_listen_parse(optarg, cfg, 1) == -1) {
				lg_optset_apply(o, "", cfg, &why); /* only for the reason text */
				snprintf(err, cap, "--%s '%s': %s", o->name, optarg, why);
				return -1;
			}
		} else if (o != NULL && lg_optset_apply(o, optarg ? optarg : "yes", cfg, &why) == -1) {
			snprintf(err, cap, "--%s '%s': %s", o->name, optarg ? optarg : "", why);
			return -1;
		}
	}
	if (optind < argc) {
		snprintf(err, cap, "unexpected argument '%s'", argv[optind]);
		return -1;
	}
	return 0;
}

int
lg_options_load(int argc, char *const argv[], struct lg_config *cfg, struct lg_command *cmd,
    char *err, size_t cap)
{
	memset(cmd, 0, sizeof(*cmd));
	lg_options_defaults(cfg);
	err[0] = '\0';
	if (load_flags(argc, argv, 0, cfg, cmd, err, cap) == -1) {
		cmd->usage_error = 1;
		return -1;
	}
	if (cmd->help || cmd->version || cmd->print_example)
		return 0;
	if (cmd->signal != NULL && strcmp(cmd->signal, "reload") != 0) {
		snprintf(err, cap, "-s '%s': expected reload", cmd->signal);
		return -1;
	}
	struct lg_site_src *site = NULL;
	if (load_file(cmd->config_given ? cmd->config_path : LG_DEFAULT_CONFIG, cmd->config_given,
	    cfg, &site, err, cap) == -1) {
		lg_site_free(site);
		return -1;
	}
	if (!cmd->config_given && access(LG_DEFAULT_CONFIG, F_OK) == 0)
		cmd->config_path = LG_DEFAULT_CONFIG;
	if (load_env(cfg, err, cap) == -1) {
		lg_site_free(site);
		return -1;
	}
	if (load_flags(argc, argv, 1, cfg, cmd, err, cap) == -1) {
		cmd->usage_error = 1;
		lg_site_free(site);
		return -1;
	}
	if (resolve_pools(cfg, err, cap) == -1) {
		lg_site_free(site);
		return -1;
	}
	return lg_site_build(site, cfg, err, cap);
}

void
lg_options_usage(void *fp)
{
	FILE *f = fp;

	fprintf(f, "usage: lagless [-c FILE] [-t | -s reload] [--print-sizing] [options]\n\n"
	    "  -c, --config FILE          configuration file (default %s if present)\n"
	    "  -t, --test-config          check the configuration, print the sizing, exit 0 or 1\n"
	    "  -s, --signal reload        check the configuration, reload the server of --pid-file,\n"
	    "                             wait: exit 0 once the new one accepts, 1 with the reason\n"
	    "  --print-sizing             print the CPU sizing inputs and decision as JSON, exit\n"
	    "  --print-example-config     print a configuration file with every default, exit\n"
	    "  --run-kind KIND            run one job of KIND (heavy, module.kind) on standard input,\n"
	    "                             its answer on standard output, no server; exit 0 or 1\n"
	    "  -h, --help                 this text\n"
	    "  -V, --version              print the version and exit\n\n"
	    "settings (flag > environment LAGLESS_<NAME> > file key <name> > default):\n",
	    LG_DEFAULT_CONFIG);
	for (size_t i = 0; i < NOPTS; i++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "%s--%s%s%s", strcmp(opts[i].name, "port") ? "" : "-p, ",
		    opts[i].name, opts[i].kind == K_BOOL ? "" : " ", opts[i].arg);
		int has_def = opts[i].def != NULL && opts[i].def[0] != '\0';

		fprintf(f, "  %-26s %s%s%s%s\n", flag, opts[i].help, has_def ? " (default " : "",
		    has_def ? opts[i].def : "", has_def ? ")" : "");
	}
	fprintf(f, "\nenvironment: LAGLESS_SYSROOT prefixes every /proc and /sys path the sizing reads\n"
	    "signals: SIGTERM/SIGINT graceful drain (after --drain-delay-ms), SIGQUIT immediate\n"
	    "         stop, SIGHUP reload (lagless -s reload waits for its outcome),\n"
	    "         SIGUSR1 reopen the error log\n");
}

void
lg_options_example(void *fp)
{
	FILE *f = fp;

	fprintf(f, "; lagless configuration: every setting with its default.\n"
	    "; Keys may also be given as flags (--key-name) or environment variables\n"
	    "; (LAGLESS_KEY_NAME); precedence: flag > environment > this file > default.\n"
	    "[lagless]\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char key[64];
		size_t n = 0;

		for (const char *p = opts[i].name; *p && n < sizeof(key) - 1; p++)
			key[n++] = *p == '-' ? '_' : *p;
		key[n] = '\0';
		fprintf(f, "\n; %s\n%s%s = %s\n", opts[i].help, opts[i].def ? "" : ";", key,
		    opts[i].def ? opts[i].def : "");
	}
	fputs(lg_builtin_example, f);
}
