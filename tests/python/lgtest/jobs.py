"""One callable per behaviour tests/integration/test_python_module.py checks. Each is called as
func(body, request) in a compute process by lagless's python module."""
import ctypes
import os

import lagless

CALLS = 0       # jobs this process ran: 1 at the first job of a fresh interpreter
KEPT = []


def echo(body, request):
    return body                         # the memoryview itself: a bytes-like answer


def text(body, request):
    return "h\u00e9llo %d" % len(body)  # str: UTF-8, text/plain


def created(body, request):
    return (201, "application/json", b'{"made": %d}' % len(body))


def teapot(body, request):
    return (418, None, "short and stout")


def tuple_500(body, request):
    return (500, None, b"the tuple said 500")


def fastapi_422(body, request):
    """A FastAPI-style validation error: a JSON document well over 255 bytes."""
    import json
    detail = [{"loc": ["body", "item", i], "msg": "field required", "type": "value_error.missing"}
              for i in range(8)]
    return (422, "application/json", json.dumps({"detail": detail}))


def long_bad(body, request):
    raise lagless.BadRequest("the field 'name' " + "is much too long, " * 30 + "end")


def weird_status(body, request):
    return (305, None, b"")


def redirect(body, request):
    return (302, None, b"", {"Location": "/new?x=1"})


def gateway(body, request):
    return (503, None, "upstream busy", {"Retry-After": "5"})


def cookies(body, request):
    return (200, "text/plain", "two", [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])


def hop_header(body, request):
    return (200, None, b"x", {"Connection": "close"})


def newline_header(body, request):
    return (200, None, b"x", {"X-A": "a\r\nX-Injected: 1"})


def nothing(body, request):
    pass                                # a forgotten return


def view(body, request):
    """What the callable sees of the request, as text."""
    return "%s %s q=%s h=%s route=%s body=%d" % (
        request.method, request.path, sorted(request.query.items()),
        sorted(request.headers.items()), sorted(request.route.items()), len(body))


def bad(body, request):
    raise lagless.BadRequest("need %s" % request.query.get("need", "more"))


def unprocessable(body, request):
    raise lagless.BadRequest("not like that", status=422)


def fails(body, request):
    raise ValueError("the value was wrong\nsecond line")


def write_body(body, request):
    """Tries every Python way to write to the body; returns the errors and the body."""
    errors = []
    try:
        body[0] = 0x58
    except TypeError as e:
        errors.append("TypeError: %s" % e)
    try:
        memoryview(body.obj).cast("B")[0] = 0x58
    except (TypeError, BufferError) as e:
        errors.append(type(e).__name__)
    try:
        import numpy
        a = numpy.frombuffer(body, dtype=numpy.uint8)
        a.setflags(write=True)
    except (ImportError, ValueError) as e:
        errors.append(type(e).__name__)
    return "%s|%s" % (";".join(errors), bytes(body).decode())


def poke_body(body, request):
    """Writes to the body behind Python's back (ctypes at the address numpy reports): the input
    region is mapped read-only in compute processes, so this faults (502) rather than change
    the bytes of the request."""
    import numpy
    ctypes.memmove(numpy.frombuffer(body, dtype=numpy.uint8).ctypes.data, b"Z", 1)
    return b"poked"


def zero_copy(body, request):
    """The answer written straight into the output region: upper-cased body."""
    out = request.output
    n = len(body)
    out[:n] = body
    for i in range(n):
        c = out[i]
        if 0x61 <= c <= 0x7a:
            out[i] = c - 0x20
    return out[:n]


def zero_copy_moved(body, request):
    """Written at an offset: the module moves it to the start of the region."""
    out = request.output
    out[100:100 + len(body)] = body
    return (200, "text/plain", out[100:100 + len(body)])


def total(body, request):
    import numpy
    return str(int(numpy.frombuffer(body, dtype=numpy.uint8).sum(dtype=numpy.uint64)))


def crash(body, request):
    return ctypes.string_at(0)          # SIGSEGV inside a C extension


def spin(body, request):
    while True:
        pass


def whoami(body, request):
    global CALLS
    CALLS += 1
    return "pid=%d calls=%d" % (lagless.compute_pid, CALLS)


def hog(body, request):
    big = bytearray(int(request.query.get("mb", "1024")) << 20)
    return b"%d" % len(big)


def keep(body, request):
    KEPT.append(body[1:])               # a view of the next job's memory, past the return
    return b"kept"


not_callable = 42


def executable(body, request):
    import sys
    return "%s|%d.%d" % (sys.executable, sys.version_info[0], sys.version_info[1])


def procinfo(body, request):
    """Where the call runs: its pid, its parent's, its executable, and the compute process
    lagless names (lagless.compute_pid)."""
    return "%d %d %s %d" % (os.getpid(), os.getppid(), os.readlink("/proc/self/exe"),
                            lagless.compute_pid)


LEAKED = []


def leak(body, request):
    """Keeps mb MiB (written, so resident) for the life of the process: a leak."""
    LEAKED.append(b"x" * (int(request.query.get("mb", "64")) << 20))
    return b"%d" % sum(map(len, LEAKED))


def big_ctype(body, request):
    """A content type far over the host's 127 bytes (and over one relay message)."""
    return (200, "a/" + "b" * 70000, b"x")


def nul_ctype(body, request):
    return (200, "text/a\x00b", b"x")


def big_field(body, request):
    """A header field far over LAGLESS_ANSWER_FIELDS_BYTES (and over one relay message)."""
    return (200, None, b"x", {"X-Big": "v" * 70000})


def orphan_then_exit(body, request):
    """Leaves a process running that inherited the call's descriptors, then dies."""
    os.system("sleep 8 &")
    os._exit(3)


def say(body, request):
    """print() with the request's query: the error log shows it."""
    print("lgtest says %s" % request.raw_query)
    return b"said"
