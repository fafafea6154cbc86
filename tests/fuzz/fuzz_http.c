/* libFuzzer harness for a loop worker's request path. Each input is one client's bytes:
 *
 * 1. Through lg_http_* alone, whole and in pieces cut by the input's first byte, with hooks
 *    that accept every body: nothing is consumed past what was presented, and the split and
 *    whole runs must reach the same verdict.
 * 2. Through the differential oracle (tests/oracle/http_oracle.h): the server's parser and
 *    http-parser 2.9.4 must read every message both complete the same way (where it ends,
 *    method, target, framing, kept fields, body bytes), and the server must complete no
 *    message http-parser refuses or frames otherwise.
 * 3. Through the real connection layer: a loop worker (struct lg_worker with a libev loop, a
 *    real memfd arena and real channels) owns one end of a socketpair, the harness writes the
 *    bytes to the other end, shuts it, plays the compute pool (takes JOB headers, finishes the
 *    slot, sends DONE) and drains the answers until the worker closes the connection. ASan and
 *    UBSan watch the real hooks (worker/route/routes.c), the offload path and the writes.
 * 4. Through lg_fwd_head (http/fwd.h): a request accepted with every field kept is written as
 *    the head an upstream would get, and that head must be one the strict parser accepts
 *    whole, with the same method and path, no hop-by-hop field, one X-Forwarded-For and the
 *    framing field the options chose.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "kinds/registry.h"
#include "shm/channel.h"
#include "shm/slot.h"
#include "tests/oracle/http_oracle.h"
#include "worker/flight/coalesce.h"
#include "worker/core/conn.h"
#include "http/fwd.h"
#include "http/http.h"
#include "worker/job/offload.h"
#include "worker/job/offload_state.h"
#include "worker/route/routes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static struct lg_config cfg = {
	.http = { .max_body = 4096, .max_head = 2048, .max_uri = 512, .max_fields = 20,
	    .head_timeout_ms = 10000, .body_timeout_ms = 10000, .body_deadline_ms = 10000,
	    .max_discard = 1024 },
	.conn = { .max_conns = 16, .keepalive_timeout_ms = 10000, .write_timeout_ms = 10000 },
	.jobs = { .deadline_ms = 30000 },
};
static struct lg_registry reg;
static struct lg_arena arena;
static struct lg_channels ch;
static struct lg_loop_env env;
static struct lg_worker w;
/* a keep set, as a loop worker has (worker/core/keptfields.c): names gathered across pieces */
static struct lg_http_keep keep; /* x-user, content-type, x-forwarded-for: see Initialize */
static const struct lg_http_limits lim = { 2048, 512, 20, 1 << 20, &keep, 0 };

static int
accept_body(struct lg_http *h, void *ctx, const char *at, size_t len)
{
	return 0;
}

/* What a parse found beyond its verdict, compared between the whole and the split runs (a
 * whole field line takes the parser's fast path, a split one its byte loop): the reason of a
 * refusal, the framing and the kept fields as the hooks gathered them. */
struct seen {
	const char *why;
	uint64_t content_length, body_seen;
	int chunked, keep_alive, expect_continue;
	unsigned nfields, nkept;
	size_t fbuf_len;
	char fbuf[LG_HTTP_FIELD_BUF];
	struct lg_http_field kept[LG_HTTP_KEPT];
};

static void
seen_of(const struct lg_http *h, struct seen *s)
{
	const struct lg_http_req *r = &h->req;

	memset(s, 0, sizeof(*s));
	/* A request line refused before it is whole is named by the first rule its bytes so far
	 * break, so only refusals past the request line must give the same reason. */
	s->why = h->status && h->frame.head_bytes > 0 ? h->why : NULL;
	if (!h->head_seen)
		return;
	s->content_length = r->content_length;
	s->body_seen = h->body_seen;
	s->chunked = r->chunked;
	s->keep_alive = r->keep_alive;
	s->expect_continue = r->expect_continue;
	s->nfields = r->nfields;
	s->nkept = r->nkept;
	s->fbuf_len = r->fbuf_len;
	memcpy(s->fbuf, r->fbuf, r->fbuf_len);
	memcpy(s->kept, r->kept, sizeof(r->kept[0]) * r->nkept);
}

/* Feeds data through lg_http in pieces of `piece` bytes, presenting unconsumed bytes again;
 * at head complete the body is given to the parser (LG_HTTP_BODY_PARSER, accept_body), as the
 * router does for a body it reads. Returns the verdict: 1000 + status, 1 complete, 0 pending;
 * what it found beyond that in *s. The parser must return at head complete exactly once per
 * head, with its bytes consumed and none of its body shown. */
