/* One Python job: the request view turned into (body, request), the call, and what it returned
 * or raised turned into the answer. The body and the output are handed over without a copy, as
 * memoryviews over a small exporter type (struct region) that counts its buffer exports: after
 * the call, a count above zero means the callable kept a view of memory that belongs to the
 * next job, which no memoryview.release() could revoke. */
#include "pymod.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

/* Memory of the job (the body or the output region), exported through the buffer protocol
 * (PEP 3118) while the job runs; p is NULL once it has ended, and every later request for a
 * buffer fails. */
struct region {
	PyObject_HEAD
	void *p;
	Py_ssize_t len;
	int writable;
	Py_ssize_t exports; /* buffers handed out and not yet released */
};

static int
region_getbuf(PyObject *o, Py_buffer *view, int flags)
{
	struct region *r = (struct region *)o;

	if (r->p == NULL) {
		view->obj = NULL;
		PyErr_SetString(PyExc_BufferError, "this job's memory is gone: a request body or "
		    "output view is valid only during the call");
		return -1;
	}
	/* refuses PyBUF_WRITABLE on the read-only body with BufferError */
	if (PyBuffer_FillInfo(view, o, r->p, r->len, !r->writable, flags) == -1)
		return -1;
	r->exports++;
	return 0;
}

static void
region_releasebuf(PyObject *o, Py_buffer *view)
{
	((struct region *)o)->exports--;
}

static PyBufferProcs region_buffer = { region_getbuf, region_releasebuf };

static PyTypeObject region_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "lagless.Region",
	.tp_basicsize = sizeof(struct region),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_as_buffer = &region_buffer,
	.tp_doc = "memory of one job (the request body or the output region)",
};

int
lg_python_region_ready(void)
{
	return PyType_Ready(&region_type);
}

/* A new region over n bytes at p and a memoryview of it; NULL with an exception. */
static struct region *
region_new(void *p, size_t n, int writable, PyObject **view)
{
	struct region *r = PyObject_New(struct region, &region_type);

	if (r == NULL)
		return NULL;
	r->p = p;
	r->len = (Py_ssize_t)n;
	r->writable = writable;
	r->exports = 0;
	if ((*view = PyMemoryView_FromObject((PyObject *)r)) == NULL) {
		Py_DECREF(r);
		return NULL;
	}
	return r;
}

/* Ends the job's use of r: its memoryview released (a stored Request holds a released view,
 * harmless), then the count of exports checked. Returns the exports still held. */
static Py_ssize_t
region_end(struct region *r, PyObject *view)
{
	PyObject *x = PyObject_CallMethod(view, "release", NULL);

	if (x == NULL)
		PyErr_Clear(); /* BufferError: exports of the view itself; counted below */
	Py_XDECREF(x);
	Py_DECREF(view);
	return r->exports;
}

/* The request's header fields as a dict (names lower case as the route lists them; values as
 * ISO-8859-1, RFC 9110 section 5.5). NULL with an exception. */
static PyObject *
headers_of(const struct lagless_request *rq)
{
	PyObject *d = PyDict_New();

	for (size_t i = 0; d != NULL && i < rq->nfields; i++) {
		const struct lagless_field *f = &rq->fields[i];
		PyObject *v = PyUnicode_DecodeLatin1(f->value, (Py_ssize_t)f->value_len, NULL);

		if (v == NULL || PyDict_SetItemString(d, f->name, v) == -1)
			Py_CLEAR(d);
		Py_XDECREF(v);
	}
	return d;
}

static PyObject *
request_of(const struct lg_python *py, const struct lagless_request *rq, PyObject *route,
    PyObject *outview)
{
	PyObject *m = PyUnicode_DecodeLatin1(rq->method, (Py_ssize_t)rq->method_len, NULL);
	PyObject *p = PyUnicode_DecodeUTF8(rq->path, (Py_ssize_t)rq->path_len, "surrogateescape");
	PyObject *q = PyUnicode_DecodeLatin1(rq->query, (Py_ssize_t)rq->query_len, NULL);
	PyObject *h = headers_of(rq);
	PyObject *d = PyLong_FromUnsignedLongLong(rq->deadline_ns);
	PyObject *r = NULL;

	if (m && p && q && h && d)
		r = PyObject_CallFunctionObjArgs(py->request_type, m, p, q, h, route, d, outview,
		    NULL);
	Py_XDECREF(m);
	Py_XDECREF(p);
	Py_XDECREF(q);
	Py_XDECREF(h);
	Py_XDECREF(d);
	return r;
}

