"""The python job module (modules/python/, docs/MODULES.md "Python kinds"), loaded by the real
server from a configuration naming the test package tests/python/lgtest: answers and status
codes, the three return shapes, BadRequest, whole 4xx bodies with their content type,
exceptions, the read-only body, the zero-copy output, a crash in a C extension, the deadline
kill, a client that leaves stopping its call, the memory limit, a venv's .pth files and
sys.executable, the import check at -t and at SIGHUP, a reload with a changed Python file,
where = loop, --run-kind.

Under ASan (build/san) the module and lagless are instrumented, libpython is not. Two things
differ there and are handled here: a SIGSEGV is ASan's report and exit rather than a death by
signal (the crash tests accept its lines); and --run-kind exits normally, so LeakSanitizer would
report the interpreter's allocations, which the module deliberately never frees (the process
ends, and finalising would run user atexit code and wait for user threads): those runs get
ASAN_OPTIONS=detect_leaks=0. RLIMIT_DATA counts ASan's shadow mappings, so the memory limit test
runs in the normal build only (as test_kinds.py's argon2 one does)."""

import http.client
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, Server, request, wait_until

MODULES = os.environ.get("LAGLESS_MODULES") or os.path.join(REPO_ROOT, "build", "modules")
SAN = "/san/" in (LAGLESS_BIN or "")
TESTPKG = os.path.join(REPO_ROOT, "tests", "python")
CRASH_LINES = (r"compute\[\d+\] pid=\d+ (killed by signal (9|11)\b|exited with status 1)"
               r"|AddressSanitizer|SEGV|==\d+==")


def module():
    path = os.path.join(MODULES, "python.so")
    if not os.path.isfile(path):
        if os.environ.get("LAGLESS_MODULES"):
            pytest.fail("%s missing although LAGLESS_MODULES is set" % path)
        pytest.skip("%s not built (make modules, with libpython3.11-dev)" % path)
    return path


def routes(*specs):
    """[route /name] sections for (name, callable, extra lines) triples."""
    return "".join("\n[route /%s]\nmethods = GET, POST\nkind = python.call\ncallable = %s\n%s"
                   % (name, fn, extra) for name, fn, extra in specs)


# Where the calls run (docs/MODULES.md, "Which interpreter"): every test runs both ways, in
# the python3 executable each compute process starts (the default) and in the libpython
# embedded in the compute process.
INTERPRETER = {"way": None}


@pytest.fixture(scope="module", autouse=True, params=["python3", "embedded"])
def interpreter(request):
    INTERPRETER["way"] = request.param
    yield request.param
    INTERPRETER["way"] = None


def config(python_path, *specs):
    way = "interpreter = embedded\n" if INTERPRETER["way"] == "embedded" else ""
    return "[module python]\npath = %s\n%spython_path = %s\n%s" % (module(), way, python_path,
                                                                  routes(*specs))


JOBS = [(n, "lgtest.jobs:" + n, "") for n in (
    "echo", "text", "created", "teapot", "tuple_500", "weird_status", "nothing", "bad",
    "unprocessable", "fastapi_422", "long_bad", "fails", "redirect", "gateway", "cookies",
    "hop_header", "newline_header", "write_body", "poke_body", "zero_copy", "zero_copy_moved",
    "total", "crash", "whoami", "keep", "procinfo", "big_ctype", "nul_ctype", "big_field",
    "orphan_then_exit", "say")] + [
    ("view", "lgtest.jobs:view", "fields = x-user, content-type\ncolour = blue\n"),
    ("spin", "lgtest.jobs:spin", "deadline_ms = 700\n"),
    ("spin_long", "lgtest.jobs:spin", "deadline_ms = 60000\n"),
]


def tool_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    if SAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    return env


def lagless(*args, stdin=b"", env=None):
    e = tool_env()
    e.update(env or {})
    return subprocess.run([LAGLESS_BIN, *args], input=stdin, capture_output=True, timeout=60,
                          env=e)


@pytest.fixture(scope="module")
def srv(tmp_path_factory, interpreter):
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    work = tmp_path_factory.mktemp("python")
    conf = work / "lagless.conf"
    conf.write_text(config(TESTPKG, *JOBS))
    # the tests kill its compute process on purpose four times within seconds, all jobs of
    # python.call: no quarantine of the kind (it would answer the next tests 503)
    s = Server(["--compute-workers", "1", "--kill-grace-ms", "200", "--quarantine-deaths", "0",
                "-c", str(conf)], workdir=str(work), start_timeout=30)
    s.expected_crash_re = CRASH_LINES  # the crash, poke_body and keep tests kill on purpose
    yield s
    s.kill_all()
    crashes = s.crash_reports()
    assert not crashes, "server log shows an unexpected crash: %r" % crashes[:10]


def post(port, path, body=b"", headers=None, timeout=30):
    h = {"Content-Length": str(len(body))}
    h.update(headers or {})
    return request(port, "POST", path, body=body, headers=h, timeout=timeout)


def ctype(r):
    return r.header("content-type") or ""


