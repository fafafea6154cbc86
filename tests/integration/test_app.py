"""[app NAME]: the master starts the application's processes, probes them ready before its own
"ready:" line, logs their output line by line, restarts them, fails the start-up of one that
cannot start (with its last output), and stops them after the loops with SIGTERM, then SIGKILL
after stop_grace_ms (issue 38). The apps are small stdlib servers written by the tests."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from conftest import (LAGLESS_BIN, HARNESS_VARS, Notify, children_of, get, pid_alive, proc_stat,
                      wait_until)

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# The app: python3 app.py MODE ADDRESS, ADDRESS a unix socket path or a port number.
APP = textwrap.dedent(r'''
    import http.server, os, signal, socketserver, sys, time
    mode, addr = sys.argv[1], sys.argv[2]
    if mode == "crash":
        print("loading settings", flush=True)
        print("boom: settings.py has no DATABASE_URL", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "env":  # what it inherits, then as "ok"
        print("env HOME=%s USER=%s LOGNAME=%s NOTIFY_SOCKET=%s" % tuple(
            os.environ.get(k) for k in ("HOME", "USER", "LOGNAME", "NOTIFY_SOCKET")), flush=True)
    if mode == "slow":
        time.sleep(1.5)  # an app that takes its time to import
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, lambda *a: print("SIGTERM ignored", flush=True))
    if mode == "orphan":  # a grandchild the app leaves behind: reparented to the master
        first = os.fork()
        if first == 0:
            if os.fork() == 0:
                time.sleep(0.2)  # its parent is gone by now
                print("orphan %d parent %d" % (os.getpid(), os.getppid()), flush=True)
                time.sleep(1.0)
                os._exit(0)
            os._exit(0)
        os.waitpid(first, 0)
    if mode in ("daemon", "daemon_stubborn", "daemon_exit"):  # a double fork and setsid
        first = os.fork()
        if first == 0:
            os.setsid()
            pid = os.fork()
            if pid == 0:
                if mode == "daemon_stubborn":
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                time.sleep(120)
                os._exit(0)
            print("daemon %d" % pid, flush=True)
            os._exit(0)
        os.waitpid(first, 0)
        if mode == "daemon_exit":
            sys.exit(0)
    if mode == "bytes":
        sys.stdout.buffer.write(b"raw \x9b[31m csi \xff bad caf\xc3\xa9 \xc2\x85 nel\n")
        sys.stdout.buffer.write(b"cut " + b"A" * 1018 + "\U0001F600".encode() + b" tail\n")
        sys.stdout.buffer.flush()
    if mode == "chatty":
        sys.stdout.write("x" * 5000 + "\n")
        for i in range(20000):
            sys.stdout.write("chatty line %d\n" % i)
        sys.stdout.write("chatty done\n")
        sys.stdout.flush()
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"
        def do_GET(self):
            if self.path == "/die":
                os._exit(4)
            if mode == "slowhealth" and self.path == "/health":
                time.sleep(1.3)  # over the default probe_timeout_ms
            if mode == "dieafter" and self.path == "/health":  # ready, then dead at once
                import threading
                threading.Timer(0.3, os._exit, (5,)).start()
            code = 503 if mode == "noready" and self.path == "/health" else 200
            body = ("pid %d %s\n" % (os.getpid(), self.path)).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
        def address_string(self):
            return "local"
    if addr.isdigit():
        srv = http.server.HTTPServer(("127.0.0.1", int(addr)), H)
    else:
        class U(socketserver.UnixStreamServer):
            def get_request(self):
                s, _ = self.socket.accept()
                return s, ("local", 0)
        srv = U(addr, H)
    print("serving on", addr, "uid", os.getuid(), "cwd", os.getcwd(), "greeting",
          os.environ.get("GREETING"), flush=True)
    srv.serve_forever()
''')


def env():
    return {k: v for k, v in os.environ.items() if k not in HARNESS_VARS}


def write_conf(tmp_path, body):
    app = tmp_path / "app.py"
    app.write_text(APP)
    conf = tmp_path / "lagless.conf"
    conf.write_text("[lagless]\nloop_workers = 1\ncompute_workers = 1\n" +
                    body.replace("APP", str(app)).replace("PY", PY))
    return conf


def app_section(mode, addr="{socket}", extra=""):
    return ("[app web]\ncommand = PY APP %s %s\nprocesses = 2\nready_path = /health\n"
            "ready_timeout_ms = 8000\nstop_grace_ms = 1500\n%s" % (mode, addr, extra))


def app_pids(srv):
    """pids of the master's children that are app processes (not lagless roles)."""
    out = []
    for pid in srv.children():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"app.py" in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def app_lines(srv):
    return [l for l in srv.log().splitlines() if "app web[" in l]


def wait_log(srv, pattern, timeout):
    rx = re.compile(pattern)
    assert wait_until(lambda: rx.search(srv.log()), timeout), \
        "no %r in the log within %s s:\n%s" % (pattern, timeout, srv.log()[-4000:])


