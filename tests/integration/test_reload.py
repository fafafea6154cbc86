"""SIGHUP reload: a valid configuration starts a new generation of workers beside the running
one and retires the old one once the new one accepts; under continuous load no request fails
and no connection is refused. An invalid configuration changes nothing."""
import http.client
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import get, heavy_result, wait_until


def write_conf(path, compute, queue):
    path.write_text("compute_workers = %d\nqueue = %d\ndeadline_ms = 20000\n" % (compute, queue))


class HeavyClient(threading.Thread):
    """Keeps /heavy going over keep-alive connections, recording every outcome."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.results, self.errors = port, threading.Event(), [], []

    def run(self):
        conn = None
        n = 100000
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
                conn.request("GET", "/heavy?iterations=%d" % n)
                r = conn.getresponse()
                body = r.read()
                self.results.append((r.status, body))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                self.errors.append(repr(e))
                conn = None


@pytest.mark.timeout(120)
def test_reloads_under_load_lose_nothing(start_server, tmp_path):
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (Debian package wrk)")
    conf = tmp_path / "lagless.conf"
    write_conf(conf, 1, 4)
    srv = start_server("-c", str(conf), "--loop-workers", "2")
    heavy = HeavyClient(srv.port)
    heavy.start()
    wrk = subprocess.Popen(["wrk", "-t2", "-c16", "-d8s", "http://127.0.0.1:%d/ping" % srv.port],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)
        for i, (compute, queue) in enumerate([(2, 6), (1, 2), (2, 4)]):
            write_conf(conf, compute, queue)
            os.kill(srv.pid, signal.SIGHUP)
            assert wait_until(lambda: "generation %d retired" % (i + 1) in srv.log(), 10), srv.log()
            time.sleep(0.8)
        out, _ = wrk.communicate(timeout=30)
    finally:
        heavy.stop.set()
        heavy.join(timeout=30)
        if wrk.poll() is None:
            wrk.kill()
    # wrk prints these lines only when something went wrong.
    assert "Socket errors" not in out, out
    assert "Non-2xx or 3xx" not in out, out
    assert int(re.search(r"(\d+) requests in", out).group(1)) > 1000, out
    assert heavy.errors == [], heavy.errors[:5]
    assert len(heavy.results) > 10
    want = heavy_result(100000)
    assert all(st == 200 and b'"result":%d' % want in body for st, body in heavy.results)
    # The last configuration is the one running: 2 compute processes, 2 + 4 slots.
    assert wait_until(lambda: len(srv.children("compute")) == 2 and
                      len(srv.children("loop")) == 2, 10), srv.children()
    assert get(srv.port, "/health").json()["slots"]["total"] == 6
    assert srv.stop(signal.SIGTERM) == 0


@pytest.mark.timeout(60)
def test_invalid_reload_keeps_running(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    write_conf(conf, 1, 3)
    srv = start_server("-c", str(conf), "--loop-workers", "2")
    loops = srv.wait_children("loop", 2)  # /ping answered by one; the other may still start
    conf.write_text("compute_workers = 1\nqueue = many\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "reload refused" in srv.log(), 5), srv.log()
    assert "%s:2:" % conf in srv.log()
    assert get(srv.port, "/heavy?iterations=1000").status == 200
    assert srv.children("loop") == loops  # nothing was replaced
    assert get(srv.port, "/health").json()["slots"]["total"] == 4


@pytest.mark.timeout(60)
def test_reload_applies_a_changed_cpu_budget(start_server, tmp_path):
    """Sizing is decided again on reload: here the budget comes from --cpus in the file (a
    changed cgroup quota goes through the same lg_sizing_read + decide)."""
    conf = tmp_path / "lagless.conf"
    conf.write_text("cpus = 2\n")
    srv = start_server("-c", str(conf))
    assert len(srv.wait_children("loop", 2)) == 2 and len(srv.wait_children("compute", 1)) == 1
    conf.write_text("cpus = 3\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: len(srv.children("loop")) == 3 and
                      len(srv.children("compute")) == 2, 10), srv.log()
    assert get(srv.port, "/health").json()["slots"]["total"] == 2 + 4


@pytest.mark.timeout(60)
def test_reload_keeps_start_time_and_restart_counts(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    write_conf(conf, 1, 2)
    srv = start_server("-c", str(conf))
    compute = srv.wait_children("compute", 1)
    os.kill(compute[0], signal.SIGKILL)
    assert srv.wait_children("compute", 1, exclude=compute)
    def restarts():
        text = get(srv.port, "/metrics").body.decode()
        return sum(float(v) for v in re.findall(
            r'^lagless_process_restarts_total\{[^}]*role="compute"[^}]*\} (\S+)$', text, re.M))
    assert wait_until(lambda: restarts() >= 1, 5)
    before = get(srv.port, "/status").json()["start_time"]
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "generation 1 retired" in srv.log(), 10), srv.log()
    assert get(srv.port, "/status").json()["start_time"] == before
    assert restarts() >= 1
