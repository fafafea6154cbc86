"""Regression: jobs that kill their compute process made the master give up and exit 1.

Every death of a compute process within a second of its start counted toward the crash-loop
limit, so bursts of GET /test/crash (the respawned process took the next queued crash job and
died too) stopped the whole server, loop workers and all, after about 20 s. A death while the
process names a job in its proc page is now that job's failure (502 to its client), counted by
kind; only processes that die before taking a job count toward giving up, and a kind that keeps
killing processes is quarantined (503) for a while.
"""
import re
import threading
import time

import pytest

from conftest import get, wait_until

BURST_SECONDS = 25.0


def metric(port, name_re):
    text = get(port, "/metrics", timeout=5).body.decode()
    m = re.search(r"^%s (\d+)$" % name_re, text, re.M)
    return int(m.group(1)) if m else None


def burst(port, statuses, lock):
    try:
        r = get(port, "/test/crash", timeout=15)
        with lock:
            statuses.append(r.status)
    except OSError as e:  # a refused or reset connection would be a failure of the server
        with lock:
            statuses.append(repr(e))


@pytest.mark.timeout(90)
def test_crash_bursts_never_stop_the_server(start_server):
    srv = start_server("--enable-test-jobs", "1", "--compute-workers", "2",
                       "--quarantine-deaths", "4", "--quarantine-ms", "3000")
    srv.expected_crash_re = r"compute\[\d+\] pid=\d+ killed by signal 6\b"
    statuses, lock = [], threading.Lock()
    end = time.monotonic() + BURST_SECONDS
    while time.monotonic() < end and srv.running():
        threads = [threading.Thread(target=burst, args=(srv.port, statuses, lock))
                   for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        r = get(srv.port, "/ping", timeout=5)
        assert r.status == 200, r
    assert srv.running(), "the server exited during the crash bursts\n%s" % srv.log()
    assert statuses and set(statuses) <= {502, 503}, statuses
    assert 502 in statuses, statuses
    # the deaths are counted by the kind that caused them, and logged naming it
    deaths = metric(srv.port, r'lagless_job_process_deaths_total\{kind="test-crash",'
                              r'route="/test/crash"\}')
    assert deaths is not None and deaths >= 4, deaths
    assert re.search(r"compute\[\d+\] pid=\d+ died running a test-crash job of route "
                     r"/test/crash", srv.log()), srv.log()
    # the kind was quarantined at least once, and those refusals are counted as such
    assert "quarantining job kind test-crash on route /test/crash" in srv.log(), srv.log()
    assert 503 in statuses, statuses
    assert metric(srv.port, r'lagless_jobs_rejected_total\{reason="quarantined"\}') >= 1
    # other kinds are served all along, and the pool is whole again
    assert srv.wait_children("compute", 2, timeout=10), srv.log()
    r = get(srv.port, "/heavy?iterations=1000", timeout=10)
    assert r.status == 200, r
    # the quarantine ends: the kind is tried again (and fails again, with 502)
    assert wait_until(lambda: get(srv.port, "/test/crash", timeout=15).status == 502, 10)
