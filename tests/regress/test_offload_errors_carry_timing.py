"""Regression: offloaded 502/503/504 answers lacked the X-Queue-Ms / X-Run-Ms headers that
200s carry, so a client could not tell a job that waited from one that ran. Every answer to a
job that reached the pool now carries both (a 503 refused at admission, before any job was
queued, carries neither) (issue 10, item 5)."""
import pytest

from conftest import Call, get, wait_until


def timing(r):
    q, run = r.header("x-queue-ms"), r.header("x-run-ms")
    assert q is not None and run is not None, r.headers
    return float(q), float(run)


@pytest.mark.timeout(60)
def test_502_carries_timing(start_server):
    srv = start_server("--enable-test-jobs", "1", "--compute-workers", "1")
    srv.expected_crash_re = r"compute\[\d+\] pid=\d+ killed by signal 6\b"
    r = get(srv.port, "/test/crash", timeout=20)
    assert r.status == 502, r
    q, run = timing(r)
    assert q >= 0 and run >= 0


@pytest.mark.timeout(60)
def test_504_and_shed_503_carry_timing(start_server):
    srv = start_server("--enable-test-jobs", "1", "--compute-workers", "1",
                       "--deadline-ms", "600", "--queue-wait-target-ms", "50")
    srv.expected_crash_re = r"compute\[\d+\] pid=\d+ killed by signal 6\b"
    spin = Call(get, srv.port, "/test/spin", timeout=20)
    spin.start()
    assert wait_until(lambda: "lagless_compute_busy 1\n" in get(srv.port, "/metrics").body.decode(),
                      10)
    # queued behind the spinning job, reached only after its deadline: shed
    queued = get(srv.port, "/test/crash", timeout=20)
    r = spin.get(20)
    assert r.status == 504, r
    q, run = timing(r)
    assert run >= 400, (q, run)  # it ran until the 600 ms deadline
    assert queued.status in (503, 504), queued
    q, run = timing(queued)
    assert q >= 40, (q, run)
    assert run < 5, (q, run)  # shed when a process reached it: it never ran
