/* The python module's own parts, shared by its files (python.c: the hooks and the
 * interpreter; call.c: one job, from the request view to the answer; error.c: a Python
 * exception turned into a line and a logged traceback; helper.c: the importable `lagless`
 * Python module). Nothing here is lagless's: the module sees only <lagless/module.h>.
 * Python.h comes first in every file that includes this (its rule: it sets feature macros). */
#ifndef LG_PYMOD_H
#define LG_PYMOD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <lagless/module.h>

/* The per-process Python objects the jobs use; owned by python.c, filled by lg_python_start. */
struct lg_python {
	PyObject *bad_request;      /* lagless.BadRequest */
	PyObject *request_type;     /* lagless.Request */
	PyObject *format_exception; /* traceback.format_exception */
	long compute_pid;           /* lagless.compute_pid: the compute process, which the
	                             * server's logs and metrics name (0: this process) */
};

/* Creates the `lagless` module from its embedded source, puts it in sys.modules and fills
 * py->bad_request and py->request_type (new references). Needs an initialised interpreter and
 * the GIL. Returns 0, or -1 with a Python exception set. */
int lg_python_helper(struct lg_python *py);

/* The read-only memory type the body and the output view are made of (call.c): must be ready
 * (PyType_Ready) before the first job. Returns 0, or -1 with a Python exception set. */
int lg_python_region_ready(void);

/* The interpreter side (interp.c), the same in the embedded interpreter and in the python3
 * executable a compute process starts (serve.c). */
extern struct lg_python lg_py;

/* python_path (':' separated, at most 16 entries) into the directories put first on
 * sys.path, each made absolute with realpath(3) against the working directory. Returns 0, or
 * -1 with a message in err. */
int lg_python_paths(const char *v, char *err, size_t errlen);

/* In a running interpreter, with the GIL: sys.path[0:0] = the python_path directories (their
 * .pth files processed), sys.stdout = sys.stderr (print() goes to the error log), the lagless
 * helper module and the region type. Returns 0, or -1 with a message in err. */
int lg_python_prepare(char *err, size_t errlen);

/* Each process that runs jobs, after its interpreter started: python_path from the module's
 * keys conf, lg_python_prepare, the preload modules and, with preload_routes = yes, the
 * callables of h->route_at's routes (those failures logged, left for the route's jobs).
 * Returns 0, or -1 with a message in err. */
int lg_python_setup(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen);

/* preload_routes of conf: 1 yes, 0 no or absent, -1 anything else. */
int lg_python_preload_routes(const struct lagless_host *h, const struct lagless_conf *conf);

/* Imports the module of spec ("pkg.mod:attr.attr") and walks its attributes to a callable.
 * New reference, or NULL with an exception set. */
PyObject *lg_python_resolve(const char *spec);

/* One job of rq->conf's route: its callable (imported at its first job in this process) run
 * by lg_python_call. Returns an enum lagless_status; an import failure is LAGLESS_ERROR with
 * its message in out. */
int lg_python_run(const struct lagless_request *rq, struct lagless_output *out);

/* One job: calls fn(body, request) for the request view rq and turns what it returns or raises
 * into the answer in out (docs/MODULES.md, "Python kinds"). route is the route's keys as a
 * read-only mapping (borrowed). Returns an enum lagless_status. Never leaves a Python exception
 * set. If the callable kept a view of the body or the output past its return, the process is
 * recycled after this answer (host->recycle, logged): the memory behind that view is the next
 * job's. */
int lg_python_call(const struct lg_python *py, PyObject *fn, PyObject *route,
    const struct lagless_request *rq, struct lagless_output *out);

#endif
