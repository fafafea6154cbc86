/* The connection's limits in time (docs/HTTP.md): which deadline applies in each state and the
 * one timer that enforces it. Private to the connection module (worker/conn.c). */
#ifndef LG_WORKER_CONN_TIMER_H
#define LG_WORKER_CONN_TIMER_H

#include <ev.h>
#include <stdint.h>

#include "worker/conn.h"

/* (Re)starts c's timer to fire in `seconds` s from now. */
void lg_conn_arm_timer(struct lg_conn *c, double seconds);

/* Whether a body is being received: into a slot (BODY), or through the parser (chunked, or
 * any body of an inline route). */
int lg_conn_in_body(const struct lg_conn *c);

/* Bytes of the current request body received so far. */
uint64_t lg_conn_body_bytes(const struct lg_conn *c);

/* When a body holding a transit buffer falls below --min-upload-rate (libev time, s); 0 off. */
ev_tstamp lg_conn_upload_due(const struct lg_conn *c);

/* When the response falls below --min-download-rate (libev time, s); 0 when off. */
ev_tstamp lg_conn_download_due(const struct lg_conn *c);

/* When the whole request must be in (--request-deadline-ms; libev time, s); 0 between
 * requests. */
ev_tstamp lg_conn_request_due(const struct lg_conn *c);

/* Arms c's timer for the limit of its state: write stall and download rate, body silence,
 * body deadline and upload rate, head deadline, linger, or keep-alive idle. A queued job's
 * deadline is armed by worker/offload.c (nothing is done in state LG_CONN_JOB). */
void lg_conn_rearm(struct lg_conn *c);

#endif