def run_failing(tmp_path, conf, timeout):
    """Starts lagless on conf, expecting it to fail: (exit code, seconds, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen([LAGLESS_BIN, "-c", str(conf), "--listen", "127.0.0.1:0"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env(), start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        pytest.fail("lagless did not give up within %s s:\n%s" % (timeout, err.decode()[-3000:]))
    return p.returncode, time.monotonic() - t0, err.decode("utf-8", "replace")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("addr", ["{socket}", "{port}"])
def test_app_is_probed_ready_before_the_master_is(start_server, tmp_path, addr):
    conf = write_conf(tmp_path, app_section("ok", addr))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    log = srv.log()
    # every app process passed its probe before the master said ready
    assert log.index("app web: 2 process(es) ready") < log.index("ready: generation 1"), log
    assert "2 app process(es)" in log
    assert len(app_pids(srv)) == 2
    for pid in app_pids(srv):  # an ordinary process for the OOM killer, not the master's -900
        with open("/proc/%d/oom_score_adj" % pid) as f:
            assert f.read().strip() == "0"
    # the app answers on the address lagless gave it
    if addr == "{socket}":
        m = re.search(r"app web\[0\] pid=\d+ started on unix:(\S+)", log)
        assert m and os.path.exists(m.group(1)), log
    else:
        m = re.search(r"app web\[0\] pid=\d+ started on 127\.0\.0\.1:(\d+)", log)
        r = get(int(m.group(1)), "/hello")
        assert r.status == 200 and b"/hello" in r.body
    st = get(srv.port, "/status").json()
    assert st["apps"] == [{"name": "web", "processes": 2, "running": 2, "ready": 2,
                           "restarts": 0}], st.get("apps")
    assert srv.stop() == 0, srv.log()


@pytest.mark.timeout(60)
def test_app_that_crashes_at_start_fails_the_start_up_with_its_output(tmp_path):
    conf = write_conf(tmp_path, app_section("crash", extra="start_failures = 3\n"))
    rc, took, err = run_failing(tmp_path, conf, 40)
    assert rc == 1, err
    assert re.search(r"start-up failed: app web process \d died 3 time\(s\) in a row before it "
                     r"was ready.*boom: settings.py has no DATABASE_URL", err), err
    assert "ready: generation" not in err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["crash", "missing"])
def test_a_lone_app_process_that_dies_before_ready_fails_the_start_up(tmp_path, mode):
    # one process: once it has given up there is no process left in the run, and the failure
    # must still reach the master (it was freed with its run, and the master went ready)
    section = app_section("crash", extra="start_failures = 2\n").replace("processes = 2",
                                                                         "processes = 1")
    if mode == "missing":  # exec fails in the child: -t refuses a missing program or #!
        # interpreter; this one is an executable whose dynamic loader (PT_INTERP) is gone,
        # as a binary built for another libc
        elf = open("/bin/true", "rb").read()
        loader = b"/lib64/ld-linux-x86-64.so.2"
        if loader not in elf:
            pytest.skip("/bin/true names no %s" % loader.decode())
        prog = tmp_path / "app-binary"
        prog.write_bytes(elf.replace(loader, loader[:-1] + b"9"))
        prog.chmod(0o755)
        section = section.replace("PY APP crash", str(prog))
    rc, took, err = run_failing(tmp_path, write_conf(tmp_path, section), 20)
    assert rc == 1, err
    assert re.search(r"start-up failed: app web process 0 died 2 time\(s\) in a row", err), err
    if mode == "crash":
        assert "boom: settings.py has no DATABASE_URL" in err, err
    assert "ready: generation" not in err


@pytest.mark.timeout(60)
def test_app_that_never_gets_ready_fails_the_start_up_in_bounded_time(tmp_path):
    conf = write_conf(tmp_path, app_section("noready").replace("ready_timeout_ms = 8000",
                                                               "ready_timeout_ms = 1500"))
    rc, took, err = run_failing(tmp_path, conf, 40)
    assert rc == 1, err
    assert "was not ready within ready_timeout_ms 1500" in err, err
    assert "serving on" in err  # its last output is in the reason
    assert took < 20, took
    assert "ready: generation" not in err


@pytest.mark.timeout(90)
def test_app_that_dies_under_load_is_restarted_and_counted(start_server, tmp_path):
    conf = write_conf(tmp_path, app_section("ok", "{port}"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    old = app_pids(srv)
    port = int(re.search(r"app web\[0\] pid=\d+ started on 127\.0\.0\.1:(\d+)",
                         srv.log()).group(1))
    try:
        get(port, "/die", timeout=5)
    except Exception:
        pass
    wait_log(srv, r"app web\[0\] pid=\d+ exited with status 4", 10)
    # restarted on the same port (counted when its death is reaped), probed ready again
    def row():
        return get(srv.port, "/status").json()["apps"][0]
    assert wait_until(lambda: row()["restarts"] == 1 and row()["ready"] == 2, 20), row()
    assert sorted(app_pids(srv)) != sorted(old)
    r = get(port, "/again")
    assert r.status == 200
    m = get(srv.port, "/metrics").body.decode()
    assert 'lagless_app_restarts_total{app="web"} 1' in m, m
    assert srv.stop() == 0


@pytest.mark.timeout(60)
def test_app_that_ignores_sigterm_is_killed_after_the_grace(start_server, tmp_path):
    conf = write_conf(tmp_path, app_section("stubborn"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    pids = {p: proc_stat(p)[3] for p in app_pids(srv)}
    assert len(pids) == 2
    t0 = time.monotonic()
    assert srv.stop(timeout=20) == 0, srv.log()
    took = time.monotonic() - t0
    log = srv.log()
    # the loops went first, then the apps: SIGTERM, the grace, SIGKILL
    assert log.index("generation 1 retired") < log.index("app web: stopping run 1"), log
    assert "SIGTERM ignored" in log
    assert re.search(r"app web\[\d\] pid=\d+ still running 1500 ms after SIGTERM \(stop_grace_ms\); SIGKILL", log), log
    assert 1.4 < took < 10, took
    assert not [p for p, s in pids.items() if pid_alive(p, s)]


@pytest.mark.timeout(60)
def test_app_output_reaches_the_log_by_line_without_blocking(start_server, tmp_path):
    conf = write_conf(tmp_path, app_section("chatty"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 30)
    wait_log(srv, r"app web\[1\]: chatty done", 30)
    lines = app_lines(srv)
    for idx in (0, 1):
        got = [l for l in lines if "app web[%d]: chatty line " % idx in l]
        assert len(got) == 20000, (idx, len(got))
    cut = [l for l in lines if "[line cut]" in l]
    assert len(cut) == 2 and all(len(l) < 1200 for l in cut), [len(l) for l in cut]
    # the master kept serving meanwhile
    assert get(srv.port, "/ping").status == 200
    assert srv.stop() == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("body,where,what", [
    ("[app web]\nprocesses = two\n", 2, "key 'processes' = 'two': expected a whole number"),
    ("[app web]\ncommand = PY 'APP\n", 2, "key 'command' = "),
    ("[app web]\ncommand = x\nnonsense = 1\n", 3, "key 'nonsense' = '1': unknown key"),
    ("[app web]\ncommand = x\ncommand = y\n", 3, "key 'command' given twice"),
    ("[app web]\ncommand = x\nenv = NOEQUALS\n", 3, "expected KEY=VALUE"),
    ("[app Web!]\ncommand = x\n", 2, "an app name is 1 to 23"),
    ("[app web]\ncommand = x\nready_path = /health\n", 2, "ready_path needs an address"),
    ("[app web]\nprocesses = 1\n", 2, "command = ... is required"),
    ("[app web]\ncommand = PY APP ok {socket}\nlive_interval_ms = 500\n", 3,
     "live_interval_ms needs a ready_path"),
    ("[app web]\ncommand = PY APP ok {socket}\nlive_failures = 0\n", 3,
     "key 'live_failures' = '0'"),
    ("[upstream web]\n", 1, "[upstream web]: a section without keys: give it its server = ... "
     "lines, or app = NAME to take an app's processes"),
])
def test_app_config_errors_name_file_line_and_key(tmp_path, body, where, what):
    conf = write_conf(tmp_path, body)
    p = subprocess.run([LAGLESS_BIN, "-c", str(conf), "-t"], capture_output=True, env=env(),
                       timeout=20)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "%s:%d:" % (conf, where + 3) in err, err
    assert what in err, err


def run_t(conf, cwd=None):
    """lagless -t on conf, from cwd."""
    return subprocess.run([LAGLESS_BIN, "-c", str(conf), "-t"], capture_output=True, env=env(),
                          timeout=20, cwd=cwd)


# What passed -t and then failed at every start, or ran an app for nothing: -t refuses it,
# naming the file, the line (of the body below, counted from 1) and why.
ROUTED = "\n[route /web/*]\nupstream = web\n"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("body,where,what", [
    # an app and server lines for the upstream it serves: requests went to the servers
    ("[app web]\ncommand = PY APP ok {socket}\n\n[upstream web]\nserver = 127.0.0.1:9\n"
     + ROUTED, 5, "upstream web: server lines, and [app web]"),
    # two apps serving one upstream: the second's processes were never sent to
    ("[app a]\ncommand = PY APP ok {port}\nupstream = web\n[app b]\ncommand = PY APP ok "
     "{socket}\nupstream = web\n[upstream web]\nmax_conns = 8\n" + ROUTED, 6,
     "[app b]: serves upstream web, as [app a]"),
    # app = b on the upstream app a serves
    ("[app a]\ncommand = PY APP ok {port}\nupstream = web\n[app b]\ncommand = PY APP ok "
     "{port}\n[upstream web]\napp = b\n" + ROUTED, 7, "app = b, but [app a]"),
    # servers without an address: "address ''" at start-up
    ("[app web]\ncommand = PY APP ok\nupstream = u\n[upstream u]\nmax_conns = 8\n"
     "[route /*]\nupstream = u\n", 5, "names neither {socket} nor {port}"),
    ("[app web]\ncommand = PY APP ok {port}\nupstream = ghost\n", 3,
     "upstream = ghost names no [upstream ghost] section"),
    ("[app web]\ncommand = PY APP ok {socket}\nuser = 1000\n", 3, "not a uid"),
    ("[app web]\ncommand = PY APP ok {socket}\nuser = app:app\n", 3, "not user:group"),
    ("[app web]\ncommand = PY APP ok {socket}\ncwd = /nonexistent/dir\n", 3,
     "cwd = /nonexistent/dir: No such file or directory"),
    ("[app web]\ncommand = PY APP ok {socket}\ncwd = /etc/passwd\n", 3,
     "cwd = /etc/passwd: not a directory"),
    ("[app web]\ncommand = /nonexistent/bin --uds {socket}\n", 2,
     "program /nonexistent/bin: No such file or directory"),
    ("[app web]\ncommand = APP ok {socket}\n", 2, "app.py: not executable"),
    ("[app web]\ncommand = no-such-program-lagless {socket}\n", 2,
     "program no-such-program-lagless is not an executable file in its PATH"),
    ("[app web]\ncommand = python3 APP ok {socket}\nenv = PATH=/nonexistent\n", 2,
     "not an executable file in its PATH /nonexistent"),
    ("[app web]\ncommand = \"\" {socket}\n", 2, "an empty program"),
    ("[app web]\ncommand = PY APP ok {socket}\nready_path = /h\x01x\n", 3, "visible ASCII"),
])
def test_test_config_refuses_an_app_that_would_not_start_or_serve(tmp_path, body, where, what):
    conf = write_conf(tmp_path, body)
    p = run_t(conf)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1, err
    assert "%s:%d:" % (conf, where + 3) in err and what in err, err
    assert "configuration test failed" in err


@pytest.mark.timeout(30)
def test_test_config_resolves_user_cwd_and_program_as_start_up(tmp_path):
    """As start-up: a user only as root, by name; cwd from lagless's working directory; a
    program with a '/' from cwd, else in the app's PATH; executable by the app's user."""
    sub = tmp_path / "sub"
    sub.mkdir()
    run = sub / "run.sh"
    run.write_text("#!/bin/sh\nexec %s \"$@\"\n" % PY)
    run.chmod(0o700)  # root's only
    body = ("[app web]\ncommand = ./run.sh %s ok {socket}\ncwd = sub\n\n[upstream web]\n"
            "app = web\n" + ROUTED) % (tmp_path / "app.py")
    conf = write_conf(tmp_path, body)
    p = run_t(conf, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr.decode()
    assert "is valid" in p.stderr.decode()
    p = run_t(conf, cwd="/")  # cwd = sub is taken from where lagless runs
    assert p.returncode == 1 and "cwd = sub: No such file or directory" in p.stderr.decode()
    conf = write_conf(tmp_path, "[app web]\ncommand = python3 APP ok {socket}\n"
                      "env = PATH=/nonexistent:/usr/bin:/bin\n\n[upstream web]\napp = web\n"
                      + ROUTED)
    p = run_t(conf)
    assert p.returncode == 0, p.stderr.decode()
    if os.geteuid() != 0:
        return  # user = is taken only as root
    conf = write_conf(tmp_path, "[app web]\ncommand = %s ok {socket}\nuser = nosuchuser\n"
                      % run)
    p = run_t(conf)
    assert p.returncode == 1 and "%s:6: [app web]: user = nosuchuser: no such user" % conf \
        in p.stderr.decode(), p.stderr.decode()
    conf = write_conf(tmp_path, "[app web]\ncommand = %s ok {socket}\nuser = nobody\n" % run)
    p = run_t(conf)  # pytest's directories are root's only (0700)
    assert p.returncode == 1 and "cannot be reached (a directory on its path is not " \
        "searchable by its user" in p.stderr.decode(), p.stderr.decode()
    shared = tempfile.mkdtemp(prefix="lagless-user-")  # one nobody may enter
    try:
        os.chmod(shared, 0o755)
        run = os.path.join(shared, "run.sh")
        with open(run, "w") as f:
            f.write("#!/bin/sh\nexec %s \"$@\"\n" % PY)
        conf = write_conf(tmp_path, "[app web]\ncommand = %s ok {socket}\nuser = nobody\n"
                          % run)
        for mode, what in ((0o700, "not executable by its user"),
                           (0o711, "a script its user cannot read"), (0o755, None)):
            os.chmod(run, mode)
            p = run_t(conf)
            if what is None:
                assert p.returncode == 0, p.stderr.decode()
            else:
                assert p.returncode == 1 and what in p.stderr.decode(), (mode, p.stderr)
        with open(run, "w") as f:
            f.write("#!/nonexistent/sh\n")
        p = run_t(conf)
        assert p.returncode == 1 and "a script whose interpreter (#!) is missing" in \
            p.stderr.decode(), p.stderr.decode()
    finally:
        shutil.rmtree(shared)


@pytest.mark.timeout(30)
def test_test_config_prints_each_app_and_its_addresses(tmp_path):
    conf = write_conf(tmp_path, app_section("ok") + "env = A=1\nenv = B=2\n"
                      "\n[app worker]\ncommand = PY APP ok {port}\nprocesses = auto\n")
    p = subprocess.run([LAGLESS_BIN, "-c", str(conf), "-t"], capture_output=True, env=env(),
                       timeout=20)
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert re.search(r"^app web: 2 process\(es\), upstream web, command: ", out, re.M), out
    assert "web[1]: unix:" in out and "web.1/1.sock" in out
    assert re.search(r"^app worker: \d+ process\(es\) \(auto\)", out, re.M), out
    assert "worker[0]: 127.0.0.1:{port}" in out


def reload_cmd(conf):
    return subprocess.run([LAGLESS_BIN, "-c", str(conf), "-s", "reload"], capture_output=True,
                          text=True, timeout=60, env=env())


def served_with_app(start_server, tmp_path, section):
    pidf = tmp_path / "lagless.pid"
    conf = write_conf(tmp_path, "pid_file = %s\n" % pidf + section)
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    return srv, conf, pidf


def rewrite(conf, tmp_path, section):
    pidf = tmp_path / "lagless.pid"
    conf.write_text(write_conf(tmp_path, "pid_file = %s\n" % pidf + section).read_text())


@pytest.mark.timeout(90)
def test_reload_keeps_an_unchanged_app(start_server, tmp_path):
    srv, conf, _ = served_with_app(start_server, tmp_path, app_section("ok"))
    before = sorted(app_pids(srv))
    r = reload_cmd(conf)
    assert r.returncode == 0 and "generation 2" in r.stderr, r.stderr
    assert sorted(app_pids(srv)) == before
    assert "(run 2)" not in srv.log()
    assert srv.stop() == 0


@pytest.mark.timeout(90)
def test_reload_starts_a_changed_app_ready_before_the_old_one_stops(start_server, tmp_path):
    srv, conf, _ = served_with_app(start_server, tmp_path, app_section("ok"))
    before = {p: proc_stat(p)[3] for p in app_pids(srv)}
    rewrite(conf, tmp_path, app_section("ok", extra="env = VERSION=2\n"))
    r = reload_cmd(conf)
    assert r.returncode == 0 and "generation 2" in r.stderr, r.stderr
    wait_log(srv, r"app web: run 1 stopped", 20)
    log = srv.log()
    assert (log.index("app web: 2 process(es) ready (run 2)") < log.index("ready: generation 2")
            < log.index("app web: stopping run 1")), log
    assert not [p for p, s in before.items() if pid_alive(p, s)]
    assert len(app_pids(srv)) == 2
    assert get(srv.port, "/status").json()["apps"][0]["ready"] == 2
    assert srv.stop() == 0


@pytest.mark.timeout(90)
def test_reload_to_an_app_that_never_gets_ready_is_refused(start_server, tmp_path):
    srv, conf, _ = served_with_app(start_server, tmp_path, app_section("ok"))
    before = {p: proc_stat(p)[3] for p in app_pids(srv)}
    rewrite(conf, tmp_path, app_section("noready").replace("ready_timeout_ms = 8000",
                                                            "ready_timeout_ms = 1500"))
    r = reload_cmd(conf)
    assert r.returncode == 1, r.stderr
    assert "refused" in r.stderr and "was not ready within ready_timeout_ms 1500" in r.stderr, \
        r.stderr
    wait_log(srv, r"app web: run 2 stopped", 20)
    # the old processes keep serving; no generation 2
    assert all(pid_alive(p, s) for p, s in before.items())
    assert "starting generation 2" not in srv.log()
    assert get(srv.port, "/status").json()["apps"][0]["ready"] == 2
    assert srv.stop() == 0


@pytest.mark.timeout(90)
def test_reload_to_an_app_that_dies_before_ready_is_refused(start_server, tmp_path):
    srv, conf, _ = served_with_app(start_server, tmp_path, app_section("ok"))
    before = {p: proc_stat(p)[3] for p in app_pids(srv)}
    rewrite(conf, tmp_path, app_section("crash", extra="start_failures = 2\n")
            .replace("processes = 2", "processes = 1"))
    r = reload_cmd(conf)
    assert r.returncode == 1, r.stderr
    assert "refused" in r.stderr and "died 2 time(s) in a row" in r.stderr, r.stderr
    assert "boom: settings.py has no DATABASE_URL" in r.stderr, r.stderr
    assert all(pid_alive(p, s) for p, s in before.items())
    assert "starting generation 2" not in srv.log()
    assert get(srv.port, "/status").json()["apps"][0]["ready"] == 2
    assert srv.stop() == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("processes,apps,compute", [("auto", 2, 1), ("1", 1, 2), ("6", 6, 1)])
def test_app_processes_count_against_the_cpu_budget(tmp_path, processes, apps, compute):
    conf = tmp_path / "lagless.conf"
    conf.write_text("[app web]\ncommand = %s -c pass\nprocesses = %s\n" % (PY, processes))
    p = subprocess.run([LAGLESS_BIN, "-c", str(conf), "--cpus", "4", "--print-sizing"],
                       capture_output=True, env=env(), timeout=20)
    assert p.returncode == 0, p.stderr.decode()
    import json
    sz = json.loads(p.stdout)
    assert (sz["loop_workers"], sz["compute_workers"], sz["app_processes"]) == (4, compute, apps)
    # a compute count that is given stays as given
    p = subprocess.run([LAGLESS_BIN, "-c", str(conf), "--cpus", "4", "--compute-workers", "3",
                        "--print-sizing"], capture_output=True, env=env(), timeout=20)
    assert json.loads(p.stdout)["compute_workers"] == 3


@pytest.mark.timeout(60)
def test_what_an_app_orphans_is_reaped_by_the_master(start_server, tmp_path):
    """Outside a container the master is the apps' subreaper (as PID 1 it reaps every orphan
    anyway, test_pid1.py): a grandchild the app left behind is reparented to it and reaped."""
    conf = write_conf(tmp_path, app_section("orphan"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    rx = re.compile(r"app web\[\d\]: orphan (\d+) parent (\d+)")
    assert wait_until(lambda: len(rx.findall(srv.log())) == 2, 10), srv.log()[-3000:]
    orphans = rx.findall(srv.log())
    # reparented to the master, not to the machine's init
    assert orphans and all(int(parent) == srv.pid for _, parent in orphans), (orphans, srv.pid)

    def gone(pid):
        st = proc_stat(pid)
        return st is None  # a zombie would still have its /proc entry
    assert wait_until(lambda: all(gone(int(p)) for p, _ in orphans), 10), orphans
    assert get(srv.port, "/status").json()["apps"][0]["ready"] == 2
    assert srv.stop() == 0


@pytest.mark.timeout(60)
def test_systemd_ready_waits_for_a_slow_app(start_server, tmp_path):
    notify = Notify(str(tmp_path / "notify.sock"))
    try:
        conf = write_conf(tmp_path, app_section("slow"))
        srv = start_server("-c", str(conf), start_timeout=30,
                           env=dict(env(), NOTIFY_SOCKET=notify.path))
        assert notify.wait_for("READY=1", 20), notify.messages
        # READY=1 came once both app processes had answered their probe
        assert "app web: 2 process(es) ready" in srv.log(), srv.log()[-3000:]
        ready_at = [l for l in srv.log().splitlines() if "process(es) ready (run 1)" in l]
        assert ready_at
        assert srv.stop() == 0
    finally:
        notify.close()


@pytest.mark.timeout(60)
def test_sigquit_stops_the_apps_at_once(start_server, tmp_path):
    conf = write_conf(tmp_path, app_section("stubborn").replace("stop_grace_ms = 1500",
                                                                "stop_grace_ms = 30000"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    pids = {p: proc_stat(p)[3] for p in app_pids(srv)}
    t0 = time.monotonic()
    assert srv.stop(signal.SIGQUIT, timeout=20) == 0, srv.log()
    assert time.monotonic() - t0 < 10
    assert "app web: stopping run 1 at once (SIGKILL)" in srv.log()
    assert not [p for p, s in pids.items() if pid_alive(p, s)]


@pytest.mark.timeout(60)
def test_sigquit_kills_apps_already_in_their_sigterm_grace(start_server, tmp_path):
    conf = write_conf(tmp_path, app_section("stubborn").replace("stop_grace_ms = 1500",
                                                                "stop_grace_ms = 30000"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    pids = {p: proc_stat(p)[3] for p in app_pids(srv)}
    os.kill(srv.pid, signal.SIGTERM)
    wait_log(srv, r"app web\[\d\]: SIGTERM ignored", 20)
    t0 = time.monotonic()
    assert srv.stop(signal.SIGQUIT, timeout=20) == 0, srv.log()
    assert time.monotonic() - t0 < 10, srv.log()
    assert "app web: stopping run 1 at once (SIGKILL)" in srv.log()
    assert not [p for p, s in pids.items() if pid_alive(p, s)]


@pytest.mark.timeout(90)
def test_sigquit_kills_the_old_runs_a_reload_left_in_their_grace(start_server, tmp_path):
    section = app_section("stubborn").replace("stop_grace_ms = 1500", "stop_grace_ms = 30000")
    srv, conf, _ = served_with_app(start_server, tmp_path, section)
    old = {p: proc_stat(p)[3] for p in app_pids(srv)}
    rewrite(conf, tmp_path, section + "env = VERSION=2\n")
    r = reload_cmd(conf)
    assert r.returncode == 0, r.stderr
    wait_log(srv, r"app web: stopping run 1 \(SIGTERM", 30)
    wait_log(srv, r"SIGTERM ignored", 20)
    pids = {p: proc_stat(p)[3] for p in app_pids(srv)}
    t0 = time.monotonic()
    assert srv.stop(signal.SIGQUIT, timeout=20) == 0, srv.log()
    assert time.monotonic() - t0 < 10, srv.log()
    assert not [p for p, s in list(old.items()) + list(pids.items()) if pid_alive(p, s)]


@pytest.mark.timeout(60)
def test_pid1_in_a_container_reaps_what_the_app_orphans(tmp_path):
    """lagless as PID 1 of a PID namespace (the stand-in for a container, as test_pid1.py):
    the app's orphans are reparented to it and reaped, and a SIGTERM from outside stops the
    loops, then the app, and exits 0."""
    from test_pid1 import _namespaces_usable
    why = _namespaces_usable()
    if why:
        pytest.skip(why)
    conf = write_conf(tmp_path, app_section("orphan"))
    log_path = tmp_path / "stderr.log"
    log = open(log_path, "wb")
    outer = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", LAGLESS_BIN, "-c",
                              str(conf), "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                             env=env())
    master = None
    seen = {}

    def text():
        return log_path.read_bytes().decode(errors="replace")
    try:
        assert wait_until(lambda: "ready: generation 1" in text(), 20), text()
        assert re.search(r"master\[0\] pid=1 ", text()), text()
        kids = [p for p, c, s, _ in children_of(outer.pid)
                if c == "lagless"]
        assert len(kids) == 1
        master = kids[0]
        for p, _, _, start in children_of(master):
            seen[p] = start
        rx = re.compile(r"app web\[\d\]: orphan (\d+) parent (\d+)")
        assert wait_until(lambda: len(rx.findall(text())) == 2, 10), text()
        # inside the namespace the orphans' parent is PID 1: lagless
        assert all(parent == "1" for _, parent in rx.findall(text())), rx.findall(text())

        def zombies_or_orphans():
            return [(p, c, s) for p, c, s, _ in children_of(master)
                    if s == "Z" or (c.startswith("python") and p not in seen)]
        assert wait_until(lambda: not zombies_or_orphans(), 10), zombies_or_orphans()
        os.kill(master, signal.SIGTERM)
        assert outer.wait(20) == 0, text()
        out = text()
        assert out.index("generation 1 retired") < out.index("app web: stopping run 1"), out
        assert not [p for p, s in seen.items() if pid_alive(p, s)]
    finally:
        if master is not None and pid_alive(master):
            os.kill(master, signal.SIGKILL)  # PID 1: the whole namespace dies with it
        if outer.poll() is None:
            outer.kill()
        outer.wait(5)
        log.close()


@pytest.mark.timeout(60)
def test_env_cwd_and_user_reach_the_app(start_server, tmp_path):
    """env lines are added to its environment, cwd is where it runs, and user (honoured when
    lagless runs as root) is whom it runs as; its socket directory is given to that user."""
    import pwd
    import shutil
    import tempfile
    user = "nobody" if os.geteuid() == 0 else ""
    shared = tempfile.mkdtemp(prefix="lagless-app-")  # readable by the app's user
    try:
        os.chmod(shared, 0o755)
        shutil.copy(str(write_conf(tmp_path, "")).replace("lagless.conf", "app.py"), shared)
        os.chmod(os.path.join(shared, "app.py"), 0o644)
        conf = tmp_path / "lagless.conf"
        conf.write_text("[lagless]\nloop_workers = 1\ncompute_workers = 1\n"
                        "[app web]\ncommand = %s app.py ok {socket}\nprocesses = 1\n"
                        "cwd = %s\nenv = GREETING=hello world\n%s"
                        % (PY, shared, "user = %s\n" % user if user else ""))
        srv = start_server("-c", str(conf), start_timeout=30)
        wait_log(srv, r"ready: generation 1", 20)
        m = re.search(r"app web\[0\]: serving on \S+ uid (\d+) cwd (\S+) greeting (.*)$",
                      srv.log(), re.M)
        assert m, srv.log()[-3000:]
        want_uid = pwd.getpwnam(user).pw_uid if user else os.getuid()
        assert int(m.group(1)) == want_uid
        assert m.group(2) == shared and m.group(3) == "hello world"
        assert srv.stop() == 0
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def pipe_inodes(pid):
    """The pipe:[inode] targets among pid's descriptors."""
    out = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:  # closed meanwhile
            continue
        if t.startswith("pipe:"):
            out.add(t)
    return out


