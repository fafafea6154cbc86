/* Unit tests for the connection core (worker/core/conn*.c) against a socketpair, with fake
 * ops in place of the router and the job room: the core must answer pipelined requests in
 * order, cope with a request that arrives a byte at a time, with a client that closes at any
 * step, read a Content-Length body into the sink a room installs (and no further), and arm
 * the job deadline of lg_conn_wait_job. Every wait is bounded: the loop runs until the expected
 * bytes are read or 3 s pass. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"
#include "master/options.h"
#include "shm/arena.h"
#include "worker/core/conn.h"

/* The fake rooms: what the test asked of them and what they saw. */
static struct {
	unsigned char sink[256];   /* the body sink's destination */
	size_t need, got;          /* Content-Length of the request being read, bytes taken */
	size_t window;             /* the sink offers at most this many bytes per read */
	int heads, dispatched, inits, gone, timeouts;
	size_t at_head[4];         /* bytes buffered behind each head when the router was asked */
	int wait_job;              /* dispatch parks the request on a 50 ms job deadline */
	size_t big;                /* dispatch answers this many bytes of big_body */
	int stream;                /* dispatch hands the answer to a room (state PROXY) */
	int rbuf_at_timeout;          /* the connection held a read buffer when its job timed out */
	unsigned long rbufs_out_at_timeout; /* read buffers lent out then */
} fk;

static unsigned char big_body[1 << 20];

static int
fake_head(struct lg_conn *c)
{
	const struct lg_http_req *r = &c->http.req;

	if (fk.heads < 4)
		fk.at_head[fk.heads] = lg_conn_buffered(c);
	fk.heads++;
	if (r->content_length != LG_HTTP_NO_LENGTH && r->content_length > 0) {
		fk.need = (size_t)r->content_length;
		fk.got = 0;
		return LG_HTTP_BODY_SELF;
	}
	return LG_HTTP_BODY_PARSER;
}

static int
fake_body(struct lg_http *h, void *conn, const char *at, size_t len)
{
	return 0;
}

static size_t
fake_body_room(struct lg_http *h, void *conn)
{
	return SIZE_MAX;
}

static int
fake_dispatch(struct lg_conn *c)
{
	char body[64];
	int n;

	fk.dispatched++;
	if (fk.stream) {
		lg_conn_stream_begin(c);
		return 0;
	}
	if (fk.wait_job) {
		lg_conn_wait_job(c, 50);
		return 0;
	}
	if (fk.big) /* referenced, not copied: it stays valid until written */
		return lg_conn_respond(c, 200, "application/octet-stream", NULL, big_body, fk.big);
	if (fk.need > 0) {
		/* as the job room does: the body bytes that came with the head first */
		size_t have = lg_conn_buffered(c) < fk.need ? lg_conn_buffered(c) : fk.need;

		lg_conn_take(c, fk.sink, have);
		fk.got = have;
		if (fk.got < fk.need) {
			lg_conn_expect_body(c);
			return 0;
		}
		return c->w->ops->body_done(c);
	}
	n = snprintf(body, sizeof(body), "r%d %.*s", fk.dispatched, (int)c->http.req.path_len,
	    c->http.req.path);
	return lg_conn_respond(c, 200, "text/plain", NULL, body, (size_t)n);
}

static int
fake_body_buf(struct lg_conn *c, unsigned char **dst, size_t *len)
{
	size_t left = fk.need - fk.got;

	*dst = fk.sink + fk.got;
	*len = left < fk.window ? left : fk.window;
	return 0;
}

static int
fake_body_took(struct lg_conn *c, size_t n)
{
	fk.got += n;
	return fk.got >= fk.need;
}

static uint64_t
fake_body_got(const struct lg_conn *c)
{
	return fk.got;
}

static int
fake_body_done(struct lg_conn *c)
{
	size_t n = fk.got;

	fk.need = fk.got = 0;
	return lg_conn_respond(c, 200, "text/plain", NULL, fk.sink, n);
}

static void
fake_init(struct lg_conn *c)
{
	fk.inits++;
}

static int
fake_job_timeout(struct lg_conn *c)
{
	fk.timeouts++;
	fk.rbuf_at_timeout = c->rbuf != NULL;
	fk.rbufs_out_at_timeout = c->w->rbufs.mapped - c->w->rbufs.len;
	return lg_conn_error(c, 504, 0, NULL);
}

static int
fake_release(struct lg_conn *c)
{
	return 0;
}

static void
fake_gone(struct lg_conn *c)
{
	fk.gone++;
}

