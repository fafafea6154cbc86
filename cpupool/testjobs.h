/* Fault-injection job kinds, served only with --enable-test-jobs: they make a compute process
 * die, hang or exhaust memory for real, so the supervision paths (502 on a crash, 504 and the
 * SIGTERM -> SIGKILL escalation on a hang, the OOM killer on a memory hog) are tested against
 * the real binary instead of simulated. Never enable them in production. */
#ifndef LG_CPUPOOL_TESTJOBS_H
#define LG_CPUPOOL_TESTJOBS_H

#include <stdint.h>

#include "cpupool/jobs.h"

enum lg_test_kind {
	LG_KIND_TEST_CRASH = 64, /* abort(3): the process dies of SIGABRT mid-job */
	LG_KIND_TEST_SPIN = 65,  /* loops forever; arg 1 also ignores SIGTERM (forces SIGKILL) */
	LG_KIND_TEST_ALLOC = 66, /* touches anonymous memory 1 MiB at a time; arg = MiB to stop at,
	                          * 0 = without bound (until mmap fails or the OOM killer acts) */
};

#define LG_TEST_ALLOC_CHUNK (1u << 20)

/* 1 if kind is one of the test kinds above. */
int lg_testjobs_is_test(uint32_t kind);

/* Runs a test kind. CRASH and SPIN never return. ALLOC returns LG_JOB_OK with the MiB touched
 * as an 8-byte output once it reached arg MiB (the memory is unmapped again), or LG_JOB_ERROR
 * when mmap(2) failed first (ENOMEM: address space or overcommit limit). Returns
 * LG_JOB_BAD_INPUT for any other kind. */
enum lg_job_status lg_testjobs_run(uint32_t kind, struct lg_job *j);

/* Name for logs ("test-crash", ...), "unknown" otherwise. Static storage. */
const char *lg_testjobs_name(uint32_t kind);

#endif