# ------------------------------------------------------------------- answers and status codes


@pytest.mark.timeout(60)
def test_three_return_shapes(srv):
    r = post(srv.port, "/echo", b"\x00binary\xff body")
    assert r.status == 200 and r.body == b"\x00binary\xff body", r
    assert ctype(r) == "application/octet-stream"
    assert r.header("x-run-ms") is not None
    r = post(srv.port, "/text", b"abc")
    assert r.status == 200 and r.body == "h\u00e9llo 3".encode(), r
    assert ctype(r) == "text/plain; charset=utf-8"
    r = post(srv.port, "/created", b"12345")
    assert r.status == 201 and r.body == b'{"made": 5}' and ctype(r) == "application/json", r
    r = post(srv.port, "/teapot")
    assert r.status == 418 and r.body == b"short and stout", r
    assert ctype(r) == "text/plain"
    r = post(srv.port, "/tuple_500")
    assert r.status == 500 and r.body == b"the tuple said 500", r
    r = post(srv.port, "/weird_status")
    assert r.status == 500 and b"status 305: a Python kind answers 2xx, 300-303" in r.body, r
    r = post(srv.port, "/nothing")
    assert r.status == 500 and r.body.startswith(b"TypeError: the callable returned None"), r
    assert post(srv.port, "/echo", b"").body == b""


@pytest.mark.timeout(60)
def test_status_and_headers_of_a_four_tuple(srv):
    """ABI 1.2: (status, content_type, body, headers), with 3xx and 502-504; a header the host
    refuses (hop-by-hop, CR/LF) makes the answer a 502 with the reason in the log."""
    r = post(srv.port, "/redirect")
    assert r.status == 302 and r.header("location") == "/new?x=1", r
    r = post(srv.port, "/gateway")
    assert r.status == 503 and r.header("retry-after") == "5", r
    assert r.body == b"upstream busy", r
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request("POST", "/cookies", body=b"")
    got = conn.getresponse()
    assert got.status == 200 and got.read() == b"two"
    assert [v for k, v in got.getheaders() if k.lower() == "set-cookie"] == ["a=1", "b=2"]
    conn.close()
    for path, why in (("/hop_header", "hop-by-hop field"), ("/newline_header", "visible ASCII")):
        r = post(srv.port, path)
        assert r.status == 502 and r.header("x-injected") is None, r
        assert wait_until(lambda: why in srv.log(), 5), srv.log()[-2000:]


@pytest.mark.timeout(60)
def test_request_view(srv):
    r = request(srv.port, "GET", "/view?a=1&b=x%20y&b=last&flag",
                headers={"X-User": "ann", "X-Other": "unlisted"})
    assert r.status == 200, r
    assert r.body.decode() == ("GET /view q=[('a', '1'), ('b', 'last'), ('flag', '')] "
                               "h=[('x-user', 'ann')] route=[('callable', 'lgtest.jobs:view'), "
                               "('colour', 'blue')] body=0"), r.body


@pytest.mark.timeout(60)
def test_bad_request_and_exceptions(srv):
    r = post(srv.port, "/bad?need=a%20name")
    assert r.status == 400 and r.body == b"need a name\n", r
    r = post(srv.port, "/unprocessable")
    assert r.status == 422 and r.body == b"not like that\n", r
    # a 4xx body is sent whole, with its content type: not cut to 255 bytes of text/plain
    r = post(srv.port, "/fastapi_422")
    assert r.status == 422 and ctype(r) == "application/json", r
    assert len(r.body) > 255 and len(r.json()["detail"]) == 8, r
    r = post(srv.port, "/long_bad")
    want = ("the field 'name' " + "is much too long, " * 30 + "end\n").encode()
    assert r.status == 400 and r.body == want, r
    assert ctype(r) == "text/plain; charset=utf-8"
    r = post(srv.port, "/fails")
    assert r.status == 500 and r.body == b"ValueError: the value was wrong\n", r
    log = srv.log()
    assert "POST /fails: Traceback (most recent call last):" in log, log[-3000:]
    assert re.search(r'POST /fails:   File ".*lgtest/jobs\.py", line \d+, in fails', log)
    assert "POST /fails: ValueError: the value was wrong" in log


# ---------------------------------------------------------------------- memory: in and out


@pytest.mark.timeout(60)
def test_body_is_read_only(srv):
    body = b"abcdef" * 1000
    r = post(srv.port, "/write_body", body)
    assert r.status == 200, r
    errors, _, seen = r.body.decode().partition("|")
    assert errors.split(";") == ["TypeError: cannot modify read-only memory", "TypeError",
                                 "ValueError"], errors
    assert seen == body.decode()
    # behind Python's back: the input region is read-only in compute processes
    before = srv.wait_children("compute", 1)
    r = post(srv.port, "/poke_body", body)
    assert r.status == 502, r
    srv.wait_children("compute", 1, timeout=15, exclude=before)
    r = post(srv.port, "/total", body)
    assert r.status == 200 and int(r.body) == sum(body), r


