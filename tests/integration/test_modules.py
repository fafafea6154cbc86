"""Job modules and routes from the configuration (docs/MODULES.md): loading, the request view,
the output API, where=loop, load errors at -t / start-up / reload, and modules that crash, hang,
allocate without bound or write past their output region (tests/modules/*.c, built by make)."""
import http.client
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import LAGLESS_BIN, get, request, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")
# Under ASan a module's SIGSEGV is reported (and exits) rather than killing by signal, and
# ASan's shadow memory does not live within an RLIMIT_DATA.
SAN = "/san/" in (LAGLESS_BIN or "")
pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(MODS, "faults.so")),
                                reason="test modules not built (make integration builds them)")


def mod(name):
    return os.path.join(MODS, name + ".so")


def run(*args, stdin=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([LAGLESS_BIN, *args], capture_output=True, timeout=30, env=e,
                          input=stdin)


FAULTS_CONF = """
[module faults]
path = {path}
level = 1

[route /echo]
methods = GET, POST
kind = faults.echo
fields = x-user, content-type
greeting = hi

[route /echo-loop]
methods = POST
kind = faults.echo
where = loop

[route /crash]
methods = GET
kind = faults.crash

[route /segv]
methods = GET
kind = faults.segv

[route /spin]
methods = GET
kind = faults.spin
deadline_ms = 1500

[route /hog]
methods = GET
kind = faults.hog

[route /overrun]
methods = GET
kind = faults.overrun

[route /answer]
methods = GET
kind = faults.answer

[route /answer-loop]
methods = GET
kind = faults.answer
where = loop

[route /qargs]
methods = GET
kind = faults.qargs

[route /qargs-loop]
methods = GET
kind = faults.qargs
where = loop

[route /heavy]
off = yes

[route /work]
methods = GET
kind = heavy
"""


def write_conf(tmp_path, text, name="lagless.conf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.timeout(30)
def test_t_prints_the_routes_table(tmp_path):
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    r = run("-t", "-c", conf)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("/")}
    assert "faults.echo" in rows["/echo"] and "GET, HEAD, POST" in rows["/echo"]
    assert re.search(r"%s:\d+" % re.escape(conf), rows["/echo"])
    assert " loop " in rows["/echo-loop"]
    assert "heavy" in rows["/work"] and "/heavy" not in rows   # removed and rebound
    assert "ping" in rows["/ping"] and "default" in rows["/ping"]
    assert "module faults 1.0 from %s" % mod("faults") in out


def error_of(tmp_path, text):
    conf = write_conf(tmp_path, text)
    r = run("-t", "-c", conf)
    assert r.returncode == 1, (text, r.stdout, r.stderr)
    return conf, r.stderr.decode()


@pytest.mark.timeout(60)
def test_configuration_errors_name_file_line_and_key(tmp_path):
    conf, err = error_of(tmp_path, "[route /x]\nmethods = GET\nkind = nosuch\n")
    assert "%s:3: key 'kind' = 'nosuch': unknown kind" % conf in err
    conf, err = error_of(tmp_path, "[route /x]\nkind = heavy\ndeadline_ms = soon\n")
    assert "%s:3: key 'deadline_ms'" % conf in err
    conf, err = error_of(tmp_path, "[route /x]\nkind = heavy\n[route /x]\nkind = compress\n"
                         "methods = POST\n[route /x]\nkind = heavy\n")
    assert "%s:4: key 'kind' given twice for [route /x]" % conf in err
    conf, err = error_of(tmp_path, "[route /x]\nkind = heavy\n[route /y]\nkind = heavy\n"
                         "[route /x]\nkind = heavy\n")
    assert "route /x is declared twice" in err
    conf, err = error_of(tmp_path, "[route /x]\nkind = heavy\nwhere = loop\nfields = a b\n"
                         "colour = red\n")
    # heavy declares no route keys (module ABI 1.1): the key's own line is named
    assert "%s:2: route /x: kind heavy: line 5: key colour: unknown key" % conf in err
    conf, err = error_of(tmp_path, "[route /x]\nkind = compress\nwhere = loop\n")
    assert "may not run where=loop" in err
    conf, err = error_of(tmp_path, "[module faults]\nlevel = 1\n")
    assert "no 'path' key" in err


@pytest.mark.timeout(60)
def test_module_load_errors(tmp_path):
    conf, err = error_of(tmp_path, "[module badabi]\npath = %s\n" % mod("badabi"))
    assert "%s:2: key 'path'" % conf in err and mod("badabi") in err
    assert "module compiled with module ABI 2.0, lagless has ABI 1.2" in err
    conf, err = error_of(tmp_path, "[module nosym]\npath = %s\n" % mod("nosym"))
    assert "no lagless_module symbol" in err
    conf, err = error_of(tmp_path, "[module clash]\npath = %s\n" % mod("clash"))
    assert "clash.twice" in err and "clashes" in err
    conf, err = error_of(tmp_path, "[module faults]\npath = %s\nlevel = 1\nspeed = 3\n"
                         % mod("faults"))
    assert "module faults: unknown key speed" in err            # the module's check hook
    conf, err = error_of(tmp_path, "[module faults]\npath = %s\n[route /e]\nkind = faults.echo"
                         "\ncolour = red\n" % mod("faults"))
    assert "echo knows no key colour" in err
    conf, err = error_of(tmp_path, "[module faults]\npath = %s\n" % (tmp_path / "missing.so"))
    assert "cannot open the module" in err
    half = tmp_path / "half.so"                                 # a copy still being written
    data = open(mod("faults"), "rb").read()
    half.write_bytes(data[: len(data) // 2])
    conf, err = error_of(tmp_path, "[module faults]\npath = %s\n" % half)
    assert "truncated ELF file" in err
    conf, err = error_of(tmp_path, "[module upper]\npath = %s\n" % mod("faults"))
    assert "calls itself 'faults'" in err


@pytest.mark.timeout(60)
def test_request_view_and_output_api(start_server, tmp_path):
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    srv = start_server("-c", conf, "--compute-workers", "1")
    r = request(srv.port, "POST", "/echo?a=1&b=2", body=b"hello",
                headers={"X-User": "bob ", "Content-Type": "text/x", "X-Other": "no"})
    assert r.status == 200, r
    assert r.header("content-type") == "text/x-echo"          # set by the kind
    lines = r.body.decode().splitlines()
    assert lines[0] == "POST /echo ?a=1&b=2 body=5 greeting=hi init=1", lines
    assert sorted(lines[1:]) == ["content-type: text/x", "x-user: bob"]   # listed fields only
    r = get(srv.port, "/echo?status=404")
    assert r.status == 404 and r.body == b"refused with 404\n", r
    # a whole error body with its own type (host->error_body, ABI 1.2), small and large
    for n in (300, 70000):
        r = get(srv.port, "/echo?status=422&json=%d" % n)
        assert r.status == 422 and r.header("content-type") == "application/json", r
        assert len(r.body) == n and r.body.startswith(b'{"detail":"xxx') and \
            r.body.endswith(b'x"}'), (len(r.body), r.body[:40])
    # a message over set_message's 255 bytes is cut, and the log says so
    r = get(srv.port, "/echo?status=409&msg=300")
    assert r.status == 409 and r.body == b"0" * 255 + b"\n", r
    assert wait_until(lambda: "set_message: a 300-byte message cut to 255 bytes" in srv.log(),
                      5), srv.log()[-2000:]
    r = get(srv.port, "/echo?status=x")
    assert r.status == 400, r
    # where=loop: the same kind inline, never queued
    r = request(srv.port, "POST", "/echo-loop", body=b"abc")
    assert r.status == 200 and r.body.startswith(b"POST /echo-loop ? body=3 greeting=- init=")
    assert r.header("x-queue-ms") == "0.000"
    assert get(srv.port, "/heavy").status == 404               # removed
    r = get(srv.port, "/work?iterations=1000")
    assert r.status == 200 and r.json()["iterations"] == 1000  # rebound
    assert "faults module initialised" in srv.log()
    # ABI 1.2: init is told the routes that use the module's kinds, with their keys
    assert wait_until(lambda: "init sees route /echo (echo, greeting hi)" in srv.log() and
                      "init sees route /answer-loop (answer)" in srv.log(), 5), srv.log()


def fields_of(port, path):
    """(status, [(name lower case, value), ...] in order, body) of GET path."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, [(k.lower(), v) for k, v in r.getheaders()], r.read()
    finally:
        conn.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["/answer", "/answer-loop"])
def test_answer_header_fields_and_statuses(start_server, tmp_path, path):
    """ABI 1.2: a kind adds response header fields (host->add_field) and answers 3xx and
    501-504; a field that breaks a rule makes the answer a 502, logged with the reason."""
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    srv = start_server("-c", conf, "--compute-workers", "1")

    def one(case):
        st, fs, body = fields_of(srv.port, path + "?case=" + case)
        return st, dict(fs), [n for n, _ in fs], body

    st, f, names, body = one("redirect")
    assert st == 302 and f["location"] == "/elsewhere?x=1", (st, f)
    assert body == b"redirect refused=0\n" and "x-queue-ms" in f, body
    st, f, names, body = one("auth")
    assert st == 401 and f["www-authenticate"] == 'Bearer realm="api"', (st, f)
    st, f, names, body = one("gateway")
    assert st == 503 and f["retry-after"] == "7", (st, f)
    assert names.count("retry-after") == 1, names        # the kind's, not the host's as well
    assert one("timeout")[0] == 504
    st, f, names, body = one("cookies")
    assert st == 200 and names.count("set-cookie") == 2, names
    for case, why in (("hop", "hop-by-hop field"), ("crlf", "visible ASCII"),
                      ("nul", "visible ASCII"), ("clen", "host writes itself"),
                      ("many", "more fields than"),
                      ("nolocation", "301 without a Location")):
        st, f, names, body = one(case)
        assert st == 502 and "x-injected" not in names and "x-many" not in names, (case, f)
        assert "refused" not in body.decode(), body        # the kind's body is not sent
        assert wait_until(lambda: why in srv.log(), 5), (case, srv.log()[-2000:])
    assert one("redirect")[0] == 302                         # the process goes on


@pytest.mark.timeout(60)
def test_answer_fields_on_a_coalescing_route(start_server, tmp_path):
    """A stored (coalesced) answer is a status, a type and a body: one with fields or a 3xx is
    not shared but a 500 with a warning, never sent without its fields; a kind's own 503
    keeps its status."""
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")) +
                      "\n[route /answer-coal]\nmethods = GET\nkind = faults.answer\n"
                      "coalesce = on\nkey_query = case\n")
    srv = start_server("-c", conf, "--compute-workers", "1")
    st, f, body = fields_of(srv.port, "/answer-coal?case=plain")
    assert st == 200 and body == b"plain refused=0\n", (st, body)
    st, f, body = fields_of(srv.port, "/answer-coal?case=redirect")
    assert st == 500 and "location" not in dict(f), (st, f)
    assert wait_until(lambda: "a coalesced answer with header fields or a 3xx is not shared"
                      in srv.log(), 5), srv.log()[-2000:]
    assert fields_of(srv.port, "/answer-coal?case=gateway")[0] == 503


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["/qargs", "/qargs-loop"])
def test_declared_query_arguments_reach_the_kind_parsed(start_server, tmp_path, path):
    """ABI 1.2 rq->query_args: the declared arguments parsed by the host into the kind's
    struct, percent-decoded, defaults for the absent ones; a bad one is the loop's 400."""
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    srv = start_server("-c", conf, "--compute-workers", "1")
    r = get(srv.port, path + "?n=%34%32&name=a%20b&fast=yes&fmt=webp&other=1")
    assert r.status == 200 and r.body == b"n=42 name=a b fast=1 fmt=1\n", r
    r = get(srv.port, path)
    assert r.status == 200 and r.body == b"n=7 name=- fast=0 fmt=0\n", r
    r = get(srv.port, path + "?n=0")
    assert r.status == 400 and b"n: expected a whole number from 1 to 100" in r.body, r


@pytest.mark.timeout(60)
def test_a_kind_asks_for_its_process_to_be_recycled(start_server, tmp_path):
    """ABI 1.2 host->recycle: the answer is sent, then the compute process exits as planned
    and a fresh one takes the next job; no crash, no quarantine."""
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    srv = start_server("-c", conf, "--compute-workers", "1", "--quarantine-deaths", "1")
    seen = set(srv.wait_children("compute", 1))
    for i in range(3):
        st, _, body = fields_of(srv.port, "/answer?case=recycle")
        assert st == 200 and body == b"recycle refused=0\n", (i, st, body)
        seen |= set(srv.wait_children("compute", 1, timeout=15, exclude=seen))
    assert len(seen) == 4, seen
    assert wait_until(lambda: srv.log().count("recycled itself; replacing it") == 3, 5), \
        srv.log()[-3000:]
    assert "recycling: the kind of the last job asked for it (host->recycle)" in srv.log()
    assert fields_of(srv.port, "/answer?case=cookies")[0] == 200      # not quarantined
    assert "quarantin" not in srv.log() and "killed by signal" not in srv.log()


@pytest.mark.timeout(90)
def test_crashing_hanging_and_hogging_modules(start_server, tmp_path):
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    limit = [] if SAN else ["--compute-memory", "256M"]
    srv = start_server("-c", conf, "--compute-workers", "1", "--kill-grace-ms", "100", *limit)
    # the module's own crashes (under ASan: its SEGV report, whose lines all name ASan)
    srv.expected_crash_re = r"compute\[\d+\] pid=\d+ killed by signal (6|11)\b" + (
        r"|AddressSanitizer|SEGV|faults\.c:\d+:\d+: runtime error" if SAN else "")
    for path in ("/crash", "/segv", "/overrun"):
        before = srv.wait_children("compute", 1)
        r = get(srv.port, path, timeout=10)
        assert r.status == 502, (path, r)
        after = srv.wait_children("compute", 1, timeout=5, exclude=before)
        assert after and set(after) != set(before), path       # replaced
        r = get(srv.port, "/echo", timeout=10)                 # the next request works
        assert r.status == 200, (path, r)
    t0 = time.monotonic()
    r = get(srv.port, "/spin", timeout=10)
    assert r.status == 504 and time.monotonic() - t0 < 5, r
    assert wait_until(lambda: get(srv.port, "/echo", timeout=10).status == 200, 10)
    if not SAN:
        r = get(srv.port, "/hog", timeout=30)
        assert r.status == 500 and b"out of memory after" in r.body, r
        assert get(srv.port, "/echo", timeout=10).status == 200


@pytest.mark.timeout(60)
def test_quarantine_is_by_route_as_well_as_kind(start_server, tmp_path):
    """ABI 1.2: deaths are charged to the kind on its route; a kind that keeps crashing on one
    route is quarantined there (503) while the same kind on another route still runs."""
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")) +
                      "\n[route /crash-too]\nmethods = GET\nkind = faults.crash\n")
    srv = start_server("-c", conf, "--compute-workers", "1", "--quarantine-deaths", "2",
                       "--quarantine-ms", "60000")
    srv.expected_crash_re = r"compute\[\d+\] pid=\d+ killed by signal 6\b" + (
        r"|AddressSanitizer|SEGV" if SAN else "")
    for _ in range(2):
        before = srv.wait_children("compute", 1)
        assert get(srv.port, "/crash", timeout=10).status == 502
        srv.wait_children("compute", 1, timeout=10, exclude=before)
    assert wait_until(lambda: "quarantining job kind faults.crash on route /crash for" in
                      srv.log(), 5), srv.log()[-3000:]
    r = get(srv.port, "/crash", timeout=10)
    assert r.status == 503 and r.header("retry-after") is not None, r
    assert get(srv.port, "/crash-too", timeout=10).status == 502   # same kind, other route
    text = get(srv.port, "/metrics").body.decode()
    assert re.search(r'^lagless_job_kind_quarantined\{kind="faults.crash",route="/crash"\} 1$',
                     text, re.M), text
    assert re.search(r'^lagless_job_process_deaths_total\{kind="faults.crash",'
                     r'route="/crash-too"\} 1$', text, re.M), text
    assert re.search(r'^lagless_job_kind_quarantined\{kind="faults.crash",'
                     r'route="/crash-too"\} 0$', text, re.M), text
    kinds = get(srv.port, "/status").json()["job_kinds"]
    assert {(k["kind"], k["route"], k["quarantined_ms"] > 0) for k in kinds} == {
        ("faults.crash", "/crash", True), ("faults.crash", "/crash-too", False)}, kinds


@pytest.mark.timeout(60)
def test_run_kind_without_server(tmp_path):
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=mod("faults")))
    r = run("-c", conf, "--run-kind", "faults.echo", stdin=b"xyz",
            env={"LAGLESS_RUN_QUERY": "q=1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"POST / ?q=1 body=3 greeting=hi init=1\n"
    r = run("-c", conf, "--run-kind", "faults.echo", env={"LAGLESS_RUN_QUERY": "status=409"})
    assert r.returncode == 1 and b"refused with 409" in r.stderr
    r = run("--run-kind", "nosuch.kind")
    assert r.returncode == 2 and b"unknown kind" in r.stderr


@pytest.mark.timeout(90)
def test_reload_keeps_running_server_on_bad_module_and_loads_a_new_one(start_server,
                                                                       tmp_path):
    so = tmp_path / "faults.so"
    shutil.copy(mod("faults"), so)
    conf = write_conf(tmp_path, FAULTS_CONF.format(path=so))
    srv = start_server("-c", conf, "--compute-workers", "1")
    assert get(srv.port, "/echo").status == 200
    # a half-written file over the path: the reload is refused, the server untouched
    data = open(mod("faults"), "rb").read()
    so.write_bytes(data[: len(data) // 3])
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "reload refused" in srv.log(), 10), srv.log()[-2000:]
    assert "truncated ELF file" in srv.log()
    assert get(srv.port, "/echo").status == 200
    # the real file again, and a config with a new route: the new generation serves it
    shutil.copy(mod("faults"), so)
    open(conf, "a").write("\n[route /echo2]\nmethods = GET\nkind = faults.echo\n"
                          "greeting = two\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: get(srv.port, "/echo2").status == 200, 15), srv.log()[-2000:]
    # until the old generation has stopped accepting, a new connection may still reach it (and
    # get its 404): both accept for the moment between the new one's readiness and the retirement
    assert wait_until(lambda: "generation 1 retired" in srv.log(), 15), srv.log()[-2000:]
    assert b"greeting=two" in get(srv.port, "/echo2").body


@pytest.mark.timeout(60)
def test_metrics_label_every_route_and_kind(start_server, tmp_path):
    """The stats area is sized from the configuration: 24 routes and every kind get their own
    series (there used to be a fixed table of 16 route rows and 4 kinds)."""
    text = "".join("[route /r%d]\nmethods = GET\nkind = heavy\n" % i for i in range(24))
    text += "[module faults]\npath = %s\n[route /e]\nmethods = GET\nkind = faults.echo\n" % \
        mod("faults")
    srv = start_server("-c", write_conf(tmp_path, text), "--compute-workers", "1")
    assert get(srv.port, "/r23?iterations=1000").status == 200
    assert get(srv.port, "/e").status == 200
    assert request(srv.port, "POST", "/hash", body=b"pw").status == 200

    def scraped():
        m = get(srv.port, "/metrics").body.decode()
        want = ['lagless_requests_total{route="/r23",code="200"} 1',
                'lagless_requests_total{route="/e",code="200"} 1',
                'lagless_job_run_seconds_count{kind="faults.echo"} 1',
                'lagless_job_run_seconds_count{kind="hash"} 1',
                'lagless_job_run_seconds_count{kind="heavy"} 1']
        return all(w in m for w in want)
    assert wait_until(scraped, 10), get(srv.port, "/metrics").body.decode()[-3000:]
    assert get(srv.port, "/health").json()["routes"]["/r23"] == 1