@pytest.mark.timeout(60)
def test_workers_hold_none_of_the_app_output_pipes(start_server, tmp_path):
    """Regression: loop workers and compute processes forked after the apps started kept the
    read end of every app's output pipe (only the master reads them)."""
    conf = write_conf(tmp_path, app_section("ok"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    apps = app_pids(srv)
    assert len(apps) == 2, apps
    app_pipes = set()
    for pid in apps:
        app_pipes.add(os.readlink("/proc/%d/fd/1" % pid))
    assert all(p.startswith("pipe:") for p in app_pipes), app_pipes
    # the master reads them; no worker holds them
    assert app_pipes <= pipe_inodes(srv.pid), (app_pipes, pipe_inodes(srv.pid))
    workers = srv.children("loop") + srv.children("compute")
    assert len(workers) == 2, workers
    for pid in workers:
        assert not app_pipes & pipe_inodes(pid), (pid, app_pipes & pipe_inodes(pid))
    assert srv.stop() == 0, srv.log()


# An [upstream] that takes an app's processes as its servers: `app = NAME` on the upstream, or
# an app's `upstream = NAME` naming an upstream with no server line.
@pytest.mark.timeout(90)
@pytest.mark.parametrize("join", [
    "[app web]\ncommand = PY APP ok {socket}\nprocesses = 2\nready_path = /health\n"
    "ready_timeout_ms = 8000\nstop_grace_ms = 1500\n\n[upstream web]\napp = web\n\n"
    "[route /web/*]\nupstream = web\ndeadline_ms = 5000\n",
    "[app web]\ncommand = PY APP ok {port}\nprocesses = 2\nready_path = /health\n"
    "ready_timeout_ms = 8000\nstop_grace_ms = 1500\nupstream = backend\n\n"
    "[upstream backend]\nmax_conns = 8\n\n[route /web/*]\nupstream = backend\n"
    "deadline_ms = 5000\n",
])
def test_upstream_takes_the_app_processes_and_routes_to_ready_ones(start_server, tmp_path,
                                                                    join):
    conf = write_conf(tmp_path, join)
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    pids = app_pids(srv)
    assert len(pids) == 2, srv.log()
    r = get(srv.port, "/web/hello")
    assert r.status == 200, (r.status, r.body, srv.log()[-3000:])
    m = re.match(rb"pid (\d+) /web/hello", r.body)
    assert m and int(m.group(1)) in pids, r.body
    # the process that answered (web[0]: the least busy, ties taken in turn from the first)
    # dies; once the
    # master has reaped it, its ready bit is clear and the loop sends every request to the
    # other process, without trying the dead one's address
    os.kill(int(m.group(1)), signal.SIGKILL)
    wait_log(srv, r"app web\[0\] pid=%s killed by signal 9" % m.group(1).decode(), 10)
    reaped = len(srv.log())
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        r = get(srv.port, "/web/again")
        assert r.status == 200, (r.status, r.body)
        assert int(re.match(rb"pid (\d+)", r.body).group(1)) != int(m.group(1))
    assert not re.search(r"connect to \S+ failed|upstream \S+: (reset|connect)",
                         srv.log()[reaped:]), srv.log()[reaped:]
    # restarted and probed ready again, it is sent to again
    assert wait_until(lambda: len(re.findall(r"app web\[0\] pid=\d+ is ready", srv.log())) >= 2,
                      20), srv.log()[-3000:]
    back = [get(srv.port, "/web/back") for _ in range(2)]  # ties in turn: one of two is it
    assert all(r.status == 200 for r in back), [(r.status, r.body) for r in back]
    assert [r for r in back if int(re.match(rb"pid (\d+)", r.body).group(1)) not in pids], \
        [r.body for r in back]
    assert srv.stop() == 0, srv.log()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("body, what", [
    ("[upstream api]\napp = nope\n", "app = nope names no [app nope] section"),
    ("[app web]\ncommand = PY APP ok {socket}\n\n[upstream api]\napp = web\n"
     "server = 127.0.0.1:9\n", "exclude each other"),
    ("[upstream api]\nmax_conns = 4\n", "no [app] with upstream = api"),
])
def test_upstream_app_join_errors(tmp_path, body, what):
    conf = write_conf(tmp_path, body + "\n[route /api/*]\nupstream = api\n")
    p = subprocess.run([LAGLESS_BIN, "-c", str(conf), "-t"], capture_output=True, env=env(),
                       timeout=20)
    assert p.returncode == 1 and what in p.stderr.decode(), p.stderr.decode()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("when", ["start", "reload"])
def test_apps_of_different_users_each_bind_their_socket(start_server, tmp_path, when):
    """Each run's sockets are in a directory of its own, given to its user: a second app with
    another user (or one a reload adds to a root-only configuration) can bind its socket."""
    import shutil
    import tempfile
    if os.geteuid() != 0:
        pytest.skip("user = is honoured only as root")
    shared = tempfile.mkdtemp(prefix="lagless-app-")  # readable by the apps' users
    try:
        os.chmod(shared, 0o755)
        shutil.copy(str(write_conf(tmp_path, "")).replace("lagless.conf", "app.py"), shared)
        os.chmod(os.path.join(shared, "app.py"), 0o644)

        def section(name, user):
            return ("[app %s]\ncommand = %s %s/app.py ok {socket}\nprocesses = 1\n"
                    "ready_path = /health\nready_timeout_ms = 8000\n%s"
                    % (name, PY, shared, "user = %s\n" % user if user else ""))
        pidf = tmp_path / "lagless.pid"
        head = "[lagless]\nloop_workers = 1\ncompute_workers = 1\npid_file = %s\n" % pidf
        users = section("api", "nobody") + section("adm", "daemon")
        conf = tmp_path / "lagless.conf"
        conf.write_text(head + section("web", "") + (users if when == "start" else ""))
        srv = start_server("-c", str(conf), start_timeout=30)
        wait_log(srv, r"ready: generation 1", 20)
        if when == "reload":
            conf.write_text(head + section("web", "") + users)
            r = reload_cmd(conf)
            assert r.returncode == 0, r.stderr + srv.log()[-3000:]
        for name in ("api", "adm"):
            wait_log(srv, r"app %s: 1 process\(es\) ready" % name, 20)
        assert "Permission denied" not in srv.log()
        assert srv.stop() == 0
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.timeout(90)
def test_a_socket_path_too_long_for_a_unix_address_is_refused(start_server, tmp_path):
    """Refused by -t, at start-up and by a reload, with the reason (it was an empty path)."""
    rt = str(tmp_path / "r")
    if len(rt) > 80:
        pytest.skip("tmp_path too long for this test")
    rt += "r" * (85 - len(rt))  # "web" fits (85 + 13 bytes), a 23-byte name does not
    long_app = app_section("ok", extra="start_failures = 1\n").replace(
        "[app web]", "[app w%s]" % ("x" * 22)).replace("processes = 2", "processes = 1")
    e = dict(env(), RUNTIME_DIRECTORY=rt)
    conf = write_conf(tmp_path, app_section("ok") + long_app)
    t = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=60, env=e)
    assert t.returncode == 1 and "is longer than a unix socket address holds" in t.stderr, \
        t.stdout + t.stderr
    p = subprocess.run([LAGLESS_BIN, "-c", str(conf), "--listen", "127.0.0.1:0"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                       env=e)
    assert p.returncode == 1 and "is longer than a unix socket address holds" in p.stderr, \
        p.stderr
    assert "ready: generation" not in p.stderr
    pidf = tmp_path / "lagless.pid"
    conf = write_conf(tmp_path, "pid_file = %s\n" % pidf + app_section("ok"))
    srv = start_server("-c", str(conf), start_timeout=30, env=e)
    wait_log(srv, r"ready: generation 1", 20)
    rewrite(conf, tmp_path, app_section("ok") + long_app)
    r = reload_cmd(conf)
    assert r.returncode == 1, r.stderr
    assert "refused" in r.stderr and "is longer than a unix socket address holds" in r.stderr, \
        r.stderr
    assert get(srv.port, "/status").json()["apps"][0]["ready"] == 2
    assert srv.stop() == 0


@pytest.mark.timeout(60)
def test_app_start_line_environment_and_user_identity(start_server, tmp_path):
    """The start line names the port; the app does not inherit the master's NOTIFY_SOCKET; with
    user (as root) HOME, USER and LOGNAME are that user's."""
    import pwd
    import shutil
    import tempfile
    user = "nobody" if os.geteuid() == 0 else ""
    shared = tempfile.mkdtemp(prefix="lagless-app-")  # readable by the app's user
    notify = Notify(str(tmp_path / "notify.sock"))
    try:
        os.chmod(shared, 0o755)
        shutil.copy(str(write_conf(tmp_path, "")).replace("lagless.conf", "app.py"), shared)
        os.chmod(os.path.join(shared, "app.py"), 0o644)
        conf = tmp_path / "lagless.conf"
        conf.write_text("[lagless]\nloop_workers = 1\ncompute_workers = 1\n"
                        "[app web]\ncommand = %s %s/app.py env {port}\nprocesses = 1\n%s"
                        % (PY, shared, "user = %s\n" % user if user else ""))
        srv = start_server("-c", str(conf), start_timeout=30,
                           env=dict(env(), NOTIFY_SOCKET=notify.path, HOME="/root-home",
                                    USER="root-user", LOGNAME="root-user"))
        wait_log(srv, r"ready: generation 1", 20)
        assert re.search(r"app web\[0\] pid=\d+ started on 127\.0\.0\.1:\d+$", srv.log(),
                         re.M), srv.log()[-3000:]
        m = re.search(r"app web\[0\]: env HOME=(\S+) USER=(\S+) LOGNAME=(\S+) "
                      r"NOTIFY_SOCKET=(\S+)$", srv.log(), re.M)
        assert m, srv.log()[-3000:]
        assert m.group(4) == "None"
        if user:
            pw = pwd.getpwnam(user)
            assert m.groups()[:3] == (pw.pw_dir, user, user)
        assert srv.stop() == 0
    finally:
        notify.close()
        shutil.rmtree(shared, ignore_errors=True)


def daemons(srv_log):
    return [int(p) for p in re.findall(r"app web\[\d\]: daemon (\d+)", srv_log)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["daemon", "daemon_stubborn"])
def test_what_an_app_daemonizes_is_stopped_with_it(start_server, tmp_path, mode):
    """A double fork and setsid leaves the app's process group and outlives its parent: it is
    reparented to the master (the subreaper), and the stop ends it with the app (SIGTERM, then
    SIGKILL after stop_grace_ms), as systemd's KillMode=control-group does; nothing is left to
    the machine's init."""
    conf = write_conf(tmp_path, app_section(mode))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    assert wait_until(lambda: len(daemons(srv.log())) == 2, 10), srv.log()[-3000:]
    pids = {p: proc_stat(p)[3] for p in daemons(srv.log())}
    assert all(proc_stat(p) and int(proc_stat(p)[2]) == srv.pid for p in pids), pids
    t0 = time.monotonic()
    assert srv.stop(timeout=20) == 0, srv.log()
    took = time.monotonic() - t0
    log = srv.log()
    assert re.search(r"2 process\(es\) the apps left behind \(reparented to the master\): "
                     r"SIGTERM, SIGKILL after 1500 ms", log), log[-3000:]
    if mode == "daemon_stubborn":
        assert "the apps left behind still running 1500 ms after SIGTERM; SIGKILL" in log, log
        assert took > 1.4, took
    else:
        assert "still running" not in log, log
    assert not [p for p, st in pids.items() if pid_alive(p, st)], pids


@pytest.mark.timeout(60)
def test_what_an_app_daemonizes_before_failing_the_start_up_is_ended(tmp_path):
    section = app_section("daemon_exit", extra="start_failures = 2\n").replace(
        "processes = 2", "processes = 1")
    rc, took, err = run_failing(tmp_path, write_conf(tmp_path, section), 40)
    assert rc == 1, err
    assert "died 2 time(s) in a row before it was ready" in err, err
    left = daemons(err)
    assert len(left) == 2, err
    assert re.search(r"2 process\(es\) the apps left behind \(reparented to the master\): "
                     r"SIGKILL", err), err
    assert all(proc_stat(p) is None for p in left), [(p, proc_stat(p)) for p in left]


@pytest.mark.timeout(90)
def test_an_app_that_keeps_dying_after_ready_is_reported(start_server, tmp_path):
    """Ready each time, dead 0.3 s later: the start-up succeeded, so it is never given up on,
    and the error line says it keeps failing (docs/OPERATIONS.md "Restarts")."""
    conf = write_conf(tmp_path, app_section("dieafter", extra="start_failures = 2\n"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    wait_log(srv, r"error .*app web\[\d\] keeps failing: died 2 times in a row within 10 s "
                  r"of starting \(last: exit status 5\); still retrying every \d+ ms", 40)
    assert srv.stop(timeout=20) == 0, srv.log()


@pytest.mark.timeout(60)
def test_sequential_requests_are_spread_over_idle_app_processes(start_server, tmp_path):
    """Ties of least-connections go in turn (nginx's least_conn, HAProxy's leastconn): requests
    one at a time reach both processes, not always the first."""
    conf = write_conf(tmp_path, app_section("ok") + "upstream = web\n\n[upstream web]\n"
                      "max_conns = 8\n\n[route /web/*]\nupstream = web\n")
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    seen = []
    for i in range(6):
        r = get(srv.port, "/web/%d" % i)
        assert r.status == 200, (r.status, r.body)
        seen.append(int(re.match(rb"pid (\d+)", r.body).group(1)))
    assert sorted(set(seen)) == sorted(app_pids(srv)), (seen, app_pids(srv))
    assert seen[0::2] == [seen[0]] * 3 and seen[1::2] == [seen[1]] * 3, seen
    assert srv.stop() == 0, srv.log()


@pytest.mark.timeout(60)
def test_app_output_bytes_stay_utf8_text_in_the_log(start_server, tmp_path):
    """C0 and C1 controls and bytes that are not UTF-8 are written \\xNN; UTF-8 passes."""
    conf = write_conf(tmp_path, app_section("bytes"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    wait_log(srv, r"app web\[1\]: raw ", 10)
    line = [l for l in srv.log().splitlines() if "app web[1]: raw " in l][0]
    assert line.endswith("app web[1]: raw \\x9b[31m csi \\xff bad caf\u00e9 \\xc2\\x85 nel"), line
    # cut at 1023 bytes, within the emoji's 4: the line ends before it, not with \xf0
    cut = [l for l in srv.log().splitlines() if "app web[1]: cut " in l][0]
    assert cut.endswith("app web[1]: cut " + "A" * 1018 + " [line cut]"), cut[-60:]
    with open(srv.stderr_path, "rb") as f:
        f.read().decode("utf-8")  # the whole log is UTF-8 text
    assert srv.stop() == 0, srv.log()


@pytest.mark.timeout(60)
def test_a_hung_app_process_fails_its_liveness_probe_and_is_restarted(start_server, tmp_path):
    """A process that stops answering (SIGSTOP: its socket still accepts) fails its liveness
    probes (GET ready_path every live_interval_ms, 1 s each) and is killed and restarted after
    live_failures in a row; the other one keeps serving."""
    conf = write_conf(tmp_path, app_section("ok", extra="live_interval_ms = 300\n"
                                            "live_failures = 2\n"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    hung = int(re.search(r"app web\[0\] pid=(\d+) started", srv.log()).group(1))
    time.sleep(1.0)  # a few passed probes: nothing is said of them
    assert "liveness" not in srv.log(), srv.log()[-2000:]
    os.kill(hung, signal.SIGSTOP)
    try:
        wait_log(srv, r"app web\[0\] pid=%d failed its liveness probe \(GET /health: no "
                      r"answer within probe_timeout_ms; 1 in a row of 2\)" % hung, 10)
        wait_log(srv, r"app web\[0\] pid=%d failed 2 liveness probes in a row; killing and "
                      r"restarting it" % hung, 10)
        assert wait_until(lambda: proc_stat(hung) is None, 10)
        # probed no more once killed: no third failure of that pid
        assert "pid=%d failed its liveness probe (GET /health: no answer within " \
            "probe_timeout_ms; 3" % hung not in srv.log()
        assert srv.log().count("pid=%d failed 2 liveness probes" % hung) == 1, srv.log()
    finally:
        if proc_stat(hung) is not None:
            os.kill(hung, signal.SIGCONT)

    def row():
        return get(srv.port, "/status").json()["apps"][0]
    assert wait_until(lambda: row()["restarts"] == 1 and row()["ready"] == 2, 20), row()
    assert srv.stop() == 0, srv.log()


@pytest.mark.timeout(60)
def test_a_slow_ready_path_needs_a_longer_probe_timeout(start_server, tmp_path):
    """Each probe waits probe_timeout_ms (default 1 s) for the answer: a /health that takes
    1.3 s is ready with 3 s, and the failed start-up says which limit applies without it."""
    conf = write_conf(tmp_path, app_section("slowhealth", extra="probe_timeout_ms = 3000\n"))
    srv = start_server("-c", str(conf), start_timeout=30)
    wait_log(srv, r"ready: generation 1", 20)
    assert srv.stop() == 0, srv.log()
    section = app_section("slowhealth").replace("ready_timeout_ms = 8000",
                                                "ready_timeout_ms = 3000")
    rc, took, err = run_failing(tmp_path, write_conf(tmp_path, section), 40)
    assert rc == 1, err
    assert "each probe answered within probe_timeout_ms 1000" in err, err
