/* python: a job module that runs a user's Python callable in the compute pool, with every
 * guarantee of a C kind (bounded queue, deadline kill, a crash costs one request, memory limit).
 * It uses <lagless/module.h> alone; docs/MODULES.md, "Python kinds", is its user's guide.
 *
 *   [module python]
 *   path = /usr/local/lib/lagless/modules/python.so
 *   python_path = /srv/app             ; directories put first on sys.path (':' separated)
 *   preload = app.images               ; modules imported at process start (optional)
 *   preload_routes = no                ; yes: every route's callable imported at process start
 *   check_timeout_ms = 10000           ; the import check of -t / start-up / SIGHUP
 *   interpreter = /usr/bin/python3.11  ; where the calls run (the default where it exists)
 *                                      ; or embedded (libpython in the compute process)
 *
 *   [route /thumbnail]
 *   kind = python.call
 *   callable = app.images:thumbnail    ; module:attribute, imported once per process
 *
 * Where each part runs: the module and kind checks in the master, before any fork; the import
 * check in a child the kind check forks (user code never runs in the master); the interpreter
 * in each compute process, started by init after fork; the call in that process. With an
 * interpreter executable (relay.h) each compute process starts that executable as its child
 * and the interpreter and the call run there (relay.c, serve.c); the checks stay here.
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags lagless python3-embed) -o python.so \
 *            python.c interp.c call.c error.c helper.c relay.c wire.c \
 *            $(pkg-config --libs python3-embed)
 *        cc -shared -fPIC $(pkg-config --cflags lagless python3) -o python-exec.so \
 *            serve.c interp.c call.c error.c helper.c wire.c   (no libpython) */
#include "pymod.h"
#include "error.h"
#include "relay.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int started; /* the interpreter runs in this process */
static int relayed;  /* the calls run in an interpreter executable this process started */

/* Master side: what the module check found, for the route checks that follow it (the host
 * checks a [module] section before the routes that name its kinds, at each configuration
 * load). */
static uint64_t check_timeout_ms = 10000;
static char *check_interpreter; /* the interpreter executable, NULL: embedded */
static char *check_python_path;

static const char *const module_keys[] = { "python_path", "preload", "preload_routes",
	"check_timeout_ms", "interpreter" };

/* The interpreter executable of the embedded libpython's own version under its prefix, as the
 * build found it (pkg-config python3-embed: /usr/bin/python3.11 on Debian 12). */
#ifndef LG_PY_EXECUTABLE
#define LG_PY_EXECUTABLE "/usr/bin/python3.11"
#endif

/* "pkg.mod:attr.attr": dotted Python identifiers (ASCII), one colon (or, with colons = 1 at
 * the start, none: a module name). The first n bytes of s. */
static int
name_ok(const char *s, size_t n, int colons)
{
	int want_id = 1;

	for (const char *end = s + n; s < end; s++) {
		int alpha = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';

		if (alpha || (!want_id && *s >= '0' && *s <= '9'))
			want_id = 0;
		else if (!want_id && (*s == '.' || (*s == ':' && colons++ == 0)))
			want_id = 1;
		else
			return 0;
	}
	return !want_id && colons == 1;
}

static int
callable_ok(const char *s)
{
	return name_ok(s, strlen(s), 0);
}

/* preload: module names separated by commas or blanks. */
static int
preload_ok(const char *v)
{
	while (v != NULL && *v) {
		size_t n = strcspn(v, ", \t");

		if (n > 0 && !name_ok(v, n, 1))
			return 0;
		v += n;
		v += strspn(v, ", \t");
	}
	return 1;
}

/* The module's extension modules (_ctypes, numpy) are not linked with libpython: they expect
 * its symbols in the global scope, and the host opened this module RTLD_LOCAL (dlopen(3)). */
static void
promote_libpython(void)
{
	Dl_info di;

	if (dladdr((void *)&Py_InitializeFromConfig, &di) != 0 && di.dli_fname != NULL)
		dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
}

/* sys.executable: the interpreter of the embedded libpython's own version under its prefix
 * (/usr/bin/python3.11 for Debian's libpython3.11), not whatever `python3` comes first on PATH
 * (an embedded interpreter has no argv[0] to go by), so that subprocess.run([sys.executable,
 * ...]) runs the version the callables run in. Left as it is when there is no such file. */
