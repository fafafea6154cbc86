/* The master's settings (struct lg_config's master member: listeners, admin and agent, pid
 * file, drain, log, apps) and the sizing inputs (its sizing member: sizing/). Filled by the
 * master (master/opttab.c). Types only. */
#ifndef LG_COMMON_CFG_MASTER_H
#define LG_COMMON_CFG_MASTER_H

#include <stdint.h>

enum lg_cpu_rounding { LG_ROUND_FLOOR = 0, LG_ROUND_CEIL = 1 };

struct lg_apps;     /* master/appconf.h: the [app NAME] sections */

struct lg_master_cfg {
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
	int backlog;               /* listen(2) backlog */
	char admin_listen[80];     /* "ADDR:PORT" of the admin listener (probes, scrapes); "" none */
	char agent_listen[80];     /* "ADDR:PORT" of the HAProxy agent (master/agent.h); "" none */
	int agent_maxconn;         /* > 0: the agent says maxconn:(job slots + this); 0 not sent */
	char pid_file[256];        /* the master's pid, and PATH.reload the last reload's outcome */
	uint64_t drain_timeout_ms; /* SIGTERM: time allowed for in-flight requests */
	uint64_t drain_delay_ms;   /* SIGTERM: /ready 503 but still accepting this long first;
	                            * LG_DRAIN_DELAY_AUTO: unset (master/agent.h decides) */
#define LG_DRAIN_DELAY_AUTO UINT64_MAX
	int log_level;             /* enum lg_log_level */
	char error_log[256];       /* file for the log lines; "" = stderr (reopened on SIGUSR1) */
	int app_fixed;             /* processes of the [app]s with a count, summed */
	int app_auto;              /* [app]s with processes = auto (sizing/sizing.h) */
	struct lg_apps *apps;      /* [app] sections (heap, NULL none): the master's app
	                            * supervisor takes it over (master/app.h); -t frees it */
};

struct lg_sizing_cfg {
	int loop_workers;          /* L; 0 = from the sizing decision */
	double cpus;               /* > 0 replaces the measured CPU budget */
	enum lg_cpu_rounding rounding;
	int live_resize;           /* 1: follow a CPU budget that changes at run time */
	uint64_t memory_limit;     /* bytes; > 0 replaces the measured memory limit (sizing/memsize.h) */
	uint64_t memory_reserve;   /* bytes left to the processes' own memory; 0 = derived */
	uint64_t shm_budget;       /* transit bytes backed at once; 0 = derived from the limit */
};

#endif
