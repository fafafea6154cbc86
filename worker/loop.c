#include "worker/loop.h"
#include "worker/upstream/upstream.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "kinds/registry.h"
#include "shm/stats.h"
#include "worker/core/client.h"
#include "worker/flight/coalesce.h"
#include "worker/core/conn.h"
#include "worker/job/fairshare.h"
#include "worker/route/inline.h"
#include "worker/core/keptfields.h"
#include "worker/loop_admin.h"
#include "worker/observe.h"
#include "worker/job/offload.h"
#include "worker/route/routes.h"

#define ACCEPT_BATCH 64   /* connections accepted per readiness event, for fairness */
#define TICK_S       0.1  /* heartbeat period */

/* The watchers of env->more_fds and of the admin listener (the last one): started and
 * stopped with accept_io (one loop per process). */
static ev_io more_io[LG_LISTEN_MAX + 1];
static int nwatch;                 /* more_io in use */

static void
pause_accept(struct lg_worker *w)
{
	if (LG_ACC(w)->accepting) {
		ev_io_stop(w->ev, &LG_ACC(w)->io);
		for (int i = 0; i < nwatch; i++)
			ev_io_stop(w->ev, &more_io[i]);
	}
	LG_ACC(w)->accepting = 0;
}

static void
resume_accept(struct lg_worker *w)
{
	if (!LG_ACC(w)->accepting && !w->draining && w->nconns < w->env->cfg->conn.max_conns) {
		ev_io_start(w->ev, &LG_ACC(w)->io);
		for (int i = 0; i < nwatch; i++)
			ev_io_start(w->ev, &more_io[i]);
		LG_ACC(w)->accepting = 1;
	}
}

/* Over --max-conns: a client refused this way gets an answer instead of a hang (a liveness
 * probe fails fast and clearly rather than by timing out). Fixed bytes, never parsed. */
static const char refused_503[] =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 22\r\n"
    LG_CONN_RETRY_AFTER
    "Connection: close\r\n"
    "\r\n"
    "too many connections\r\n";

/* At most one warning per this many seconds per loop worker for a repeated condition. */
#define WARN_EVERY_S 10.0

/* A warning for something that repeats (EMFILE every tick, refusals under a flood): logged at
 * most once per WARN_EVERY_S, with the count of repeats it stood for. */
static void
warn_limited(struct lg_worker *w, ev_tstamp *last, uint64_t *repeats, const char *what)
{
	ev_tstamp now = ev_now(w->ev);

	if (*last != 0 && now - *last < WARN_EVERY_S) {
		(*repeats)++;
		return;
	}
	if (*repeats)
		log_warn("%s (repeated %llu times in the last %.0f s)", what, (unsigned long long)*repeats,
		    now - *last);
	else
		log_warn("%s", what);
	*last = now;
	*repeats = 0;
}

/* Accept whatever is still queued on the listen socket while this loop worker is full, answer
 * each with the fixed 503 (one non-blocking send) and close it. Run from the tick, not from
 * readiness: a loop worker with room has had up to a tick to take the connection first, so a
 * full worker refuses only what no other would take. The receive buffer is read empty before
 * the close so the kernel sends FIN, not RST, and the answer is not lost (RFC 9112 9.6). */