static int
set_executable(void)
{
	PyObject *pre = PySys_GetObject("base_exec_prefix"), *exe;
	const char *p = pre != NULL ? PyUnicode_AsUTF8(pre) : NULL;
	char path[PATH_MAX];

	if (p == NULL)
		return pre != NULL ? -1 : 0;
	snprintf(path, sizeof(path), "%s/bin/python%d.%d", p, PY_MAJOR_VERSION, PY_MINOR_VERSION);
	if (access(path, X_OK) != 0)
		return 0;
	if ((exe = PyUnicode_DecodeFSDefault(path)) == NULL)
		return -1;
	int rc = PySys_SetObject("executable", exe) == -1 ||
	    PySys_SetObject("_base_executable", exe) == -1 ? -1 : 0;
	Py_DECREF(exe);
	return rc;
}

/* Starts the interpreter in this process: isolated from the environment (PYTHONPATH and the
 * like are not read, the user site is off; the system's site-packages stay), no signal handler
 * installed (the host's deadline kill is SIGTERM), unbuffered standard streams (a process may be
 * killed at any instant). Returns 0, or -1 with a message in err. */
static int
start_python(char *err, size_t errlen)
{
	PyConfig c;
	PyStatus s;

	promote_libpython();
	PyConfig_InitIsolatedConfig(&c);
	c.install_signal_handlers = 0;
	c.buffered_stdio = 0;
	c.site_import = 1;
	c.pathconfig_warnings = 0;
	c.parse_argv = 0;
	s = Py_InitializeFromConfig(&c);
	PyConfig_Clear(&c);
	if (PyStatus_Exception(s)) {
		snprintf(err, errlen, "cannot start Python: %s", s.err_msg ? s.err_msg : "?");
		return -1;
	}
	started = 1;
	if (set_executable() == -1) {
		lg_python_error(&lg_py, NULL, NULL, 0, err, errlen);
		return -1;
	}
	return 0;
}

/* The check child: dies with its parent (a reload's check process is SIGKILLed when the master
 * stops or gives up on it, and this child is not in its group), leads a process group of its
 * own (so whatever the import forks can be killed with it), starts Python as a compute process
 * would, imports spec, writes the reason ("" when found) and its NUL to fd, and leaves with
 * _exit (no atexit handler of the master). */
static void __attribute__((noreturn))
check_child(const char *spec, int fd, pid_t parent)
{
	char why[512] = "";
	PyObject *fn;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent) /* it died before the prctl took effect (prctl(2)) */
		_exit(1);
	setpgid(0, 0);
	if (check_interpreter != NULL) /* where the calls will run: a venv's sees its packages */
		lg_relay_check(check_interpreter, fd, parent, spec, check_python_path);
	if (start_python(why, sizeof(why)) == 0 && lg_python_prepare(why, sizeof(why)) == 0) {
		if ((fn = lg_python_resolve(spec)) == NULL)
			lg_python_error(&lg_py, NULL, NULL, 0, why, sizeof(why));
		Py_XDECREF(fn);
	}
	(void)!write(fd, why, strlen(why) + 1); /* one write under PIPE_BUF: whole or nothing */
	_exit(0);
}

/* What a check saw: the report (complete once its NUL arrived) and the child's exit. */
struct check_run {
	char why[512];
	size_t n;
	int reported, exited, status;
};

static int64_t
ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Reads what is in the (non-blocking) pipe fd; notes the report once its NUL is in. */
static void
take_report(int fd, struct check_run *c)
{
	ssize_t k;

	while (!c->reported && c->n < sizeof(c->why) &&
	    (k = read(fd, c->why + c->n, sizeof(c->why) - c->n)) > 0) {
		c->reported = memchr(c->why + c->n, '\0', (size_t)k) != NULL;
		c->n += (size_t)k;
	}
	c->why[sizeof(c->why) - 1] = '\0';
}

/* Runs the check of child pid until it has reported and exited (left unreaped), or check_timeout_ms has passed
 * since it was forked (t0): the end is the child's report and exit, never the pipe's EOF, which a
 * process the import forked holds off as long as it lives. A pidfd (pidfd_open(2), Linux 5.3)
 * wakes the poll at the exit; without one the poll wakes every 20 ms to ask waitpid. */
