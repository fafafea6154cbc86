#include "worker/job/backing.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"

/* The helper: blocking reads of requests, fallocate(2) mode 0 (retried on EINTR, which
 * shmem_fallocate returns when a signal is pending; what it allocated stays), then the range
 * mapped into the page tables (worker/job/backing.h); a MAP request only maps. One outcome per
 * request. A failed populate
 * is not an error: the pages are backed and the loop's own faults map them, as before. It ends
 * when the loop's end of the request pipe closes (process exit), or after LG_BACKING_IDLE_MS
 * without a request, saying so (LG_BACKING_EXIT): a loop worker with no helper is a process of
 * one thread, whose system calls on a descriptor take no reference on its file (fdget(),
 * fs/file.c: the file table is not shared), 0.1 us of a /ping's 7. */
static void
reply(struct lg_backing *b, const struct lg_backing_msg *m)
{
	while (write(b->done[1], m, sizeof(*m)) == -1 && errno == EINTR)
		;
}

static void *
helper(void *arg)
{
	struct lg_backing *b = arg;
	struct lg_backing_msg m;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the loop thread's */
	for (;;) {
		struct pollfd pfd = { .fd = b->req[0], .events = POLLIN };
		int r = poll(&pfd, 1, LG_BACKING_IDLE_MS);

		if (r == 0) { /* idle: the loop joins this thread, and starts one when needed */
			m = (struct lg_backing_msg){ .op = LG_BACKING_EXIT };
			reply(b, &m);
			return NULL;
		}
		if (r < 0)
			continue; /* EINTR */
		ssize_t n = read(b->req[0], &m, sizeof(m));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(m))
			return NULL;
		m.err = 0;
		if (m.op == LG_BACKING_MAP) {
			if (madvise(b->base + m.off, (size_t)m.len, MADV_POPULATE_READ) == -1)
				m.err = errno;
			reply(b, &m);
			continue;
		}
		for (int tries = 0; tries < 8; tries++) {
			if (fallocate(b->fd, 0, (off_t)m.off, (off_t)m.len) == 0) {
				m.err = 0;
				break;
			}
			m.err = errno;
			if (errno != EINTR)
				break;
		}
		if (m.err == 0 && madvise(b->base + m.off, (size_t)m.len, MADV_POPULATE_WRITE) == -1 &&
		    !b->populate_warned) {
			b->populate_warned = 1;
			log_debug("MADV_POPULATE_WRITE: %s; the loop maps backed pages itself",
			    strerror(errno));
		}
		reply(b, &m);
	}
}

/* Starts the helper thread. Returns 0, or -1 with errno (pthread_create). */
static int
start_helper(struct lg_backing *b)
{
	int rc = pthread_create(&b->thread, NULL, helper, b);

	if (rc != 0) {
		errno = rc;
		return -1;
	}
	b->running = 1;
	return 0;
}

static void
done_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	struct lg_backing *b = io->data;
	struct lg_backing_msg m;

	(void)ev;
	(void)revents;
	while (read(b->done[0], &m, sizeof(m)) == (ssize_t)sizeof(m)) {
		if (m.op == LG_BACKING_EXIT) {
			pthread_join(b->thread, NULL); /* it returns right after this message */
			b->running = 0;
			/* posted after its last read: they wait in the pipe for a new helper */
			if (b->posted > b->answered && start_helper(b) == -1)
				log_warn("backing helper: %s; backing requests wait", strerror(errno));
			continue;
		}
		b->answered++;
		if (m.err)
			b->failed++;
		b->on_done(b->ctx, &m);
	}
}

int
lg_backing_start(struct lg_backing *b, struct ev_loop *ev, int fd, unsigned char *base,
    void (*on_done)(void *ctx, const struct lg_backing_msg *m), void *ctx)
{
	memset(b, 0, sizeof(*b));
	b->req[0] = b->req[1] = b->done[0] = b->done[1] = -1;
	b->fd = fd;
	b->base = base;
	b->on_done = on_done;
	b->ctx = ctx;
	/* Records are 40 bytes, below PIPE_BUF, so each write and read is whole (pipe(7)). */
	if (pipe2(b->req, O_CLOEXEC) == -1 || pipe2(b->done, O_CLOEXEC | O_NONBLOCK) == -1)
		return -1;
	fcntl(b->req[1], F_SETFL, O_NONBLOCK);
	ev_io_init(&b->io, done_cb, b->done[0], EV_READ);
	b->io.data = b;
	ev_io_start(ev, &b->io);
	return 0;
}

int
lg_backing_post(struct lg_backing *b, const struct lg_backing_msg *m)
{
	ssize_t n;

	if (!b->running && start_helper(b) == -1)
		return -1;
	while ((n = write(b->req[1], m, sizeof(*m))) == -1 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*m))
		return -1;
	b->posted++;
	return 0;
}
