"""Regression: a module whose init crashed (abort, _exit) passed `lagless -t`; the server reported
ready with no compute process alive and exited after 10 deaths, taking every route down. A
failing or crashing init now costs that module's routes only: 503 with the reason (logged once),
the init retried in a probe with a back-off until it works, and `-t` runs each init once in a
child (tests/modules/initfault.c)."""
import os
import subprocess

import pytest

from conftest import LAGLESS_BIN, get, request, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")
pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "initfault.so")),
                                reason="test modules not built (make integration builds them)")

CAUSE = {"abort": "init was killed by signal 6", "exit": "init exited with status 3",
         "fail": "init failed"}


def conf(tmp_path, how):
    p = tmp_path / "lagless.conf"
    p.write_text("[module initfault]\npath = %s\ninit = %s\nok_when = %s\n\n"
                 "[route /hello]\nmethods = GET\nkind = initfault.hello\n\n"
                 "[route /hello-loop]\nmethods = GET\nkind = initfault.hello\nwhere = loop\n"
                 % (os.path.join(MODS, "initfault.so"), how, tmp_path / "ok"))
    return str(p)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", sorted(CAUSE))
def test_t_runs_each_init_in_a_child(tmp_path, how):
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", conf(tmp_path, how)], capture_output=True,
                       timeout=50)
    assert r.returncode == 1, r
    assert ("module initfault: " + CAUSE[how]).encode() in r.stderr, r.stderr
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", conf(tmp_path, "ok")], capture_output=True,
                       timeout=50)
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", sorted(CAUSE))
def test_failing_init_costs_its_routes_only(start_server, tmp_path, how):
    srv = start_server("-c", conf(tmp_path, how), "--compute-workers", "1",
                       "--log-level", "debug", start_timeout=30)
    srv.expected_crash_re = r"(compute|loop)\[\d+\] pid=\d+ (killed by signal 6|exited with " \
        r"status 3)|initfault\.c|module initfault: init"
    for path in ("/hello", "/hello-loop"):
        r = get(srv.port, path, timeout=10)
        assert r.status == 503, (path, r)
        assert ("module initfault is unavailable: its " + CAUSE[how]).encode() in r.body, r
        assert int(r.header("retry-after")) >= 1, r
    # every other route is served, by a live compute process
    assert srv.wait_children("compute", 1, timeout=10)
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200, r
    # retried with a back-off, in a probe: the server goes on, the failure is logged once
    assert wait_until(lambda: srv.log().count("retrying its init in probe") >= 2, 30), \
        srv.log()[-3000:]
    assert srv.running()
    log = srv.log()
    assert "module initfault: " + CAUSE[how] in log, log[-3000:]
    assert log.count("its routes answer 503 until a retry") == 1, log[-3000:]
    m = get(srv.port, "/metrics").body.decode()
    assert 'lagless_jobs_rejected_total{reason="module_init"}' in m
    # once the init works, the next retry brings the routes back, in every process
    (tmp_path / "ok").write_text("")
    assert wait_until(lambda: get(srv.port, "/hello", timeout=10).status == 200, 30), \
        srv.log()[-3000:]
    assert get(srv.port, "/hello").body == b"hello\n"
    assert wait_until(lambda: get(srv.port, "/hello-loop", timeout=10).status == 200, 10)
    assert "its init succeeded in a retry" in srv.log()
    assert srv.stop() == 0