static int
parse(const uint8_t *data, size_t size, size_t piece, struct seen *s)
{
	static struct lg_http h;
	size_t off = 0, avail = 0;
	int heads = 0;

	lg_http_init(&h, &lim);
	h.on_body = accept_body;
	while (!h.complete && !h.status) {
		avail = size - avail < piece ? size : avail + piece;
		char *copy = malloc(avail - off ? avail - off : 1);
		memcpy(copy, data + off, avail - off);
		size_t used, more = 0;
		enum lg_http_stop st = lg_http_feed(&h, copy, avail - off, &used);
		if (st == LG_HTTP_HEAD_DONE) {
			if (heads++ > 0 || !h.head_seen || h.complete || h.body_seen > 0)
				abort();
			if (lg_http_body_to(&h, LG_HTTP_BODY_PARSER) == LG_HTTP_MORE)
				lg_http_feed(&h, copy + used, avail - off - used, &more);
		} else if (st == LG_HTTP_ERROR ? h.status == 0 : st == LG_HTTP_DONE && !h.complete) {
			abort(); /* the stop code and the parser's state disagree */
		}
		free(copy);
		used += more;
		if (used > avail - off)
			abort();
		off += used;
		if (avail == size && (used == 0 || off == size))
			break;
	}
	if (heads > h.head_seen || (h.complete && heads == 0))
		abort(); /* a head returned that was not seen, or a message done without one */
	seen_of(&h, s);
	return h.status ? 1000 + h.status : h.complete;
}

/* What the loop gives the offload path for the headers no connection waits for (loop.c). */
static const struct lg_offload_sink completion_sink = {
	.unclaimed = lg_coal_completion,
	.message = lg_coal_message,
};

/* Plays the compute pool for every JOB header waiting: RUNNING, then DONE with no output. */
static void
play_compute(void)
{
	struct lg_msg m;

	while (lg_chan_recv(ch.job[0][1], &m, MSG_DONTWAIT) == 1) {
		uint32_t slot = m.job.slot, gen = m.job.gen;
		uint64_t now = lg_now_ns();
		struct lg_msg done = { .type = LG_MSG_DONE, .done = { .slot = slot, .gen = gen } };
		struct lg_job j;
		uint32_t owner;

		if (lg_wire_check_job(&m, &arena) == -1 && errno != ESTALE)
			abort(); /* the loop wrote a header that does not match the arena */
		if (lg_slot_start(&arena.slots[slot], gen, getpid(), now) == -1)
			continue; /* cancelled */
		if (lg_slot_job_read(&arena, slot, gen, 1, &j, &owner) == -1)
			abort(); /* the loop's record of the job does not match the arena */
		arena.slots[slot].out_len = 0;
		memset(lg_arena_out(&arena, slot), 0, 8);
		lg_slot_finish(&arena.slots[slot], gen, LG_JOB_OK, now);
		lg_chan_send(ch.done[0][1], &done, MSG_DONTWAIT);
	}
	lg_offload_completions(&w, &completion_sink);
}

static void
through_conn(const uint8_t *data, size_t size)
{
	int sv[2];
	size_t off = 0;
	int shut = 0;
	char sink[65536];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == -1)
		abort();
	if (lg_conn_start(&w, sv[0]) == -1)
		abort();
	for (int round = 0; w.nconns > 0; round++) {
		if (off < size) {
			ssize_t n = write(sv[1], data + off, size - off);
			if (n > 0)
				off += (size_t)n;
			else if (n < 0 && errno != EAGAIN)
				off = size; /* the worker closed its end */
		}
		if (off == size && !shut) {
			shutdown(sv[1], SHUT_WR);
			shut = 1;
		}
		ev_run(w.ev, EVRUN_NOWAIT);
		play_compute();
		lg_conn_tick(&w); /* a connection idle for two rounds gives its buffers back */
		while (read(sv[1], sink, sizeof(sink)) > 0)
			;
		if (round > 100000) {
			fprintf(stderr, "connection never finished (state %d)\n",
			    w.conns ? (int)w.conns->state : -1);
			abort();
		}
	}
	close(sv[1]);
}

/* Feeds data to h: at head complete the body is left to the caller (LG_HTTP_BODY_SELF), as a
 * proxied request's view is whole at its head. Returns the bytes consumed. */
static size_t
fwd_head_only(struct lg_http *h, const char *data, size_t size)
{
	size_t used;

	if (lg_http_feed(h, data, size, &used) == LG_HTTP_HEAD_DONE)
		lg_http_body_to(h, LG_HTTP_BODY_SELF);
	return used;
}