@pytest.mark.timeout(60)
def test_zero_copy_output(srv):
    r = post(srv.port, "/zero_copy", b"Hello, output region")
    assert r.status == 200 and r.body == b"HELLO, OUTPUT REGION", r
    r = post(srv.port, "/zero_copy_moved", b"moved to the start")
    assert r.status == 200 and r.body == b"moved to the start" and ctype(r) == "text/plain", r
    big = bytes(range(256)) * 8192  # 2 MiB through numpy, read in place
    r = post(srv.port, "/total", big)
    assert r.status == 200 and int(r.body) == sum(range(256)) * 8192, r


@pytest.mark.timeout(60)
def test_a_view_kept_past_the_return_recycles_the_process_after_its_answer(srv):
    # ABI 1.2 host->recycle: the answer is sent (a 502 before), then the process is replaced
    before = srv.wait_children("compute", 1)
    r = post(srv.port, "/keep", b"secret of one request")
    assert r.status == 200 and r.body == b"kept", r
    assert "the callable kept a view of the request body past its return" in srv.log()
    srv.wait_children("compute", 1, timeout=15, exclude=before)
    assert wait_until(lambda: "recycled itself; replacing it" in srv.log(), 5), srv.log()
    assert post(srv.port, "/echo", b"next").body == b"next"


# --------------------------------------------------------------------- crash, deadline


@pytest.mark.timeout(60)
def test_init_imports_the_routes_callables_before_the_first_job(start_server, tmp_path):
    """ABI 1.2: init is told the routes (host->route_at), so with preload_routes = yes each
    compute process imports the callables at its start, not at each route's first job."""
    conf = tmp_path / "lagless.conf"
    conf.write_text(config(TESTPKG, ("early", "lgtest.early:hello", "")).replace(
        "[module python]\n", "[module python]\npreload_routes = yes\n", 1))
    s = start_server("-c", str(conf), "--compute-workers", "1", start_timeout=30)
    (pid,) = s.wait_children("compute", 1, timeout=15)
    assert wait_until(lambda: "lgtest.early imported in pid %d" % pid in s.log(), 15), \
        s.log()[-3000:]
    r = post(s.port, "/early")
    assert r.status == 200 and r.body == b"hello from %d" % pid, r
    assert s.log().count("lgtest.early imported in pid %d" % pid) == 1   # once, kept


@pytest.mark.timeout(90)
def test_one_python_route_quarantined_leaves_the_others(start_server, tmp_path):
    """ABI 1.2: every Python route runs python.call, but deaths and quarantine are counted by
    route as well as kind: one crashing callable does not take the other routes with it."""
    conf = tmp_path / "lagless.conf"
    conf.write_text(config(TESTPKG, ("crash", "lgtest.jobs:crash", ""),
                           ("echo", "lgtest.jobs:echo", "")))
    s = start_server("-c", str(conf), "--compute-workers", "1", "--quarantine-deaths", "2",
                     "--quarantine-ms", "60000", start_timeout=30)
    s.expected_crash_re = CRASH_LINES
    for _ in range(2):
        before = s.wait_children("compute", 1, timeout=15)
        assert post(s.port, "/crash").status == 502
        s.wait_children("compute", 1, timeout=15, exclude=before)
    assert wait_until(lambda: "quarantining job kind python.call on route /crash" in s.log(),
                      5), s.log()[-3000:]
    assert post(s.port, "/crash").status == 503
    r = post(s.port, "/echo", b"still here")
    assert r.status == 200 and r.body == b"still here", r


@pytest.mark.timeout(90)
def test_crash_in_a_c_extension_costs_only_that_request(srv):
    before = srv.wait_children("compute", 1)
    r = post(srv.port, "/crash")
    assert r.status == 502, r
    after = srv.wait_children("compute", 1, timeout=15, exclude=before)
    assert after and set(after) != set(before)
    r = post(srv.port, "/whoami")
    assert r.status == 200 and r.body.endswith(b" calls=1"), r  # a fresh interpreter


@pytest.mark.timeout(90)
def test_deadline_kill_then_a_fresh_interpreter(srv):
    r = post(srv.port, "/whoami")
    assert r.status == 200, r
    pid = int(r.body.split()[0].split(b"=")[1])
    t0 = time.monotonic()
    r = post(srv.port, "/spin")
    assert r.status == 504 and time.monotonic() - t0 < 10, r

    def fresh():
        a = post(srv.port, "/whoami")
        return a.status == 200 and a.body
    body = wait_until(fresh, 20)
    assert body and body.endswith(b" calls=1") and b"pid=%d " % pid not in body, body


