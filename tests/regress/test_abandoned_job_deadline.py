"""Regression: a running job whose client left was not stopped at its deadline.

With --on-client-gone finish (the default until issue 39) the loop releases the slot (RUNNING -> ABANDONED)
and forgets it, so nothing enforced --deadline-ms any more: a 10^12-iteration job held the only
compute process for minutes and every later job waited and got 504. The master now kills the
runner of an ABANDONED slot once the slot's deadline passes.
"""
import socket
import time

import pytest

from conftest import get, heavy_iterations_for, wait_until


@pytest.mark.timeout(60)
def test_abandoned_job_is_killed_at_its_deadline(start_server):
    srv = start_server("--compute-workers", "1", "--queue", "1", "--deadline-ms", "20000")
    n = heavy_iterations_for(srv.port, 30.0)  # far beyond the deadline below
    srv.stop()
    srv = start_server("--compute-workers", "1", "--queue", "1", "--deadline-ms", "1500",
                       "--on-client-gone", "finish")
    compute = srv.wait_children("compute", 1)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.sendall(b"GET /heavy?iterations=%d HTTP/1.1\r\nHost: x\r\n\r\n" % n)
    assert wait_until(lambda: get(srv.port, "/health").json()["slots"]["running"] == 1, 5)
    s.close()  # the client leaves while its job runs
    t0 = time.monotonic()
    # The compute process is killed at the deadline and replaced ...
    assert srv.wait_children("compute", 1, timeout=6, exclude=compute), srv.log()
    assert time.monotonic() - t0 < 5.0
    assert "nobody waiting for it" in srv.log()
    # ... so the next job runs at once instead of waiting behind the abandoned one.
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200, r
