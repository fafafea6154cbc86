/* The interpreter side of the python module: what runs where the user's code runs, whichever
 * process that is (pymod.h): in a compute process with the embedded libpython (python.c), or
 * in the python3 executable the compute process starts (serve.c, interpreter = PATH). It
 * prepares sys (python_path, the helper module), imports the preload modules and the routes'
 * callables, and runs one job. Python.h comes first (pymod.h). */
#include "pymod.h"
#include "error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PATHS 16 /* python_path entries */

/* One route's callable, imported at the route's first job in this process. */
struct route_fn {
	const struct lagless_conf *conf; /* the route's keys: valid for the process's life */
	PyObject *fn;
	PyObject *route; /* types.MappingProxyType of the route's keys */
};

struct lg_python lg_py;
static struct route_fn *fns;
static size_t nfns;
static char paths[MAX_PATHS][PATH_MAX];
static size_t npaths;

/* python_path (':' separated) into paths[], each made absolute with realpath(3). */
int
lg_python_paths(const char *v, char *err, size_t errlen)
{
	char one[PATH_MAX];

	npaths = 0;
	while (v != NULL && *v != '\0') {
		size_t n = strcspn(v, ":");

		if (n > 0) {
			if (n >= sizeof(one) || npaths == MAX_PATHS) {
				snprintf(err, errlen, "python_path: at most %d entries of at most %d "
				    "bytes", MAX_PATHS, PATH_MAX - 1);
				return -1;
			}
			memcpy(one, v, n);
			one[n] = '\0';
			if (realpath(one, paths[npaths]) == NULL) {
				snprintf(err, errlen, "python_path %s: %s", one, strerror(errno));
				return -1;
			}
			npaths++;
		}
		v += n + (v[n] == ':');
	}
	return 0;
}

/* The .pth files of each python_path entry, as site.py reads them in site-packages: a venv's
 * site-packages holds its editable installs (`pip install -e`: a path or an import hook in
 * a .pth file) and namespace packages that way. site.addsitedir does not add an entry that is
 * already on sys.path again; the directories a .pth file names go to its end. */
static int
add_site_dirs(void)
{
	PyObject *site = PyImport_ImportModule("site");

	for (size_t i = 0; site != NULL && i < npaths; i++) {
		PyObject *r = PyObject_CallMethod(site, "addsitedir", "O&", PyUnicode_DecodeFSDefault,
		    paths[i]);

		if (r == NULL) {
			Py_DECREF(site);
			return -1;
		}
		Py_DECREF(r);
	}
	Py_XDECREF(site);
	return site != NULL ? 0 : -1;
}

/* sys.path[0:0] = paths, their .pth files processed; sys.stdout = sys.stderr
 * (print() goes to the error log, never into the answer of --run-kind);
 * traceback.format_exception kept for the failures. */
static int
setup_sys(void)
{
	PyObject *sys_path = PySys_GetObject("path"), *err = PySys_GetObject("stderr"), *tb;

	for (size_t i = npaths; sys_path != NULL && i > 0; i--) {
		PyObject *s = PyUnicode_DecodeFSDefault(paths[i - 1]);

		if (s == NULL || PyList_Insert(sys_path, 0, s) == -1) {
			Py_XDECREF(s);
			return -1;
		}
		Py_DECREF(s);
	}
	if (sys_path == NULL || add_site_dirs() == -1 ||
	    (err != NULL && PySys_SetObject("stdout", err) == -1))
		return -1;
	if ((tb = PyImport_ImportModule("traceback")) == NULL)
		return -1;
	lg_py.format_exception = PyObject_GetAttrString(tb, "format_exception");
	Py_DECREF(tb);
	return lg_py.format_exception != NULL ? 0 : -1;
}

/* Imports the module of spec and walks its attributes. New reference, or NULL with an
 * exception set. */
PyObject *
lg_python_resolve(const char *spec)
{
	const char *colon = strchr(spec, ':'), *a = colon + 1;
	PyObject *name = PyUnicode_FromStringAndSize(spec, colon - spec), *obj;

	if (name == NULL)
		return NULL;
	obj = PyImport_Import(name);
	Py_DECREF(name);
	while (obj != NULL && *a) {
		size_t n = strcspn(a, ".");
		PyObject *attr = PyUnicode_FromStringAndSize(a, (Py_ssize_t)n), *next = NULL;

		if (attr != NULL)
			next = PyObject_GetAttr(obj, attr);
		Py_XDECREF(attr);
		Py_DECREF(obj);
		obj = next;
		a += n + (a[n] == '.');
	}
	if (obj != NULL && !PyCallable_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s is a %.80s, not a callable", spec,
		    Py_TYPE(obj)->tp_name);
		Py_CLEAR(obj);
	}
	return obj;
}

