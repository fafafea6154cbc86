/* python-exec.so: the extension module the python3 executable loads when the python module's
 * interpreter is an executable (relay.h). serve(fd) takes the module's keys and routes, sets
 * up as a compute process's embedded interpreter would (interp.c), then runs each job the
 * compute process hands over on fd with the same code (call.c), the host calls of the job
 * sent back to be made on the real answer. It links no libpython: its Python symbols are the
 * executable's own, the interpreter code a `python3` command line runs (Debian: a static LTO
 * and PGO build, 1.06 to 1.35 times faster than libpython3.11.so on pure-Python code,
 * docs/MODULES.md "Speed"). Python.h comes first (pymod.h). */
#include "pymod.h"
#include "error.h"
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* The host's struct lagless_conf, opaque to modules, is this side's own: the keys as the
 * compute process sent them. */
struct lagless_conf {
	size_t n;
	char **kv; /* key, value, key, value ... */
};

struct route {
	char *path, *kind;
	struct lagless_conf conf;
};

#define MAX_MAPS 8

static int sock = -1;
static unsigned char in[LG_PYR_MAX], out_msg[LG_PYR_MAX];
static struct lagless_conf modconf;
static struct route *routes;
static size_t nroutes;
static int in_setup; /* route_at answers only then, as the host's does in init */
static struct {
	unsigned char *p;
	size_t len;
} maps[MAX_MAPS];
static const struct lagless_output *cur; /* the job's answer, for the len of each message */

/* A message to the compute process: op, a, the answer's current length, then body. On a
 * failure to send, the compute process is gone: so is this process (nothing to answer to). */
static void
tell(uint32_t op, int32_t a, const void *body, size_t n)
{
	struct lg_pyr_head h = { op, a, cur != NULL ? cur->len : 0 };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)body, n } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n > 0 ? 2 : 1 };

	while (sendmsg(sock, &mh, MSG_NOSIGNAL) == -1)
		if (errno != EINTR)
			_exit(1);
}

/* One string as a message's body: 0, or -1 (nothing sent) when it does not fit one. */
static int
tell_str(uint32_t op, int32_t a, const char *s, size_t n)
{
	size_t used = 0;

	if (lg_pyr_put(out_msg, sizeof(out_msg), &used, s, n) == -1)
		return -1;
	tell(op, a, out_msg, used);
	return 0;
}

/* Waits for the REPLY to a host call (into a buffer of its own: the job's strings are in
 * the message buffer); its value. */
static int
reply(void)
{
	struct lg_pyr_head r;
	ssize_t n;

	while ((n = recv(sock, &r, sizeof(r), 0)) == -1 && errno == EINTR)
		;
	if (n < (ssize_t)sizeof(r))
		_exit(1);
	return r.op == LG_PYR_REPLY ? r.a : -1;
}

/* The host table the interpreter side sees here: the functions interp.c, call.c and error.c
 * call. Those that change the answer are made by the compute process on the real one (the
 * answer's bytes are already in place: write() is local, into the shared output region);
 * log lines go to its error log with its prefix. The others (alloc, query, query_uint,
 * header, conf_uint) are not used by this module and stay NULL. */
static void
p_vlog(int level, const char *fmt, va_list ap)
{
	char line[2048];
	int n = vsnprintf(line, sizeof(line), fmt, ap);

	if (n >= 0)
		tell_str(LG_PYR_LOG, level, line, (size_t)n < sizeof(line) ? (size_t)n :
		    sizeof(line) - 1);
}

static void
p_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	p_vlog(level, fmt, ap);
	va_end(ap);
}

static int
p_write(struct lagless_output *out, const void *p, size_t n)
{
	if (n > out->cap - out->len)
		return -1;
	memcpy(out->data + out->len, p, n);
	out->len += n;
	return 0;
}

static int
p_set_status(struct lagless_output *out, int code)
{
	tell(LG_PYR_STATUS, code, NULL, 0);
	return reply();
}

static int
p_set_ctype(struct lagless_output *out, const char *ctype)
{
	/* one that does not fit a message is far over the host's 127 bytes: refused as there */
	if (tell_str(LG_PYR_CTYPE, 0, ctype, strlen(ctype)) == -1)
		return -1;
	return reply();
}