static const struct lg_conn_ops fake_ops = {
	.head = fake_head, .body = fake_body, .body_room = fake_body_room,
	.dispatch = fake_dispatch, .body_buf = fake_body_buf, .body_took = fake_body_took,
	.body_got = fake_body_got, .body_done = fake_body_done, .init = fake_init,
	.job_timeout = fake_job_timeout, .release = fake_release, .gone = fake_gone,
};

struct rig {
	struct lg_config cfg;
	struct lg_arena arena;
	struct lg_loop_env env;
	struct lg_worker w;
	int client;                /* the test's end of the socketpair */
	int server;                /* the core's end (owned by the core) */
};

static int
rig_up(void **state)
{
	static struct rig r;
	int sv[2];

	memset(&r, 0, sizeof(r));
	memset(&fk, 0, sizeof(fk));
	fk.window = sizeof(fk.sink);
	lg_options_defaults(&r.cfg);
	r.cfg.conn.access_log = 0;
	if (lg_arena_create_sized(&r.arena, 1, 1, 65536, 65536, 4, 1) == -1)
		return -1;
	r.env = (struct lg_loop_env){ .cfg = &r.cfg, .arena = &r.arena, .listen_fd = -1,
	    .admin_fd = -1, .index = 0, .nloops = 1, .page = &r.arena.procs[0] };
	r.w.env = &r.env;
	r.w.ops = &fake_ops;
	r.w.lim.max_head = (size_t)r.cfg.http.max_head;
	r.w.lim.max_target = (size_t)r.cfg.http.max_uri;
	r.w.lim.max_fields = (unsigned)r.cfg.http.max_fields;
	r.w.lim.max_body = r.cfg.http.max_body;
	if ((r.w.ev = ev_loop_new(EVFLAG_AUTO)) == NULL)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == -1)
		return -1;
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	r.client = sv[1];
	r.server = sv[0];
	if (lg_conn_start(&r.w, sv[0]) == -1)
		return -1;
	*state = &r;
	return 0;
}

