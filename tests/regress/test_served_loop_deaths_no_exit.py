"""Regression (issue 18, 1): loop workers that requests crashed (a client resetting on a cache
hit) died within a second of their start, and after ten such deaths in a row the master took
them for a process that cannot start, stopped everything and exited 1: every route down. A
loop worker that requests reached got to serve; its death is a fault of some request, like a
compute process killed by its job, and never counts toward giving up. Only a loop that dies
young before any request reached it counts, and ten of those still stop the server.
"""
import re
import signal
import os

import pytest

from conftest import get, pid_alive, wait_until

KILLS = 13  # more than the ten quick deaths after which the master gives up


@pytest.mark.timeout(120)
def test_loop_killed_after_serving_never_stops_the_master(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    srv.expected_crash_re = r"loop\[0\] pid=\d+ killed by signal 9\b"
    killed = []
    for i in range(KILLS):
        pids = srv.wait_children("loop", 1, timeout=15, exclude=killed)
        assert srv.running(), "the master exited after %d served loops died\n%s" % (i, srv.log())
        assert len(pids) == 1 and pids[0] not in killed, (i, pids, srv.log()[-3000:])
        # a request this incarnation answers (the only loop), then its death, young
        r = get(srv.port, "/ping", timeout=15)
        assert r.status == 200, r
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])
    pids = srv.wait_children("loop", 1, timeout=15, exclude=killed)
    assert len(pids) == 1, srv.log()[-3000:]
    assert get(srv.port, "/ping", timeout=15).status == 200
    assert srv.running() and "giving up" not in srv.log(), srv.log()[-3000:]
    assert srv.stop(signal.SIGTERM) == 0


@pytest.mark.timeout(120)
def test_loop_that_never_serves_still_gives_up(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1")
    srv.expected_crash_re = r"loop\[0\] pid=\d+ killed by signal 9\b"
    killed = []
    # the first incarnation served the harness's /ping; the next ones get no request at all
    for _ in range(11):
        pids = srv.wait_children("loop", 1, timeout=15, exclude=killed)
        if not srv.running():
            break
        assert len(pids) == 1 and pids[0] not in killed, (pids, srv.log()[-3000:])
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])
    try:
        rc = srv.proc.wait(15)
    except Exception:
        rc = None
    assert rc == 1, "master exit code %r after a loop crash loop\n%s" % (rc, srv.log())
    assert re.search(r"loop\[0\] died 10 times in a row within \d+ ms of starting, before "
                     r"serving any request; giving up", srv.log()), srv.log()
    assert len(killed) == 11, killed
    assert all(wait_until(lambda p=p: not pid_alive(p), 5) for p in killed)
