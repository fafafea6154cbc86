/* The settings every process role reads. Filled by the master from flags before forking;
 * children get a copy through fork and never change it. Types only. */
#ifndef LG_COMMON_CONFIG_H
#define LG_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

enum lg_cpu_rounding { LG_ROUND_FLOOR = 0, LG_ROUND_CEIL = 1 };

/* What happens to a RUNNING job whose client disconnected (a queued one is always cancelled). */
enum lg_client_gone { LG_GONE_FINISH = 0, LG_GONE_KILL = 1 };

struct lg_registry; /* kinds/registry.h: kinds, modules and routes, built from the file */
struct lg_apps;     /* master/appconf.h: the [app NAME] sections */

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
	uint64_t memory;           /* RLIMIT_DATA of each of its compute processes; 0 = none */
	uint64_t max_jobs;         /* a compute process that ran this many jobs is replaced; 0 off */
	uint64_t max_rss;          /* ... or whose private memory (RssAnon) passed this; 0 off */
	uint64_t queue_wait_target_ms;   /* CoDel target (shm/codel.h); 0 = off */
	uint64_t queue_wait_interval_ms;
	int oversubscribe;         /* 1: not counted against the CPU budget */
	char routes[256];          /* paths of the offloaded routes it serves, space-separated */
	uint32_t given;            /* loading only: bit k set when the section gave key k */
};