static int
p_set_message(struct lagless_output *out, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n >= 0)
		tell_str(LG_PYR_MESSAGE, 0, text, (size_t)n < sizeof(text) ? (size_t)n :
		    sizeof(text) - 1);
	return 0;
}

static int
p_error_body(struct lagless_output *out)
{
	tell(LG_PYR_ERROR_BODY, 0, NULL, 0);
	return 0;
}

static int
p_add_field(struct lagless_output *out, const char *name, size_t nl, const char *value,
    size_t vl)
{
	size_t used = 0, room = sizeof(out_msg) / 2 - 16;

	/* A field that does not fit a message is far over the host's LAGLESS_ANSWER_FIELDS_BYTES:
	 * sent cut, the host refuses it as it would whole (the answer a 502, logged there), never
	 * dropped here in silence. */
	if (lg_pyr_put(out_msg, sizeof(out_msg), &used, name, nl < room ? nl : room) == 0 &&
	    lg_pyr_put(out_msg, sizeof(out_msg), &used, value, vl < room ? vl : room) == 0)
		tell(LG_PYR_FIELD, 0, out_msg, used);
	return 0;
}

static int
p_recycle(struct lagless_output *out)
{
	tell(LG_PYR_RECYCLE, 0, NULL, 0);
	return 0;
}

static const char *
p_conf_get(const struct lagless_conf *conf, const char *key)
{
	for (size_t i = 0; i < conf->n; i++)
		if (strcmp(conf->kv[2 * i], key) == 0)
			return conf->kv[2 * i + 1];
	return NULL;
}

static int
p_conf_at(const struct lagless_conf *conf, size_t i, const char **key, const char **value)
{
	if (i >= conf->n)
		return -1;
	*key = conf->kv[2 * i];
	*value = conf->kv[2 * i + 1];
	return 0;
}

static int
p_route_at(size_t i, const char **path, const char **kind, const struct lagless_conf **conf)
{
	if (!in_setup || i >= nroutes)
		return -1;
	*path = routes[i].path;
	*kind = routes[i].kind;
	*conf = &routes[i].conf;
	return 0;
}

static const struct lagless_host host = {
	.size = sizeof(struct lagless_host),
	.abi_major = LAGLESS_ABI_MAJOR,
	.abi_minor = LAGLESS_ABI_MINOR,
	.log = p_log,
	.write = p_write,
	.set_status = p_set_status,
	.set_ctype = p_set_ctype,
	.set_message = p_set_message,
	.conf_get = p_conf_get,
	.conf_at = p_conf_at,
	.vlog = p_vlog,
	.error_body = p_error_body,
	.add_field = p_add_field,
	.recycle = p_recycle,
	.route_at = p_route_at,
};

/* The strings from at in a message of len bytes as key/value pairs into c. 0, or -1. */
static int
take_conf(struct lagless_conf *c, const unsigned char *m, size_t len, size_t at)
{
	const char *s;
	size_t n;

	while (at < len) {
		char **grown = realloc(c->kv, (2 * c->n + 2) * sizeof(char *));

		if (grown == NULL)
			return -1;
		c->kv = grown;
		for (int k = 0; k < 2; k++) {
			if (lg_pyr_get(m, len, &at, &s, &n) == -1 || (c->kv[2 * c->n + k] =
			    strndup(s, n)) == NULL)
				return -1;
		}
		c->n++;
	}
	return 0;
}

static int
take_route(const unsigned char *m, size_t len)
{
	struct route *grown = realloc(routes, (nroutes + 1) * sizeof(*routes));
	size_t at = sizeof(struct lg_pyr_head), n;
	const char *s;

	if (grown == NULL)
		return -1;
	routes = grown;
	memset(&routes[nroutes], 0, sizeof(routes[nroutes]));
	if (lg_pyr_get(m, len, &at, &s, &n) == -1 || (routes[nroutes].path = strndup(s, n)) ==
	    NULL || lg_pyr_get(m, len, &at, &s, &n) == -1 || (routes[nroutes].kind =
	    strndup(s, n)) == NULL || take_conf(&routes[nroutes].conf, m, len, at) == -1)
		return -1;
	nroutes++;
	return 0;
}