static void
await_check(pid_t pid, int fd, const struct timespec *t0, struct check_run *c)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		int64_t left = (int64_t)check_timeout_ms - ms_since(t0);
		struct pollfd p[2] = { { fd, c->reported ? 0 : POLLIN, 0 }, { pidfd, POLLIN, 0 } };

		siginfo_t si = { .si_pid = 0 };

		take_report(fd, c);
		/* WNOWAIT: the exited child stays a zombie, so its pid (its group's id) cannot be
		 * reused before check_import kills the group */
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
			c->exited = 1;
		if (c->exited) {
			take_report(fd, c); /* written before the exit: in the pipe by now */
			break;
		}
		if (left <= 0)
			break;
		if (poll(p, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? (int)(left > INT_MAX ? INT_MAX : left) :
		    (int)(left < 20 ? left : 20)) == -1 && errno != EINTR)
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
}

/* 1 when a process other than the check child still holds the write end of pipe fd: the import
 * forked one that outlived it (poll(2): POLLHUP once every writer has closed). */
static int
pipe_held(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char b[64];

	while (read(fd, b, sizeof(b)) > 0) /* what the leftover wrote, if anything */
		;
	return poll(&p, 1, 0) == 1 ? !(p.revents & POLLHUP) : 1;
}

/* The refusal for what c saw, into err; 0 when the import succeeded cleanly. */
static int
check_verdict(const char *spec, const struct check_run *c, int held, char *err, size_t errlen)
{
	int st = c->status;

	if (c->reported && c->why[0])
		snprintf(err, errlen, "callable %s: %s", spec, c->why);
	else if (c->exited && !c->reported)
		snprintf(err, errlen, "callable %s: the check process died (%s %d) importing it%s%s",
		    spec, WIFSIGNALED(st) ? "signal" : "status",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
		    check_interpreter ? " in " : "", check_interpreter ? check_interpreter : "");
	else if (!c->reported)
		snprintf(err, errlen, "importing %s took over check_timeout_ms = %llu", spec,
		    (unsigned long long)check_timeout_ms);
	else if (held)
		snprintf(err, errlen, "callable %s: the import finished but left a process holding "
		    "the check's output open (it forked one that outlives the import; every compute "
		    "process would do the same); killed with the check's process group", spec);
	else
		return 0;
	return -1;
}

/* lagless -t, start-up and SIGHUP: can spec be imported? Asked of a child, so that importing
 * user code never runs in the caller (it could start threads or install signal handlers in the
 * process that forks every other). The whole check is bounded by check_timeout_ms; the child's
 * process group is SIGKILLed when it ends, so nothing the import forked outlives the check
 * (only a process that left the group with setsid(2) can). The caller's SIGCHLD is read from a
 * signalfd by the same thread that runs this check (or left at its default), so the waitpid
 * here is not raced by a reaper. */
static int
check_import(const char *spec, char *err, size_t errlen)
{
	struct check_run c = { .n = 0 };
	struct timespec t0;
	int fds[2], held;
	pid_t pid, self = getpid();

	if (pipe2(fds, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "cannot check %s: pipe: %s", spec, strerror(errno));
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "cannot check %s: fork: %s", spec, strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		check_child(spec, fds[1], self);
	}
	setpgid(pid, pid); /* as the child does: whichever runs first */
	close(fds[1]);
	await_check(pid, fds[0], &t0, &c);
	held = c.exited && pipe_held(fds[0]);
	kill(-pid, SIGKILL);
	while (waitpid(pid, &c.status, 0) == -1 && errno == EINTR)
		;
	close(fds[0]);
	return check_verdict(spec, &c, held, err, errlen);
}

/* The interpreter executable the calls run in, or NULL for the embedded libpython: the
 * interpreter key (a path, or "embedded"); without it LG_PY_EXECUTABLE where it is
 * installed, else embedded. */
static const char *
interpreter_of(const struct lagless_host *h, const struct lagless_conf *conf)
{
	const char *v = h->conf_get(conf, "interpreter");

	if (v != NULL)
		return strcmp(v, "embedded") == 0 ? NULL : v;
	return access(LG_PY_EXECUTABLE, X_OK) == 0 ? LG_PY_EXECUTABLE : NULL;
}

/* interpreter = embedded, or an absolute path to an executable file. The executable's version is not asked here: one that is not CPython
 * PY_MAJOR_VERSION.PY_MINOR_VERSION cannot load python-exec.so, and every compute process's
 * init then fails with its error (the module's routes answer 503). */
static int
interpreter_check(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *v = h->conf_get(conf, "interpreter");

	if (v == NULL || strcmp(v, "embedded") == 0)
		return 0;
	if (v[0] != '/' || access(v, X_OK) != 0) {
		snprintf(err, errlen, "interpreter = %s: not an absolute path to an executable "
		    "file (%s), nor embedded", v, v[0] != '/' ? "relative" : strerror(errno));
		return -1;
	}
	return 0;
}

