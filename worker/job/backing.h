/* Backing shared memory off the loop thread. fallocate(2) on the arena's memfd allocates and
 * zeroes pages and, under a memory limit, waits in direct reclaim for as long as the kernel
 * needs (seconds were measured: loops in uninterruptible sleep, /ping p99 2.1 s). So a loop
 * worker never calls it: it posts a request to its own helper thread, which does the call and
 * posts the outcome back through a pipe the loop watches. The helper holds no loop state; a
 * request names a slot and its generation, so an outcome for a connection that went away in
 * the meantime is recognised and dropped by the caller.
 * After backing a range the helper also maps it into the process's page tables
 * (MADV_POPULATE_WRITE): otherwise the loop's first write to each page faults, and the page
 * tables those faults allocate are charged to the memory cgroup like any page, so at the limit
 * the loop itself sat in the cgroup's OOM path (mem_cgroup_out_of_memory, from pte_alloc_one)
 * while it copied a body in: slow callbacks of 0.6-1.8 s in the pressure experiment
 * (docs/BENCHMARKS.md). The threads share one address space, so the helper's faults are the
 * loop's. */
#ifndef LG_WORKER_BACKING_H
#define LG_WORKER_BACKING_H

#include <ev.h>
#include <pthread.h>
#include <stdint.h>

/* What a request asks of the helper for [off, off + len) of the memfd. */
enum lg_backing_op {
	LG_BACKING_BACK = 0, /* back it (fallocate) and map it writable: input a loop will write */
	LG_BACKING_MAP = 1,  /* map it readable (MADV_POPULATE_READ): output a compute process
	                      * wrote, which the loop is about to send; the first send from each
	                      * 64 KiB faulted in the loop, each 2 MiB allocating a page table */
	LG_BACKING_EXIT = 2, /* outcome only: the helper was idle and ended (the loop joins it) */
};

/* The helper ends after this long without a request; the next post starts a new one. */
#define LG_BACKING_IDLE_MS 1000

/* One request or its outcome (off page-aligned). */
struct lg_backing_msg {
	uint32_t slot, gen;
	uint64_t off, len;
	uint64_t upto;   /* caller's meaning: the region bytes backed once this succeeds */
	int32_t err;     /* outcome: 0, or the errno of fallocate (ENOMEM, ENOSPC); for MAP, of
	                  * madvise, which the caller may ignore (its own faults map the pages) */
	uint32_t op;     /* enum lg_backing_op */
};

struct lg_backing {
	int req[2], done[2];       /* pipes: loop -> helper, helper -> loop */
	int fd;                    /* the arena memfd */
	unsigned char *base;       /* its MAP_SHARED mapping in this process (offset 0) */
	pthread_t thread;
	int running;               /* a helper thread exists (started by the first post) */
	ev_io io;
	void (*on_done)(void *ctx, const struct lg_backing_msg *m);
	void *ctx;
	uint64_t posted, failed;   /* requests posted, outcomes with an error */
	uint64_t answered;         /* outcomes received */
	int populate_warned;       /* the helper's: MADV_POPULATE_WRITE failed once (logged) */
};

/* Readies the helper for arena file descriptor fd, mapped read-write at base in this process
 * (its offset 0), and watches its outcomes on ev; on_done(ctx, msg) runs on the loop thread
 * for each. The thread itself starts with the first post and ends when idle. Returns 0, or -1
 * with errno (pipe2). */
int lg_backing_start(struct lg_backing *b, struct ev_loop *ev, int fd, unsigned char *base,
    void (*on_done)(void *ctx, const struct lg_backing_msg *m), void *ctx);

/* Posts one request (never blocks: the pipe holds far more requests than there are slots),
 * starting the helper thread when there is none. Returns 0, or -1 with errno EAGAIN when the
 * pipe is full (the caller answers 503) or that of pthread_create. */
int lg_backing_post(struct lg_backing *b, const struct lg_backing_msg *m);

#endif