/* Puts the bytes of a bytes-like or str object into out: no copy when they already are the
 * start of the output region (the callable returned request.output[:n]), a move when they lie
 * further in it, else one copy. Returns a lagless_status; a message in out on error. */
static int
put_body(const struct lagless_host *h, struct lagless_output *out, PyObject *body)
{
	Py_buffer b;
	const unsigned char *lo = out->data, *hi = out->data + out->cap;
	int st = LAGLESS_OK;

	if (PyUnicode_Check(body)) {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(body, &n);

		if (s == NULL)
			return -1;
		return h->write(out, s, (size_t)n) == 0 ? LAGLESS_OK : LAGLESS_TOO_LARGE;
	}
	if (PyObject_GetBuffer(body, &b, PyBUF_SIMPLE) == -1)
		return -1;
	const unsigned char *p = b.buf;
	if (p >= lo && p <= hi && (size_t)b.len <= (size_t)(hi - p)) {
		if (p != lo)
			memmove(out->data, p, (size_t)b.len);
		out->len = (size_t)b.len;
	} else if (h->write(out, p, (size_t)b.len) == -1) {
		st = LAGLESS_TOO_LARGE;
	}
	PyBuffer_Release(&b);
	return st;
}

/* The body of a 4xx or 500 answer, n bytes at p, sent whole (ABI 1.2 error_body) with the
 * content type set before: cut to the output region, with a log line, when over it (p may lie
 * in that region: request.output[:n]). Its first line, at most 200 bytes, is also the short
 * message that names the failure in the server's log and in --run-kind. */
static void
error_text(const struct lagless_host *h, struct lagless_output *out, const void *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);
	size_t keep = n < out->cap ? n : out->cap, line = nl ? (size_t)(nl - (const char *)p) : n;

	h->set_message(out, "%.*s", (int)(line < 200 ? line : 200), (const char *)p);
	if (keep < n)
		h->log(LAGLESS_LOG_WARN, "an error body of %zu bytes cut to the %zu bytes of the "
		    "output region", n, keep);
	memmove(out->data, p, keep);
	out->len = keep;
	h->error_body(out);
}

/* The body of a 4xx or 500 tuple answer (str as UTF-8, or bytes-like; None: the default
 * text) into out with error_text. Returns st, or -1 with an exception. */
static int
put_error(const struct lagless_host *h, struct lagless_output *out, PyObject *body, int st)
{
	Py_buffer b;

	if (PyUnicode_Check(body)) {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(body, &n);

		if (s == NULL)
			return -1;
		error_text(h, out, s, (size_t)n);
	} else if (body != Py_None) {
		if (PyObject_GetBuffer(body, &b, PyBUF_SIMPLE) == -1)
			return -1;
		error_text(h, out, b.buf, (size_t)b.len);
		PyBuffer_Release(&b);
	}
	return st;
}

/* One (name, value) pair of a tuple answer's headers, both str, into host->add_field (ABI
 * 1.2). A field the host refuses makes the answer a 502 (the host logs why): not an exception
 * here, as a field dropped in silence would be a wrong answer. Returns 0, or -1 with an
 * exception for a pair that is not two str. */
static int
put_field(const struct lagless_host *h, struct lagless_output *out, PyObject *pair)
{
	PyObject *f = PySequence_Fast(pair, "a header is a (name, value) pair of str");
	const char *n, *v;
	Py_ssize_t nl, vl;
	int rc = -1;

	if (f == NULL)
		return -1;
	if (PySequence_Fast_GET_SIZE(f) != 2 || !PyUnicode_Check(PySequence_Fast_GET_ITEM(f, 0)) ||
	    !PyUnicode_Check(PySequence_Fast_GET_ITEM(f, 1)))
		PyErr_Format(PyExc_TypeError, "a header is a (name, value) pair of str, not %R", pair);
	else if ((n = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(f, 0), &nl)) != NULL &&
	    (v = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(f, 1), &vl)) != NULL) {
		h->add_field(out, n, (size_t)nl, v, (size_t)vl);
		rc = 0;
	}
	Py_DECREF(f);
	return rc;
}