@pytest.mark.timeout(90)
def test_a_client_that_leaves_stops_its_call(srv):
    """The background article's complaint: asyncio.wait_for's timeout stops the waiting, not
    the worker. Here a client that leaves while its call runs (nobody else waiting on it) has
    the compute process killed and replaced (--on-client-gone kill, the default), far before
    the route's 60 s deadline."""
    r = post(srv.port, "/whoami")
    pid = int(r.body.split()[0].split(b"=")[1])
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /spin_long HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert wait_until(lambda: request(srv.port, "GET", "/health").json()["slots"]["running"] == 1,
                      10)
    t0 = time.monotonic()
    s.close()
    assert wait_until(lambda: re.search(r"killing compute\[\d+\] pid=%d: slot \d+ lost its "
                                        r"client" % pid, srv.log()), 10), srv.log()[-2000:]
    assert time.monotonic() - t0 < 20

    def fresh():
        a = post(srv.port, "/whoami")
        return a.status == 200 and a.body
    body = wait_until(fresh, 20)
    assert body and body.endswith(b" calls=1") and b"pid=%d " % pid not in body, body


@pytest.mark.timeout(90)
@pytest.mark.skipif(SAN, reason="ASan's shadow mappings count against RLIMIT_DATA")
def test_memory_limit_is_a_500_and_the_process_survives(start_server, tmp_path):
    conf = tmp_path / "mem.conf"
    conf.write_text(config(TESTPKG, ("hog", "lgtest.jobs:hog", ""),
                           ("whoami", "lgtest.jobs:whoami", "")))
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--compute-memory", "192M",
                       start_timeout=30)
    pid = post(srv.port, "/whoami").body
    r = post(srv.port, "/hog?mb=1024")
    assert r.status == 500 and r.body == b"MemoryError: out of memory\n", r
    assert "POST /hog: MemoryError" in srv.log()
    r = post(srv.port, "/hog?mb=16")
    assert r.status == 200 and r.body == b"%d" % (16 << 20), r
    after = post(srv.port, "/whoami").body
    assert after.split()[0] == pid.split()[0], (pid, after)  # the same process


# ------------------------------------------------------------------ -t, SIGHUP and reload


def write_app(d, text):
    """Writes d/lgapp.py (a new size each time: Python revalidates its bytecode cache by the
    source's mtime in seconds and its size)."""
    (d / "lgapp.py").write_text(text)