/* A MAP message: fd mapped shared, read and write, len bytes, as map id. 0, or -1. */
static int
take_map(const struct lg_pyr_head *h, int fd)
{
	void *p;

	if (fd < 0 || h->a < 0 || h->a >= MAX_MAPS)
		return -1;
	p = mmap(NULL, (size_t)h->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	if (maps[h->a].p != NULL)
		munmap(maps[h->a].p, maps[h->a].len);
	maps[h->a].p = p;
	maps[h->a].len = (size_t)h->len;
	return 0;
}

/* A READONLY message: those ranges of map h->a made read-only (mprotect(2)), so that a write
 * to a job's body behind Python's back (ctypes, a C extension) faults here as it does in a
 * compute process, rather than change the request. 0, or -1. */
static int
take_readonly(const struct lg_pyr_head *h, const unsigned char *m, size_t len)
{
	size_t n = (len - sizeof(*h)) / sizeof(struct lg_pyr_range);

	if (h->a < 0 || h->a >= MAX_MAPS || maps[h->a].p == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct lg_pyr_range r;

		memcpy(&r, m + sizeof(*h) + i * sizeof(r), sizeof(r));
		if (r.off > maps[h->a].len || r.len > maps[h->a].len - r.off ||
		    mprotect(maps[h->a].p + r.off, (size_t)r.len, PROT_READ) == -1)
			return -1;
	}
	return 0;
}

/* n bytes at offset off of map id, or NULL when they are not all in it. */
static unsigned char *
at_map(uint32_t id, uint64_t off, uint64_t n)
{
	if (id >= MAX_MAPS || maps[id].p == NULL || off > maps[id].len || n > maps[id].len - off)
		return NULL;
	return maps[id].p + off;
}

/* A JOB message: the request rebuilt over the mapped memory and run as the embedded
 * interpreter runs it; DONE with its status. */
static int
run_job(const unsigned char *m, size_t len)
{
	struct lg_pyr_job j;
	struct lagless_field fields[LAGLESS_MAX_FIELDS];
	struct lagless_request rq = { .size = sizeof(rq), .host = &host };
	struct lagless_output out = { .size = sizeof(out) };
	size_t at = sizeof(struct lg_pyr_head) + sizeof(j), n;
	const char *s;

	if (len < at)
		return -1;
	memcpy(&j, m + sizeof(struct lg_pyr_head), sizeof(j));
	if (j.route >= nroutes || j.nfields > LAGLESS_MAX_FIELDS ||
	    (rq.input = at_map(j.in_map, j.in_off, j.in_len)) == NULL ||
	    (out.data = at_map(j.out_map, j.out_off, j.out_cap)) == NULL ||
	    lg_pyr_get(m, len, &at, &rq.method, &rq.method_len) == -1 ||
	    lg_pyr_get(m, len, &at, &rq.path, &rq.path_len) == -1 ||
	    lg_pyr_get(m, len, &at, &rq.query, &rq.query_len) == -1)
		return -1;
	for (uint32_t i = 0; i < j.nfields; i++) {
		if (lg_pyr_get(m, len, &at, &s, &n) == -1 ||
		    lg_pyr_get(m, len, &at, &fields[i].value, &fields[i].value_len) == -1)
			return -1;
		fields[i].name = s;
	}
	rq.input_len = (size_t)j.in_len;
	rq.fields = fields;
	rq.nfields = j.nfields;
	rq.conf = &routes[j.route].conf;
	rq.deadline_ns = j.deadline_ns;
	rq.enqueue_ns = j.enqueue_ns;
	rq.start_ns = j.start_ns;
	out.cap = (size_t)j.out_cap;
	cur = &out;
	int st = lg_python_run(&rq, &out);
	tell(LG_PYR_DONE, st, NULL, 0);
	cur = NULL;
	return 0;
}

/* START: set up as an embedded interpreter would; READY, or FAIL with why. */
static void
start(void)
{
	char err[512];

	lg_py.compute_pid = getppid();
	in_setup = 1;
	int rc = lg_python_setup(&host, &modconf, err, sizeof(err));
	in_setup = 0;
	if (rc == 0)
		tell(LG_PYR_READY, 0, NULL, 0);
	else
		tell_str(LG_PYR_FAIL, 0, err, strlen(err));
}

/* The end: the compute process closed its end (a graceful exit) or is gone. The streams are
 * flushed; the interpreter is not finalised, as the embedded one is not (python.c, py_exit). */
static void __attribute__((noreturn))
leave(void)
{
	PyRun_SimpleString("import sys\nsys.stderr.flush()\n");
	_exit(0);
}

/* serve(fd): runs until the compute process closes fd; never returns. */
static PyObject *
serve(PyObject *self, PyObject *args)
{
	if (!PyArg_ParseTuple(args, "i", &sock))
		return NULL;
	/* not inherited by what the calls run (os.system, subprocess): only python3 holds it, so
	 * its death is the end of the socket (the compute process also watches its pidfd) */
	if (fcntl(sock, F_SETFD, FD_CLOEXEC) == -1)
		return PyErr_SetFromErrno(PyExc_OSError);
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { in, sizeof(in) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		    .msg_controllen = sizeof(u.buf) };
		const struct lg_pyr_head *h = (const void *)in;
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
		int fd = -1, bad;

		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			leave();
		if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		if ((size_t)n < sizeof(*h))
			bad = 1;
		else if (h->op == LG_PYR_CONF)
			bad = take_conf(&modconf, in, (size_t)n, sizeof(*h));
		else if (h->op == LG_PYR_ROUTE)
			bad = take_route(in, (size_t)n);
		else if (h->op == LG_PYR_MAP)
			bad = take_map(h, fd), fd = -1;
		else if (h->op == LG_PYR_STDERR)
			bad = fd < 0 || dup2(fd, 2) == -1;
		else if (h->op == LG_PYR_READONLY)
			bad = take_readonly(h, in, (size_t)n);
		else if (h->op == LG_PYR_START)
			start(), bad = 0;
		else if (h->op == LG_PYR_JOB)
			bad = run_job(in, (size_t)n);
		else
			bad = 1;
		if (fd >= 0)
			close(fd);
		if (bad) { /* only a compute process of another build could send it */
			fprintf(stderr, "python-exec: a message it cannot read (op %u)\n",
			    (size_t)n >= sizeof(*h) ? h->op : 0);
			_exit(1);
		}
	}
}

