"""Regression: a SIGHUP that came while four generations were alive (older ones still draining
long jobs) was only logged ("SIGHUP ignored") and never took effect, while systemctl reload
reported success: the new configuration was lost. Such a request is now remembered (repeated
ones coalesce: the configuration is read when it is applied) and applied as soon as a draining
generation has gone. Under systemd the deferral sends RELOADING=1 once (not again for the
requests coalesced into it) and READY=1 only when the reload has taken effect.
"""
import os
import re
import signal
import threading

import pytest

from conftest import Call, Notify, get, heavy_iterations_for, wait_until


def write_conf(path, queue):
    # The draining jobs must end for the deferred reload to be applied: under the idle policy
    # they would get only the CPU nothing else wants, which on a busy machine can be none for
    # minutes. Their scheduling is not what this test is about, so it is fixed here.
    path.write_text("compute_workers = 1\nqueue = %d\ndeadline_ms = 120000\n"
                    "drain_timeout_ms = 120000\ncompute_policy = normal\n" % queue)


class Pinger(threading.Thread):
    """/ping over fresh connections until stopped; any failure is recorded."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.ok, self.errors = port, threading.Event(), 0, []

    def run(self):
        while not self.stop.is_set():
            try:
                r = get(self.port, "/ping", timeout=10)
                if r.status == 200:
                    self.ok += 1
                else:
                    self.errors.append(r.status)
            except OSError as e:
                self.errors.append(repr(e))
            self.stop.wait(0.02)


@pytest.mark.timeout(150)
def test_sighup_while_generations_drain_is_applied_later(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    write_conf(conf, 2)
    notify = Notify(str(tmp_path / "notify.sock"))
    srv = start_server("-c", str(conf), "--loop-workers", "1",
                       env=dict(os.environ, NOTIFY_SOCKET=notify.path))
    n = heavy_iterations_for(srv.port, 3)
    pinger = Pinger(srv.port)
    pinger.start()
    heavies = []
    try:
        # Each generation gets a long /heavy to drain, then a SIGHUP starts the next one, until
        # the master has MAX_GENS alive and defers the request.
        for gen in range(2, 9):
            h = Call(get, srv.port, "/heavy?iterations=%d" % n, timeout=120)
            h.start()
            heavies.append(h)
            # Running in the serving generation (the one /health answers for).
            assert wait_until(lambda: get(srv.port, "/health").json()["slots"]["running"] >= 1,
                              20)
            os.kill(srv.pid, signal.SIGHUP)
            assert wait_until(lambda: "reload deferred" in srv.log() or
                              "ready: generation %d" % gen in srv.log(), 20), srv.log()
            if "reload deferred" in srv.log():
                break
        assert "reload deferred" in srv.log(), srv.log()
        assert "SIGHUP ignored" not in srv.log()
        # One RELOADING=1 per SIGHUP so far, the deferred one included; READY=1 for each that
        # took effect (and the start), not yet for the deferred one.
        sighups = len(heavies)
        assert wait_until(lambda: notify.count("RELOADING=1") == sighups, 10), notify.messages
        assert wait_until(lambda: notify.count("READY=1") == sighups, 10), notify.messages
        # Two more requests with a changed file in between: only the last one matters.
        write_conf(conf, 5)
        os.kill(srv.pid, signal.SIGHUP)
        assert wait_until(lambda: "coalesced" in srv.log(), 10), srv.log()
        write_conf(conf, 7)
        os.kill(srv.pid, signal.SIGHUP)
        assert wait_until(lambda: srv.log().count("coalesced") >= 2, 10), srv.log()
        assert notify.count("RELOADING=1") == sighups, notify.messages  # coalesced: no more
        # Once the oldest job ends its generation retires and the pending reload starts.
        assert wait_until(lambda: "applying the deferred reload" in srv.log(), 120), srv.log()
        # The next READY=1 names the generation the deferred reload started, not an older one.
        assert wait_until(lambda: notify.count("READY=1") > sighups, 30), notify.messages
        ready = [m for m in notify.messages if "READY=1" in m][sighups]
        started = re.findall(r"starting generation (\d+)", srv.log())[-1]
        assert re.search(r"\bgeneration %s\b" % started, ready), (ready, started)
        assert wait_until(lambda: get(srv.port, "/health").json()["slots"]["total"] == 1 + 7,
                          30), (get(srv.port, "/health").json(), srv.log())
        for h in heavies:
            assert h.get(120).status == 200
    finally:
        pinger.stop.set()
        pinger.join(timeout=20)
        notify.close()
    assert pinger.errors == [], pinger.errors[:5]
    assert pinger.ok > 10
    assert srv.stop(signal.SIGTERM) == 0
