/* The compute process's side of interpreter = PATH (relay.h): starts the python3 executable
 * with the module's extension (serve.c), hands it each job and carries out the host calls it
 * asks for on the real answer. The job's body and output region are the compute process's
 * shared memory, mapped by python3 too: nothing of them is copied (but under lagless
 * --run-kind, whose job memory is private: there it is copied through a scratch memfd).
 *
 * The promises of a compute process hold because python3 is part of it: its child, in its
 * process group (the master SIGKILLs the group when it reaps the compute process, at a
 * deadline among others), killed by the kernel if the compute process dies first
 * (PR_SET_PDEATHSIG), under the same memory limit (RLIMIT_DATA), nice, scheduling policy and
 * time slice, all inherited across fork and exec (a custom slice of sched_setattr(2) too).
 * When python3 dies during a job the compute process dies the same way (the same signal, or
 * the same exit status), so the master counts that death against the job's kind and route
 * exactly as it does for an embedded interpreter. */
#define _GNU_SOURCE
#include "relay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

/* A piece of this process's address space that python3 maps too: [start, end) is at file
 * offset off of map id. */
struct vma {
	uintptr_t start, end;
	uint64_t off;
	uint32_t id;
};

#define MAX_MAPS 8
#define SCRATCH_ID (MAX_MAPS - 1)

static pid_t child = -1;
static int sock = -1;
static int pidfd = -1;        /* child's (pidfd_open(2), Linux 5.3): its death, whoever holds
                               * the other end of the socket */
static dev_t err_dev;         /* the standard error python3 has, to see it reopened */
static ino_t err_ino;
static const struct lagless_host *host;
static struct vma *vmas;
static size_t nvmas;
static uint32_t nmaps;        /* map ids given out (MAP), SCRATCH_ID excepted */
/* The copy of private job memory (--run-kind): a memfd mapped here at scratch, scratch_len
 * bytes, and by python3 as SCRATCH_ID. */
static unsigned char *scratch;
static size_t scratch_len;
static int scratch_fd = -1;
static unsigned char msg[LG_PYR_MAX];
/* The python.call routes' keys as init was told them (host->route_at answers only in init):
 * a job names its route to python3 by its index here. */
static const struct lagless_conf **routes;
static size_t nroutes;
/* During a job whose memory python3 sees through the scratch memfd: where its output lies
 * there, to be copied back before the host reads it. */
static const unsigned char *copy_from;

/* One message of head op, a and len, then the body bytes of n (may be 0), plus fd when >= 0
 * (SCM_RIGHTS). Returns 0 or -1 (errno). */
static int
send_msg(uint32_t op, int32_t a, uint64_t len, const void *body, size_t n, int fd)
{
	struct lg_pyr_head h = { op, a, len };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)body, n } };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n > 0 ? 2 : 1 };

	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while (sendmsg(sock, &mh, MSG_NOSIGNAL) == -1)
		if (errno != EINTR)
			return -1;
	return 0;
}

/* The next message into msg: its length, 0 when python3 closed its end or died (a process it
 * started may still hold a copy of its end: its pidfd tells), -1 on error. */
