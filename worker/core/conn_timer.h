/* The connection's limits in time (docs/HTTP.md): which deadline applies in each state and the
 * one timer that enforces it. Private to the connection module (worker/core/conn.c). */
#ifndef LG_WORKER_CONN_TIMER_H
#define LG_WORKER_CONN_TIMER_H

#include <ev.h>
#include <stdint.h>

#include "worker/core/conn.h"

/* A limit due within this many seconds is reached: libev fires a timer by its monotonic clock
 * and the limits are in ev_now's (wall-clock) time, so a timer may fire a hair before the limit
 * it was armed for (a limit due within 1 ms taken as not yet due made a trickled upload cut at
 * --min-upload-rate count as a plain body timeout, commit 78d0634). */
#define LG_CONN_TIMER_SLACK 1e-3

/* Sets c's limit in time to `seconds` s from now (c->tmo.due). Lazily (libev(3), "Be smart
 * about timeouts"): a timer already due no later stays as it is, and when it fires early
 * lg_conn_timer_early() arms it for what is left; so a limit that only moves later (keep-alive
 * idle after each answer) costs no timer-heap delete and insert. */
void lg_conn_arm_timer(struct lg_conn *c, double seconds);

/* Seconds left until c's limit (ev_timer_remaining of the timer in state LG_CONN_JOB, whose
 * deadline lg_conn_wait_job arms, or when no timer runs). */
double lg_conn_timer_left(const struct lg_conn *c);

/* Called when c's timer fires: returns 1, and arms the timer for the rest, when the limit set
 * by lg_conn_arm_timer is more than LG_CONN_TIMER_SLACK away; 0 when the timer's owner must
 * act. A job's deadline (LG_CONN_JOB) is always due. */
int lg_conn_timer_early(struct lg_conn *c);

/* Whether the limit `at` (libev time, s; 0 = none) is reached, within LG_CONN_TIMER_SLACK. */
int lg_conn_past(const struct lg_conn *c, ev_tstamp at);

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
 * body deadline and upload rate, head deadline, linger, or keep-alive idle. A job's deadline
 * is armed by lg_conn_wait_job (nothing is done in state LG_CONN_JOB). */
void lg_conn_rearm(struct lg_conn *c);

#endif
