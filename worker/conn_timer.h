/* The connection's limits in time (docs/HTTP.md): which deadline applies in each state and the
 * one timer that enforces it. Private to the connection module (worker/conn.c). */
#ifndef LG_WORKER_CONN_TIMER_H
#define LG_WORKER_CONN_TIMER_H

#include <ev.h>
#include <stdint.h>

#include "worker/conn.h"

/* Sets c's limit in time to `seconds` s from now. Lazily (libev(3), "Be smart about
 * timeouts"): a timer already due no later than that stays as it is, and when it fires early
 * lg_conn_timer_early() arms it again for what is left; so a limit that only moves later (the
 * keep-alive idle limit after each answer) costs no timer heap delete and insert. */
void lg_conn_arm_timer(struct lg_conn *c, double seconds);

/* Seconds left until c's limit (what ev_timer_remaining gave before timers were lazy). */
double lg_conn_timer_left(const struct lg_conn *c);

/* Called when c's timer fires: returns 1 (and arms the timer for the rest) when the limit set
 * by lg_conn_arm_timer is not due yet, 0 when the timer's owner must act. A job's deadline
 * (LG_CONN_JOB, armed by offload.c or coalesce.c directly) is always due. */
int lg_conn_timer_early(struct lg_conn *c);

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
