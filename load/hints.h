/* Warnings that name the likely cause of what a run measured, beside the ones the report
 * gives already (a calibration answered from a cache, a calibration the machine's load moved,
 * a generator behind its schedule, servers that changed between scrapes):
 *
 *   shared_wait: a cheap route's latency rose above its idle limit at the same moments as a
 *     heavy route's (their per-second p99 correlate): the cheap route waits on something the
 *     heavy one fills, a shared pool or queue, or heavy work on the event loop;
 *   work_grows_with_key: a templated route's latency grows with the template's value (the
 *     first {seq}, {rand:N} or numeric {key}): the work grows with the key, so its percentiles
 *     mix small and large jobs.
 *
 * Both are computed from the run's samples (every step level's in step mode). */
#ifndef LL_LOAD_HINTS_H
#define LL_LOAD_HINTS_H

#include "load/report.h"

#define LL_HINTS_SHARED_CORR 0.7   /* per-second p99 correlation of a cheap and a heavy route */
#define LL_HINTS_KEY_CORR 0.5      /* correlation of latency and a template's value */
#define LL_HINTS_MIN_SECONDS 4     /* seconds in which both routes answered, at least */
#define LL_HINTS_MIN_SAMPLES 20    /* 2xx answers with a value, at least */

/* Fills r->hints and r->nhints (at most LL_REPORT_HINTS) from r's engine: r judged, its
 * thresholds set. Out of memory, it finds none. */
void ll_hints_find(struct ll_report *r);

#endif