/* check(fd, spec, python_path): the import check of lagless -t, start-up and SIGHUP run in
 * this executable (python.c, check_import): sys set up as for the jobs, spec imported, the
 * reason ("" when it is a callable) and a NUL written to fd; then the process exits. */
static PyObject *
check(PyObject *self, PyObject *args)
{
	const char *spec, *pp;
	char why[512] = "";
	int fd;
	PyObject *fn;

	if (!PyArg_ParseTuple(args, "iss", &fd, &spec, &pp))
		return NULL;
	if (lg_python_paths(pp, why, sizeof(why)) == 0 && lg_python_prepare(why, sizeof(why)) == 0) {
		if ((fn = lg_python_resolve(spec)) == NULL)
			lg_python_error(&lg_py, NULL, NULL, 0, why, sizeof(why));
		Py_XDECREF(fn);
	}
	(void)!write(fd, why, strlen(why) + 1); /* one write under PIPE_BUF: whole or nothing */
	leave();
}

static PyMethodDef methods[] = {
	{ "check", check, METH_VARARGS, "check(fd, spec, python_path): the import check" },
	{ "serve", serve, METH_VARARGS, "serve(fd): run the jobs a lagless compute process "
	    "hands over on fd; never returns" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef def = {
	PyModuleDef_HEAD_INIT, "lagless_exec", "lagless's python module, in the python3 executable",
	-1, methods, NULL, NULL, NULL, NULL,
};

/* Built against one CPython minor version's headers and ABI (not the limited API): loaded by
 * another version it would run undefined. Py_GetVersion exists in every version. */
PyMODINIT_FUNC
PyInit_lagless_exec(void)
{
	char want[16];
	const char *have = Py_GetVersion();

	snprintf(want, sizeof(want), "%d.%d.", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	if (strncmp(have, want, strlen(want)) != 0) {
		PyErr_Format(PyExc_ImportError, "lagless's python module is built for CPython "
		    "%d.%d; this interpreter is %.20s", PY_MAJOR_VERSION, PY_MINOR_VERSION, have);
		return NULL;
	}
	return PyModule_Create(&def);
}
