/* One app process: fork and exec, output into the error log, readiness probe. */
#include "master/appproc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "master/memwatch.h"

#define PROBE_RETRY_NS  (50 * LG_NS_PER_MS)
#define READ_BUDGET     (64 * 1024)

/* In the child: the user's ids (only as root: without privilege they cannot change). */
static int
become_user(const char *user)
{
	struct passwd *pw;

	if (user[0] == '\0' || geteuid() != 0)
		return 0;
	if ((pw = getpwnam(user)) == NULL) {
		fprintf(stderr, "lagless: no user %s\n", user);
		return -1;
	}
	if (setgid(pw->pw_gid) == -1 || initgroups(user, pw->pw_gid) == -1 ||
	    setuid(pw->pw_uid) == -1) {
		fprintf(stderr, "lagless: cannot become user %s: %s\n", user, strerror(errno));
		return -1;
	}
	return 0;
}

/* In the child: what an app of its own should see in its environment: not the master's
 * NOTIFY_SOCKET (systemd's is the master's to answer), and as root with a user, that user's
 * HOME, USER and LOGNAME (env lines, set after, may still change them). */
static void
child_env(const struct lg_app_conf *a)
{
	struct passwd *pw;

	unsetenv("NOTIFY_SOCKET");
	if (a->user[0] == '\0' || geteuid() != 0 || (pw = getpwnam(a->user)) == NULL)
		return; /* become_user says why */
	setenv("HOME", pw->pw_dir, 1);
	setenv("USER", pw->pw_name, 1);
	setenv("LOGNAME", pw->pw_name, 1);
}

/* In the child, after fork: never returns. */
static void
child(const struct lg_app_conf *a, const struct lg_app_proc *p, pid_t master, int out)
{
	static char buf[LG_APP_CMD * 2]; /* the words substituted, one after another */
	char *argv[LG_APP_ARGS_MAX];
	size_t used = 0;
	const char *w = a->words;
	sigset_t none;
	int null = open("/dev/null", O_RDONLY);

	setpgid(0, 0);
	if (null == -1 || dup2(null, 0) == -1 || dup2(out, 1) == -1 || dup2(out, 2) == -1)
		_exit(127);
	close_range(3, ~0u, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL); /* the master blocks what its signalfd reads */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	child_env(a);
	for (int i = 0; i < a->nenv; i++) {
		char kv[LG_APP_STR];
		char *eq;

		memcpy(kv, a->env[i], sizeof(kv));
		eq = strchr(kv, '=');
		*eq = '\0';
		setenv(kv, eq + 1, 1);
	}
	if (a->cwd[0] && chdir(a->cwd) == -1) {
		fprintf(stderr, "lagless: cannot enter %s: %s\n", a->cwd, strerror(errno));
		_exit(127);
	}
	/* the master's -900 (inherited) would have the OOM killer take the master's own
	 * processes before the app: the app is an ordinary process (proc(5)) */
	lg_memwatch_score(0);
	if (become_user(a->user) == -1)
		_exit(127);
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* after setuid, which clears it */
	if (getppid() != master)
		_exit(127);
	for (int i = 0; i < a->argc; i++, w += strlen(w) + 1) {
		if (lg_appconf_subst(w, p->sock, p->port, buf + used, sizeof(buf) - used) == -1)
			_exit(127);
		argv[i] = buf + used;
		used += strlen(argv[i]) + 1;
	}
	argv[a->argc] = NULL;
	execvp(argv[0], argv);
	fprintf(stderr, "lagless: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

int
lg_appproc_spawn(const struct lg_app_conf *a, struct lg_app_proc *p, pid_t master)
{
	int fds[2];
	pid_t pid;

	if (p->sock[0])
		unlink(p->sock); /* a stale file would make the app's bind(2) fail */
	if (pipe2(fds, O_CLOEXEC) == -1)
		return -1;
	fflush(NULL);
	if ((pid = fork()) == -1) {
		int saved = errno;

		close(fds[0]);
		close(fds[1]);
		errno = saved;
		return -1;
	}
	if (pid == 0)
		child(a, p, master, fds[1]);
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	setpgid(pid, pid); /* the child does too: whichever runs first */
	p->pid = pid;
	p->out = fds[0];
	p->nline = 0;
	p->cutting = 0;
	p->ready = 0;
	p->started_ns = lg_now_ns();
	p->probe_at = p->started_ns;
	p->kill_at = 0;
	p->stopping = 0;
	return 0;
}

/* The line of p into out (4 x LG_APP_LINE), written \xNN: its control bytes (a NUL too), the
 * C1 controls (U+0080 to U+009F: 0x9b is a terminal's CSI) and every byte above 0x7f that is
 * not part of well-formed UTF-8 (RFC 3629). An app's output never forges log lines (CR, ESC)
 * nor cuts them short (NUL), and the log stays UTF-8 text (journald, grep), as the access
 * log does. */
static void
escape_line(const struct lg_app_proc *p, size_t n, char *out)
{
	const unsigned char *u = (const unsigned char *)p->line;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		unsigned cp;
		size_t seq = c > 0x7f ? lg_utf8_seq(u + i, n - i, &cp) : 0;

		if (seq > 0 && cp > 0x9f) {
			memcpy(out + o, u + i, seq);
			o += seq;
			i += seq;
		} else if ((c < 0x20 && c != '\t') || c >= 0x7f) {
			o += (size_t)sprintf(out + o, "\\x%02x", c);
			i++;
		} else {
			out[o++] = (char)c;
			i++;
		}
	}
	out[o] = '\0';
}

static void
emit(const char *name, struct lg_app_proc *p, struct lg_app_tail *tail, int cut)
{
	char line[4 * LG_APP_LINE];
	size_t n = p->nline;

	if (n > 0 && p->line[n - 1] == '\r')
		n--; /* a CRLF line end */
	if (cut) { /* the cut falls in a UTF-8 sequence: the line ends before it */
		const unsigned char *u = (const unsigned char *)p->line;
		size_t k = n;
		unsigned cp;

		while (k > 0 && n - k < 3 && (u[k - 1] & 0xc0) == 0x80)
			k--;
		if (k > 0 && u[k - 1] >= 0xc0 && lg_utf8_seq(u + k - 1, n - k + 1, &cp) == 0)
			n = k - 1;
	}
	escape_line(p, n, line);
	log_info("app %s[%d]: %s%s", name, p->index, line, cut ? " [line cut]" : "");
	snprintf(tail->line[tail->next % LG_APP_TAIL], sizeof(tail->line[0]), "%.199s", line);
	tail->next++;
	p->nline = 0;
}

/* Bytes b[0..n) of p's output: whole lines logged, a line over LG_APP_LINE cut. */
static void
take(const char *name, struct lg_app_proc *p, struct lg_app_tail *tail, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\n') {
			if (!p->cutting)
				emit(name, p, tail, 0);
			p->cutting = 0;
			p->nline = 0;
		} else if (!p->cutting) {
			p->line[p->nline++] = b[i];
			if (p->nline == LG_APP_LINE - 1) {
				emit(name, p, tail, 1);
				p->cutting = 1;
			}
		}
	}
}

