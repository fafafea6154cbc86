/* The messages that travel on the channels, encoded with msgpack (msgpack-c).
 *
 * A message is a doorbell: the slot record (shm/layout.h struct lg_slot) is the one record of
 * a job, written by the owner loop before QUEUED and by the compute side before DONE/FAILED,
 * and a message only names it. Each message is one SOCK_SEQPACKET datagram holding one msgpack
 * array whose first element is the wire version and second the message type; the rest is the
 * type's payload struct, field by field in declaration order (OpenBSD imsg's habit: one payload
 * per type, its size checked on receipt; see docs/ARCHITECTURE.md):
 *
 *   JOB   loop -> compute  [2, 1, slot, gen]       kind, arg, lengths, times: in the slot
 *   DONE  compute/master -> owner loop
 *                          [2, 2, slot, gen]       status, out_len, times: in the slot
 *   KILL  loop -> master   [2, 3, slot, gen]       (deadline passed while RUNNING, or the
 *                          client left under --on-client-gone kill)
 *   RETIRE master -> compute [2, 4, seq]           (live resize: the compute process that
 *                          takes it from the job channel exits; seq numbers the requests)
 *   WAKE  owner loop/master -> waiting loop (shm/flight.h: one per loop, not per connection)
 *                          [2, 5, flight, flight_gen, http_status, cache_idx, cache_word,
 *                           queue_ns, run_ns]
 *                          (http_status 2xx: read the answer from cache entry cache_idx whose
 *                          word is still cache_word; 0/1: run the request again / alone; else
 *                          answer http_status, from the cache entry when cache_word is not 0)
 *   UNWANTED waiting loop/master -> owner loop  [2, 6, flight, flight_gen]
 *                          (the last waiter left: cancel the job)
 *   UPWAKE loop -> loop with queued upstream requests  [2, 7, upstream]
 *                          (an in-flight place of that upstream was given back: shm/upstream.h)
 *
 * All integers are unsigned msgpack integers. Payload bytes never travel here: they stay in the
 * arena. A compute process trusts no header: lg_wire_check_job checks the slot index and
 * generation against the arena, and the slot record is read and bounded after the slot is
 * started (shm/slot.h lg_slot_job_read). */
#ifndef LG_SHM_WIRE_H
#define LG_SHM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "shm/arena.h"

#define LG_WIRE_VERSION 2u
#define LG_WIRE_MAX     128 /* bytes; every encoded header fits (max 9 x 9-byte uint + array) */

enum lg_msg_type { LG_MSG_JOB = 1, LG_MSG_DONE = 2, LG_MSG_KILL = 3, LG_MSG_RETIRE = 4,
	LG_MSG_WAKE = 5, LG_MSG_UNWANTED = 6, LG_MSG_UPWAKE = 7 };

struct lg_msg_job {            /* the slot (index, generation) now QUEUED */
	uint32_t slot, gen;
};

struct lg_msg_done {           /* the slot now DONE or FAILED */
	uint32_t slot, gen;
};

struct lg_msg_kill {           /* kill the compute process running the slot at gen */
	uint32_t slot, gen;
};

struct lg_msg_retire {
	uint32_t seq;          /* the master's request number, for the log */
};

struct lg_msg_wake {
	uint32_t flight, flight_gen;   /* the flight entry (struct lg_flight_ref idx, gen) */
	uint32_t http_status;  /* an HTTP status, or 0 (run again) / 1 (run alone) */
	uint32_t cache_idx;    /* the cache entry holding the answer (shm/cache.h) */
	uint64_t cache_word;   /* that entry's word when stored; 0 = no entry */
	uint64_t queue_ns;     /* the job's time between QUEUED and RUNNING */
	uint64_t run_ns;       /* the job's time between RUNNING and DONE/FAILED */
};

struct lg_msg_unwanted {
	uint32_t flight, flight_gen;
};

struct lg_msg_upwake {
	uint32_t upstream;     /* the admission record whose place came free (shm/upstream.h: an
	                        * upstream's index in the registry, or a route bulkhead's after them) */
};

/* One message: its type and the payload of that type (only that member is meaningful). */
struct lg_msg {
	uint32_t type;         /* enum lg_msg_type */
	union {
		struct lg_msg_job job;
		struct lg_msg_done done;
		struct lg_msg_kill kill;
		struct lg_msg_retire retire;
		struct lg_msg_wake wake;
		struct lg_msg_unwanted unwanted;
		struct lg_msg_upwake upwake;
	};
};

/* Encodes m (the payload of m->type only) into buf of cap bytes (LG_WIRE_MAX is always
 * enough). Allocates nothing. Returns the encoded length, or -1 with errno EINVAL for an
 * unknown type or ENOSPC when cap is too small. */
int lg_wire_encode(const struct lg_msg *m, char *buf, size_t cap);

/* Decodes one header from buf (len bytes, the whole datagram) into *m, every byte of *m
 * outside the type's payload zeroed. Rejects, with -1 and errno EBADMSG: truncated or trailing
 * bytes, a non-array, a wrong element count for the type, any element that is not an unsigned
 * integer, values that overflow their field. Rejects a version other than LG_WIRE_VERSION with
 * EPROTO and an unknown type with EINVAL. Returns 0 on success. Never trusts the input: the
 * caller counts and drops failures. */
int lg_wire_decode(const char *buf, size_t len, struct lg_msg *m);

/* Checks a decoded JOB header against the arena: type JOB and slot < nslots, else -1 with
 * errno ERANGE (a header no loop of ours wrote: the caller counts it); the slot's generation
 * now equal to gen, else -1 with errno ESTALE (a job cancelled and its slot reused since: the
 * caller skips it). Racy by nature: lg_slot_start's compare-and-swap is the real test.
 * Returns 0. */
int lg_wire_check_job(const struct lg_msg *m, const struct lg_arena *a);

#endif
