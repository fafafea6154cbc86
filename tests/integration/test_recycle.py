"""Recycling: a compute process that has run max_jobs jobs, or whose private memory passed
max_rss, finishes its job and is replaced (gunicorn's max_requests, PHP-FPM's
pm.max_requests, uWSGI's reload-on-rss), as a planned exit: no failed request, no crash-loop
back-off, no restart counted as a crash or exit."""
import re

import pytest

from conftest import get, heavy_result, wait_until


def restarts(port, reason):
    text = get(port, "/metrics").body.decode()
    return sum(float(v) for v in re.findall(
        r'^lagless_process_restarts_total\{role="compute",reason="%s"\} (\S+)$' % reason, text,
        re.M))


@pytest.mark.timeout(90)
def test_max_jobs_replaces_the_process_after_n_jobs(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("[pool default]\ncompute = 1\nmax_jobs = 3\n")
    srv = start_server("-c", str(conf))
    for i in range(10):  # more than CRASH_LOOP_LIMIT quick exits would have stopped it
        r = get(srv.port, "/heavy?iterations=%d" % (1000 + i), timeout=30)
        assert r.status == 200 and r.json()["result"] == heavy_result(1000 + i), (i, r)
    # jobs 1-3 on the first process, 4-6 on the second, 7-9 on the third, 10 on a fourth
    assert wait_until(lambda: srv.log().count("recycling after 3 jobs (max_jobs of pool "
                                              "default)") == 3, 5), srv.log()
    started = lambda: set(re.findall(r"compute\[0\] pid=(\d+) \S+: started", srv.log()))
    assert wait_until(lambda: len(started()) == 4, 5), srv.log()
    assert srv.log().count("recycling after") == 3, srv.log()
    assert "recycled itself; replacing it" in srv.log()
    assert restarts(srv.port, "exit") == 0 and restarts(srv.port, "crash") == 0
    assert "giving up" not in srv.log()


@pytest.mark.timeout(90)
def test_max_rss_replaces_a_process_past_it(start_server):
    # 1 KiB: any process is past it after its first job, so each job gets a fresh one
    srv = start_server("--compute-workers", "1", "--compute-max-rss", "1K")
    seen = set()
    for i in range(4):
        (pid,) = srv.wait_children("compute", 1, timeout=10, exclude=seen)
        seen.add(pid)
        r = get(srv.port, "/heavy?iterations=1000", timeout=30)
        assert r.status == 200, r
    assert len(seen) == 4, seen
    assert re.search(r"recycling: private memory \d+ KiB past max_rss 1 KiB of pool default",
                     srv.log()), srv.log()


@pytest.mark.timeout(60)
def test_no_recycling_by_default(start_server):
    srv = start_server("--compute-workers", "1")
    (pid,) = srv.wait_children("compute", 1)
    for _ in range(5):
        assert get(srv.port, "/heavy?iterations=1000").status == 200
    assert srv.wait_children("compute", 1) == [pid]
