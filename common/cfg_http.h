/* The http room's settings (struct lg_config's http member): the HTTP limits and timeouts of a
 * request the loop workers read (docs/HTTP.md). Filled by the master (master/opttab.c); the
 * loop copies the limits into its struct lg_http_limits (http/frame.h). Types only. */
#ifndef LG_COMMON_CFG_HTTP_H
#define LG_COMMON_CFG_HTTP_H

#include <stdint.h>

struct lg_http_cfg {
	uint64_t max_body;         /* bytes; larger request bodies get 413 */
	uint64_t max_discard;      /* bytes of a body read and dropped to keep a connection after a
	                            * refusal (503, 404, 405) or by an inline route; more: close */
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
	uint64_t min_upload_rate;  /* bytes/s a body must average after body_timeout_ms; 0 = off */
};

#endif