static int
rig_down(void **state)
{
	struct rig *r = *state;

	/* close every connection the core still holds, then the loop */
	while (r->w.conns != NULL)
		lg_conn_close(r->w.conns);
	close(r->client);
	for (int i = 0; i < 10 && r->w.nconns > 0; i++)
		ev_run(r->w.ev, EVRUN_NOWAIT);
	ev_loop_destroy(r->w.ev);
	lg_arena_destroy(&r->arena);
	return 0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
send_all(int fd, const char *s, size_t n)
{
	assert_int_equal(write(fd, s, n), (ssize_t)n);
}

/* Runs the loop until the client has read `want` occurrences of "HTTP/1.1 " (or EOF, or 3 s
 * pass); returns what it read, NUL-terminated, in buf. */
static size_t
read_answers(struct rig *r, char *buf, size_t cap, int want)
{
	size_t len = 0;
	double until = now_s() + 3.0;

	fcntl(r->client, F_SETFL, O_NONBLOCK);
	buf[0] = '\0';
	while (now_s() < until) {
		ev_run(r->w.ev, EVRUN_NOWAIT);
		ssize_t n = read(r->client, buf + len, cap - 1 - len);

		if (n > 0) {
			len += (size_t)n;
			buf[len] = '\0';
		} else if (n == 0) {
			break;
		}
		int seen = 0;
		for (const char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++)
			seen++;
		if (seen >= want)
			break;
		if (n < 0)
			usleep(1000);
	}
	return len;
}

static void
test_one_request(void **state)
{
	struct rig *r = *state;
	char buf[4096];

	send_all(r->client, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 28);
	read_answers(r, buf, sizeof(buf), 1);
	assert_non_null(strstr(buf, "HTTP/1.1 200 "));
	assert_non_null(strstr(buf, "\r\n\r\nr1 /a"));
	assert_int_equal(fk.dispatched, 1);
	assert_int_equal(fk.inits, 1);
	assert_int_equal(r->w.nconns, 1); /* keep-alive: still open */
}

static void
test_pipelined_in_order(void **state)
{
	struct rig *r = *state;
	char buf[8192];
	const char *req = "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
	    "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n";

	send_all(r->client, req, strlen(req));
	read_answers(r, buf, sizeof(buf), 3);
	char *a = strstr(buf, "r1 /1"), *b = strstr(buf, "r2 /2"), *c = strstr(buf, "r3 /3");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_true(a < b && b < c);
	assert_int_equal(fk.heads, 3);
}

/* The parser returns at head complete and the core asks the router only then, outside the
 * parse: the head's bytes are consumed when the router is called (what is buffered is the body
 * and what follows it), and a body the parser reads (chunked, with its trailer section) goes on
 * to the body hook afterwards, the pipelined request behind it answered in order. */
static void
test_router_after_head(void **state)
{
	struct rig *r = *state;
	char buf[8192];
	const char *head = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
	const char *rest = "3\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\n\r\n";
	char req[256];

	snprintf(req, sizeof(req), "%s%s", head, rest);
	send_all(r->client, req, strlen(req));
	read_answers(r, buf, sizeof(buf), 2);
	char *a = strstr(buf, "r1 /c"), *b = strstr(buf, "r2 /d");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(a < b);
	assert_int_equal(fk.heads, 2);
	assert_int_equal(fk.at_head[0], strlen(rest));
	assert_int_equal(fk.at_head[1], 0);
}

static void
test_byte_at_a_time(void **state)
{
	struct rig *r = *state;
	char buf[4096];
	const char *req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";

	for (size_t i = 0; req[i] != '\0'; i++) {
		send_all(r->client, req + i, 1);
		ev_run(r->w.ev, EVRUN_NOWAIT);
		if (req[i + 1] != '\0') {
			assert_int_equal(fk.dispatched, 0); /* nothing before the head is whole */
			assert_int_equal(fk.heads, 0);
		}
	}
	read_answers(r, buf, sizeof(buf), 1);
	assert_non_null(strstr(buf, "r1 /slow"));
}

/* The client closes after every prefix of a request: the core closes the connection, never
 * dispatches a partial head, and leaves no connection behind. */
static void
test_close_at_every_step(void **state)
{
	struct rig *r = *state;
	const char *req = "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab";
	size_t n = strlen(req);

	close(r->client); /* the rig's own connection: gone before a byte */
	for (int i = 0; i < 200 && r->w.nconns > 0; i++)
		ev_run(r->w.ev, EVRUN_NOWAIT);
	assert_int_equal(r->w.nconns, 0);
	for (size_t cut = 1; cut <= n; cut++) {
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		assert_int_equal(lg_conn_start(&r->w, sv[0]), 0);
		send_all(sv[1], req, cut);
		ev_run(r->w.ev, EVRUN_NOWAIT);
		close(sv[1]);
		for (int i = 0; i < 200 && r->w.nconns > 0; i++)
			ev_run(r->w.ev, EVRUN_NOWAIT);
		assert_int_equal(r->w.nconns, 0);
		assert_null(r->w.conns);
	}
	assert_int_equal(fk.gone, 0); /* no room held any of them */
	r->client = socket(AF_UNIX, SOCK_STREAM, 0); /* for rig_down to close */
}

/* A Content-Length body goes to the sink the room installed, in windows of the size it
 * offers, and not a byte further: the next request's bytes stay the core's. */
static void
test_body_into_sink(void **state)
{
	struct rig *r = *state;
	char buf[4096];
	const char *head = "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";

	fk.window = 3;
	send_all(r->client, head, strlen(head));
	for (int i = 0; i < 1000 && fk.dispatched == 0; i++) {
		ev_run(r->w.ev, EVRUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(fk.dispatched, 1);
	assert_int_equal(r->w.conns->state, LG_CONN_BODY);
	send_all(r->client, "0123456789GET /n HTTP/1.1\r\nHost: x\r\n\r\n", 38);
	read_answers(r, buf, sizeof(buf), 2);
	assert_non_null(strstr(buf, "\r\n\r\n0123456789"));
	assert_non_null(strstr(buf, "r2 /n"));
}

/* lg_conn_wait_job arms the job deadline: it fires ops->job_timeout, whose answer goes out. */
static void
test_job_deadline(void **state)
{
	struct rig *r = *state;
	char buf[4096];
	double t0 = now_s();

	fk.wait_job = 1;
	send_all(r->client, "GET /j HTTP/1.1\r\nHost: x\r\n\r\n", 28);
	read_answers(r, buf, sizeof(buf), 1);
	assert_int_equal(fk.timeouts, 1);
	assert_non_null(strstr(buf, "HTTP/1.1 504 "));
	assert_true(now_s() - t0 >= 0.045); /* not before the 50 ms deadline */
	assert_true(now_s() - t0 < 2.0);
	/* a request parsed and away holds no read buffer: the loop lent none out meanwhile */
	assert_int_equal(fk.rbuf_at_timeout, 0);
	assert_int_equal(fk.rbufs_out_at_timeout, 0);
	assert_true(r->w.rbufs.mapped >= 1); /* one was lent for the read */
}

/* An upgrade's hand-over (lg_conn_detach): the room takes the bytes behind the head, the core
 * gives the socket away (its block back in the pool, the socket open, still counted) and reads
 * it no more; lg_conn_detached_close closes it and counts it gone. */
static void
test_detach(void **state)
{
	struct rig *r = *state;
	char buf[16];
	struct lg_conn *c;
	int fd;

	fk.stream = 1;
	send_all(r->client, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\nEXTRA", 34);
	for (int i = 0; i < 100 && fk.dispatched == 0; i++) {
		ev_run(r->w.ev, EVRUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(fk.dispatched, 1);
	c = r->w.conns;
	assert_non_null(c);
	lg_conn_hold(c, LG_CONN_HELD_UP); /* a room still holding c: not yet */
	assert_int_equal(lg_conn_can_detach(c), 0);
	assert_int_equal(lg_conn_detach(c, 101), -1);
	lg_conn_unhold(c, LG_CONN_HELD_UP);
	assert_int_equal(lg_conn_can_detach(c), 1);
	assert_int_equal(lg_conn_buffered(c), 5);
	lg_conn_take(c, buf, 5);
	assert_memory_equal(buf, "EXTRA", 5);
	fd = lg_conn_detach(c, 101);
	assert_int_equal(fd, r->server);
	assert_null(r->w.conns);
	assert_int_equal(r->w.nconns, 1);
	/* the core reads the socket no more: the bytes stay for the new owner */
	send_all(r->client, "y", 1);
	for (int i = 0; i < 5; i++)
		ev_run(r->w.ev, EVRUN_NOWAIT);
	assert_int_equal(read(fd, buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'y');
	assert_int_equal(write(fd, "z", 1), 1);
	assert_int_equal(read(r->client, buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'z');
	lg_conn_detached_close(&r->w, fd);
	assert_int_equal(r->w.nconns, 0);
	fcntl(r->client, F_SETFL, 0);
	assert_int_equal(read(r->client, buf, sizeof(buf)), 0); /* closed */
	assert_int_equal(fk.gone, 0);
}

/* The client reads n bytes (or gives up after 3 s); returns how many it got. */
static size_t
read_n(struct rig *r, unsigned char *buf, size_t n)
{
	size_t len = 0;
	double until = now_s() + 3.0;

	fcntl(r->client, F_SETFL, O_NONBLOCK);
	while (len < n && now_s() < until) {
		ev_run(r->w.ev, EVRUN_NOWAIT);
		ssize_t got = read(r->client, buf + len, n - len);

		if (got > 0)
			len += (size_t)got;
		else if (got == 0)
			break;
		else
			usleep(500);
	}
	return len;
}

/* A response larger than the socket takes is written in parts as the client reads, arrives
 * whole and in order, and the connection then serves the next request. */
static void
test_partial_writes(void **state)
{
	struct rig *r = *state;
	static unsigned char got[(1 << 20) + 4096];
	int small = 4096;
	size_t head_len, n;
	char *end;

	for (size_t i = 0; i < sizeof(big_body); i++)
		big_body[i] = (unsigned char)(i * 7 + i / 251);
	setsockopt(r->server, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	fk.big = 300000;
	send_all(r->client, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 30);
	for (int i = 0; i < 50; i++)
		ev_run(r->w.ev, EVRUN_NOWAIT);
	assert_non_null(r->w.conns);
	assert_int_equal(r->w.conns->state, LG_CONN_WRITE); /* blocked: the client reads nothing */
	n = read_n(r, got, 512);
	assert_int_equal(n, 512);
	got[n] = '\0';
	end = strstr((char *)got, "\r\n\r\n");
	assert_non_null(end);
	head_len = (size_t)(end + 4 - (char *)got);
	n += read_n(r, got + n, head_len + fk.big - n);
	assert_int_equal(n, head_len + fk.big);
	assert_memory_equal(got + head_len, big_body, fk.big);
	fk.big = 0;
	send_all(r->client, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", 32);
	read_answers(r, (char *)got, sizeof(got), 1);
	assert_non_null(strstr((char *)got, "r2 /after"));
}

/* The client leaves while its response is blocked on a full socket: the core closes. */
static void
test_close_while_writing(void **state)
{
	struct rig *r = *state;
	int small = 4096;

	setsockopt(r->server, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	fk.big = 300000;
	send_all(r->client, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 30);
	for (int i = 0; i < 50; i++)
		ev_run(r->w.ev, EVRUN_NOWAIT);
	assert_int_equal(r->w.conns->state, LG_CONN_WRITE);
	close(r->client);
	for (int i = 0; i < 2000 && r->w.nconns > 0; i++) {
		ev_run(r->w.ev, EVRUN_NOWAIT);
		usleep(500);
	}
	assert_int_equal(r->w.nconns, 0);
	r->client = socket(AF_UNIX, SOCK_STREAM, 0); /* for rig_down to close */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_request, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_pipelined_in_order, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_router_after_head, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_byte_at_a_time, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_close_at_every_step, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_body_into_sink, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_job_deadline, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_partial_writes, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_close_while_writing, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(test_detach, rig_up, rig_down),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
