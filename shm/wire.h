/* The headers that travel on the channels, encoded with msgpack (msgpack-c).
 *
 * Each header is one SOCK_SEQPACKET message holding one msgpack array whose first element is the
 * wire version and second the message type; the rest is positional (see docs/ARCHITECTURE.md):
 *
 *   JOB   loop -> compute  [1, 1, slot, gen, kind, owner, in_off, in_len, out_off, out_cap,
 *                           arg, deadline_ns, enqueue_ns]
 *   DONE  compute/master -> owner loop
 *                          [1, 2, slot, gen, status, out_len, queue_ns, run_ns]
 *   KILL  loop -> master   [1, 3, slot, gen]           (deadline passed while RUNNING)
 *   RETIRE master -> compute [1, 4, seq]             (live resize: the compute process that
 *                          takes it from the job channel exits; seq numbers the requests)
 *   WAKE  owner loop/master -> waiting loop (shm/flight.h: one per loop, not per connection)
 *                          [1, 5, flight, flight gen, http status, cache idx, cache word,
 *                           queue_ns, run_ns]   carried in slot, gen, status, out_len, arg
 *                          (status 200: read the answer from the cache entry idx whose word is
 *                          still `cache word`; 0: run the request again; else answer status)
 *   UNWANTED waiting loop/master -> owner loop  [1, 6, flight, flight gen]
 *                          (the last waiter left: cancel the job)
 *
 * All integers are unsigned msgpack integers. Payload bytes never travel here: they stay in the
 * arena, and offsets/lengths are checked against the arena layout by lg_wire_check_job. */
#ifndef LG_SHM_WIRE_H
#define LG_SHM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "shm/arena.h"

#define LG_WIRE_VERSION 1u
#define LG_WIRE_MAX     128 /* bytes; every encoded header fits (max 13 x 9-byte uint + array) */

enum lg_msg_type { LG_MSG_JOB = 1, LG_MSG_DONE = 2, LG_MSG_KILL = 3, LG_MSG_RETIRE = 4,
	LG_MSG_WAKE = 5, LG_MSG_UNWANTED = 6 };

struct lg_msg {
	uint32_t type;         /* enum lg_msg_type */
	uint32_t slot;
	uint32_t gen;          /* RETIRE: the request's sequence number */
	/* JOB */
	uint32_t kind;         /* kind id in the registry (kinds/registry.h) */
	uint32_t owner;        /* loop worker index */
	uint64_t in_off, in_len;   /* bytes, offsets from the arena base */
	uint64_t out_off, out_cap; /* bytes */
	uint64_t arg;          /* the route's index in the registry (its config, its fields) */
	uint64_t deadline_ns;  /* CLOCK_MONOTONIC */
	uint64_t enqueue_ns;   /* CLOCK_MONOTONIC */
	/* DONE */
	uint32_t status;       /* enum lg_job_status */
	uint64_t out_len;      /* bytes */
	uint64_t queue_ns;     /* time between QUEUED and RUNNING */
	uint64_t run_ns;       /* time between RUNNING and DONE/FAILED */
};

/* Encodes m (fields for m->type only) into buf of cap bytes (LG_WIRE_MAX is always enough).
 * Allocates nothing. Returns the encoded length, or -1 with errno EINVAL for an unknown type
 * or ENOSPC when cap is too small. */
int lg_wire_encode(const struct lg_msg *m, char *buf, size_t cap);

/* Decodes one header from buf (len bytes, the whole datagram) into *m. Rejects, with -1 and
 * errno EBADMSG: truncated or trailing bytes, a non-array, a wrong element count for the type,
 * any element that is not an unsigned integer, values that overflow their field. Rejects a
 * version other than LG_WIRE_VERSION with EPROTO and an unknown type with EINVAL.
 * Returns 0 on success. Never trusts the input: the caller counts and drops failures. */
int lg_wire_decode(const char *buf, size_t len, struct lg_msg *m);

/* Checks a decoded JOB header against the arena: slot < nslots, in_off/out_off equal to that
 * slot's region offsets, in_len <= in_cap, out_cap == arena out_cap, owner < nloops.
 * Returns 0, or -1 with errno ERANGE. */
int lg_wire_check_job(const struct lg_msg *m, const struct lg_arena *a, uint32_t nloops);

#endif
