/* Unit tests for shm/channel.c: the SOCK_SEQPACKET channels the headers travel on.
 *
 * Every receive uses MSG_DONTWAIT: a message that should be there is there by the time send
 * returns (AF_UNIX queues on the peer synchronously), and a missing one must fail the test, not
 * hang it. lg_channels_keep closes descriptors for good, so it runs in forked children that
 * report through their exit status. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/wire_assert.h"

#include "shm/channel.h"
#include "shm/wire.h"

#define NLOOPS 3
#define NFDS   (4 + 2 * NLOOPS)

/* Every descriptor of ch, in a fixed order: job, ctl, then done[i] pairs. */
static void
all_fds(const struct lg_channels *ch, int fds[NFDS])
{
	fds[0] = ch->job[0][0];
	fds[1] = ch->job[0][1];
	fds[2] = ch->ctl[0];
	fds[3] = ch->ctl[1];
	for (uint32_t i = 0; i < NLOOPS; i++) {
		fds[4 + 2 * i] = ch->done[i][0];
		fds[5 + 2 * i] = ch->done[i][1];
	}
}

static int
fd_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

static int
fd_closed(int fd)
{
	return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

static void
test_create(void **state)
{
	struct lg_channels ch;
	int fds[NFDS];

	assert_int_equal(lg_channels_create(&ch, NLOOPS, 1), 0);
	assert_int_equal(ch.nloops, NLOOPS);
	assert_non_null(ch.done);
	all_fds(&ch, fds);
	for (int i = 0; i < NFDS; i++) {
		int type = -1, domain = -1;
		socklen_t len = sizeof(type);

		assert_true(fds[i] >= 0);
		for (int k = 0; k < i; k++)
			assert_int_not_equal(fds[i], fds[k]);
		/* CLOEXEC: an exec'd helper must not inherit a channel end. */
		assert_int_equal(fcntl(fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
		assert_int_equal(getsockopt(fds[i], SOL_SOCKET, SO_TYPE, &type, &len), 0);
		assert_int_equal(type, SOCK_SEQPACKET);
		len = sizeof(domain);
		assert_int_equal(getsockopt(fds[i], SOL_SOCKET, SO_DOMAIN, &domain, &len), 0);
		assert_int_equal(domain, AF_UNIX);
	}
	lg_channels_close(&ch);
	for (int i = 0; i < NFDS; i++)
		assert_true(fd_closed(fds[i]));
}

/* No loop workers is a degenerate but valid size: create, close, nothing leaks. */
static void
test_create_zero_loops(void **state)
{
	struct lg_channels ch;

	assert_int_equal(lg_channels_create(&ch, 0, 1), 0);
	assert_int_equal(ch.nloops, 0);
	assert_true(ch.job[0][0] >= 0 && ch.job[0][1] >= 0 && ch.ctl[0] >= 0 && ch.ctl[1] >= 0);
	lg_channels_close(&ch);
	assert_null(ch.done);
}

static struct lg_msg
job_msg(uint32_t slot)
{
	struct lg_msg m = { .type = LG_MSG_JOB, .job = { .slot = slot, .gen = 7 } };

	return m;
}

/* Each channel carries its message type in its documented direction. */
static void
test_round_trip(void **state)
{
	struct lg_channels ch;
	struct lg_msg job = job_msg(3), got;
	struct lg_msg done = { .type = LG_MSG_DONE, .done = { .slot = UINT32_MAX, .gen = 9 } };
	struct lg_msg kill = { .type = LG_MSG_KILL, .kill = { .slot = 5, .gen = UINT32_MAX } };
	struct lg_msg wake = { .type = LG_MSG_WAKE, .wake = { .flight = 4, .flight_gen = 5,
	    .http_status = 200, .cache_idx = UINT32_MAX, .cache_word = UINT64_MAX,
	    .queue_ns = 1000, .run_ns = 2000 } };

	assert_int_equal(lg_channels_create(&ch, NLOOPS, 1), 0);

	assert_int_equal(lg_chan_send(ch.job[0][0], &job, MSG_DONTWAIT), 0);
	memset(&got, 0xff, sizeof(got));
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &job);

	for (uint32_t i = 0; i < NLOOPS; i++) {
		done.done.gen = 100 + i;
		assert_int_equal(lg_chan_send(ch.done[i][1], &done, MSG_DONTWAIT), 0);
	}
	/* Each loop's channel holds its own completion and no other. */
	for (uint32_t i = 0; i < NLOOPS; i++) {
		memset(&got, 0xff, sizeof(got));
		assert_int_equal(lg_chan_recv(ch.done[i][0], &got, MSG_DONTWAIT), 1);
		assert_int_equal(got.type, LG_MSG_DONE);
		assert_int_equal(got.done.slot, UINT32_MAX);
		assert_int_equal(got.done.gen, 100 + i);
		errno = 0;
		assert_int_equal(lg_chan_recv(ch.done[i][0], &got, MSG_DONTWAIT), -1);
		assert_int_equal(errno, EAGAIN);
	}

	assert_int_equal(lg_chan_send(ch.ctl[0], &kill, MSG_DONTWAIT), 0);
	memset(&got, 0xff, sizeof(got));
	assert_int_equal(lg_chan_recv(ch.ctl[1], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &kill);

	/* A loop wakes another loop's coalesced waiters on that loop's completion channel. */
	assert_int_equal(lg_chan_send(ch.done[1][1], &wake, MSG_DONTWAIT), 0);
	memset(&got, 0xff, sizeof(got));
	assert_int_equal(lg_chan_recv(ch.done[1][0], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &wake);

	/* The pairs are full duplex; nothing in lagless sends the other way, but the socket
	 * does not care, and a stray header must still arrive whole. */
	assert_int_equal(lg_chan_send(ch.job[0][1], &job, MSG_DONTWAIT), 0);
	assert_int_equal(lg_chan_recv(ch.job[0][0], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &job);
	lg_channels_close(&ch);
}

/* SOCK_SEQPACKET keeps boundaries: two sends are two receives, in order, never merged. */
static void
test_boundaries(void **state)
{
	struct lg_channels ch;
	struct lg_msg a = job_msg(1), b = job_msg(2), got;

	b.job.gen = 8;
	assert_int_equal(lg_channels_create(&ch, 1, 1), 0);
	assert_int_equal(lg_chan_send(ch.job[0][0], &a, MSG_DONTWAIT), 0);
	assert_int_equal(lg_chan_send(ch.job[0][0], &b, MSG_DONTWAIT), 0);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &a);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &b);
	errno = 0;
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	lg_channels_close(&ch);
}

/* Bytes that are not a header are read (the datagram leaves the queue) and reported as 0, so
 * the receiver counts and drops them; the next valid header is unaffected. */
static void
test_garbage(void **state)
{
	static const char junk[] = "\xc1 this is not msgpack";
	static const char not_array[] = "\x01";
	struct lg_channels ch;
	struct lg_msg m = job_msg(4), got;

	assert_int_equal(lg_channels_create(&ch, 1, 1), 0);
	assert_int_equal(send(ch.job[0][0], junk, sizeof(junk) - 1, 0), (ssize_t)sizeof(junk) - 1);
	assert_int_equal(send(ch.job[0][0], not_array, 1, 0), 1);
	assert_int_equal(lg_chan_send(ch.job[0][0], &m, MSG_DONTWAIT), 0);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 0);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 0);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 1);
	assert_msg_equal(&got, &m);
	lg_channels_close(&ch);
}