/* The headers of a 4-tuple answer: a dict of str to str, or an iterable of (name, value)
 * pairs (a name twice: Set-Cookie), None for none. Returns 0, or -1 with an exception. */
static int
put_fields(const struct lagless_host *h, struct lagless_output *out, PyObject *fields)
{
	PyObject *items, *it, *pair;
	int rc = 0;

	if (fields == Py_None)
		return 0;
	items = PyDict_Check(fields) ? PyDict_Items(fields) : (Py_INCREF(fields), fields);
	if (items == NULL || (it = PyObject_GetIter(items)) == NULL) {
		Py_XDECREF(items);
		return -1;
	}
	while (rc == 0 && (pair = PyIter_Next(it)) != NULL) {
		rc = put_field(h, out, pair);
		Py_DECREF(pair);
	}
	Py_DECREF(it);
	Py_DECREF(items);
	return rc == 0 && PyErr_Occurred() ? -1 : rc;
}

/* (status, content_type, body[, headers]): 2xx or 3xx with a body, 4xx, 500 or 501-504 with
 * that body too (whole, with its content type: a FastAPI-style 422 {"detail": [...]} in
 * application/json); headers (ABI 1.2) as put_fields takes them. */
static int
put_tuple(const struct lagless_host *h, struct lagless_output *out, PyObject *t)
{
	PyObject *ctype = PyTuple_GET_ITEM(t, 1), *body = PyTuple_GET_ITEM(t, 2);
	long code = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
	const char *ct = NULL;
	Py_ssize_t ctn = 0;

	if (code == -1 && PyErr_Occurred())
		return -1;
	if (PyTuple_GET_SIZE(t) == 4 && put_fields(h, out, PyTuple_GET_ITEM(t, 3)) == -1)
		return -1;
	/* a NUL inside would cut the C string the host reads: refused, not cut */
	if (ctype != Py_None && (!PyUnicode_Check(ctype) || (ct = PyUnicode_AsUTF8AndSize(ctype,
	    &ctn)) == NULL || strlen(ct) != (size_t)ctn || h->set_ctype(out, ct) == -1)) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_ValueError, "content type %R: at most 127 visible ASCII "
			    "characters", ctype);
		return -1;
	}
	if (code >= 200 && code <= 399 && h->set_status(out, (int)code) == 0)
		return body == Py_None ? LAGLESS_OK : put_body(h, out, body);
	if (code >= 400 && code <= 499) {
		h->set_status(out, (int)code);
		return put_error(h, out, body, LAGLESS_BAD_INPUT);
	}
	if (code >= 500 && code <= 504) {
		h->set_status(out, (int)code);
		return put_error(h, out, body, LAGLESS_ERROR);
	}
	PyErr_Format(PyExc_ValueError, "status %ld: a Python kind answers 2xx, 300-303, 307, "
	    "308, 4xx or 500-504", code);
	return -1;
}

/* What the callable returned, into out. Returns a lagless_status, or -1 with an exception. */
static int
answer(const struct lagless_host *h, struct lagless_output *out, PyObject *res)
{
	if (PyUnicode_Check(res)) {
		h->set_ctype(out, "text/plain; charset=utf-8");
		return put_body(h, out, res);
	}
	if (PyTuple_Check(res) && (PyTuple_GET_SIZE(res) == 3 || PyTuple_GET_SIZE(res) == 4))
		return put_tuple(h, out, res);
	if (PyObject_CheckBuffer(res))
		return put_body(h, out, res);
	PyErr_Format(PyExc_TypeError, "the callable returned %.100s; return bytes, str or "
	    "(status, content_type, body[, headers])", res == Py_None ? "None" : Py_TYPE(res)->tp_name);
	return -1;
}

/* A BadRequest raised by the call, into out: its status (400 unless it says another 4xx)
 * and its message, whole, as text (not the exception's first line only). */