static void
refuse_queued(struct lg_worker *w)
{
	char sink[512];
	int n = 0;

	for (int l = -1; l < w->env->nmore; l++)
	for (int a = 0; a < ACCEPT_BATCH; a++, n++) {
		int fd = accept4(l < 0 ? w->env->listen_fd : w->env->more_fds[l], NULL, NULL,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1)
			break;
		(void)send(fd, refused_503, sizeof(refused_503) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		for (int k = 0; k < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++)
			;
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	if (n == 0)
		return;
	lg_stats_add(&w->env->page->conns_refused, (uint64_t)n);
	char what[128];
	snprintf(what, sizeof(what), "%d connection(s) over --max-conns %d refused with 503", n,
	    w->env->cfg->conn.max_conns);
	warn_limited(w, &LG_ACC(w)->refuse_warned_at, &LG_ACC(w)->refuse_warn_repeats, what);
}

/* Whether listener lfd takes a PROXY protocol header first: bit 0 of cfg->master.listen_proxy is the
 * first listener (env->listen_fd), bit i + 1 more_fds[i] (master/listen.c numbers them so). */
static int
takes_proxy(const struct lg_loop_env *env, int lfd)
{
	uint32_t bits = env->cfg->master.listen_proxy;

	if (bits == 0)
		return 0;
	if (lfd == env->listen_fd)
		return bits & 1u;
	for (int i = 0; i < env->nmore; i++)
		if (lfd == env->more_fds[i])
			return (bits >> (i + 1)) & 1u;
	return 0; /* the admin listener */
}

static void
accept_conns(struct lg_worker *w, int lfd)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		if (w->nconns >= w->env->cfg->conn.max_conns) {
			pause_accept(w); /* resumed by the tick once connections close */
			return;
		}
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: stop polling the ready socket, or the loop
				 * spins at 100% CPU; the tick retries. */
				char what[128];
				snprintf(what, sizeof(what), "accept: %s; pausing accept",
				    strerror(errno));
				warn_limited(w, &LG_ACC(w)->emfile_warned_at, &LG_ACC(w)->emfile_warn_repeats, what);
				LG_ACC(w)->paused_until_tick = 1;
				pause_accept(w);
			}
			return; /* EAGAIN: another loop worker took it, or the queue is empty */
		}
		if ((w->env->admin_fd >= 0 && lg_loop_mark_conn(fd, lfd == w->env->admin_fd) == -1) ||
		    lg_client_accepted(w, fd, takes_proxy(w->env, lfd), &peer) == -1) {
			close(fd);
			continue;
		}
		lg_conn_start(w, fd);
	}
}

/* The libev entry points, timed for slow-callback warnings (worker/observe.h). */
static void
accept_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	struct lg_worker *w = io->data;

	lg_obs_cb_begin(w, NULL);
	accept_conns(w, io->fd);
	lg_obs_cb_end(w, "accept");
}

/* A doorbell on the completion channel: single-flight's (WAKE, UNWANTED) or an upstream's
 * freed place (UPWAKE). */
static void
loop_message(struct lg_worker *w, const struct lg_msg *m)
{
	if (m->type == LG_MSG_UPWAKE)
		lg_up_message(w, m);
	else
		lg_coal_message(w, m);
}

/* The completion channel's headers that are no waiting connection's: single-flight's (a
 * flight's job, another loop's WAKE or UNWANTED), an upstream's UPWAKE. */
static const struct lg_offload_sink completion_sink = {
	.unclaimed = lg_coal_completion,
	.message = loop_message,
};

static void
done_cb(struct ev_loop *ev, ev_io *io, int revents)
{
	struct lg_worker *w = io->data;

	lg_obs_cb_begin(w, NULL);
	lg_offload_completions(w, &completion_sink);
	lg_obs_cb_end(w, "job completions");
}

static void
tick_cb(struct ev_loop *ev, ev_timer *t, int revents)
{
	struct lg_worker *w = t->data;

	atomic_store(&w->env->page->heartbeat_ns, lg_now_ns());
	lg_conn_tick(w);
	lg_up_tick(w);
	lg_fair_tick(w);
	if (!w->draining && !LG_ACC(w)->paused_until_tick && w->nconns >= w->env->cfg->conn.max_conns)
		refuse_queued(w);
	LG_ACC(w)->paused_until_tick = 0;
	resume_accept(w);
}