/* A datagram longer than any header is cut at LG_WIRE_MAX + 1 bytes by recv; the cut-off
 * copy must fail to decode even when it starts with a valid header, and the rest of the
 * datagram is discarded with it rather than read as the next message. */
static void
test_oversized(void **state)
{
	struct lg_channels ch;
	struct lg_msg m = job_msg(6), got;
	char big[LG_WIRE_MAX + 50];
	int n;

	assert_int_equal(lg_channels_create(&ch, 1, 1), 0);
	memset(big, 0, sizeof(big));
	n = lg_wire_encode(&m, big, sizeof(big));
	assert_true(n > 0 && n <= LG_WIRE_MAX);

	/* A valid header with zeros after it. */
	assert_int_equal(send(ch.job[0][0], big, sizeof(big), 0), (ssize_t)sizeof(big));
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 0);
	/* Exactly one byte over. */
	assert_int_equal(send(ch.job[0][0], big, LG_WIRE_MAX + 1, 0), LG_WIRE_MAX + 1);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 0);
	/* Filler bytes that a stream socket would have delivered as a message of their own. */
	memset(big, 0x90, sizeof(big));
	n = lg_wire_encode(&m, big + LG_WIRE_MAX + 1, sizeof(big) - LG_WIRE_MAX - 1);
	assert_true(n > 0);
	assert_int_equal(send(ch.job[0][0], big, LG_WIRE_MAX + 1 + (size_t)n, 0),
	    LG_WIRE_MAX + 1 + n);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 0);
	errno = 0;
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	lg_channels_close(&ch);
}

