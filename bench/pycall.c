/* pycall: one pure-Python function called through the C API (PyObject_Call), timed in C, in
 * whichever interpreter loaded this code. bench/python_speed.py builds it three ways to tell
 * where an embedded interpreter loses its time against /usr/bin/python3 (issue 38):
 *
 *   pycall.so      an extension module imported by /usr/bin/python3: the interpreter is the
 *                  executable's own code (Debian: a static, LTO + PGO build);
 *   pycall         a program embedding libpython3.11.so (pkg-config python3-embed), as
 *                  modules/python/ does in a compute process;
 *   pycall-static  a program linking libpython3.11.a, non-PIE: the same sources without
 *                  position-independent code or symbol interposition.
 *
 * The C code and the call are the same in all three, so a difference is the interpreter's
 * build. Program usage: pycall DIR N K CLOCK, prints the fastest of K calls of
 * benchjobs.execute_cpu_workload(N) (benchjobs from DIR) in seconds; CLOCK is "wall"
 * (CLOCK_MONOTONIC) or "cpu" (CLOCK_THREAD_CPUTIME_ID, clock_gettime(2): the time this thread
 * ran, which other work on a shared machine disturbs less). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Seconds on the clock named by cpu (1: this thread's CPU time, 0: monotonic wall time). */
static double
now_s(int cpu)
{
	struct timespec t;

	clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* pycall.best(fn, n, k, cpu) -> float: the fastest of k calls fn(n), in seconds on the clock
 * of now_s(cpu). Raises what fn raises; ValueError for k < 1. */
static PyObject *
best(PyObject *self, PyObject *args)
{
	PyObject *fn, *argt;
	long long n;
	int k, cpu;
	double fastest = -1;

	(void)self;
	if (!PyArg_ParseTuple(args, "OLip", &fn, &n, &k, &cpu))
		return NULL;
	if (k < 1) {
		PyErr_SetString(PyExc_ValueError, "k must be at least 1");
		return NULL;
	}
	if ((argt = Py_BuildValue("(L)", n)) == NULL)
		return NULL;
	for (int i = 0; i < k; i++) {
		double t0 = now_s(cpu);
		PyObject *r = PyObject_Call(fn, argt, NULL);
		double dt = now_s(cpu) - t0;

		if (r == NULL) {
			Py_DECREF(argt);
			return NULL;
		}
		Py_DECREF(r);
		if (fastest < 0 || dt < fastest)
			fastest = dt;
	}
	Py_DECREF(argt);
	return PyFloat_FromDouble(fastest);
}

static PyMethodDef methods[] = {
	{ "best", best, METH_VARARGS, "best(fn, n, k, cpu): fastest of k calls fn(n), seconds" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT, "pycall", "PyObject_Call timed in C (bench/pycall.c)", -1, methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_pycall(void);

PyMODINIT_FUNC
PyInit_pycall(void)
{
	return PyModule_Create(&moddef);
}

#ifdef PYCALL_MAIN
/* The embedding program: an isolated interpreter (as python3 -I), pycall built in. Exit
 * status 0 with the seconds on standard output, 1 with Python's message on standard error,
 * 2 on bad usage. */
int
main(int argc, char **argv)
{
	char code[8192];
	PyConfig c;
	PyStatus s;
	int n;

	if (argc != 5 || (strcmp(argv[4], "wall") != 0 && strcmp(argv[4], "cpu") != 0)) {
		fprintf(stderr, "usage: %s DIR N K wall|cpu\n", argv[0]);
		return 2;
	}
	n = snprintf(code, sizeof(code), "import sys\nsys.path.insert(0, %s)\n"
	    "import benchjobs, pycall\nprint('%%.9f' %% pycall.best("
	    "benchjobs.execute_cpu_workload, int(%s), int(%s), %s))\n",
	    "sys.argv[1]", "sys.argv[2]", "sys.argv[3]", "sys.argv[4] == 'cpu'");
	if (n < 0 || (size_t)n >= sizeof(code))
		return 2;
	if (PyImport_AppendInittab("pycall", PyInit_pycall) == -1)
		return 1;
	PyConfig_InitIsolatedConfig(&c);
	s = PyConfig_SetBytesArgv(&c, argc, argv);
	if (!PyStatus_Exception(s))
		s = Py_InitializeFromConfig(&c);
	PyConfig_Clear(&c);
	if (PyStatus_Exception(s)) {
		fprintf(stderr, "%s: cannot start Python: %s\n", argv[0],
		    s.err_msg ? s.err_msg : "?");
		return 1;
	}
	n = PyRun_SimpleString(code) == 0 ? 0 : 1;
	if (Py_FinalizeEx() < 0)
		n = 1;
	return n;
}
#endif
