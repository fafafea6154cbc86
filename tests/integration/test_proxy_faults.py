"""Faults of the app behind an upstream route (issue 36, "Bad input and faults"): an app server
that restarts every few seconds, and one that closes its kept connections at random. The real
binary in front of app servers on loopback (test_proxy_eject.py's App), two loop workers.

What lagless promises there: an idempotent request is never lost to a restart or to a kept
connection the app closed (sent again once on a new connection, or to another server after a
refused connect), a POST the app may have had is never sent twice, the restarting server is
taken out while it is down and comes back on its own."""

import random
import socket
import threading
import time

import pytest

from conftest import metric, request, wait_until
from test_proxy_eject import App, apps, start  # noqa: F401 (apps: a fixture)


class Restarting(App):
    """An App that goes down (its port closed, its connections cut) for `down` s every
    `period` s, then listens again on the same port, until stop_cycling()."""

    def __init__(self, period, down):
        super().__init__("ok")
        self.port = int(self.address.rsplit(":", 1)[1])
        self.period, self.down = period, down
        self.cycles = 0
        self.cycling = threading.Event()
        self.cycling.set()
        self.thread = threading.Thread(target=self._cycle, daemon=True)
        self.thread.start()

    def _cycle(self):
        while self.cycling.is_set():
            time.sleep(self.period - self.down)  # fault injection: the app's own rhythm
            if not self.cycling.is_set():
                return
            self.close()
            time.sleep(self.down)
            self.stopping.clear()
            self.gate.clear()
            self.sock = socket.socket()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("127.0.0.1", self.port))
            self.sock.listen(128)
            self.cycles += 1
            threading.Thread(target=self._accept, daemon=True).start()

    def stop_cycling(self):
        self.cycling.clear()
        self.thread.join(10)


class Flaky(App):
    """An App that, after an answer, closes the connection with probability p (seeded), without
    saying so (no Connection: close): the next request on it finds it gone."""

    def __init__(self, p, seed):
        super().__init__("ok")
        self.rng = random.Random(seed)
        self.p = p
        self.closed = 0
        self.targets = []

    def _serve(self, c):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                n = 0
                for line in head.split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":", 1)[1])
                while len(buf) < n:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                buf = buf[n:]
                method = head.split(b" ", 1)[0].decode()
                with self.lock:
                    self.seen[method] = self.seen.get(method, 0) + 1
                    self.targets.append(head.split(b" ", 2)[1].decode())
                    cut = self.rng.random() < self.p
                    self.closed += cut
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                if cut:
                    return
        except OSError:
            return
        finally:
            c.close()


@pytest.mark.timeout(90)
def test_an_app_server_that_restarts_every_few_seconds(start_server, tmp_path, apps):
    """Two servers, the second down for 0.4 s of every 1.2 s: GETs sent all along are answered
    200 (a refused connect goes to the other server, a kept connection cut before its answer
    is sent again), at most one of them per restart 502 (cut after the app had it on a fresh
    connection); the restarting server is ejected while down and back once up."""
    stable, = apps("ok")
    flaky = Restarting(period=1.2, down=0.4)
    try:
        srv = start(start_server, tmp_path, [flaky.address, stable.address],
                    upstream="eject_after = 2\neject_ms = 300\n")
        statuses = []
        end = time.monotonic() + 4.5
        while time.monotonic() < end:
            statuses.append(request(srv.port, "GET", "/api/x", timeout=10).status)
        flaky.stop_cycling()
        assert flaky.cycles >= 2, flaky.cycles
        bad = [s for s in statuses if s != 200]
        assert set(bad) <= {502} and len(bad) <= flaky.cycles + 1, (len(statuses), bad)
        assert len(statuses) >= 50, len(statuses)
        assert metric(srv.port, 'lagless_upstream_ejections_total{upstream="app",server="%s"}'
                      % flaky.address) >= 1
        # up again: it is back in the rotation after its back-off and serves its share
        before = flaky.count()
        assert wait_until(lambda: request(srv.port, "GET", "/api/y").status == 200 and
                          flaky.count() > before, 10), flaky.count()
    finally:
        flaky.stop_cycling()
        flaky.close()


@pytest.mark.timeout(90)
def test_an_app_that_closes_kept_connections_at_random(start_server, tmp_path, apps):
    """The app closes a third of its kept connections after an answer, unannounced: every GET
    through lagless is answered 200 (a request that finds its kept connection gone is sent
    again once on a new one), and no POST reaches the app twice (one that may have reached
    it is a 502, never resent: RFC 9110 9.2.2)."""
    app = Flaky(p=0.33, seed=36)
    try:
        srv = start(start_server, tmp_path, [app.address])
        gets = [request(srv.port, "GET", "/api/g%d" % i, timeout=10).status for i in range(300)]
        assert gets == [200] * 300, [s for s in gets if s != 200]
        assert app.closed >= 50, app.closed  # not vacuous: kept connections were cut
        posts = [request(srv.port, "POST", "/api/p%d" % i, body=b"x", timeout=10).status
                 for i in range(100)]
        assert set(posts) <= {200, 502}, posts
        seen = [t for t in app.targets if t.startswith("/api/p")]
        assert len(seen) == len(set(seen)), "a POST reached the app twice"
        assert all("/api/p%d" % i in seen for i, st in enumerate(posts) if st == 200)
        assert posts.count(200) >= 90, posts.count(200)
    finally:
        app.close()