/* An empty datagram is a datagram too: it is consumed and fails to decode. */
static void
test_empty_datagram(void **state)
{
	struct lg_channels ch;
	struct lg_msg got;

	assert_int_equal(lg_channels_create(&ch, 1, 1), 0);
	assert_int_equal(send(ch.ctl[0], "", 0, 0), 0);
	assert_int_equal(lg_chan_recv(ch.ctl[1], &got, MSG_DONTWAIT), 0);
	errno = 0;
	assert_int_equal(lg_chan_recv(ch.ctl[1], &got, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	lg_channels_close(&ch);
}

static void
test_recv_empty_channel(void **state)
{
	struct lg_channels ch;
	struct lg_msg got;
	int fds[NFDS];

	assert_int_equal(lg_channels_create(&ch, NLOOPS, 1), 0);
	all_fds(&ch, fds);
	for (int i = 0; i < NFDS; i++) {
		errno = 0;
		assert_int_equal(lg_chan_recv(fds[i], &got, MSG_DONTWAIT), -1);
		assert_int_equal(errno, EAGAIN);
	}
	lg_channels_close(&ch);
}

/* A header that cannot be encoded is refused before anything reaches the channel. */
static void
test_send_unknown_type(void **state)
{
	struct lg_channels ch;
	struct lg_msg m = job_msg(0), got;

	m.type = 99;
	assert_int_equal(lg_channels_create(&ch, 1, 1), 0);
	errno = 0;
	assert_int_equal(lg_chan_send(ch.job[0][0], &m, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	lg_channels_close(&ch);
}

/* A loop's MSG_DONTWAIT send on a full channel fails with EAGAIN instead of blocking, and every
 * header queued before that is intact. */
static void
test_send_full(void **state)
{
	struct lg_channels ch;
	struct lg_msg m = job_msg(0), got;
	uint32_t sent = 0;
	int rc;

	assert_int_equal(lg_channels_create(&ch, 1, 1), 0);
	for (;;) {
		m.job.slot = sent;
		if ((rc = lg_chan_send(ch.job[0][0], &m, MSG_DONTWAIT)) == -1)
			break;
		sent++;
		assert_true(sent < 1000000); /* the kernel queue is far smaller */
	}
	assert_int_equal(errno, EAGAIN);
	assert_true(sent > 0);
	for (uint32_t i = 0; i < sent; i++) {
		assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), 1);
		assert_int_equal(got.job.slot, i);
	}
	assert_int_equal(lg_chan_recv(ch.job[0][1], &got, MSG_DONTWAIT), -1);
	lg_channels_close(&ch);
}

/* A send to a channel whose reader is gone returns EPIPE and the sender lives on: run in a
 * child with SIGPIPE at its default action, so a missing MSG_NOSIGNAL would kill it on kernels
 * that raise SIGPIPE here (Linux does for stream sockets; for SOCK_SEQPACKET it may not). */
static void
test_send_peer_gone(void **state)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct lg_channels ch;
		struct lg_msg m = { .type = LG_MSG_KILL, .kill = { .slot = 1, .gen = 1 } };
		int rc;

		signal(SIGPIPE, SIG_DFL);
		if (lg_channels_create(&ch, 1, 1) == -1)
			_exit(2);
		close(ch.ctl[1]);
		ch.ctl[1] = -1;
		errno = 0;
		rc = lg_chan_send(ch.ctl[0], &m, MSG_DONTWAIT);
		_exit(rc == -1 && errno == EPIPE ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_false(WIFSIGNALED(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* In a child: keeps role/index's ends, then checks every descriptor, open or closed, against
 * want_open[], and that the struct says -1 for exactly the closed ones. Then closes the rest
 * and checks nothing is left. Exit 0, or 1 + the index of the first wrong descriptor. */
static int
keep_child(char role, uint32_t index, const int want_open[NFDS])
{
	struct lg_channels ch;
	int before[NFDS], after[NFDS];

	if (lg_channels_create(&ch, NLOOPS, 1) == -1)
		return 100;
	all_fds(&ch, before);
	lg_channels_keep(&ch, role, index, 0);
	all_fds(&ch, after);
	for (int i = 0; i < NFDS; i++) {
		if (want_open[i] ? !fd_open(before[i]) : !fd_closed(before[i]))
			return 1 + i;
		if (after[i] != (want_open[i] ? before[i] : -1))
			return 1 + i;
	}
	lg_channels_close(&ch);
	for (int i = 0; i < NFDS; i++)
		if (!fd_closed(before[i]))
			return 50 + i;
	return 0;
}

static void
run_keep(char role, uint32_t index, const int want_open[NFDS])
{
	struct lg_channels parent;
	int status, fds[NFDS];
	pid_t pid;

	/* The parent's own channels, to show the child's closes do not reach them. */
	assert_int_equal(lg_channels_create(&parent, NLOOPS, 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		lg_channels_close(&parent);
		_exit(keep_child(role, index, want_open));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	all_fds(&parent, fds);
	for (int i = 0; i < NFDS; i++)
		assert_true(fd_open(fds[i]));
	lg_channels_close(&parent);
}

/* channel.h: role 'l' keeps job[0], ctl[0], done[index][0], and every done[i][1] (it wakes
 * other loops' coalesced waiters). */
static void
test_keep_loop(void **state)
{
	/* job[0] job[1] ctl[0] ctl[1] done0[0] done0[1] done1[0] done1[1] done2[0] done2[1] */
	static const int want[NFDS] = { 1, 0, 1, 0, 0, 1, 1, 1, 0, 1 };
	static const int want0[NFDS] = { 1, 0, 1, 0, 1, 1, 0, 1, 0, 1 };

	run_keep('l', 1, want);
	run_keep('l', 0, want0);
}

/* channel.h: role 'c' keeps job[1] and every done[i][1]. */
static void
test_keep_compute(void **state)
{
	static const int want[NFDS] = { 0, 1, 0, 0, 0, 1, 0, 1, 0, 1 };

	run_keep('c', 0, want);
	run_keep('c', 2, want);
}

/* The second close finds every field at -1 and closes nothing, even when a new descriptor has
 * since taken one of the old numbers. */
static void
test_close_twice(void **state)
{
	struct lg_channels ch;
	int fds[NFDS], reused;

	assert_int_equal(lg_channels_create(&ch, NLOOPS, 1), 0);
	all_fds(&ch, fds);
	lg_channels_close(&ch);
	assert_int_equal(ch.job[0][0], -1);
	assert_int_equal(ch.job[0][1], -1);
	assert_int_equal(ch.ctl[0], -1);
	assert_int_equal(ch.ctl[1], -1);
	assert_null(ch.done);
	reused = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(reused >= 0);
	lg_channels_close(&ch);
	assert_true(fd_open(reused));
	close(reused);
	for (int i = 0; i < NFDS; i++)
		assert_true(fd_closed(fds[i]) || fds[i] == reused);
}

/* Pools: a loop worker keeps every pool's send end, a compute process its own pool's receive
 * end only; too many pools is EINVAL with nothing left open. */
static void
test_keep_pools(void **state)
{
	struct lg_channels ch;
	pid_t pid;
	int st;

	errno = 0;
	assert_int_equal(lg_channels_create(&ch, 1, LG_MAX_POOLS + 1), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(lg_channels_create(&ch, 1, 0), -1);
	for (char role = 'c'; role; role = role == 'c' ? 'l' : 0) {
		assert_int_equal(lg_channels_create(&ch, 1, 3), 0);
		assert_true(ch.job[3][0] == -1 && ch.job[3][1] == -1);
		if ((pid = fork()) == 0) {
			int job[3][2];

			memcpy(job, ch.job, sizeof(job));
			lg_channels_keep(&ch, role, 0, 1);
			for (int p = 0; p < 3; p++) {
				int send_open = role == 'l', recv_open = role == 'c' && p == 1;

				if (fd_open(job[p][0]) != send_open || fd_open(job[p][1]) != recv_open)
					_exit(1 + p);
			}
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
		lg_channels_close(&ch);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_create_zero_loops),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_empty_datagram),
		cmocka_unit_test(test_recv_empty_channel),
		cmocka_unit_test(test_send_unknown_type),
		cmocka_unit_test(test_send_full),
		cmocka_unit_test(test_send_peer_gone),
		cmocka_unit_test(test_keep_loop),
		cmocka_unit_test(test_keep_compute),
		cmocka_unit_test(test_keep_pools),
		cmocka_unit_test(test_close_twice),
	};

	/* watchdog: a receive that blocks despite MSG_DONTWAIT, or a child that never exits,
	 * fails the run instead of hanging it */
	alarm(10);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
