#include "kinds/testjobs.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kinds/heavy.h"

#define ALLOC_MAX_CHUNKS 65536 /* 64 GiB of 1 MiB chunks: more than any test machine has */

static int
crash(const struct lagless_request *rq, struct lagless_output *out)
{
	abort();
}

static int
spin(const struct lagless_request *rq, struct lagless_output *out)
{
	volatile uint64_t x = 0;
	uint64_t ignore;

	if (rq->host->query_uint(rq, "ignore_term", 0, 0, 1, &ignore) == -1)
		return LAGLESS_BAD_INPUT;
	if (ignore)
		signal(SIGTERM, SIG_IGN); /* the process is killed anyway; nothing restores it */
	for (;;)
		x = x + lg_heavy_loop(1000);
	return LAGLESS_ERROR; /* not reached */
}

/* Chunks are mapped with mmap(2), not malloc, so the memory is really touched (and charged to
 * the memory cgroup) and no allocator caches it after the job. */
static int
alloc(const struct lagless_request *rq, struct lagless_output *out)
{
	static void *chunks[ALLOC_MAX_CHUNKS];
	uint64_t n = 0, limit;
	int st = LAGLESS_OK;

	if (rq->host->query_uint(rq, "mib", 0, 0, ALLOC_MAX_CHUNKS, &limit) == -1)
		return LAGLESS_BAD_INPUT;
	if (limit == 0)
		limit = ALLOC_MAX_CHUNKS;
	while (n < limit) {
		void *p = mmap(NULL, LG_TEST_ALLOC_CHUNK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			st = LAGLESS_ERROR;
			rq->host->set_message(out, "out of memory after %llu MiB",
			    (unsigned long long)n);
			break;
		}
		memset(p, 0x5a, LG_TEST_ALLOC_CHUNK);
		chunks[n++] = p;
	}
	for (uint64_t i = 0; i < n; i++)
		munmap(chunks[i], LG_TEST_ALLOC_CHUNK);
	if (st == LAGLESS_OK && rq->host->write(out, &n, sizeof(n)) == -1)
		return LAGLESS_TOO_LARGE;
	return st;
}

/* Waits ?ms=N (default 200, at most 60000) without using CPU, then answers, or with ?fail=1
 * fails as the kind (500): a slow origin for the single-flight tests and benchmark. With
 * ?echo=1 the answer is followed by the request body and the listed fields, as name=value
 * lines, so a test can see which request a shared answer came from. */
static int
sleep_job(const struct lagless_request *rq, struct lagless_output *out)
{
	uint64_t ms, fail, echo;
	char buf[48];
	int n;

	if (rq->host->query_uint(rq, "ms", 200, 0, 60000, &ms) == -1 ||
	    rq->host->query_uint(rq, "fail", 0, 0, 1, &fail) == -1 ||
	    rq->host->query_uint(rq, "echo", 0, 0, 1, &echo) == -1)
		return LAGLESS_BAD_INPUT;
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
	if (fail) {
		rq->host->set_message(out, "failed as asked");
		return LAGLESS_ERROR;
	}
	n = snprintf(buf, sizeof(buf), "slept %llu ms\n", (unsigned long long)ms);
	if (rq->host->write(out, buf, (size_t)n) == -1)
		return LAGLESS_TOO_LARGE;
	for (size_t i = 0; echo && i < rq->nfields; i++)
		if (rq->host->write(out, rq->fields[i].name, rq->fields[i].name_len) == -1 ||
		    rq->host->write(out, "=", 1) == -1 ||
		    rq->host->write(out, rq->fields[i].value, rq->fields[i].value_len) == -1 ||
		    rq->host->write(out, "\n", 1) == -1)
			return LAGLESS_TOO_LARGE;
	if (echo && rq->host->write(out, rq->input, rq->input_len) == -1)
		return LAGLESS_TOO_LARGE;
	return LAGLESS_OK;
}

static uint64_t
eight_bytes(uint64_t in_len, const struct lagless_conf *conf)
{
	return sizeof(uint64_t);
}

/* test-sleep's answer depends only on the request, and test-crash and test-spin never answer:
 * the single-flight tests may give them rules. test-alloc answers what the machine gave it. */
static const struct lagless_kind kinds[] = {
	LAGLESS_KIND("test-crash", crash, .flags = LAGLESS_KIND_CACHEABLE),
	LAGLESS_KIND("test-spin", spin, .flags = LAGLESS_KIND_CACHEABLE),
	LAGLESS_KIND("test-alloc", alloc, .output_size = eight_bytes),
	LAGLESS_KIND("test-sleep", sleep_job, .ctype = "text/plain",
	    .flags = LAGLESS_KIND_CACHEABLE),
};

/* What each run above reads with host->query_uint (kinds/builtin.h). */
const struct lg_kind_query lg_test_query[] = {
	{ "test-crash", "" }, { "test-spin", "ignore_term" }, { "test-alloc", "mib" },
	{ "test-sleep", "ms,fail,echo" }, { NULL, NULL },
};

/* Built in, so not the exported `lagless_module` symbol of LAGLESS_MODULE: the same struct. */
const struct lagless_module lg_test_module = {
	.magic = LAGLESS_MODULE_MAGIC, .abi_major = LAGLESS_ABI_MAJOR,
	.abi_minor = LAGLESS_ABI_MINOR, .size = sizeof(struct lagless_module),
	.kind_size = sizeof(struct lagless_kind), .nkinds = sizeof(kinds) / sizeof(kinds[0]),
	.signature = LAGLESS_SIGNATURE, .name = "lagless-test", .version = "1", .kinds = kinds,
};
