#include "cpupool/testjobs.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ALLOC_MAX_CHUNKS 65536 /* 64 GiB of 1 MiB chunks: more than any test machine has */

int
lg_testjobs_is_test(uint32_t kind)
{
	return kind >= LG_KIND_TEST_CRASH && kind <= LG_KIND_TEST_ALLOC;
}

static void
spin(int ignore_term)
{
	volatile uint64_t x = 0;

	if (ignore_term)
		signal(SIGTERM, SIG_IGN); /* the process is killed anyway; nothing restores it */
	for (;;)
		x = x + lg_jobs_heavy(1000);
}

/* Chunks are mapped with mmap(2), not malloc, so the memory is really touched (and charged to
 * the memory cgroup) and no allocator caches it after the job. */
static enum lg_job_status
alloc(struct lg_job *j)
{
	static void *chunks[ALLOC_MAX_CHUNKS];
	uint64_t n = 0, limit = j->arg ? j->arg : ALLOC_MAX_CHUNKS;
	enum lg_job_status st = LG_JOB_OK;

	if (limit > ALLOC_MAX_CHUNKS || j->out_cap < sizeof(n))
		return LG_JOB_BAD_INPUT;
	while (n < limit) {
		void *p = mmap(NULL, LG_TEST_ALLOC_CHUNK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			st = LG_JOB_ERROR;
			break;
		}
		memset(p, 0x5a, LG_TEST_ALLOC_CHUNK);
		chunks[n++] = p;
	}
	for (uint64_t i = 0; i < n; i++)
		munmap(chunks[i], LG_TEST_ALLOC_CHUNK);
	if (st == LG_JOB_OK) {
		memcpy(j->out, &n, sizeof(n));
		j->out_len = sizeof(n);
	}
	return st;
}

enum lg_job_status
lg_testjobs_run(uint32_t kind, struct lg_job *j)
{
	j->out_len = 0;
	switch (kind) {
	case LG_KIND_TEST_CRASH:
		abort();
	case LG_KIND_TEST_SPIN:
		spin(j->arg != 0);
		return LG_JOB_ERROR; /* not reached */
	case LG_KIND_TEST_ALLOC:
		return alloc(j);
	default:
		return LG_JOB_BAD_INPUT;
	}
}

const char *
lg_testjobs_name(uint32_t kind)
{
	switch (kind) {
	case LG_KIND_TEST_CRASH:
		return "test-crash";
	case LG_KIND_TEST_SPIN:
		return "test-spin";
	case LG_KIND_TEST_ALLOC:
		return "test-alloc";
	default:
		return "unknown";
	}
}