/* Stage 4: the upstream head of the first request in data, re-read by the strict parser. */
static void
through_fwd(const uint8_t *data, size_t size)
{
	static const struct lg_http_limits relim = { LG_HTTP_HEAD_CAP, LG_FRAME_TARGET_CAP, 1000,
		0, NULL, 1 };
	static const char *const hop[] = { "connection", "keep-alive", "te", "trailer",
		"proxy-connection", "expect", "upgrade", "x-lagless-deadline-ms" };
	static struct lg_http in, re;
	static char out[65536];
	struct lg_fwd_opts o = { .client_addr = size % 2 ? "192.0.2.1" : "2001:db8::1",
		.trusted = size % 3 == 0, .style = size % 5 == 0 ? LG_FWD_FORWARDED : LG_FWD_XFF,
		.request_id = "fuzz", .deadline_ms = -1, .body = (int)(size % 3),
		.content_length = size };
	size_t len;
	const char *v;
	unsigned pos = 0;
	int n = 0;

	lg_http_init(&in, NULL);
	fwd_head_only(&in, (const char *)data, size);
	if (in.status || !in.complete || in.req.kept_short || in.req.nkept != in.req.nfields)
		return; /* a view without every field: refused (EINVAL), checked by test_fwd */
	/* An upgrade request goes as an upstream route sends it: Upgrade kept, no body. */
	if ((o.tunnel = lg_fwd_upgrade_request(&in.req)) != 0)
		o.body = LG_FWD_BODY_NONE;
	ssize_t nw = lg_fwd_head(&in.req, &o, out, sizeof(out));
	if (in.req.method == HTTP_CONNECT && nw == -1 && errno == EINVAL)
		return; /* no tunnel is offered */
	if (nw <= 0)
		abort(); /* every kept request fits 64 KiB */
	lg_http_init(&re, &relim);
	if (fwd_head_only(&re, out, (size_t)nw) != (size_t)nw || re.status || !re.complete ||
	    re.req.method != in.req.method || re.req.path_len != in.req.path_len ||
	    memcmp(re.req.path, in.req.path, in.req.path_len) != 0 || re.req.minor != 1) {
		fprintf(stderr, "the upstream head is not the request: %.*s\n", (int)nw, out);
		abort();
	}
	if (re.req.chunked != (o.body == LG_FWD_BODY_CHUNKED) ||
	    re.req.content_length != (o.body == LG_FWD_BODY_LENGTH ? size : LG_HTTP_NO_LENGTH))
		abort();
	if (re.req.kept_short)
		return; /* the fields added took the re-read past what a view keeps (32 lines) */
	/* with the tunnel option, Upgrade and Connection: upgrade are there, and the head sent
	 * is an upgrade request again (the app sees what the client asked) */
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if ((!o.tunnel || (strcmp(hop[i], "upgrade") != 0 &&
		    strcmp(hop[i], "connection") != 0)) &&
		    lg_http_field_get(&re.req, hop[i], &len) != NULL)
			abort();
	if (o.tunnel && lg_fwd_upgrade_request(&re.req) != 1)
		abort();
	while ((v = lg_http_field_next(&re.req, o.style == LG_FWD_XFF ? "x-forwarded-for" :
	    "forwarded", &pos, &len)) != NULL)
		n++;
	if (n != 1)
		abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	lg_log_level = LG_LOG_ERROR;
	if (lg_http_keep_add(&keep, "x-user") == -1 || lg_http_keep_add(&keep, "content-type") == -1 ||
	    lg_http_keep_add(&keep, "x-forwarded-for") == -1)
		abort();
	if (lg_arena_create(&arena, 2, 1, 4096, 8192) == -1 || lg_channels_create(&ch, 1, 1) == -1)
		abort();
	/* the routes a server serves without configuration (kinds/registry.h) */
	if (lg_registry_init(&reg, err, sizeof(err)) == -1 || lg_registry_default_routes(&reg,
	    cfg.jobs.deadline_ms, cfg.http.max_body, 0, err, sizeof(err)) == -1) {
		fprintf(stderr, "registry: %s\n", err);
		abort();
	}
	cfg.reg = &reg;
	arena.procs[0].role = 1;
	env = (struct lg_loop_env){ .cfg = &cfg, .arena = &arena, .ch = &ch, .listen_fd = -1,
	    .index = 0, .nloops = 1, .page = &arena.procs[0] };
	w.ev = ev_default_loop(EVFLAG_AUTO);
	w.env = &env;
	w.lim = lim;
	w.ops = &lg_route_conn_ops;
	if (w.ev == NULL || lg_offload_setup(&w) == -1 || lg_router_build(&w) == -1)
		abort();
	lg_registry_init_process(&reg, 1, NULL);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct seen a, b;
	int whole = parse(data, size, SIZE_MAX, &a);
	int split = parse(data, size, size ? 1 + data[0] % 16 : 1, &b);

	if (whole != split) {
		fprintf(stderr, "whole %d, split %d\n", whole, split);
		abort();
	}
	if ((a.why != b.why && (a.why == NULL || b.why == NULL || strcmp(a.why, b.why) != 0)) ||
	    memcmp(&a.content_length, &b.content_length, offsetof(struct seen, fbuf) -
	    offsetof(struct seen, content_length)) != 0 || memcmp(a.fbuf, b.fbuf, a.fbuf_len) != 0 ||
	    memcmp(a.kept, b.kept, sizeof(a.kept[0]) * a.nkept) != 0) {
		fprintf(stderr, "whole and split runs read different requests: %s / %s\n",
		    a.why ? a.why : "-", b.why ? b.why : "-");
		abort();
	}
	char why[1024];
	if (lg_oracle_check(data, size, &lim, why, sizeof(why)) != 0) {
		fprintf(stderr, "the server and http-parser disagree: %s\n", why);
		abort();
	}
	through_conn(data, size);
	through_fwd(data, size);
	return 0;
}