@pytest.mark.timeout(90)
def test_check_finds_the_callable_in_a_child(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    write_app(app, "import os\nopen(%r, 'w').write('%%d %%d' %% (os.getpid(), os.getppid()))\n"
              "def ok(body, request):\n    return b'ok'\nnot_callable = 1\n"
              % str(tmp_path / "imported-by"))
    (app / "broken.py").write_text("def f(:\n")
    conf = tmp_path / "ok.conf"
    conf.write_text(config(app, ("ok", "lgapp:ok", "")))
    p = subprocess.Popen([LAGLESS_BIN, "-t", "-c", str(conf)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=tool_env())
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    pid, ppid = map(int, (tmp_path / "imported-by").read_text().split())
    assert ppid == p.pid and pid != p.pid  # imported in a child of lagless -t, not in it
    for spec, why in (("lgapp:missing", "AttributeError: module 'lgapp' has no attribute "
                       "'missing'"),
                      ("nosuch.mod:f", "ModuleNotFoundError: No module named 'nosuch'"),
                      ("broken:f", "SyntaxError"),
                      ("lgapp:not_callable", "lgapp:not_callable is a int, not a callable"),
                      ("lgapp", "not module:function")):
        conf.write_text(config(app, ("x", spec, "")))
        r = lagless("-t", "-c", str(conf))
        text = r.stderr.decode()
        assert r.returncode == 1 and why in text and str(conf) in text, (spec, text)
    conf.write_text(config(app, ("x", "lgapp:ok", "where = loop\n")))
    r = lagless("-t", "-c", str(conf))
    assert r.returncode == 1 and b"kind python.call may not run where=loop" in r.stderr, r
    conf.write_text(config(app, ("x", "lgapp:ok", "")).replace("python_path", "pythonpath"))
    r = lagless("-t", "-c", str(conf))
    line = conf.read_text().splitlines().index("pythonpath = %s" % app) + 1
    assert r.returncode == 1 and ("line %d: key pythonpath: unknown key for this module" % line)\
        .encode() in r.stderr, r
    # a bad value of a module key names its line and the key, in the declared keys' words
    conf.write_text(config(app, ("x", "lgapp:ok", "")).replace(
        "python_path", "check_timeout_ms = 0\npython_path"))
    r = lagless("-t", "-c", str(conf))
    line = conf.read_text().splitlines().index("check_timeout_ms = 0") + 1
    assert r.returncode == 1 and ("line %d: key check_timeout_ms: expected a whole number from 1 "
                                  "to 600000" % line).encode() in r.stderr, r
    conf.write_text(config(app, ("x", "lgapp:ok", "")).replace(
        "python_path", "preload = lgapp, not-a-name\npython_path"))
    r = lagless("-t", "-c", str(conf))
    assert r.returncode == 1 and b"preload = lgapp, not-a-name: module names" in r.stderr, r
    conf.write_text(config(tmp_path / "nowhere", ("x", "lgapp:ok", "")))
    r = lagless("-t", "-c", str(conf))
    assert r.returncode == 1 and b"No such file or directory" in r.stderr, r


@pytest.mark.timeout(90)
def test_venv_pth_files_and_sys_executable(start_server, tmp_path):
    """python_path naming a venv's site-packages: its .pth files are processed (an editable
    install is a .pth naming the project's source directory), and sys.executable is the
    interpreter of the embedded libpython's version, not the python3 first on PATH."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    src = tmp_path / "project" / "src"
    site.mkdir(parents=True)
    src.mkdir(parents=True)
    (src / "pthmod.py").write_text("def hello(body, request):\n    return 'from the .pth'\n")
    (site / "__editable__.pthmod-0.1.pth").write_text("%s\n" % src)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nexit 3\n")
    (fake / "python3").chmod(0o755)
    conf = tmp_path / "venv.conf"
    conf.write_text(config("%s:%s" % (TESTPKG, site), ("pth", "pthmod:hello", ""),
                           ("exe", "lgtest.jobs:executable", "")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    env["PATH"] = "%s:%s" % (fake, env.get("PATH", "/usr/bin:/bin"))
    if SAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    srv = start_server("-c", str(conf), "--compute-workers", "1", start_timeout=30, env=env)
    r = post(srv.port, "/pth")
    assert r.status == 200 and r.body == b"from the .pth", r
    r = post(srv.port, "/exe")
    assert r.status == 200, r
    exe, version = r.body.decode().split("|")
    assert not exe.startswith(str(fake)) and os.path.basename(exe) == "python" + version, exe
    p = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                       capture_output=True, timeout=30)
    assert p.returncode == 0 and p.stdout.decode().strip() == version, p


@pytest.mark.timeout(60)
def test_check_timeout_and_preload(start_server, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "slow.py").write_text("import time\ntime.sleep(30)\ndef f(body, request):\n"
                                 "    return b''\n")
    conf = tmp_path / "slow.conf"
    conf.write_text(config(app, ("x", "slow:f", "")).replace(
        "python_path", "check_timeout_ms = 300\npython_path"))
    t0 = time.monotonic()
    r = lagless("-t", "-c", str(conf))
    assert r.returncode == 1 and b"importing slow:f took over check_timeout_ms = 300" in \
        r.stderr, r
    assert time.monotonic() - t0 < 20
    # preload: imported when each compute process starts, before any request
    marker = tmp_path / "preloaded"
    write_app(app, "import lagless\nopen(%r, 'a').write('%%d\\n' %% lagless.compute_pid)\n"
              "def ok(body, request):\n    return b'ok'\n" % str(marker))
    conf.write_text(config(app, ("ok", "lgapp:ok", "")).replace(
        "python_path", "preload = lgapp\npython_path"))
    srv = start_server("-c", str(conf), "--compute-workers", "1", start_timeout=30)
    compute = srv.wait_children("compute", 1, timeout=15)
    assert wait_until(lambda: marker.exists() and str(compute[0]) in
                      marker.read_text().split(), 15), (compute, marker.exists())
    assert post(srv.port, "/ok").body == b"ok"


def _gone(pid):
    """pid has ended (a zombie its new parent has not reaped yet counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.timeout(60)
def test_check_of_an_import_that_leaves_a_process(tmp_path):
    # Issue 33 section 3: an import that forks a process outliving it kept the check's pipe
    # open; the check waited for EOF past check_timeout_ms (25 s for 10 s) and then blamed the
    # import's time. It ends when the check process has reported and exited, names the cause
    # and kills the process group (the leftover with it).
    app = tmp_path / "app"
    app.mkdir()
    pidfile = tmp_path / "leftover.pid"
    (app / "forks.py").write_text(
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(50)\n"
        "    os._exit(0)\n"
        "open(%r, 'w').write(str(pid))\n"
        "def f(body, request):\n    return b''\n" % str(pidfile))
    conf = tmp_path / "forks.conf"
    conf.write_text(config(app, ("x", "forks:f", "")).replace(
        "python_path", "check_timeout_ms = 10000\npython_path"))
    t0 = time.monotonic()
    try:
        r = lagless("-t", "-c", str(conf))
        took = time.monotonic() - t0
        assert r.returncode == 1 and b"callable forks:f: the import finished but left a " \
            b"process holding the check's output open" in r.stderr, r
        assert b"took over check_timeout_ms" not in r.stderr, r
        assert took < 8, took  # at the report, not at check_timeout_ms or the leftover's exit
        leftover = int(pidfile.read_text())
        assert wait_until(lambda: _gone(leftover), 5), leftover
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


@pytest.mark.timeout(120)
def test_reload_with_a_changed_file_and_a_refused_import(start_server, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    write_app(app, "def answer(body, request):\n    return b'version one'\n")
    conf = tmp_path / "app.conf"
    conf.write_text(config(app, ("app", "lgapp:answer", "")))
    srv = start_server("-c", str(conf), "--compute-workers", "1", start_timeout=30)
    assert post(srv.port, "/app").body == b"version one"
    # a changed Python file: the new generation's processes import it
    write_app(app, "def answer(body, request):\n    return b'version two, longer'\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: post(srv.port, "/app").body == b"version two, longer", 30), \
        srv.log()[-3000:]
    assert wait_until(lambda: "generation 1 retired" in srv.log(), 30), srv.log()[-3000:]
    # an import error at SIGHUP: the reload is refused, the running server keeps serving
    write_app(app, "raise RuntimeError('half-deployed')\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "reload refused" in srv.log(), 30), srv.log()[-3000:]
    assert "RuntimeError: half-deployed" in srv.log()
    r = post(srv.port, "/app")
    assert r.status == 200 and r.body == b"version two, longer", r
    assert srv.running()


# --------------------------------------------------------------------------- --run-kind


@pytest.mark.timeout(90)
def test_run_kind_without_a_server(tmp_path):
    conf = tmp_path / "run.conf"
    conf.write_text(config(TESTPKG, ("view", "lgtest.jobs:view", "colour = red\n")))
    r = lagless("-c", str(conf), "--run-kind", "python.call", stdin=b"12345",
                env={"LAGLESS_RUN_QUERY": "a=1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == (b"POST / q=[('a', '1')] h=[] route=[('callable', 'lgtest.jobs:view'), "
                        b"('colour', 'red')] body=5"), r
    conf.write_text(config(TESTPKG, ("bad", "lgtest.jobs:bad", "")))
    r = lagless("-c", str(conf), "--run-kind", "python.call", env={"LAGLESS_RUN_QUERY": "need=x"})
    assert r.returncode == 1 and b"bad input: need x" in r.stderr, r


def procinfo(port):
    """(pid, parent pid, executable, lagless.compute_pid) of the process running the calls."""
    r = post(port, "/procinfo")
    assert r.status == 200, r
    pid, ppid, exe, compute = r.body.decode().split()
    return int(pid), int(ppid), exe, int(compute)


@pytest.mark.timeout(60)
def test_where_the_calls_run(srv, interpreter):
    """interpreter = embedded: in the compute process itself. By default: in the python3
    executable (its own interpreter code, docs/MODULES.md "Which interpreter"), a child of the
    compute process the server names (lagless.compute_pid), one per compute process, kept
    from call to call."""
    (compute,) = srv.wait_children("compute", 1, timeout=15)
    pid, ppid, exe, named = procinfo(srv.port)
    assert named == compute
    if interpreter == "embedded":
        assert pid == compute and exe == os.path.realpath(LAGLESS_BIN)
        return
    assert ppid == compute and pid != compute
    assert exe == os.path.realpath("/usr/bin/python3.11")
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        assert f.read().split(b"\0")[1:3] == [b"-I", b"-u"]
    assert procinfo(srv.port)[0] == pid
    # it holds none of lagless's descriptors but the standard three and its socket
    fds = sorted(int(n) for n in os.listdir("/proc/%d/fd" % pid))
    assert fds == [0, 1, 2, 3], [(n, os.readlink("/proc/%d/fd/%d" % (pid, n))) for n in fds]


@pytest.mark.timeout(90)
def test_python3_ends_with_its_compute_process(srv, interpreter):
    """The deadline kill takes the python3 process with the compute process: nothing of the
    call runs on (the background article's complaint about wait_for)."""
    if interpreter == "embedded":
        pytest.skip("one process")
    pid = procinfo(srv.port)[0]
    r = post(srv.port, "/spin")
    assert r.status == 504, r
    assert wait_until(lambda: _gone(pid), 10), "python3 pid %d outlived its compute process" % pid
    assert wait_until(lambda: post(srv.port, "/procinfo").status == 200, 20)
    assert procinfo(srv.port)[0] != pid


@pytest.mark.timeout(90)
def test_python3_killed_between_jobs_is_started_again(srv, interpreter):
    """A python3 process that dies while idle (an operator, the OOM killer) costs no request:
    the next job starts a new one in the same compute process."""
    if interpreter == "embedded":
        pytest.skip("one process")
    pid, _, _, compute = procinfo(srv.port)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: _gone(pid), 10)
    pid2, ppid2, _, compute2 = procinfo(srv.port)
    assert pid2 != pid and ppid2 == compute and compute2 == compute
    assert "the python3 process %d ended between jobs (signal 9)" % pid in srv.log()


@pytest.mark.timeout(90)
def test_python3_killed_during_a_job_is_its_compute_process_dying(srv, interpreter):
    """A python3 process that dies during a job ends its compute process the same way, so the
    master answers and counts that death as it does an embedded interpreter's: 502, the
    kind's and route's death, a new compute process."""
    if interpreter == "embedded":
        pytest.skip("one process")
    pid, _, _, compute = procinfo(srv.port)

    def on_cpu_ns():
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0])
    idle = on_cpu_ns()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    s.sendall(b"POST /spin_long HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    # the slot is running once the compute process took it, before python3 has the job:
    # python3 spinning (50 ms of CPU) says it is in the call
    assert wait_until(lambda: on_cpu_ns() > idle + 50_000_000, 10)
    os.kill(pid, signal.SIGKILL)
    head = s.recv(4096)
    s.close()
    assert head.startswith(b"HTTP/1.1 502 "), head
    assert wait_until(lambda: re.search(r"compute\[\d+\] pid=%d killed by signal 9" % compute,
                                        srv.log()), 10), srv.log()[-2000:]
    assert "the python3 process died of signal 9" in srv.log()
    srv.wait_children("compute", 1, timeout=15, exclude=[compute])
    assert wait_until(lambda: post(srv.port, "/procinfo").status == 200, 20)


@pytest.mark.timeout(90)
def test_interpreter_key(start_server, tmp_path, interpreter):
    """interpreter = a relative path or a file that cannot run is refused by -t and at
    start-up; so is one that is not this CPython: the import check runs in it."""
    if interpreter == "embedded":
        pytest.skip("sets the key itself")
    plain = tmp_path / "plain"
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    for value, why in (("python3", "not an absolute path to an executable file (relative)"),
                       (str(tmp_path / "nope"), "No such file or directory"),
                       (str(plain), "Permission denied"),
                       ("/bin/true", "the check process died (status 0) importing it in "
                                     "/bin/true")):
        conf = tmp_path / "i.conf"
        conf.write_text(config(TESTPKG, ("whoami", "lgtest.jobs:whoami", "")).replace(
            "python_path", "interpreter = %s\npython_path" % value))
        r = lagless("-t", "-c", str(conf))
        assert r.returncode == 1 and why.encode() in r.stderr, (value, r)


@pytest.mark.timeout(90)
def test_max_rss_counts_the_python_memory(start_server, tmp_path, interpreter):
    """--compute-max-rss (uWSGI's reload-on-rss) sees what the calls keep wherever they run:
    the python3 process's private memory counts as its compute process's."""
    conf = tmp_path / "rss.conf"
    conf.write_text(config(TESTPKG, ("leak", "lgtest.jobs:leak", ""),
                           ("whoami", "lgtest.jobs:whoami", "")))
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--compute-max-rss", "96M",
                       start_timeout=30)
    (compute,) = srv.wait_children("compute", 1, timeout=15)
    assert post(srv.port, "/leak?mb=16").status == 200
    assert "recycling: private memory" not in srv.log()
    assert post(srv.port, "/leak?mb=128").status == 200
    assert wait_until(lambda: re.search(r"recycling: private memory \d+ KiB past max_rss "
                                        r"98304 KiB", srv.log()), 10), srv.log()[-2000:]
    srv.wait_children("compute", 1, timeout=15, exclude=[compute])
    r = post(srv.port, "/whoami")
    assert r.status == 200 and b"pid=%d " % compute not in r.body, r


@pytest.mark.timeout(120)
def test_a_venv_interpreter(start_server, tmp_path, interpreter):
    """interpreter = a venv's bin/python: the calls and the import check of -t run in it, so
    the venv's own packages import without python_path naming its site-packages."""
    if interpreter == "embedded":
        pytest.skip("sets the key itself")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3.11", "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "venvonly.py").write_text("WHERE = 'the venv'\n")
    app = tmp_path / "app"
    app.mkdir()
    (app / "vapp.py").write_text("import sys\nimport venvonly\n\ndef f(body, request):\n"
                                 "    return '%s|%s' % (sys.prefix, venvonly.WHERE)\n")
    conf = tmp_path / "v.conf"
    conf.write_text(config(app, ("v", "vapp:f", "")).replace(
        "python_path", "interpreter = %s\npython_path" % (venv / "bin" / "python")))
    assert lagless("-t", "-c", str(conf)).returncode == 0
    srv = start_server("-c", str(conf), "--compute-workers", "1", start_timeout=30)
    r = post(srv.port, "/v")
    assert r.status == 200 and r.body == b"%s|the venv" % str(venv).encode(), r
    # the same configuration with the embedded interpreter: the venv is not there
    conf.write_text(conf.read_text().replace("interpreter = %s" % (venv / "bin" / "python"),
                                             "interpreter = embedded"))
    r = lagless("-t", "-c", str(conf))
    assert r.returncode == 1 and b"No module named 'venvonly'" in r.stderr, r


@pytest.mark.timeout(60)
def test_oversized_answer_parts_are_refused_not_lost(srv):
    """A content type or a header field far over the host's bounds (and over one message of
    the relay to python3) is refused as the embedded interpreter refuses it, at once; so is a
    content type with a NUL inside, which a C string would cut."""
    t0 = time.monotonic()
    r = post(srv.port, "/big_ctype")
    assert r.status == 500 and r.body.startswith(b"ValueError: content type"), r
    assert time.monotonic() - t0 < 2
    r = post(srv.port, "/nul_ctype")
    assert r.status == 500 and r.body.startswith(b"ValueError: content type"), r
    r = post(srv.port, "/big_field")
    assert r.status == 502, r
    assert "X-Big" in srv.log()


def maps_of(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


@pytest.mark.timeout(60)
def test_a_request_without_a_body_is_not_copied(srv, interpreter):
    """A GET has no body in shared memory: its empty view must not send the job through the
    copy --run-kind uses (a 64 MiB memfd in the compute process, the output copied back)."""
    (compute,) = srv.wait_children("compute", 1, timeout=15)
    r = request(srv.port, "GET", "/procinfo")
    assert r.status == 200, r
    assert "lagless-python-copy" not in maps_of(compute)


@pytest.mark.timeout(60)
def test_an_orphan_holding_the_call_does_not_hide_its_death(srv, interpreter):
    """A call that leaves a process behind (os.system("... &")) and then dies: 502 at once and
    the death counted, not a 504 at the deadline because the orphan holds the relay's socket."""
    (compute,) = srv.wait_children("compute", 1, timeout=15)
    t0 = time.monotonic()
    r = post(srv.port, "/orphan_then_exit")
    assert r.status == 502 and time.monotonic() - t0 < 5, r
    assert wait_until(lambda: "compute[0] pid=%d exited with status 3" % compute in srv.log(),
                      10), srv.log()[-2000:]
    srv.wait_children("compute", 1, timeout=15, exclude=[compute])


@pytest.mark.timeout(60)
def test_print_follows_a_reopened_error_log(start_server, tmp_path, interpreter):
    """SIGUSR1 reopens the error log (after logrotate moved it): what the calls print goes to
    the new file too, whichever process they run in."""
    conf = tmp_path / "say.conf"
    conf.write_text(config(TESTPKG, ("say", "lgtest.jobs:say", "")))
    log = tmp_path / "error.log"
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--error-log", str(log),
                       log_path=str(log), start_timeout=30)
    assert post(srv.port, "/say?before").status == 200
    assert wait_until(lambda: "lgtest says before" in log.read_text(), 10)
    os.rename(log, tmp_path / "error.log.1")
    srv.proc.send_signal(signal.SIGUSR1)
    assert wait_until(lambda: log.exists(), 10)
    assert post(srv.port, "/say?after").status == 200
    assert wait_until(lambda: "lgtest says after" in log.read_text(), 10), log.read_text()


@pytest.mark.timeout(90)
def test_a_recycled_compute_process_leaves_nothing_behind(start_server, tmp_path, interpreter):
    """A compute process that recycles itself (max_jobs) ends its python3 first: the master
    finds nothing of it to kill, and says nothing about it."""
    conf = tmp_path / "r.conf"
    conf.write_text(config(TESTPKG, ("whoami", "lgtest.jobs:whoami", "")))
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--compute-max-jobs", "2",
                       start_timeout=30)
    (compute,) = srv.wait_children("compute", 1, timeout=15)
    for _ in range(2):
        assert post(srv.port, "/whoami").status == 200
    srv.wait_children("compute", 1, timeout=15, exclude=[compute])
    assert post(srv.port, "/whoami").status == 200
    assert "left processes of its jobs behind" not in srv.log(), srv.log()[-2000:]


@pytest.mark.timeout(60)
def test_another_cpython_is_refused(tmp_path, interpreter):
    """python-exec.so is built for one CPython minor version: another version's python3 (a
    python3.12 on PATH, say) is refused by the import check with the versions named, rather
    than run a 3.11 extension in it."""
    import shutil
    if interpreter == "embedded":
        pytest.skip("sets the key itself")
    def runs(p):  # a version manager's shim may be on PATH without that version behind it
        return p and subprocess.run([p, "-c", "pass"], capture_output=True,
                                    timeout=30).returncode == 0
    other = next((p for p in (shutil.which("python3.%d" % m) for m in (12, 13, 10, 14, 9))
                  if runs(p)), None)
    if other is None:
        pytest.skip("no CPython of another minor version on PATH")
    conf = tmp_path / "o.conf"
    conf.write_text(config(TESTPKG, ("whoami", "lgtest.jobs:whoami", "")).replace(
        "python_path", "interpreter = %s\npython_path" % other))
    r = lagless("-t", "-c", str(conf))
    assert r.returncode == 1 and b"lagless's python module is built for CPython 3.11" in r.stderr, r


@pytest.mark.timeout(60)
def test_python3_keeps_the_pools_nice_and_slice(start_server, tmp_path, interpreter):
    """python3 runs the calls with its compute process's nice and time slice (--compute-slice-ms,
    sched_setattr(2)): inherited across fork and exec, as the compute process set them."""
    if interpreter == "embedded":
        pytest.skip("one process")
    conf = tmp_path / "n.conf"
    conf.write_text(config(TESTPKG, ("procinfo", "lgtest.jobs:procinfo", "")))
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--compute-slice-ms", "20",
                       start_timeout=30)
    pid, compute = procinfo(srv.port)[0], procinfo(srv.port)[3]

    def sched(p, field):
        with open("/proc/%d/sched" % p) as f:
            return next((line.split()[-1] for line in f if line.split()[0] == field), None)
    assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, compute)
    if not os.path.exists("/proc/%d/sched" % pid) or sched(compute, "se.slice") != "20000000":
        pytest.skip("no custom slices here (Linux 6.12 and CONFIG_SCHED_DEBUG)")
    assert sched(pid, "se.slice") == "20000000"