static ssize_t
recv_msg(void)
{
	ssize_t n;

	for (;;) {
		struct pollfd p[2] = { { sock, POLLIN, 0 }, { pidfd, POLLIN, 0 } };

		if (poll(p, pidfd >= 0 ? 2 : 1, -1) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (p[0].revents == 0 && (p[1].revents & POLLIN))
			return 0; /* dead, and nothing more it wrote is waiting */
		if (p[0].revents != 0)
			break;
	}
	while ((n = recv(sock, msg, sizeof(msg), 0)) == -1 && errno == EINTR)
		;
	if (n > 0 && (size_t)n < sizeof(struct lg_pyr_head)) {
		errno = EPROTO;
		return -1;
	}
	return n;
}

/* python3 ended (its end of the socket closed, or a read failed): reaps it and, during a job,
 * ends this process the same way, so the master counts the death where it counts one of an
 * embedded interpreter (the job's kind and route). */
static void __attribute__((noreturn))
die_like_child(const char *during)
{
	int st = 0;

	while (waitpid(child, &st, 0) == -1 && errno == EINTR)
		;
	if (WIFSIGNALED(st)) {
		host->log(LAGLESS_LOG_ERROR, "the python3 process died of signal %d (%s) %s",
		    WTERMSIG(st), strsignal(WTERMSIG(st)), during);
		signal(WTERMSIG(st), SIG_DFL);
		raise(WTERMSIG(st));
	}
	host->log(LAGLESS_LOG_ERROR, "the python3 process exited with status %d %s",
	    WIFEXITED(st) ? WEXITSTATUS(st) : -1, during);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

/* The child's side of the fork: fd as 3 (the socket, or the check's pipe), python-exec.so's
 * memfd as fd 4 (the extension loaded from /proc/self/fd/4 and that descriptor closed once it
 * is) and no other descriptor of lagless's; python3 -I (isolated: no PYTHON* variable, no user
 * site, no script directory on sys.path) -u (unbuffered: it may be killed at any instant), the
 * extension loaded from its file by the importlib machinery (no directory added to sys.path),
 * then call[0] of it called with fd 3 and the strings call[1..] (NULL-terminated, at most 3). */
static void __attribute__((noreturn))
exec_child(const char *interpreter, int so, int fd, pid_t parent, const char *const *call)
{
	static const char boot[] =
	    "import sys\n"
	    "from importlib.machinery import ExtensionFileLoader\n"
	    "from importlib.util import spec_from_loader, module_from_spec\n"
	    "so, fd, call = sys.argv[1], int(sys.argv[2]), sys.argv[3:]\n"
	    "sys.argv[:] = ['']\n"
	    "loader = ExtensionFileLoader('lagless_exec', so)\n"
	    "m = module_from_spec(spec_from_loader('lagless_exec', loader))\n"
	    "loader.exec_module(m)\n"
	    "import os\n"
	    "os.close(4)\n"
	    "del os, sys, ExtensionFileLoader, spec_from_loader, module_from_spec, so, loader\n"
	    "getattr(m, call[0])(fd, *call[1:])\n";
	const char *argv[12] = { interpreter, "-I", "-u", "-c", boot, "/proc/self/fd/4", "3" };
	sigset_t none;

	for (size_t i = 0; call[i] != NULL && i < 4; i++)
		argv[7 + i] = call[i];
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent) /* it died before the prctl took effect (prctl(2)) */
		_exit(1);
	/* both above 4 first: either may be 3 or 4 now */
	if ((fd = fcntl(fd, F_DUPFD, 5)) == -1 || (so = fcntl(so, F_DUPFD, 5)) == -1 ||
	    dup2(fd, 3) == -1 || dup2(so, 4) == -1)
		_exit(126);
	syscall(SYS_close_range, 5, ~0U, 0); /* Linux 5.9 */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execv(interpreter, (char *const *)argv);
	dprintf(2, "cannot run %s: %s\n", interpreter, strerror(errno));
	_exit(127);
}

/* python-exec.so, built first and carried inside this module (its bytes are the build's file,
 * .incbin): python3 loads it from a memfd, so the two halves of the relay always come from
 * one build, with no second file to install or to be replaced under a running server. */
#ifndef LG_PY_EXEC_SO /* the Makefile gives the built file's path */
#define LG_PY_EXEC_SO "python-exec.so"
#endif
__asm__(".section .rodata\n"
    ".balign 16\n"
    ".hidden lg_py_exec_so\n"
    ".hidden lg_py_exec_so_end\n"
    "lg_py_exec_so:\n"
    ".incbin \"" LG_PY_EXEC_SO "\"\n"
    "lg_py_exec_so_end:\n"
    ".previous\n");
extern const unsigned char lg_py_exec_so[], lg_py_exec_so_end[];

/* A memfd holding python-exec.so; -1 with errno. */
static int
exec_so_fd(void)
{
	size_t len = (size_t)(lg_py_exec_so_end - lg_py_exec_so), off = 0;
	int fd = memfd_create("lagless-python-exec.so", MFD_CLOEXEC);

	while (fd >= 0 && off < len) {
		ssize_t n = write(fd, lg_py_exec_so + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	return fd;
}

/* The key/value pairs of conf as strings into buf (after used bytes). */
static int
put_conf(const struct lagless_conf *conf, size_t *used)
{
	const char *k, *v;

	for (size_t i = 0; host->conf_at(conf, i, &k, &v) == 0; i++)
		if (lg_pyr_put(msg, sizeof(msg), used, k, strlen(k)) == -1 ||
		    lg_pyr_put(msg, sizeof(msg), used, v, strlen(v)) == -1)
			return -1;
	return 0;
}

/* The setup messages (CONF, ROUTE), recorded at init to be sent again to a python3 started
 * after one died between jobs: each a struct lg_pyr_head (len: its body's bytes) and body. */
static unsigned char *setup;
static size_t setup_len;
static char *interpreter_path;

static int
record(uint32_t op, int32_t a, const void *body, size_t n)
{
	struct lg_pyr_head h = { op, a, n };
	unsigned char *grown = realloc(setup, setup_len + sizeof(h) + n);

	if (grown == NULL)
		return -1;
	setup = grown;
	memcpy(setup + setup_len, &h, sizeof(h));
	memcpy(setup + setup_len + sizeof(h), body, n);
	setup_len += sizeof(h) + n;
	return 0;
}

/* The module's keys and the python.call routes, as python3 needs them for setup, recorded;
 * routes[] filled. */
static int
record_setup(const struct lagless_conf *conf)
{
	const char *path, *kind;
	const struct lagless_conf *rc;
	size_t used = 0;

	if (put_conf(conf, &used) == -1 || record(LG_PYR_CONF, 0, msg, used) == -1)
		return -1;
	for (size_t i = 0; host->route_at(i, &path, &kind, &rc) == 0; i++) {
		const struct lagless_conf **grown = realloc(routes, (i + 1) * sizeof(*routes));

		if (grown == NULL)
			return -1;
		routes = grown;
		routes[nroutes++] = rc;
		used = 0;
		if (lg_pyr_put(msg, sizeof(msg), &used, path, strlen(path)) == -1 ||
		    lg_pyr_put(msg, sizeof(msg), &used, kind, strlen(kind)) == -1 ||
		    put_conf(rc, &used) == -1 || record(LG_PYR_ROUTE, (int32_t)i, msg, used) == -1)
			return -1;
	}
	return 0;
}

/* A LOG message's line onto the error log. */
static void
relay_log(ssize_t n)
{
	const struct lg_pyr_head *h = (const void *)msg;
	const char *s;
	size_t at = sizeof(*h), len;

	if (lg_pyr_get(msg, (size_t)n, &at, &s, &len) == 0)
		host->log(h->a, "%s", s);
}

/* Forgets an ended python3: its socket and pidfd closed. */
static void
drop_child(void)
{
	if (sock >= 0)
		close(sock);
	if (pidfd >= 0)
		close(pidfd);
	sock = pidfd = -1;
	child = -1;
}

/* Starts python3 and sets it up with the recorded messages: 0 once it is READY, or -1 with a
 * message in err. */
static int
spawn(char *err, size_t errlen)
{
	const char *interpreter = interpreter_path;
	int sv[2], so;
	pid_t self = getpid();

	if ((so = exec_so_fd()) == -1) {
		snprintf(err, errlen, "a memfd for python-exec.so: %s", strerror(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		close(so);
		return -1;
	}
	if ((child = fork()) == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		close(so);
		return -1;
	}
	if (child == 0)
		exec_child(interpreter, so, sv[1], self, (const char *[]){ "serve", NULL });
	close(sv[1]);
	close(so);
	sock = sv[0];
	pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	if (pidfd >= 0)
		fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	struct stat est;
	if (fstat(2, &est) == 0) {
		err_dev = est.st_dev;
		err_ino = est.st_ino;
	}
	for (size_t at = 0; at < setup_len;) {
		struct lg_pyr_head h;

		memcpy(&h, setup + at, sizeof(h));
		if (send_msg(h.op, h.a, 0, setup + at + sizeof(h), (size_t)h.len, -1) == -1)
			break;
		at += sizeof(h) + (size_t)h.len;
	}
	send_msg(LG_PYR_START, 0, 0, NULL, 0, -1); /* a failure: the EOF below tells */
	for (;;) {
		ssize_t n = recv_msg();
		const struct lg_pyr_head *m = (const void *)msg;
		const char *why;
		size_t at = sizeof(*m), len;

		if (n <= 0) {
			int st = 0;

			if (n < 0)
				kill(child, SIGKILL);
			while (waitpid(child, &st, 0) == -1 && errno == EINTR)
				;
			snprintf(err, errlen, "%s ended before it was ready (%s %d; its standard "
			    "error is above)", interpreter, WIFSIGNALED(st) ? "signal" : "status",
			    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			drop_child();
			return -1;
		}
		if (m->op == LG_PYR_LOG)
			relay_log(n);
		else if (m->op == LG_PYR_READY)
			return 0;
		else {
			if (m->op == LG_PYR_FAIL)
				snprintf(err, errlen, "%s", lg_pyr_get(msg, (size_t)n, &at, &why,
				    &len) == 0 ? why : "?");
			else
				snprintf(err, errlen, "%s sent message %u before it was ready",
				    interpreter, m->op);
			kill(child, SIGKILL);
			while (waitpid(child, NULL, 0) == -1 && errno == EINTR)
				;
			drop_child();
			return -1;
		}
	}
}

void
lg_relay_check(const char *interpreter, int fd, pid_t parent, const char *spec,
    const char *python_path)
{
	int so = exec_so_fd();

	if (so == -1) {
		dprintf(fd, "a memfd for python-exec.so: %s%c", strerror(errno), '\0');
		_exit(0);
	}
	exec_child(interpreter, so, fd, parent, (const char *[]){ "check", spec,
	    python_path ? python_path : "", NULL });
}

int
lg_relay_start(const struct lagless_host *h, const struct lagless_conf *conf,
    const char *interpreter, char *err, size_t errlen)
{
	host = h;
	if ((interpreter_path = strdup(interpreter)) == NULL || record_setup(conf) == -1) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return spawn(err, errlen);
}

/* Before a job: when python3 ended since the last one (killed by an operator or the OOM
 * killer while idle, a thread of the user's that crashed it), a new one is started and set
 * up, so the job does not pay for a death it did not cause; what python3 had mapped is
 * sent again. Returns 0, or -1 with the job's message set when none could start. The compute
 * process reaps its children after each job (cpupool/compute.c), so a python3 already reaped
 * is gone too (ECHILD). */
static int
alive(struct lagless_output *out)
{
	int st = 0;
	pid_t r = child > 0 ? waitpid(child, &st, WNOHANG) : -1;
	char err[512];

	if (child > 0 && r == 0)
		return 0;
	if (r == child)
		host->log(LAGLESS_LOG_WARN, "the python3 process %d ended between jobs (%s %d); "
		    "starting a new one", (int)child, WIFSIGNALED(st) ? "signal" : "status",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	else
		host->log(LAGLESS_LOG_WARN, "the python3 process ended between jobs; starting a "
		    "new one");
	drop_child();
	nvmas = 0;
	nmaps = 0;
	if (scratch != NULL)
		munmap(scratch, scratch_len);
	scratch = NULL;
	scratch_len = 0;
	if (spawn(err, sizeof(err)) == 0)
		return 0;
	host->log(LAGLESS_LOG_ERROR, "interpreter %s: %s", interpreter_path, err);
	host->set_message(out, "the Python interpreter could not be started again\n");
	return -1;
}

/* The mappings of /proc/self/maps (proc(5)) backed by the same shared file as the one holding
 * address p, into vmas under a new map id, the file sent to python3 (its descriptor found in
 * /proc/self/fd by device and inode). Returns the vma holding p, or NULL when p is not in a
 * shared file mapping (private memory, as under --run-kind). */
static const struct vma *
learn(uintptr_t p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], perms[8];
	unsigned long long s, e, off, ino, found_ino = 0;
	unsigned maj, min, fmaj = 0, fmin = 0;
	int fd = -1;

	if (f == NULL)
		return NULL;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &s, &e, perms, &off, &maj, &min,
		    &ino) == 7 && p >= s && p < e && perms[3] == 's' && ino != 0) {
			found_ino = ino;
			fmaj = maj;
			fmin = min;
		}
	if (found_ino == 0 || nmaps == SCRATCH_ID) {
		fclose(f);
		return NULL;
	}
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	struct stat st;

	while (d != NULL && fd == -1 && (de = readdir(d)) != NULL) {
		int n = atoi(de->d_name);

		if (de->d_name[0] != '.' && n != dirfd(d) && fstat(n, &st) == 0 &&
		    st.st_ino == found_ino && st.st_dev == makedev(fmaj, fmin))
			fd = n;
	}
	if (d != NULL)
		closedir(d);
	if (fd == -1 || send_msg(LG_PYR_MAP, (int32_t)nmaps, (uint64_t)st.st_size, NULL, 0, fd) ==
	    -1) {
		fclose(f);
		return NULL;
	}
	rewind(f);
	struct lg_pyr_range *ro = (void *)msg;
	size_t nro = 0;

	while (fgets(line, sizeof(line), f) != NULL) {
		struct vma *grown;

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &s, &e, perms, &off, &maj, &min,
		    &ino) != 7 || ino != found_ino || maj != fmaj || min != fmin ||
		    (grown = realloc(vmas, (nvmas + 1) * sizeof(*vmas))) == NULL)
			continue;
		vmas = grown;
		vmas[nvmas++] = (struct vma){ s, e, off, nmaps };
		if (perms[1] != 'w') { /* read-only here: read-only there too */
			if (nro == sizeof(msg) / sizeof(*ro)) {
				send_msg(LG_PYR_READONLY, (int32_t)nmaps, 0, ro, nro * sizeof(*ro), -1);
				nro = 0;
			}
			ro[nro++] = (struct lg_pyr_range){ off, e - s };
		}
	}
	fclose(f);
	if (nro > 0)
		send_msg(LG_PYR_READONLY, (int32_t)nmaps, 0, ro, nro * sizeof(*ro), -1);
	nmaps++;
	for (size_t i = 0; i < nvmas; i++)
		if (p >= vmas[i].start && p < vmas[i].end)
			return &vmas[i];
	return NULL;
}

/* Where python3 finds n bytes at p: its map id and offset. 0, or -1 when they are not in
 * shared memory both processes map. */
static int
locate(const void *p, size_t n, uint32_t *id, uint64_t *off)
{
	uintptr_t a = (uintptr_t)p;
	const struct vma *v = NULL;

	for (size_t i = 0; i < nvmas && v == NULL; i++)
		if (a >= vmas[i].start && a < vmas[i].end)
			v = &vmas[i];
	if (v == NULL)
		v = learn(a);
	if (v == NULL)
		return -1;
	/* the bytes past this vma continue in the file (the arena's regions are one file,
	 * split into vmas only by their protections) */
	(void)n;
	*id = v->id;
	*off = v->off + (a - v->start);
	return 0;
}

/* A scratch memfd of at least n bytes, mapped here and sent to python3 as SCRATCH_ID. */
static int
scratch_fit(size_t n)
{
	size_t want = (n + 0xffff) & ~(size_t)0xffff;
	void *p;

	if (n <= scratch_len && scratch != NULL)
		return 0;
	if (scratch_fd == -1 && (scratch_fd = memfd_create("lagless-python-copy", MFD_CLOEXEC)) ==
	    -1)
		return -1;
	if (ftruncate(scratch_fd, (off_t)want) == -1 || (p = mmap(NULL, want, PROT_READ |
	    PROT_WRITE, MAP_SHARED, scratch_fd, 0)) == MAP_FAILED)
		return -1;
	if (scratch != NULL)
		munmap(scratch, scratch_len);
	scratch = p;
	scratch_len = want;
	return send_msg(LG_PYR_MAP, SCRATCH_ID, want, NULL, 0, scratch_fd);
}

/* The job's body and output region as python3 finds them: each in place in shared memory,
 * else (private memory, as under --run-kind) in the scratch memfd, the body copied there
 * first and the output after it. An empty body (a GET) is an empty view of the output's map:
 * its pointer need not be shared memory. *copied is set when the output must be copied
 * back. */
static int
place(const struct lagless_request *rq, const struct lagless_output *out, struct lg_pyr_job *j,
    int *copied)
{
	int in_shared = 1, out_shared = locate(out->data, out->cap, &j->out_map, &j->out_off) == 0;
	size_t in_room = 0;

	*copied = 0;
	if (rq->input_len > 0 && (in_shared = locate(rq->input, rq->input_len, &j->in_map,
	    &j->in_off) == 0) == 0)
		in_room = (rq->input_len + 4095) & ~(size_t)4095;
	if (in_shared && out_shared) {
		if (rq->input_len == 0) {
			j->in_map = j->out_map;
			j->in_off = j->out_off;
		}
		return 0;
	}
	if (scratch_fit(in_room + (out_shared ? 0 : out->cap)) == -1)
		return -1;
	if (!in_shared) {
		memcpy(scratch, rq->input, rq->input_len);
		j->in_map = SCRATCH_ID;
		j->in_off = 0;
	}
	if (!out_shared) {
		j->out_map = SCRATCH_ID;
		j->out_off = in_room;
		*copied = 1;
	}
	if (rq->input_len == 0) {
		j->in_map = j->out_map;
		j->in_off = j->out_off;
	}
	return 0;
}

/* The JOB message of rq (head fields strings after struct lg_pyr_job). */
static int
send_job(const struct lagless_request *rq, struct lg_pyr_job *j)
{
	size_t used = sizeof(*j);

	if (lg_pyr_put(msg, sizeof(msg), &used, rq->method, rq->method_len) == -1 ||
	    lg_pyr_put(msg, sizeof(msg), &used, rq->path, rq->path_len) == -1 ||
	    lg_pyr_put(msg, sizeof(msg), &used, rq->query, rq->query_len) == -1)
		return -1;
	for (size_t i = 0; i < rq->nfields; i++)
		if (lg_pyr_put(msg, sizeof(msg), &used, rq->fields[i].name,
		    strlen(rq->fields[i].name)) == -1 ||
		    lg_pyr_put(msg, sizeof(msg), &used, rq->fields[i].value,
		    rq->fields[i].value_len) == -1)
			return -1;
	memcpy(msg, j, sizeof(*j));
	return send_msg(LG_PYR_JOB, 0, 0, msg, used, -1);
}

/* Carries out one host call python3 asked for (msg, n bytes) on out. */
static void
host_call(struct lagless_output *out, ssize_t n)
{
	const struct lg_pyr_head *m = (const void *)msg;
	const char *s = NULL, *v = NULL;
	size_t at = sizeof(*m), sl = 0, vl = 0;
	int ok = lg_pyr_get(msg, (size_t)n, &at, &s, &sl) == 0;

	if (m->len <= out->cap)
		out->len = (size_t)m->len;
	if (copy_from != NULL)
		memcpy(out->data, copy_from, out->len);
	switch (m->op) {
	case LG_PYR_LOG:
		if (ok)
			host->log(m->a, "%s", s);
		break;
	case LG_PYR_STATUS:
		send_msg(LG_PYR_REPLY, host->set_status(out, m->a), 0, NULL, 0, -1);
		break;
	case LG_PYR_CTYPE:
		send_msg(LG_PYR_REPLY, ok ? host->set_ctype(out, s) : -1, 0, NULL, 0, -1);
		break;
	case LG_PYR_MESSAGE:
		if (ok)
			host->set_message(out, "%s", s);
		break;
	case LG_PYR_ERROR_BODY:
		host->error_body(out);
		break;
	case LG_PYR_FIELD:
		if (ok && lg_pyr_get(msg, (size_t)n, &at, &v, &vl) == 0)
			host->add_field(out, s, sl, v, vl);
		break;
	case LG_PYR_RECYCLE:
		host->recycle(out);
		break;
	default:
		host->log(LAGLESS_LOG_ERROR, "python3 sent message %u during a job", m->op);
	}
}

/* Before a job: python3 given this process's standard error again when it was reopened since
 * (SIGUSR1 after the error log was rotated), so that print() follows the log, as it does in an
 * embedded interpreter. */
static void
same_stderr(void)
{
	struct stat st;

	if (fstat(2, &st) == -1 || (st.st_dev == err_dev && st.st_ino == err_ino))
		return;
	if (send_msg(LG_PYR_STDERR, 0, 0, NULL, 0, 2) == 0) {
		err_dev = st.st_dev;
		err_ino = st.st_ino;
	}
}

int
lg_relay_run(const struct lagless_request *rq, struct lagless_output *out)
{
	struct lg_pyr_job j = { .in_len = rq->input_len, .out_cap = out->cap,
	    .deadline_ns = rq->deadline_ns, .enqueue_ns = rq->enqueue_ns, .start_ns = rq->start_ns,
	    .nfields = (uint32_t)rq->nfields };
	int copied;

	host = rq->host;
	for (j.route = 0; j.route < nroutes && routes[j.route] != rq->conf; j.route++)
		;
	if (j.route == nroutes) {
		host->set_message(out, "this route is not among the module's routes\n");
		return LAGLESS_ERROR;
	}
	if (alive(out) == -1)
		return LAGLESS_ERROR;
	same_stderr();
	if (place(rq, out, &j, &copied) == -1 || send_job(rq, &j) == -1) {
		if (errno == EPIPE || errno == ECONNRESET)
			die_like_child("between jobs");
		host->log(LAGLESS_LOG_ERROR, "cannot hand the job to python3: %s", strerror(errno));
		return LAGLESS_ERROR;
	}
	copy_from = copied ? scratch + j.out_off : NULL;
	for (;;) {
		ssize_t n = recv_msg();
		const struct lg_pyr_head *m = (const void *)msg;

		if (n <= 0) {
			if (n < 0) /* a message it could not have meant: not waited for alive */
				kill(child, SIGKILL);
			die_like_child("during a job");
		}
		if (m->op != LG_PYR_DONE) {
			host_call(out, n);
			continue;
		}
		out->len = m->len <= out->cap ? (size_t)m->len : 0;
		if (copy_from != NULL)
			memcpy(out->data, copy_from, out->len);
		copy_from = NULL;
		return m->a;
	}
}

void
lg_relay_stop(void)
{
	struct pollfd p = { pidfd, POLLIN, 0 };

	if (sock >= 0)
		close(sock); /* python3 reads the end of its socket and exits */
	sock = -1;
	/* waited for (1 s at most), so that a recycled or retired compute process leaves nothing
	 * for the master to kill (master/respawn.c, reclaim_child) */
	if (child > 0 && pidfd >= 0 && poll(&p, 1, 1000) == 0)
		kill(child, SIGKILL);
	if (child > 0)
		while (waitpid(child, NULL, 0) == -1 && errno == EINTR)
			;
	drop_child();
}
