"""A reload's checks run beside the master's poll loop, not in it (issue 33 section 3): while a
Python route's import check of a SIGHUP takes seconds, the HAProxy agent answers at once and a
runaway job is killed at its deadline, so the cheap job queued behind it is served."""
import os
import signal
import threading
import time

import pytest

from conftest import free_port, get, wait_jobs, wait_until
from test_python_module import _gone, module
from haproxy_rig import agent_line

IMPORT_S = 6  # the import check's time at the reload (under check_timeout_ms = 10000)


def slow_app(d, flag, started):
    """d/slowimp.py: its import takes IMPORT_S seconds once flag exists, and says when it
    begins by writing its pid into started."""
    (d / "slowimp.py").write_text(
        "import os, time\n"
        "if os.path.exists(%r):\n"
        "    open(%r, 'w').write(str(os.getpid()))\n"
        "    time.sleep(%d)\n"
        "def f(body, request):\n    return b'slow'\n" % (str(flag), str(started), IMPORT_S))


@pytest.mark.timeout(90)
def test_master_serves_while_a_reload_is_checked(start_server, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    flag, started = tmp_path / "slow-now", tmp_path / "import-began"
    slow_app(app, flag, started)
    conf = tmp_path / "lagless.conf"
    conf.write_text(
        "[module python]\npath = %s\npython_path = %s\ncheck_timeout_ms = 10000\n"
        "[route /slow]\nkind = python.call\ncallable = slowimp:f\n"
        "[route /runaway]\nmethods = GET\nkind = test-spin\ndeadline_ms = 500\n"
        "[route /cheap]\nmethods = GET\nkind = test-sleep\ndeadline_ms = 3000\n" % (module(), app))
    agent = free_port()
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--loop-workers", "1",
                       "--enable-test-jobs", "1", "--agent-listen", "127.0.0.1:%d" % agent,
                       start_timeout=30)
    assert agent_line(agent).startswith(b"ready"), srv.log()
    # the slow import is armed once the compute process has started (with preload_routes it
    # would import the callable in its init), so only the reload's check meets it
    assert wait_until(lambda: "lg_compute_main: started" in srv.log(), 20), srv.log()
    flag.touch()
    t_hup = time.monotonic()
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(started.exists, 10), srv.log()  # the import check is running

    # the agent answers at once
    t0 = time.monotonic()
    line = agent_line(agent, timeout=IMPORT_S + 5)
    took = time.monotonic() - t0
    assert line.startswith(b"ready") and took < 1.0, (line, took, srv.log())

    # a runaway job is killed at its deadline (0.5 s), so the cheap job behind it on the one
    # compute process is served within its own (3 s)
    out = {}

    def call(name, path):
        t = time.monotonic()
        r = get(srv.port, path, timeout=IMPORT_S + 5)
        out[name] = (r.status, time.monotonic() - t)

    runaway = threading.Thread(target=call, args=("runaway", "/runaway"))
    runaway.start()
    assert wait_jobs(srv.port, running=1, timeout=5), out
    cheap = threading.Thread(target=call, args=("cheap", "/cheap?ms=1"))
    cheap.start()
    runaway.join(IMPORT_S + 10)
    cheap.join(IMPORT_S + 10)
    assert out["runaway"][0] == 504 and out["runaway"][1] < 2.0, (out, srv.log())
    assert out["cheap"][0] == 200, (out, srv.log())
    # all that while the check was still running
    assert time.monotonic() - t_hup < IMPORT_S, (time.monotonic() - t_hup, out)

    # and the reload goes on once the check is done
    assert wait_until(lambda: "ready: generation 2" in srv.log(), IMPORT_S + 15), srv.log()
    assert get(srv.port, "/cheap?ms=1").status == 200



@pytest.mark.timeout(60)
def test_stop_during_a_reload_check(start_server, tmp_path):
    # SIGTERM while a reload is checked: the master stops at once (it used to finish the
    # check first) and the check's processes end with it.
    app = tmp_path / "app"
    app.mkdir()
    flag, started = tmp_path / "slow-now", tmp_path / "import-began"
    slow_app(app, flag, started)
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module python]\npath = %s\npython_path = %s\ncheck_timeout_ms = 10000\n"
                    "[route /slow]\nkind = python.call\ncallable = slowimp:f\n"
                    % (module(), app))
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--loop-workers", "1",
                       start_timeout=30)
    flag.touch()
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: started.exists() and started.read_text(), 10), srv.log()
    importer = int(started.read_text())
    t0 = time.monotonic()
    assert srv.stop(signal.SIGTERM, timeout=IMPORT_S + 10) == 0, srv.log()
    assert time.monotonic() - t0 < 3, (time.monotonic() - t0, srv.log())
    assert wait_until(lambda: _gone(importer), 5), importer


@pytest.mark.timeout(60)
def test_a_file_changed_during_the_check_is_checked_again(start_server, tmp_path):
    # The master applies only what the check process checked: a file edited while the check
    # runs refuses that reload ("changed while it was checked"), and the SIGHUP sent after the
    # edit, which came during the check, is checked after it and applied.
    app = tmp_path / "app"
    app.mkdir()
    flag, started = tmp_path / "slow-now", tmp_path / "import-began"
    slow_app(app, flag, started)
    conf = tmp_path / "lagless.conf"
    text = ("[module python]\npath = %s\npython_path = %s\ncheck_timeout_ms = 10000\n"
            "[route /slow]\nkind = python.call\ncallable = slowimp:f\n" % (module(), app))
    conf.write_text(text)
    srv = start_server("-c", str(conf), "--compute-workers", "1", "--loop-workers", "1",
                       "--enable-test-jobs", "1", start_timeout=30)
    assert get(srv.port, "/extra?ms=1").status == 404
    flag.touch()
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(started.exists, 10), srv.log()
    flag.unlink()  # the next check imports at once
    conf.write_text(text + "[route /extra]\nmethods = GET\nkind = test-sleep\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "changed while it was checked" in srv.log(), IMPORT_S + 10), \
        srv.log()
    assert wait_until(lambda: "ready: generation 2" in srv.log(), 15), srv.log()
    assert get(srv.port, "/extra?ms=1").status == 200
