/* Job kinds: the heavy handlers that run in compute processes, never on a loop.
 * A job reads its input from the slot's input region and writes its output to the slot's output
 * region; it owns neither (the arena does) and must not keep pointers past its return. */
#ifndef LG_CPUPOOL_JOBS_H
#define LG_CPUPOOL_JOBS_H

#include <stdint.h>

#include "shm/layout.h"

enum lg_job_kind {
	LG_KIND_HEAVY = 1,     /* reference CPU loop; arg = iterations; output 8-byte result */
	LG_KIND_COMPRESS = 2,  /* zstd one-shot compression; arg = level; output a zstd frame */
	LG_KIND_MAX
};

#define LG_HEAVY_DEFAULT_ITERATIONS 60000000ull
#define LG_HEAVY_MAX_ITERATIONS     1000000000000ull /* 10^12: beyond any sane deadline */
#define LG_COMPRESS_DEFAULT_LEVEL   3
#define LG_COMPRESS_MIN_LEVEL       1
#define LG_COMPRESS_MAX_LEVEL       19 /* ultra levels (20-22) need far more memory per job */

struct lg_job {
	const unsigned char *in;  /* input bytes, in_len long (may be NULL when in_len is 0) */
	uint64_t in_len;
	unsigned char *out;       /* output region, out_cap bytes */
	uint64_t out_cap;
	uint64_t arg;             /* kind-specific argument */
	uint64_t out_len;         /* set by the job: bytes written to out */
};

/* Runs job kind `kind` on *j. Returns LG_JOB_OK, LG_JOB_BAD_INPUT (unknown kind, argument out of
 * range) or LG_JOB_ERROR (the kind failed, e.g. zstd reported an error). */
enum lg_job_status lg_jobs_run(uint32_t kind, struct lg_job *j);

/* The reference CPU job of the published Node.js and Python comparisons:
 * x = 0; for i in 0..n-1: x = (x + i*7) % 1000003. Pure function of n; about 1 ns per
 * iteration here. n <= LG_HEAVY_MAX_ITERATIONS keeps i*7 far from overflowing 64 bits. */
uint64_t lg_jobs_heavy(uint64_t n);

/* Worst-case output size in bytes of the compress kind for an input of len bytes
 * (ZSTD_compressBound); used to size the output regions. */
uint64_t lg_jobs_compress_bound(uint64_t len);

/* Output bytes job kind `kind` may write for in_len input bytes: what the compute process
 * reserves in the output region before running it (ZSTD_compressBound for compress, 8 for the
 * kinds that answer one 64-bit number). */
uint64_t lg_jobs_out_need(uint32_t kind, uint64_t in_len);

/* Name of a job kind for logs ("heavy", "compress", "test-crash", ...), "unknown" otherwise.
 * Static storage. */
const char *lg_jobs_name(uint32_t kind);

#endif
