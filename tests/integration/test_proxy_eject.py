"""Outlier ejection and retries with a budget across an upstream's servers (issue 36, items 3
and 4; worker/upstream/, shm/upeject.c): the real binary in front of real app servers on
loopback, each a thread of this test that answers every request the same way (200, 500, 503,
never, or once released), and closed ports that refuse.

* a server that fails eject_after times in a row (a 5xx, a refused connect, no first byte in
  time) is taken out for all loop workers at once, its requests go to the others, it comes back
  after its back-off on probation (one failure ejects it again, for longer), never more than
  eject_max_percent of the servers out and never all of them; counted and logged once per
  change;
* a GET is sent once to another server after a connect failure or a 503 (retry_on), a POST
  never after the app had it, and the retry budget stops retries past its share.

Every wait is for a condition, bounded; nothing sleeps for a guess.
"""
import socket
import threading
import time

import pytest

from conftest import free_port, metric, request, wait_until


class App:
    """An app server on 127.0.0.1: every request gets `mode`'s answer: "ok" (200), "500",
    "503", "hang" (read, never answered), "hold" (200 once release() was called). Counts the
    requests it read, by method."""

    def __init__(self, mode):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.seen = {}
        self.gate = threading.Event()
        self.stopping = threading.Event()
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def count(self, method=None):
        with self.lock:
            return sum(n for m, n in self.seen.items() if method in (None, m))

    def release(self):
        self.gate.set()

    def close(self):
        self.stopping.set()
        self.gate.set()
        self.sock.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.close()
                except OSError:
                    pass

    def _accept(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

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
                if self.mode == "hang":
                    self.stopping.wait(60)
                    return
                if self.mode == "hold":
                    self.gate.wait(60)
                if self.mode.startswith("slow"):  # "slow500", "slowok": after 300 ms
                    self.stopping.wait(0.3)
                status = {"500": 500, "503": 503, "slow500": 500}.get(self.mode, 200)
                body = b"%d from %s\n" % (status, self.address.encode())
                c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s"
                          % (status, len(body), body))
        except OSError:
            return
        finally:
            c.close()


@pytest.fixture
def apps():
    made = []

    def _make(*modes):
        out = [App(m) for m in modes]
        made.extend(out)
        return out
    yield _make
    for a in made:
        a.close()


def refused_address():
    """A loopback address nothing listens on (connects are refused)."""
    return "127.0.0.1:%d" % free_port()


def start(start_server, tmp_path, servers, upstream="", route="", loops=2):
    p = tmp_path / "eject.conf"
    p.write_text("[upstream app]\n%smax_conns = 32\nqueue = 32\nconnect_timeout_ms = 1000\n%s\n"
                 "[route /api/*]\nupstream = app\ndeadline_ms = 10000\n%s\n"
                 % ("".join("server = %s\n" % s for s in servers), upstream, route))
    return start_server("-c", str(p), "--loop-workers", str(loops), "--compute-workers", "1")


def m(srv, name, **labels):
    lab = ",".join('%s="%s"' % kv for kv in [("upstream", "app")] + sorted(labels.items()))
    return metric(srv.port, "%s{%s}" % (name, lab))


def test_a_server_answering_500_is_ejected_then_back_on_probation(start_server, tmp_path,
                                                                   apps):
    bad, good1, good2 = apps("500", "ok", "ok")
    srv = start(start_server, tmp_path, [bad.address, good1.address, good2.address],
                "eject_after = 3\neject_ms = 1500\n")
    errors, t_first, t_last = 0, None, None
    for _ in range(30):
        r = request(srv.port, "GET", "/api/x")
        if r.status != 200:
            assert r.status == 500, r
            errors += 1
            t_last = time.monotonic()  # the ejection came before this answer went out
            t_first = t_first or t_last
    # at most eject_after answers of the failing server reach clients, then none
    assert 1 <= errors <= 3, errors
    assert bad.count() == errors
    assert good1.count() + good2.count() == 30 - errors
    assert t_last - t_first < 1.0  # ejected within a second of its first failure
    assert m(srv, "lagless_upstream_ejections_total", server=bad.address) == 1
    assert m(srv, "lagless_upstream_ejected_servers") == 1
    assert srv.log().count("server %s ejected for 1500 ms" % bad.address) == 1
    # back after its back-off (1.5 s), announced once
    assert wait_until(lambda: m(srv, "lagless_upstream_ejected_servers") == 0, 10)
    assert time.monotonic() - t_last > 1.2
    assert wait_until(lambda: "server %s back in the rotation" % bad.address in srv.log(), 5)
    # on probation: its first failure ejects it again, for twice as long
    seen = bad.count()
    for _ in range(10):
        request(srv.port, "GET", "/api/x")
    assert bad.count() == seen + 1
    assert m(srv, "lagless_upstream_ejections_total", server=bad.address) == 2
    assert srv.log().count("server %s ejected for 3000 ms" % bad.address) == 1
    assert srv.log().count("back in the rotation") == 1
    assert m(srv, "lagless_upstream_ejections_total", server=good1.address) == 0