static int
module_check(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *key, *value;

	for (size_t i = 0; h->conf_at(conf, i, &key, &value) == 0; i++) {
		size_t j = 0;

		while (j < sizeof(module_keys) / sizeof(module_keys[0]) && strcmp(key, module_keys[j]))
			j++;
		if (j == sizeof(module_keys) / sizeof(module_keys[0])) {
			snprintf(err, errlen, "%s: unknown key for this module (it takes: python_path, "
			    "preload, preload_routes, check_timeout_ms, interpreter)", key);
			return -1;
		}
	}
	if (lg_python_preload_routes(h, conf) == -1) {
		snprintf(err, errlen, "preload_routes = %s: yes or no",
		    h->conf_get(conf, "preload_routes"));
		return -1;
	}
	if (!preload_ok(h->conf_get(conf, "preload"))) {
		snprintf(err, errlen, "preload = %s: module names (dotted Python names) separated "
		    "by commas", h->conf_get(conf, "preload"));
		return -1;
	}
	if (h->conf_uint(conf, "check_timeout_ms", 10000, 1, 600000, &check_timeout_ms) == -1) {
		snprintf(err, errlen, "check_timeout_ms: expected a whole number from 1 to 600000 "
		    "(milliseconds; K, M, G suffixes)");
		return -1;
	}
	if (interpreter_check(h, conf, err, errlen) == -1)
		return -1;
	free(check_interpreter);
	check_interpreter = interpreter_of(h, conf) ? strdup(interpreter_of(h, conf)) : NULL;
	free(check_python_path);
	check_python_path = h->conf_get(conf, "python_path") ?
	    strdup(h->conf_get(conf, "python_path")) : NULL;
	return lg_python_paths(h->conf_get(conf, "python_path"), err, errlen);
}

/* A route's keys: callable (required); every other key is the callable's own (request.route). */
static int
call_check(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *spec = h->conf_get(conf, "callable");

	if (spec == NULL) {
		snprintf(err, errlen, "no callable key (callable = package.module:function)");
		return -1;
	}
	if (!callable_ok(spec)) {
		snprintf(err, errlen, "callable = %s: not module:function (dotted Python names, "
		    "one colon)", spec);
		return -1;
	}
	return check_import(spec, err, errlen);
}

/* Each compute process, after fork: the interpreter (the executable this process starts, or
 * libpython here), then the preload modules and, with preload_routes = yes, the routes'
 * callables (a failure there is logged: the route's jobs report it again). Not by default: a
 * compute process that replaces one killed at a deadline would otherwise import every Python
 * route's module before it takes the next job, which may be a C kind's in the same pool. */
static int
py_init(const struct lagless_host *h, const struct lagless_conf *conf, void **state)
{
	char err[512];
	const char *exe = interpreter_of(h, conf);

	if (exe != NULL) {
		if (lg_relay_start(h, conf, exe, err, sizeof(err)) == -1) {
			h->log(LAGLESS_LOG_ERROR, "interpreter %s: %s", exe, err);
			return -1;
		}
		relayed = 1;
		return 0;
	}
	if (start_python(err, sizeof(err)) == -1 || lg_python_setup(h, conf, err, sizeof(err)) ==
	    -1) {
		h->log(LAGLESS_LOG_ERROR, "%s", err);
		return -1;
	}
	return 0;
}

/* A graceful exit: the streams flushed. The interpreter is not finalised: Py_FinalizeEx would
 * wait for any thread user code left running and run its atexit handlers, neither of which a
 * process that can be killed at any instant may count on. */
static void
py_exit(const struct lagless_host *h, void *state)
{
	if (relayed)
		lg_relay_stop();
	if (started)
		PyRun_SimpleString("import sys\nsys.stderr.flush()\n");
}

static int
py_run(const struct lagless_request *rq, struct lagless_output *out)
{
	if (relayed)
		return lg_relay_run(rq, out);
	if (!started)
		return LAGLESS_ERROR;
	return lg_python_run(rq, out);
}

/* Pool only: Python on the loop would stall every connection of that loop worker, which is
 * what lagless exists to prevent; the host refuses where = loop for this kind. */
LAGLESS_MODULE_HOOKS("python", "1.0.0", (.check = module_check, .init = py_init, .exit = py_exit),
    LAGLESS_KIND("call", py_run, .check = call_check, .where = LAGLESS_WHERE_POOL));
