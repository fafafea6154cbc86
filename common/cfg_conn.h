/* The loop worker's own settings: its connections (struct lg_config's conn member, read by
 * worker/core) and the loop's watch (the loop member, read by worker/ and the master). Filled
 * by the master (master/opttab.c). Types only. */
#ifndef LG_COMMON_CFG_CONN_H
#define LG_COMMON_CFG_CONN_H

#include <stdint.h>

struct lg_conn_cfg {
	int max_conns;             /* open connections per loop worker */
	uint64_t keepalive_timeout_ms; /* idle time between requests before the close */
	uint64_t lingering_time_ms;    /* closing with input unread: drain it this long at most */
	uint64_t lingering_timeout_ms; /* ... with at most this silence between reads */
	uint64_t lingering_bytes;      /* ... and at most this many bytes (worker/core/conn.c linger) */
	uint64_t write_timeout_ms; /* longest time a response write makes no progress */
	uint64_t min_download_rate; /* bytes/s a response must average after write_timeout_ms */
	int access_log;            /* one log line per request; off by default */
	int access_log_json;       /* ... as JSON lines (worker/core/access.c) */
	int request_id;            /* echo X-Request-Id (the client's or a generated one) */
	char trusted_proxies[256]; /* CIDRs whose X-Forwarded-For names the client (common/cidr.h) */
};

struct lg_loop_cfg {
	uint64_t lag_interval_ms;  /* loop-lag probe period; default 10 */
	uint64_t slow_callback_ms; /* a loop callback longer than this is logged; default 50 */
	uint64_t stuck_loop_ms;    /* a loop worker whose heartbeat is older than this is replaced
	                            * (the master's watch) */
};

#endif