/* The route's callable, imported at its first job in this process; NULL with an exception. */
static struct route_fn *
route_fn(const struct lagless_conf *conf, const struct lagless_host *h)
{
	const char *key, *value;
	PyObject *d, *fn;
	struct route_fn *grown;

	for (size_t i = 0; i < nfns; i++)
		if (fns[i].conf == conf)
			return &fns[i];
	if ((fn = lg_python_resolve(h->conf_get(conf, "callable"))) == NULL)
		return NULL;
	if ((d = PyDict_New()) == NULL || (grown = realloc(fns, (nfns + 1) * sizeof(*fns))) ==
	    NULL) {
		Py_XDECREF(d);
		Py_DECREF(fn);
		return (struct route_fn *)PyErr_NoMemory();
	}
	fns = grown;
	for (size_t i = 0; h->conf_at(conf, i, &key, &value) == 0; i++) {
		PyObject *v = PyUnicode_FromString(value);

		if (v == NULL || PyDict_SetItemString(d, key, v) == -1)
			PyErr_Clear(); /* a value that is not UTF-8: left out */
		Py_XDECREF(v);
	}
	fns[nfns] = (struct route_fn){ conf, fn, PyDictProxy_New(d) };
	Py_DECREF(d);
	if (fns[nfns].route == NULL) {
		Py_DECREF(fn);
		return NULL;
	}
	return &fns[nfns++];
}


/* preload_routes: 1 yes, 0 no or absent (the default), -1 neither. */
int
lg_python_preload_routes(const struct lagless_host *h, const struct lagless_conf *conf)
{
	const char *v = h->conf_get(conf, "preload_routes");

	if (v == NULL || strcmp(v, "no") == 0)
		return 0;
	return strcmp(v, "yes") == 0 ? 1 : -1;
}

/* The callables of the routes that use python.call (host->route_at, ABI 1.2), imported now
 * rather than at each route's first job. A failure is logged and left for that job, which
 * tries again and reports it (the import check of -t and start-up already refused the
 * imports that fail there). */
static void
import_callables(const struct lagless_host *h)
{
	const char *path, *kind;
	const struct lagless_conf *conf;
	char err[512], what[300];

	for (size_t i = 0; h->route_at(i, &path, &kind, &conf) == 0; i++)
		if (route_fn(conf, h) == NULL) {
			snprintf(what, sizeof(what), "import of the callable of route %s", path);
			lg_python_error(&lg_py, h, what, 1, err, sizeof(err));
		}
}

int
lg_python_prepare(char *err, size_t errlen)
{
	if (setup_sys() == -1 || lg_python_helper(&lg_py) == -1 || lg_python_region_ready() == -1) {
		lg_python_error(&lg_py, NULL, NULL, 0, err, errlen);
		return -1;
	}
	return 0;
}

int
lg_python_setup(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *pre = h->conf_get(conf, "preload");

	if (lg_python_paths(h->conf_get(conf, "python_path"), err, errlen) == -1 ||
	    lg_python_prepare(err, errlen) == -1)
		return -1;
	while (pre != NULL && *pre) {
		size_t n = strcspn(pre, ", \t");
		PyObject *m = NULL;

		if (n > 0 && (m = PyImport_ImportModule(strndupa(pre, n))) == NULL)
			lg_python_error(&lg_py, h, "preload", 1, err, errlen);
		Py_XDECREF(m);
		pre += n;
		pre += strspn(pre, ", \t");
	}
	if (lg_python_preload_routes(h, conf) == 1)
		import_callables(h);
	err[0] = '\0';
	return 0;
}

int
lg_python_run(const struct lagless_request *rq, struct lagless_output *out)
{
	char line[256];
	struct route_fn *f;

	if ((f = route_fn(rq->conf, rq->host)) == NULL) {
		lg_python_error(&lg_py, rq->host, "import", 1, line, sizeof(line));
		rq->host->set_message(out, "cannot import %s: %s\n",
		    rq->host->conf_get(rq->conf, "callable"), line);
		return LAGLESS_ERROR;
	}
	return lg_python_call(&lg_py, f->fn, f->route, rq, out);
}