def test_requests_in_flight_cannot_carry_a_run_past_eject_after(start_server, tmp_path, apps):
    """Once a server's run of failures has begun, it takes no more requests than the run has
    left to eject_after, across both loops: a burst that would spread a third of itself onto
    it sends it two (Envoy's consecutive_5xx lets every request in flight fail as well)."""
    bad, good1, good2 = apps("slow500", "slowok", "slowok")
    srv = start(start_server, tmp_path, [bad.address, good1.address, good2.address],
                "eject_after = 3\neject_ms = 30000\n")
    assert request(srv.port, "GET", "/api/x").status == 500  # the first: least busy, server 0
    got = []
    burst = [threading.Thread(target=lambda: got.append(request(srv.port, "GET", "/api/x",
                                                                timeout=10).status))
             for _ in range(12)]
    for t in burst:
        t.start()
    for t in burst:
        t.join(15)
    assert len(got) == 12
    assert bad.count() == 3, (bad.count(), sorted(got))  # the run, and not one more
    assert sorted(got) == [200] * 10 + [500] * 2
    assert m(srv, "lagless_upstream_ejections_total", server=bad.address) == 1
    assert good1.count() + good2.count() == 10


def test_a_refusing_and_a_hanging_server_are_ejected(start_server, tmp_path, apps):
    hang, good = apps("hang", "ok")
    dead = refused_address()
    srv = start(start_server, tmp_path, [dead, hang.address, good.address],
                "eject_after = 2\neject_ms = 60000\neject_max_percent = 100\n"
                "first_byte_timeout_ms = 300\n", loops=1)
    res = [request(srv.port, "GET", "/api/x").status for _ in range(12)]
    assert res[-8:] == [200] * 8, res
    assert hang.count() <= 2  # no first byte in time, twice: out
    assert m(srv, "lagless_upstream_ejected_servers") == 2
    assert m(srv, "lagless_upstream_ejections_total", server=dead) == 1
    assert m(srv, "lagless_upstream_ejections_total", server=hang.address) == 1
    st = request(srv.port, "GET", "/status").json()
    states = {s["address"]: s["state"] for s in st["upstreams"][0]["servers"]}
    assert states == {dead: "ejected", hang.address: "ejected", good.address: "in"}, states


def test_a_hanging_server_is_ejected_when_its_clients_gave_up(start_server, tmp_path, apps):
    """Clients that leave before the first byte: the app still has their requests (orphans,
    up_orphan.c), whose first-byte timeouts count against the server all the same."""
    hang, good = apps("hang", "ok")
    srv = start(start_server, tmp_path, [hang.address, good.address],
                "eject_after = 2\neject_ms = 60000\nfirst_byte_timeout_ms = 300\n", loops=1)
    sent = 0
    for k in (1, 2):
        socks = []
        while hang.count() < k:  # ties rotate (least_conn): an idle good server may come first
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
            sent += 1
            assert wait_until(lambda: hang.count() + good.count() == sent, 10)
            assert len(socks) <= 2, (hang.count(), good.count())
        for s in socks:
            s.close()  # the client gives up; the app still has the request
        assert wait_until(lambda: srv.log().count("nobody waits for at its first-byte timeout")
                          == k, 10)
    assert m(srv, "lagless_upstream_ejections_total", server=hang.address) == 1
    for _ in range(5):
        assert request(srv.port, "GET", "/api/x").status == 200
    assert hang.count() == 2


@pytest.mark.parametrize("percent,most", [(50, 1), (100, 2)])
def test_never_more_than_the_share_ejected_never_all(start_server, tmp_path, apps, percent,
                                                      most):
    a, b, c = apps("500", "500", "500")
    srv = start(start_server, tmp_path, [a.address, b.address, c.address],
                "eject_after = 1\neject_ms = 60000\neject_max_percent = %d\n" % percent)
    for i in range(12):
        assert request(srv.port, "GET", "/api/x").status == 500
        assert m(srv, "lagless_upstream_ejected_servers") <= most
    assert m(srv, "lagless_upstream_ejected_servers") == most
    assert a.count() + b.count() + c.count() == 12  # one server always takes them


