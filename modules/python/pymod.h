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
};

/* Creates the `lagless` module from its embedded source, puts it in sys.modules and fills
 * py->bad_request and py->request_type (new references). Needs an initialised interpreter and
 * the GIL. Returns 0, or -1 with a Python exception set. */
int lg_python_helper(struct lg_python *py);

/* The read-only memory type the body and the output view are made of (call.c): must be ready
 * (PyType_Ready) before the first job. Returns 0, or -1 with a Python exception set. */
int lg_python_region_ready(void);

/* One job: calls fn(body, request) for the request view rq and turns what it returns or raises
 * into the answer in out (docs/MODULES.md, "Python kinds"). route is the route's keys as a
 * read-only mapping (borrowed). Returns an enum lagless_status. Never leaves a Python exception
 * set. If the callable kept a view of the body or the output past its return, the process is
 * recycled after this answer (host->recycle, logged): the memory behind that view is the next
 * job's. */
int lg_python_call(const struct lg_python *py, PyObject *fn, PyObject *route,
    const struct lagless_request *rq, struct lagless_output *out);

#endif
