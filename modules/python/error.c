/* A Python exception turned into the one line an answer or a log names, and its traceback on
 * the error log (modules/python/error.h). */
#include "error.h"

#include <stdio.h>
#include <string.h>

void
lg_python_error(const struct lg_python *p, const struct lagless_host *h, const char *what,
    int log, char *buf, size_t cap)
{
	PyObject *t, *v, *tb, *s = NULL, *lines = NULL;

	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	if (v != NULL)
		s = PyObject_Str(v);
	const char *msg = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
	snprintf(buf, cap, "%s%s%s", t != NULL ? ((PyTypeObject *)t)->tp_name : "error",
	    msg != NULL && *msg ? ": " : "", msg != NULL ? msg : "");
	buf[strcspn(buf, "\n")] = '\0'; /* the first line */
	if (log && h != NULL && p->format_exception != NULL && t != NULL)
		lines = PyObject_CallFunctionObjArgs(p->format_exception, t, v ? v : Py_None,
		    tb ? tb : Py_None, NULL);
	for (Py_ssize_t i = 0; lines != NULL && PyList_Check(lines) && i < PyList_GET_SIZE(lines);
	    i++) {
		const char *l = PyUnicode_AsUTF8(PyList_GET_ITEM(lines, i));

		for (size_t n; l != NULL && *l; l += n + (l[n] == '\n'))
			if ((n = strcspn(l, "\n")) > 0)
				h->log(LAGLESS_LOG_ERROR, "%s: %.*s", what, (int)n, l);
	}
	Py_XDECREF(lines);
	Py_XDECREF(s);
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	PyErr_Clear();
}
