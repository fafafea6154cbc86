/* Shared-memory layout: types only (haproxy's *-t.h habit). Every field has a fixed width and
 * the sizes are pinned with _Static_assert, because processes of one server read these bytes
 * with the same binary but the layout is also documented in docs/ARCHITECTURE.md.
 *
 * Arena (one memfd_create(2) file, mapped MAP_SHARED by the master before any fork):
 *
 *   [ struct lg_arena_hdr | pad to 4 KiB ]
 *   [ struct lg_proc_page x nprocs        ]   one 4 KiB page per child-table entry, one writer each
 *   [ struct lg_slot x nslots | pad to 4 KiB ]
 *   [ slot 0 input region | slot 0 output region | slot 1 input ... ]   page-aligned, lazily backed
 */
#ifndef LG_SHM_LAYOUT_H
#define LG_SHM_LAYOUT_H

#include <stdatomic.h>
#include <stdint.h>

#define LG_ARENA_MAGIC   0x4c41474cu /* "LGAL" */
#define LG_ARENA_VERSION 1u
#define LG_PAGE          4096u

/* Slot states. The 64-bit slot word is (generation << 32) | (owner << 8) | state, owner being
 * the index of the loop worker that claimed it; every change is one
 * compare-and-swap on the whole word, so a process killed at any instruction leaves the slot in
 * a state another process can read and recover, and a stale actor (older generation) cannot
 * move it. The generation is bumped on every claim. See docs/ARCHITECTURE.md for the diagram. */
enum lg_slot_state {
	LG_SLOT_FREE = 0,       /* nobody owns it */
	LG_SLOT_CLAIMED = 1,    /* a loop worker owns it and reads the request body into it */
	LG_SLOT_QUEUED = 2,     /* its job header is on the job channel */
	LG_SLOT_RUNNING = 3,    /* a compute process runs the job */
	LG_SLOT_DONE = 4,       /* output written; the owner loop sends it, then frees */
	LG_SLOT_FAILED = 5,     /* the job failed or its process died; the owner answers 5xx */
	LG_SLOT_ABANDONED = 6,  /* the owner stopped waiting while it ran; the finisher frees */
	LG_SLOT_RECLAIMING = 7, /* the master is releasing the slot's pages (hole punch) */
};

/* Job outcome, set with the DONE/FAILED transition and carried in the completion header. */
enum lg_job_status {
	LG_JOB_OK = 0,
	LG_JOB_BAD_INPUT = 1,   /* the job kind rejected its input: 400 */
	LG_JOB_ERROR = 2,       /* the job kind failed (e.g. output too large): 500 */
	LG_JOB_CRASHED = 3,     /* the compute process died while running it: 502 */
	LG_JOB_NO_SPACE = 4,    /* shared memory for its output could not be backed: 503 */
};

struct lg_arena_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t nslots;
	uint32_t nprocs;
	uint64_t in_cap;        /* bytes per input region (page multiple) */
	uint64_t out_cap;       /* bytes per output region (page multiple) */
	uint64_t procs_off;     /* byte offsets from the arena base */
	uint64_t slots_off;
	uint64_t regions_off;
	uint64_t total_size;
};
_Static_assert(sizeof(struct lg_arena_hdr) == 64, "arena header layout");

#define LG_NO_JOB UINT64_MAX

/* One per child-table entry (loop workers first, then compute processes); written only by the
 * process that currently holds the entry, read by everyone. */
struct lg_proc_page {
	_Atomic int32_t pid;            /* 0 while the entry has no process */
	uint32_t role;                  /* 1 loop, 2 compute */
	_Atomic uint64_t heartbeat_ns;  /* CLOCK_MONOTONIC of the last loop iteration / job pick-up */
	_Atomic uint64_t job;           /* compute: (slot << 32 | generation) it runs, LG_NO_JOB if idle */
	_Atomic uint64_t requests;      /* requests answered (loop) or jobs run (compute) */
	_Atomic uint64_t bad_headers;   /* channel messages dropped because they failed to decode */
	_Atomic uint64_t rejected_full; /* 503 answers because no slot was free (loop) */
	_Atomic uint64_t timed_out;     /* 504 answers (loop) */
	uint8_t reserved[LG_PAGE - 56]; /* room for histograms (metrics) */
};
_Static_assert(sizeof(struct lg_proc_page) == LG_PAGE, "proc page is one page");

struct lg_slot {
	_Atomic uint64_t word;          /* (generation << 32) | (owner loop << 8) | state */
	uint32_t reserved0;
	_Atomic int32_t runner_pid;     /* compute pid that moved it to RUNNING (informational) */
	uint32_t kind;                  /* enum lg_job_kind (cpupool/jobs.h) */
	uint32_t status;                /* enum lg_job_status, valid in DONE/FAILED */
	uint64_t arg;                   /* kind-specific argument (iterations, level) */
	uint64_t in_len;                /* bytes of input in the input region */
	uint64_t out_len;               /* bytes of output in the output region */
	uint64_t enqueue_ns;            /* CLOCK_MONOTONIC when QUEUED */
	uint64_t start_ns;              /* ... when RUNNING */
	uint64_t end_ns;                /* ... when DONE/FAILED */
	uint64_t deadline_ns;           /* ... past which the owner answers 504 */
	uint64_t touched;               /* bytes dirtied in the regions since the last hole punch */
	uint8_t pad[40];
};
_Static_assert(sizeof(struct lg_slot) == 128, "slot is two cache lines");

#define LG_MAX_LOOPS 65535 /* the owner field of the slot word is 24 bits; keep it sane */

static inline uint64_t
lg_slot_word(uint32_t gen, uint32_t owner, enum lg_slot_state st)
{
	return ((uint64_t)gen << 32) | ((uint64_t)(owner & 0xffffffu) << 8) | (uint32_t)st;
}

#endif
