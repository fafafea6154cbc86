/* The offload path's files' shared internals (worker/job/offload.c, the claim, body, queue and
 * completion stages; worker/job/offload_answer.c, the answers from a slot and its release, a
 * leaf of offload.c; worker/job/args.c, the query's one parse). Nothing outside worker/job/
 * includes this. */
#ifndef LG_WORKER_OFFLOAD_INT_H
#define LG_WORKER_OFFLOAD_INT_H

#include <stddef.h>
#include <stdint.h>

#include "worker/job/offload.h"

#define SMALL_ANSWER 2048u /* bytes: what lg_conn_respond copies rather than references */

/* The registry name of job kind `kind` ("unknown" when out of range): static storage, for logs. */
const char *lg_offload_kind_name(const struct lg_worker *w, uint32_t kind);

/* The X-Queue-Ms / X-Run-Ms header lines of an answer to a job that reached the pool (from
 * c->obs), then "Retry-After: 1" when retry, then "X-Cache: bypass" when single-flight had c
 * run its own job: into buf (cap bytes, NUL-terminated, cut to fit). */
void lg_offload_timing_headers(const struct lg_conn *c, char *buf, size_t cap, int retry);

/* Answers c from its finished slot: st an enum lg_job_status (LG_JOB_OK for a DONE slot), out_len
 * the output bytes after the slot's metadata page. Gives the slot back once the answer no longer
 * needs it. Returns as lg_conn_respond (0, or -1 when c is closed or finished). */
int lg_offload_answer_result(struct lg_conn *c, uint32_t st, uint64_t out_len);

/* Writes the loop's parse of c's request's query (lg_job_parse_query) at dst (cap bytes of
 * c's slot's input region, backed) with its strings made movable (kinds/params.h
 * lg_params_query_pack), its length in *len. Returns 1, or 0 with *len 0 when none is kept for
 * this request (not parsed, another request's since, or over cap): the runner parses then. */
uint32_t lg_offload_args_write(struct lg_conn *c, unsigned char *dst, size_t cap, uint32_t *len);

#endif
