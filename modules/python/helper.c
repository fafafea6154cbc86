/* The `lagless` Python module a Python kind may import: BadRequest and the Request type. It is
 * embedded here as source and created in each compute process after the interpreter starts, so
 * there is no file to install beside python.so and no version of it that can disagree. */
#include "pymod.h"

#include <unistd.h>

static const char helper_src[] =
"\"\"\"lagless: the helper module of lagless's python job module (docs/MODULES.md, Python kinds).\n"
"\n"
"A callable named by a route (callable = pkg.mod:func) is called as func(body, request):\n"
"body is a read-only memoryview over the request body in shared memory, request a Request.\n"
"It returns bytes (or any bytes-like object), str (sent as UTF-8 text/plain) or a tuple\n"
"(status, content_type, body). Raising BadRequest('why') answers 400 with that text.\n"
"\n"
"compute_pid: the pid of the compute process running the calls, the one the server's log\n"
"lines and metrics name: os.getpid() with an embedded interpreter, the parent of this\n"
"process when the calls run in a python3 executable (interpreter = ...).\n"
"\"\"\"\n"
"\n"
"\n"
"class BadRequest(Exception):\n"
"    \"\"\"The request is wrong: a 4xx answer (400 unless status says another) whose body is\n"
"    the message, whole, as text/plain. A body of another type (a JSON error document):\n"
"    return (422, 'application/json', body) instead.\"\"\"\n"
"\n"
"    def __init__(self, message='bad request', status=400):\n"
"        if not isinstance(status, int) or not 400 <= status <= 499:\n"
"            raise ValueError('BadRequest status must be in 400..499, not %r' % (status,))\n"
"        super().__init__(message)\n"
"        self.status = status\n"
"\n"
"\n"
"class Request:\n"
"    \"\"\"What the callable knows of the request. Valid only during the call: output is\n"
"    released when the callable returns.\n"
"\n"
"    method, path: str; the path normalized as routing saw it, without the query\n"
"    raw_query: str, the query after '?', not decoded ('' when none)\n"
"    query: dict, the query decoded (urllib.parse.parse_qsl; the last value of a name wins)\n"
"    headers: dict, the header fields the route lists (fields = ...), lower-case names\n"
"    route: read-only mapping of the route's own keys (callable and any key of yours)\n"
"    deadline_ns: time.monotonic_ns() past which the client gets 504 and this process is killed\n"
"    output: writable memoryview of the job's output region (shared memory); write the answer\n"
"        there and return output[:n] to send it without a copy\n"
"    \"\"\"\n"
"\n"
"    __slots__ = ('method', 'path', 'raw_query', 'headers', 'route', 'deadline_ns', 'output',\n"
"                 '_query')\n"
"\n"
"    def __init__(self, method, path, raw_query, headers, route, deadline_ns, output):\n"
"        self.method = method\n"
"        self.path = path\n"
"        self.raw_query = raw_query\n"
"        self.headers = headers\n"
"        self.route = route\n"
"        self.deadline_ns = deadline_ns\n"
"        self.output = output\n"
"        self._query = None\n"
"\n"
"    @property\n"
"    def query(self):\n"
"        if self._query is None:\n"
"            from urllib.parse import parse_qsl\n"
"            self._query = dict(parse_qsl(self.raw_query, keep_blank_values=True))\n"
"        return self._query\n"
"\n"
"    def remaining(self):\n"
"        \"\"\"Seconds left before the deadline (negative once past it).\"\"\"\n"
"        import time\n"
"        return (self.deadline_ns - time.monotonic_ns()) / 1e9\n"
"\n"
"    def __repr__(self):\n"
"        return '<lagless.Request %s %s>' % (self.method, self.path)\n";

int
lg_python_helper(struct lg_python *py)
{
	PyObject *code = NULL, *mod = NULL, *dict, *r;
	int rc = -1;

	if ((mod = PyImport_AddModule("lagless")) == NULL) /* borrowed, in sys.modules */
		return -1;
	Py_INCREF(mod);
	dict = PyModule_GetDict(mod);
	if (PyDict_SetItemString(dict, "__builtins__", PyEval_GetBuiltins()) == -1 ||
	    (code = Py_CompileString(helper_src, "<lagless helper>", Py_file_input)) == NULL ||
	    (r = PyEval_EvalCode(code, dict, dict)) == NULL)
		goto out;
	Py_DECREF(r);
	py->bad_request = PyDict_GetItemString(dict, "BadRequest");
	py->request_type = PyDict_GetItemString(dict, "Request");
	if (py->bad_request == NULL || py->request_type == NULL) {
		PyErr_SetString(PyExc_RuntimeError, "the lagless helper module is incomplete");
		goto out;
	}
	Py_INCREF(py->bad_request);
	Py_INCREF(py->request_type);
	if ((r = PyLong_FromLong(py->compute_pid ? py->compute_pid : (long)getpid())) == NULL ||
	    PyDict_SetItemString(dict, "compute_pid", r) == -1) {
		Py_XDECREF(r);
		goto out;
	}
	Py_DECREF(r);
	rc = 0;
out:
	Py_XDECREF(code);
	Py_XDECREF(mod);
	return rc;
}