static int
bad_request(const struct lg_python *py, const char *what, const struct lagless_host *h,
    struct lagless_output *out)
{
	PyObject *t, *v, *tb, *s = NULL;
	long code = 400;
	char line[256];

	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	if (v != NULL && (s = PyObject_GetAttrString(v, "status")) != NULL) {
		code = PyLong_AsLong(s);
		Py_CLEAR(s);
	}
	PyErr_Clear();
	h->set_status(out, code >= 400 && code <= 499 ? (int)code : 400);
	Py_ssize_t n;
	const char *msg = v != NULL && (s = PyObject_Str(v)) != NULL ?
	    PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	if (msg != NULL) {
		h->set_ctype(out, "text/plain; charset=utf-8");
		error_text(h, out, msg, (size_t)n);
		h->write(out, "\n", 1); /* as the short message always was; none past the cap */
		Py_DECREF(s);
		Py_XDECREF(t);
		Py_XDECREF(v);
		Py_XDECREF(tb);
		PyErr_Clear();
		return LAGLESS_BAD_INPUT;
	}
	Py_XDECREF(s);
	PyErr_Restore(t, v, tb);
	lg_python_error(py, h, what, 0, line, sizeof(line)); /* a str() that failed: its name */
	h->set_message(out, "%s\n", line);
	return LAGLESS_BAD_INPUT;
}

/* The exception the call raised (or answer() set), into out: BadRequest is its 4xx, anything
 * else a 500 whose message is the exception's first line, with the traceback in the log. */
static int
failure(const struct lg_python *py, const struct lagless_request *rq, struct lagless_output *out)
{
	const struct lagless_host *h = rq->host;
	char what[160], line[256];

	snprintf(what, sizeof(what), "%s %s", rq->method, rq->path);
	if (PyErr_ExceptionMatches(py->bad_request))
		return bad_request(py, what, h, out);
	if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
		PyErr_Clear(); /* formatting a traceback needs the memory there is not */
		h->log(LAGLESS_LOG_ERROR, "%s: MemoryError (the process memory limit, "
		    "--compute-memory?)", what);
		h->set_message(out, "MemoryError: out of memory\n");
		return LAGLESS_ERROR;
	}
	lg_python_error(py, h, what, 1, line, sizeof(line));
	h->set_message(out, "%s\n", line);
	return LAGLESS_ERROR;
}

/* The callable kept a view of this job's memory: past this return that memory is another
 * job's, and no Python call can take the view back. The process must not run another job:
 * it is recycled after this answer (host->recycle, ABI 1.2; no Python runs in between, the
 * module holding the GIL), so the answer itself is still sent. */
static void
kept_view(const struct lagless_request *rq, struct lagless_output *out, const char *which)
{
	rq->host->log(LAGLESS_LOG_ERROR, "%s %s: the callable kept a view of the request %s past "
	    "its return (a slice, numpy array or buffer of it in a global, a cache or a "
	    "thread); this process is replaced after this answer so that no later job sees it",
	    rq->method, rq->path, which);
	rq->host->recycle(out);
}

int
lg_python_call(const struct lg_python *py, PyObject *fn, PyObject *route,
    const struct lagless_request *rq, struct lagless_output *out)
{
	PyObject *body = NULL, *outview = NULL, *req = NULL, *res = NULL;
	struct region *in, *outr = NULL;
	int st = -1;

	in = region_new((void *)rq->input, rq->input_len, 0, &body);
	if (in != NULL)
		outr = region_new(out->data, out->cap, 1, &outview);
	if (outr != NULL && (req = request_of(py, rq, route, outview)) != NULL &&
	    (res = PyObject_CallFunctionObjArgs(fn, body, req, NULL)) != NULL)
		st = answer(rq->host, out, res);
	Py_XDECREF(res);
	if (st == -1) {
		out->len = 0;
		st = failure(py, rq, out); /* clears the exception: its frames let go of body */
	}
	Py_XDECREF(req);
	if (outr != NULL && region_end(outr, outview) + region_end(in, body) > 0) {
		PyGC_Collect(); /* a reference cycle (a frame kept by a closure) holds it? */
		if (outr->exports > 0 || in->exports > 0)
			kept_view(rq, out, in->exports > 0 ? "body" : "output");
	} else if (in != NULL && outr == NULL) {
		region_end(in, body);
	}
	if (in != NULL)
		in->p = NULL;
	if (outr != NULL)
		outr->p = NULL;
	Py_XDECREF(in);
	Py_XDECREF(outr);
	return st;
}