def test_a_get_goes_to_another_server_after_a_503_a_post_never(start_server, tmp_path, apps):
    busy, good = apps("503", "ok")
    srv = start(start_server, tmp_path, [busy.address, good.address], "eject_after = 0\n",
                "retry_on = connect-failure 503\n", loops=1)
    r = request(srv.port, "GET", "/api/x")
    assert r.status == 200 and good.address.encode() in r.body, r
    assert busy.count("GET") == 1 and good.count("GET") == 1
    r = request(srv.port, "POST", "/api/x", body=b"pay once")
    assert r.status == 503, r  # the app had it: never sent again
    assert busy.count("POST") == 1 and good.count("POST") == 0
    assert m(srv, "lagless_upstream_retries_by_reason_total", reason="503") == 1


def test_retry_on_decides_what_is_retried(start_server, tmp_path, apps):
    busy, good = apps("503", "ok")
    dead = refused_address()
    srv = start(start_server, tmp_path, [dead, busy.address, good.address],
                "eject_after = 0\n", "retry_on = none\n", loops=1)
    assert request(srv.port, "GET", "/api/x").status in (502, 503)  # the refused one, alone
    assert busy.count() + good.count() == 0
    assert m(srv, "lagless_upstream_retries_by_reason_total", reason="connect") == 0
    # the default, HAProxy's: a connect failure (nothing was sent) goes to another server
    srv.stop()
    srv = start(start_server, tmp_path, [dead, good.address], "eject_after = 0\n", loops=1)
    r = request(srv.port, "GET", "/api/x")
    assert r.status == 200 and good.count() == 1, r
    assert m(srv, "lagless_upstream_retries_by_reason_total", reason="connect") == 1


def test_the_retry_budget_stops_retries(start_server, tmp_path, apps):
    busy, held = apps("503", "hold")
    srv = start(start_server, tmp_path, [busy.address, held.address],
                "eject_after = 0\nretry_budget_percent = 0\nretry_budget_min = 2\n",
                "retry_on = 503\n", loops=1)
    out = [None] * 6

    def ask(i):
        out[i] = request(srv.port, "GET", "/api/x", timeout=30).status
    threads = []
    for i in range(6):
        h0 = held.count()
        t = threading.Thread(target=ask, args=(i,))
        t.start()
        threads.append(t)
        # busy answers 503: the GET goes to held (held there), or the budget refuses it
        assert wait_until(lambda: out[i] is not None or held.count() > h0, 10)
    assert wait_until(lambda: sum(1 for s in out if s == 503) >= 4, 10), out
    assert held.count() == 2  # the budget's minimum: two retries in flight at most
    assert m(srv, "lagless_upstream_retry_budget_exhausted_total") >= 4
    held.release()
    for t in threads:
        t.join(30)
    assert sorted(out) == [200, 200, 503, 503, 503, 503], out


def test_config_keys_checked_and_printed(tmp_path, apps):
    import subprocess
    from conftest import LAGLESS_BIN
    good, = apps("ok")
    p = tmp_path / "k.conf"
    p.write_text("[upstream app]\nserver = %s\neject_after = 4\neject_ms = 2000\n"
                 "eject_max_percent = 30\nretry_budget_percent = 10\nretry_budget_min = 1\n\n"
                 "[route /api/*]\nupstream = app\nretry_on = 502, 503\n" % good.address)
    out = subprocess.run([LAGLESS_BIN, "-t", "-c", str(p)], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "eject_after 4, eject_ms 2000, eject_max_percent 30, retry_budget_percent 10, " \
           "retry_budget_min 1" in text, text
    assert "route /api/* (retry_on 502 503)" in text, text
    for bad in ("eject_after = -1", "eject_max_percent = 101", "eject_ms = 0"):
        p.write_text("[upstream app]\nserver = %s\n%s\n" % (good.address, bad))
        out = subprocess.run([LAGLESS_BIN, "-t", "-c", str(p)], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode != 0 and ":3: key '%s'" % bad.split()[0] in out.stderr, out
    for bad in ("retry_on = 500", "retry_on = none 503"):
        p.write_text("[upstream app]\nserver = %s\n[route /api/*]\nupstream = app\n%s\n"
                     % (good.address, bad))
        out = subprocess.run([LAGLESS_BIN, "-t", "-c", str(p)], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode != 0 and "retry_on" in out.stderr, out