/* Graceful drain: stop accepting, close idle connections, let the others finish. */
static void
drain_cb(struct ev_loop *ev, ev_signal *sig, int revents)
{
	struct lg_worker *w = sig->data;

	if (w->draining)
		return;
	log_info("draining %d connection(s)", w->nconns);
	w->draining = 1;
	lg_obs_draining(w);
	pause_accept(w);
	/* Our copy of the listen socket goes now: once every loop has closed it (and the master),
	 * new connections are refused instead of queued behind a drain. */
	close(w->env->listen_fd);
	for (int i = 0; i < w->env->nmore; i++)
		close(w->env->more_fds[i]);
	if (w->env->admin_fd >= 0)
		close(w->env->admin_fd);
	lg_conn_drain(w);
	lg_up_drain(w);
	if (w->nconns == 0)
		ev_break(ev, EVBREAK_ALL);
}

/* A loop worker holds every connection it serves: under memory pressure the OOM killer is to
 * take a compute process (oom_score_adj 1000, one job lost) long before it (proc(5)
 * oom_score_adj; the master sits lower still at -900, inherited until this write). Without
 * CAP_SYS_RESOURCE a value below the inherited one is refused: then it stays as it was. */
static void
lower_oom_score(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "-500", 4) != 4)
		log_debug("cannot set oom_score_adj to -500: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Grows this process's descriptor table once, to room for max_conns connections plus the
 * descriptors a loop holds besides (64), bounded by RLIMIT_NOFILE. The kernel doubles the table
 * when a new descriptor passes its end (64, 128, 256, ...), and in a process whose threads
 * share it (the backing helper, worker/job/backing.c) every growth first waits for an RCU grace
 * period (expand_fdtable() in fs/file.c: synchronize_rcu() when files->count > 1): milliseconds
 * inside accept4(2) on the loop thread, 7.7 ms measured for the 64th descriptor of a burst of
 * 100 new connections. Grown here, while the process has one thread, it costs no grace
 * period, and a table never shrinks. Costs 8 bytes of kernel memory per slot (about 128 KiB
 * for the default 10,000); /proc/PID/status FDSize shows it. fd: any open descriptor. */
static void
presize_fd_table(int fd, int max_conns)
{
	struct rlimit rl;
	long want = (long)max_conns + 64;
	int hi;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)want > rl.rlim_cur)
		want = (long)rl.rlim_cur;
	if (want <= 64)
		return;
	/* the lowest free descriptor >= want - 1: never one that is open */
	if ((hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(want - 1))) == -1) {
		log_debug("presizing the descriptor table to %ld: %s", want, strerror(errno));
		return;
	}
	close(hi);
}

/* The accept watchers: the listener, then the --listen extras and the admin listener (each
 * without Nagle, as the main listener: see setup). */