struct lg_config {
	char listen_addr[64];      /* numeric IPv4 or IPv6 address, "0.0.0.0" by default (a host
	                            * name is resolved when the configuration is read) */
	int port;                  /* 0 picks a free port; default 8080 */
	/* The listeners after the first: "ADDR:PORT" (numeric, brackets for IPv6) or
	 * "unix:/path[,mode=0660][,owner=USER[:GROUP]]" (master/listen.c); "" ends the list. A
	 * unix:/path first listener is listen_more[0] with listen_addr "" (no TCP listener). */
#define LG_LISTEN_MAX 8
	char listen_more[LG_LISTEN_MAX][160];
	/* bit k: the k-th listener of --listen (0 the first, whatever its kind; a socket systemd
	 * passed is the first) takes a PROXY protocol header first (",proxy": worker/core/client.h) */
	uint32_t listen_proxy;
	char admin_listen[80];     /* "ADDR:PORT" of the admin listener (probes, scrapes); "" none */
	char agent_listen[80];     /* "ADDR:PORT" of the HAProxy agent (master/agent.h); "" none */
	int agent_maxconn;         /* > 0: the agent says maxconn:(job slots + this); 0 not sent */
	int loop_workers;          /* L; 0 = from the sizing decision */
	int compute_workers;       /* C; 0 = from the sizing decision (or compute_share) */
	double compute_share;      /* > 0: C = max(1, floor(share x budget)); 0 = not set */
	int live_resize;           /* 1: follow a CPU budget that changes at run time */
	uint64_t queue_wait_target_ms;   /* CoDel target (shm/codel.h); 0 = admission by count only */
	uint64_t queue_wait_interval_ms; /* CoDel interval; at least the target */
	int queue_capacity;        /* waiting jobs beyond the C running; -1 = 2 x C */
	double cpus;               /* > 0 replaces the measured CPU budget */
	enum lg_cpu_rounding rounding;
	uint64_t max_body;         /* bytes; larger request bodies get 413 */
	uint64_t max_discard;      /* bytes of a body read and dropped to keep a connection after a
	                            * refusal (503, 404, 405) or by an inline route; more: close */
	uint64_t deadline_ms;      /* per offloaded job, queue wait included; past it 504 */
	uint64_t drain_timeout_ms; /* SIGTERM: time allowed for in-flight requests */
	uint64_t drain_delay_ms;   /* SIGTERM: /ready 503 but still accepting this long first;
	                            * LG_DRAIN_DELAY_AUTO: unset (master/agent.h decides) */
#define LG_DRAIN_DELAY_AUTO UINT64_MAX
	char pid_file[256];        /* the master's pid, and PATH.reload the last reload's outcome */
	uint64_t kill_grace_ms;    /* SIGTERM -> SIGKILL grace for a compute process past deadline */
	int max_conns;             /* open connections per loop worker */
	int backlog;               /* listen(2) backlog */
	int compute_nice;          /* nice(2) increment for compute processes */
	int compute_policy;        /* their scheduling policy (sched(7)); default SCHED_OTHER */
	int log_level;             /* enum lg_log_level */
	char error_log[256];       /* file for the log lines; "" = stderr (reopened on SIGUSR1) */
	uint64_t lag_interval_ms;  /* loop-lag probe period; default 10 */
	uint64_t slow_callback_ms; /* a loop callback longer than this is logged; default 50 */
	int access_log;            /* one log line per request; off by default */
	int access_log_json;       /* ... as JSON lines (worker/core/access.c) */
	int request_id;            /* echo X-Request-Id (the client's or a generated one) */
	char trusted_proxies[256]; /* CIDRs whose X-Forwarded-For names the client (common/cidr.h) */
	int inline_heavy;          /* run /heavy on the loop (demonstrates what lag looks like) */
	int demo_routes;           /* serve the built-in kinds' default routes (/heavy, /hash, ...) */
	uint64_t compute_max_jobs; /* the pools' max_jobs unless their section says (0 = off) */
	uint64_t compute_max_rss;  /* the pools' max_rss, bytes (0 = off) */
	uint64_t stuck_loop_ms;    /* a loop worker whose heartbeat is older than this is replaced */
	enum lg_client_gone on_client_gone; /* running job of a departed client: finish or kill */
	/* single-flight and result cache (common/policy.h, shm/flight.h, shm/cache.h) */
	char coalesce[2048];       /* per-route rules; "" = no route coalesces */
	uint64_t cache_bytes;      /* shared-memory cache budget */
	uint64_t cache_max_entry;  /* largest answer stored */
	int cache_jitter_pct;      /* TTL jitter, percent */
	/* the cluster scope's shared store (redis/redis.c, worker/flight/cluster.c) */
	char redis[256];           /* "unix:/path" or "IP:PORT" of Redis; "" = none (all local) */
	uint64_t redis_budget_ms;  /* connect, and each command: past it the breaker opens */
	uint64_t redis_breaker_ms; /* how long an open breaker keeps every key local */
	uint64_t redis_lease_ms;   /* a leader's lease, at most the route's deadline */
	char redis_prefix[64];     /* of every Redis key and channel */
	uint64_t cluster_max_value; /* largest answer stored in Redis, bytes */
	int enable_test_jobs;      /* 1: serve the /test/ fault-injection routes (never in production) */
	int quarantine_deaths;     /* compute deaths by one job kind within quarantine_ms that
	                            * quarantine it; 0 = never */
	uint64_t quarantine_ms;    /* how long a quarantined kind is refused (503), and the window */
	/* HTTP limits and timeouts of the loop workers (docs/HTTP.md) */
	uint64_t max_head;         /* request line + header section bytes; over -> 431 */
	uint64_t max_uri;          /* request-target bytes (at most 8192); over -> 414 */
	int max_fields;            /* header field lines; over -> 431 */
	int merge_slashes;         /* a run of '/' in a path is one '/' (http/path.h) */
	uint64_t head_timeout_ms;  /* from a request's first byte (or accept) to its whole head; 408 */
	uint64_t body_timeout_ms;  /* longest silence while a body is read; 408 */
	uint64_t body_deadline_ms; /* whole body of an offloaded request (it holds a slot); 408 */
	uint64_t request_deadline_ms; /* whole request (head, body, trailers) from its first byte,
	                               * on every path; 408; 0 = head_timeout_ms +
	                               * body_deadline_ms */
	uint64_t keepalive_timeout_ms; /* idle time between requests before the close */
	uint64_t lingering_time_ms;    /* closing with input unread: drain it this long at most */
	uint64_t lingering_timeout_ms; /* ... with at most this silence between reads */
	uint64_t lingering_bytes;      /* ... and at most this many bytes (worker/core/conn.c linger) */
	uint64_t write_timeout_ms; /* longest time a response write makes no progress */
	/* job modules and routes (docs/MODULES.md) */
	uint64_t max_output;       /* bytes of a job's output region (its answer); 0 = from max_body */
	uint64_t compute_memory;   /* RLIMIT_AS of a compute process, bytes; 0 = none */
	uint64_t memory_limit;     /* bytes; > 0 replaces the measured memory limit (sizing/memsize.h) */
	uint64_t memory_reserve;   /* bytes left to the processes' own memory; 0 = derived */
	uint64_t shm_budget;       /* transit bytes backed at once; 0 = derived from the limit */
	struct lg_registry *reg;   /* built by the master before fork; never freed while used */
	int app_fixed;             /* processes of the [app]s with a count, summed */
	int app_auto;              /* [app]s with processes = auto (sizing/sizing.h) */
	struct lg_apps *apps;      /* [app] sections (heap, NULL none): the master's app
	                            * supervisor takes it over (master/app.h); -t frees it */
	struct lg_pool_cfg pools[LG_MAX_POOLS]; /* [0] is "default" */
	int npools;                /* >= 1 after lg_options_load */
	int transit_buffers;       /* bodies and results in transit; 0 = 4 x (C + Q) */
	uint64_t min_upload_rate;  /* bytes/s a body must average after body_timeout_ms; 0 = off */
	uint64_t min_download_rate; /* bytes/s a response must average after write_timeout_ms */
	int transit_share_pct;     /* most of a pool's transit buffers one client address holds,
	                            * percent (never below the pool's job slots); 100 = no limit */
	uint64_t evict_upload_rate; /* bytes/s: with every transit buffer held, the slowest upload
	                             * below it is cut (408); 0 = never */
};

#endif