void
lg_appproc_read(const char *name, struct lg_app_proc *p, struct lg_app_tail *tail, int drain)
{
	char b[4096];
	size_t total = 0;
	ssize_t n;

	while (p->out >= 0 && (drain || total < READ_BUDGET)) {
		if ((n = read(p->out, b, sizeof(b))) > 0) {
			take(name, p, tail, b, (size_t)n);
			total += (size_t)n;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			lg_appproc_close_output(name, p, tail);
		} else if (errno == EAGAIN) {
			break;
		}
	}
}

void
lg_appproc_close_output(const char *name, struct lg_app_proc *p, struct lg_app_tail *tail)
{
	if (p->nline > 0 && !p->cutting)
		emit(name, p, tail, 0);
	p->nline = 0;
	p->cutting = 0;
	if (p->out >= 0)
		close(p->out);
	p->out = -1;
}

void
lg_appproc_probe_close(struct lg_app_proc *p)
{
	if (p->probe >= 0)
		close(p->probe);
	p->probe = -1;
	p->probe_sent = 0;
	p->nreply = 0;
}

/* A new connection to p's address; -1 when it cannot even begin (retried). */
static int
probe_connect(const struct lg_app_proc *p)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p->port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(p->sock[0] ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	int rc;

	if (fd == -1)
		return -1;
	if (p->sock[0]) {
		snprintf(un.sun_path, sizeof(un.sun_path), "%s", p->sock);
		rc = connect(fd, (struct sockaddr *)&un, sizeof(un));
	} else {
		rc = connect(fd, (struct sockaddr *)&in, sizeof(in));
	}
	if (rc == -1 && errno != EINPROGRESS && errno != EAGAIN) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One step of an open probe. Returns 1 passed, 0 waiting, -1 failed. */
static int
probe_step(const struct lg_app_conf *a, struct lg_app_proc *p)
{
	char req[LG_APP_STR + 96];
	int err = 0, n;
	socklen_t len = sizeof(err);

	if (!p->probe_sent) {
		struct pollfd q = { .fd = p->probe, .events = POLLOUT };

		if (poll(&q, 1, 0) == 0)
			return 0; /* still connecting */
		if (getsockopt(p->probe, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0)
			return -1;
		if (a->ready_path[0] == '\0')
			return 1; /* no path: an accepted connection is ready */
		n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: "
		    "lagless-ready\r\nConnection: close\r\n\r\n", a->ready_path);
		if (send(p->probe, req, (size_t)n, MSG_NOSIGNAL) == n) {
			p->probe_sent = 1;
			return 0;
		}
		return errno == EAGAIN || errno == ENOTCONN ? 0 : -1;
	}
	char sink[512];
	ssize_t got;

	/* the first bytes kept; the rest read to the end, so the app's answer is not cut */
	while ((got = recv(p->probe, sink, sizeof(sink), 0)) > 0) {
		size_t take = sizeof(p->reply) - 1 - p->nreply;

		take = (size_t)got < take ? (size_t)got : take;
		memcpy(p->reply + p->nreply, sink, take);
		p->nreply += take;
	}
	if (got == -1)
		return errno == EAGAIN ? 0 : -1;
	p->reply[p->nreply] = '\0';
	/* the answer is whole (Connection: close); RFC 9112 section 4: HTTP/1.x SP 3DIGIT */
	return p->nreply >= 12 && strncmp(p->reply, "HTTP/1.", 7) == 0 && p->reply[9] == '2' ?
	    1 : -1;
}

void
lg_appproc_probe(const struct lg_app_conf *a, struct lg_app_proc *p, uint64_t now,
    uint64_t *next)
{
	int r;

	if (p->pid <= 0 || p->ready || p->stopping)
		return;
	if (a->addr == LG_APP_ADDR_NONE) {
		p->ready = 1; /* nothing to probe: running is ready */
		return;
	}
	if (p->probe < 0) {
		if (now < p->probe_at) {
			*next = p->probe_at < *next ? p->probe_at : *next;
			return;
		}
		if ((p->probe = probe_connect(p)) == -1) {
			p->probe_at = now + PROBE_RETRY_NS;
			*next = p->probe_at < *next ? p->probe_at : *next;
			return;
		}
		p->probe_end = now + a->probe_timeout_ms * LG_NS_PER_MS;
	}
	r = probe_step(a, p);
	if (r == 1) {
		lg_appproc_probe_close(p);
		p->ready = 1;
		p->fails = 0;
		p->live_at = 0;
		p->live_fails = 0;
		log_info("app %s[%d] pid=%d is ready", a->name, p->index, (int)p->pid);
		return;
	}
	if (r == -1 || now >= p->probe_end) {
		lg_appproc_probe_close(p);
		p->probe_at = now + PROBE_RETRY_NS;
		*next = p->probe_at < *next ? p->probe_at : *next;
		return;
	}
	*next = now + 10 * LG_NS_PER_MS < *next ? now + 10 * LG_NS_PER_MS : *next;
}

int
lg_appproc_live(const struct lg_app_conf *a, struct lg_app_proc *p, uint64_t now,
    uint64_t *next)
{
	uint64_t every = a->live_interval_ms * LG_NS_PER_MS;
	int r;

	if (p->pid <= 0 || !p->ready || p->stopping || every == 0 || a->ready_path[0] == '\0')
		return 0;
	if (p->probe < 0) {
		if (p->live_at == 0)
			p->live_at = now + every;
		if (now < p->live_at) {
			*next = p->live_at < *next ? p->live_at : *next;
			return 0;
		}
		p->live_at = now + every;
		p->probe_end = now + a->probe_timeout_ms * LG_NS_PER_MS;
		if ((p->probe = probe_connect(p)) == -1)
			r = -1;
		else if ((r = probe_step(a, p)) == 0) {
			*next = now + 10 * LG_NS_PER_MS < *next ? now + 10 * LG_NS_PER_MS : *next;
			return 0;
		}
	} else if ((r = probe_step(a, p)) == 0 && now < p->probe_end) {
		*next = now + 10 * LG_NS_PER_MS < *next ? now + 10 * LG_NS_PER_MS : *next;
		return 0;
	}
	lg_appproc_probe_close(p);
	*next = p->live_at < *next ? p->live_at : *next;
	if (r == 1) {
		p->live_fails = 0;
		return 0;
	}
	p->live_fails++;
	log_warn("app %s[%d] pid=%d failed its liveness probe (GET %s: %s; %u in a row of %llu)",
	    a->name, p->index, (int)p->pid, a->ready_path, r == 0 ? "no answer within "
	    "probe_timeout_ms" : "no 2xx answer", p->live_fails,
	    (unsigned long long)a->live_failures);
	return p->live_fails >= a->live_failures;
}

void
lg_appproc_tail_text(const struct lg_app_tail *t, char *out, size_t cap)
{
	size_t n = 0;
	unsigned first = t->next > LG_APP_TAIL ? t->next - LG_APP_TAIL : 0;

	out[0] = '\0';
	for (unsigned i = first; i < t->next && n < cap; i++) {
		int w = snprintf(out + n, cap - n, "%s%s", n ? " | " : "", t->line[i % LG_APP_TAIL]);

		if (w < 0)
			break;
		n += (size_t)w;
	}
}

int
lg_appproc_free_port(void)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(in);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&in, sizeof(in)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&in, &len) == 0)
		port = ntohs(in.sin_port);
	close(fd);
	return port;
}