static void
watch_listeners(struct lg_worker *w)
{
	const struct lg_loop_env *env = w->env;
	int one = 1;

	ev_io_init(&LG_ACC(w)->io, accept_cb, env->listen_fd, EV_READ);
	LG_ACC(w)->io.data = w;
	for (int i = 0; i <= env->nmore; i++) {
		int fd = i < env->nmore ? env->more_fds[i] : env->admin_fd;

		if (fd < 0)
			break;
		ev_io_init(&more_io[nwatch], accept_cb, fd, EV_READ);
		more_io[nwatch++].data = w;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
}

/* The loop's own watchers: job completions, SIGTERM and SIGINT (drain), the heartbeat tick. */
static void
watch_loop(struct lg_worker *w)
{
	const struct lg_loop_env *env = w->env;

	lg_offload_watch(w, done_cb, env->ch->done[env->index][0]);
	ev_signal_init(&w->sig_term, drain_cb, SIGTERM);
	ev_signal_init(&w->sig_int, drain_cb, SIGINT);
	w->sig_term.data = w->sig_int.data = w;
	ev_signal_start(w->ev, &w->sig_term);
	ev_signal_start(w->ev, &w->sig_int);
	ev_timer_init(&w->tick, tick_cb, TICK_S, TICK_S);
	w->tick.data = w;
	ev_timer_start(w->ev, &w->tick);
}

/* The header fields this process's parser keeps (worker/core/keptfields.h): the ones the server
 * reads and every route's listed ones; all of them when the names do not fit the list. */
static void
keep_fields(struct lg_worker *w)
{
	static struct lg_http_keep keep; /* one worker per process */

	if (w->env->cfg->reg != NULL && w->env->cfg->reg->nupstreams > 0)
		return; /* a proxied request forwards every field: all kept (worker/upstream/) */
	if (lg_keptfields_build(&keep, w->env->cfg->reg) == 0)
		w->lim.keep = &keep;
	else
		log_warn("more header field names listed than %d: every field is kept, the first "
		    "%d that fit %d bytes", LG_HTTP_KEEP_NAMES, LG_HTTP_KEPT, LG_HTTP_FIELD_BUF);
}

static int
setup(struct lg_worker *w, const struct lg_loop_env *env)
{
	memset(w, 0, sizeof(*w));
	w->env = env;
	w->lim.max_head = (size_t)env->cfg->http.max_head;
	w->lim.max_target = (size_t)env->cfg->http.max_uri;
	w->lim.max_fields = (unsigned)env->cfg->http.max_fields;
	w->lim.keep_slashes = !env->cfg->http.merge_slashes;
	w->lim.max_body = env->cfg->http.max_body;
	keep_fields(w);
	w->ops = &lg_route_conn_ops;
	if (lg_router_build(w) == -1)
		return -1;
	struct lg_init_guard guard = { env->arena->master->modules, &env->page->in_init };
	/* What a where=loop kind forks ends with this process, as a compute process's does
	 * (cpupool/compute.c): subreaper, own process group SIGKILLed by the master when it
	 * reaps us; libev's default loop reaps our children (its SIGCHLD watcher). */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1 || setpgid(0, 0) == -1)
		log_warn("cannot own what the kinds fork: %s", strerror(errno));
	lg_registry_init_process(env->cfg->reg, 1, &guard);
	if ((w->ev = ev_default_loop(EVFLAG_AUTO)) == NULL)
		return -1;
	if (lg_offload_setup(w) == -1)
		return -1;
	if (lg_coal_setup(w) == -1 || lg_coal_cluster_setup(w) == -1)
		return -1;
	if (lg_inline_start(w) == -1)
		return -1;
	/* No Nagle: a response written while an earlier one of the same connection is unacked
	 * (pipelining, or a batch split by a full socket buffer) would otherwise wait for the
	 * client's delayed ACK, 40 ms (RFC 1122 4.2.3.2 and 4.2.3.4). Linux copies the option from
	 * the listener to every accepted socket, so this is one call per loop worker rather than
	 * one per connection; a listener passed by systemd gets it too. Responses are written
	 * whole (a head and its body in one writev), so no tiny segments result. */
	int one = 1;
	if (setsockopt(env->listen_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1)
		log_debug("TCP_NODELAY on the listener: %s", strerror(errno));
	presize_fd_table(env->listen_fd, env->cfg->conn.max_conns);
	lower_oom_score();
	if (lg_offload_backing_start(w) == -1)
		return -1;
	lg_offload_map_views(w);
	watch_listeners(w);
	watch_loop(w);
	resume_accept(w);
	lg_obs_start(w);
	return 0;
}

int
lg_loop_main(const struct lg_loop_env *env)
{
	/* Allocated, as the connections' pool blocks are: the rooms' parts (LG_PART) are bytes
	 * each room stores its own struct in, which allocated storage allows (C11 6.5p6: its
	 * effective type is that of what is stored) and a declared object would not. Freed by
	 * the process's exit. */
	struct lg_worker *w = malloc(sizeof(*w));

	if (w == NULL || setup(w, env) == -1) {
		log_error("cannot set up the event loop: %s", strerror(errno));
		return 1;
	}
	atomic_store(&env->page->heartbeat_ns, lg_now_ns());
	log_info("started");
	ev_run(w->ev, 0);
	log_info("drained, exiting");
	return 0;
}
