"""Upstreams that slow down do not take the service with them (issue 36, items 1 and 2): a
route's bulkhead within its upstream (its own max_conns and queue, counted for the whole
server), and admission by queue wait (CoDel) per upstream. Against the test origin (origin.py),
with two loop workers so that every bound is shown to hold for the whole server."""

import socket
import subprocess

import pytest

from conftest import LAGLESS_BIN, get, metric, read_response, wait_until
from origin import Origin
from test_proxy import Pending, ask, close_all

UPSTREAM = """\
[upstream app]
server = {server}
max_conns = {max_conns}
queue = {queue}
first_byte_timeout_ms = 60000
{extra}
"""

ROUTES = """\
[route /slow/*]
upstream = app
deadline_ms = 60000
{bulkhead}
[route /api/*]
upstream = app
deadline_ms = 60000
"""


@pytest.fixture
def origin():
    o = Origin().start()
    yield o
    o.release_all()
    o.stop()


def start(start_server, tmp_path, origin, max_conns, queue, bulkhead="", extra=""):
    conf = tmp_path / "bulkhead.conf"
    conf.write_text(UPSTREAM.format(server=origin.unix_server, max_conns=max_conns, queue=queue,
                                    extra=extra) + ROUTES.format(bulkhead=bulkhead))
    return start_server("--loop-workers", "2", "--compute-workers", "1", "-c", str(conf))


@pytest.mark.timeout(90)
def test_flooded_route_holds_its_share_and_others_keep_their_latency(start_server, tmp_path,
                                                                      origin):
    """/slow has max_conns 2 and queue 2 within the app's 4 and 8: of 10 held /slow requests,
    2 reach the app, 2 wait in the route's own queue and 6 are refused at once; /api requests
    meanwhile take the app's other places and answer at once. Without the bulkhead the 10 took
    the app's 4 places and its queue, and every /api request waited behind them."""
    srv = start(start_server, tmp_path, origin, 4, 8, "max_conns = 2\nqueue = 2\n")
    pending = [Pending(srv.port, "/slow/hold?i=%d" % i) for i in range(10)]
    try:
        assert origin.wait(lambda o: o.in_flight == 2, 15), origin.in_flight
        assert wait_until(lambda: sum(p.done() for p in pending) == 6, 10), \
            [p.status for p in pending]
        for p in (p for p in pending if p.done()):
            assert p.error is None and p.status == 503, (p.status, p.error)
            assert p.headers.get("retry-after"), p.headers
        assert metric(srv.port, 'lagless_route_bulkhead_in_flight{route="/slow/"}') == 2
        assert metric(srv.port, 'lagless_route_bulkhead_queue_depth{route="/slow/"}') == 2
        assert metric(srv.port, 'lagless_route_bulkhead_full_total{route="/slow/"}') == 6
        assert metric(srv.port, 'lagless_upstream_queue_depth{upstream="app"}') == 0
        for i in range(6):  # the other routes of the app are served at once, 2 at a time
            r, took = ask(srv.port, "/api/ok?i=%d" % i, timeout=10)
            assert r.status == 200 and r.body == b"ok\n", r.status
        assert origin.max_in_flight <= 4
        status = get(srv.port, "/status").json()
        assert status["bulkheads"] == [{"route": "/slow/", "in_flight": 2, "queued": 2,
                                        "max_conns": 2, "queue": 2}], status["bulkheads"]
        # released, the 2 queued ones get the route's places and finish too
        origin.release_all()
        assert origin.wait(lambda o: o.count("hold") == 4, 15), origin.count("hold")
        origin.release_all()
        assert wait_until(lambda: all(p.done() for p in pending), 15)
        assert sorted(p.status for p in pending) == [200] * 4 + [503] * 6
        assert origin.count("hold") == 4
        assert wait_until(lambda: metric(
            srv.port, 'lagless_route_bulkhead_in_flight{route="/slow/"}') == 0, 10)
    finally:
        origin.release_all()
        close_all(pending)


@pytest.mark.timeout(90)
def test_bulkhead_waiters_then_queue_at_the_upstream(start_server, tmp_path, origin):
    """A bulkhead's request that got its route's place still needs one of the upstream's: with
    the app's 2 places held by /api, /slow's request waits in the upstream's queue (its
    route's place held), then goes when an /api request ends; the route's queue waiter is
    served after it."""
    srv = start(start_server, tmp_path, origin, 2, 4, "max_conns = 1\nqueue = 1\n")
    api = [Pending(srv.port, "/api/hold?i=%d" % i) for i in range(2)]
    slow = []
    try:
        assert origin.wait(lambda o: o.in_flight == 2, 15)
        slow = [Pending(srv.port, "/slow/sleep?ms=1&i=%d" % i) for i in range(2)]
        assert wait_until(lambda: metric(
            srv.port, 'lagless_upstream_queue_depth{upstream="app"}') == 1, 10)
        assert wait_until(lambda: metric(
            srv.port, 'lagless_route_bulkhead_queue_depth{route="/slow/"}') == 1, 10)
        assert not any(p.done() for p in slow)
        origin.release_all()
        for p in api + slow:
            p.wait(15)
        assert [p.status for p in api + slow] == [200] * 4
        assert origin.max_in_flight <= 2
    finally:
        origin.release_all()
        close_all(api + slow)


def check_fails(tmp_path, text, want):
    p = tmp_path / "bad.conf"
    p.write_text(text)
    out = subprocess.run([LAGLESS_BIN, "-t", "-c", str(p)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode != 0, text
    assert str(p) + want in out.stderr, (want, out.stderr)


def test_bulkhead_and_codel_keys_are_checked(tmp_path):
    up = "[upstream app]\nserver = 127.0.0.1:1\nmax_conns = 8\n"
    check_fails(tmp_path, up + "[route /x]\nupstream = app\nmax_conns = 9\n",
                ":6: key 'max_conns'")
    check_fails(tmp_path, up + "[route /x]\nupstream = app\nqueue = 3\n", ":6: key 'queue'")
    check_fails(tmp_path, up + "[route /x]\nupstream = app\nmax_conns = 0\n",
                ":6: key 'max_conns'")
    check_fails(tmp_path, "[route /x]\nkind = heavy\nmax_conns = 2\n", ":3: key 'max_conns'")
    check_fails(tmp_path, up + "queue_wait_target_ms = soon\n", ":4: key 'queue_wait_target_ms'")
    p = tmp_path / "good.conf"
    p.write_text(up + "queue_wait_target_ms = 50\n[route /x]\nupstream = app\nmax_conns = 3\n")
    out = subprocess.run([LAGLESS_BIN, "-t", "-c", str(p)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "route /x (retry_on connect-failure) (bulkhead: max_conns 3, queue 3)" in text, text
    assert "queue_wait_target_ms 50, queue_wait_interval_ms 100" in text, text


@pytest.mark.timeout(90)
def test_codel_sheds_a_standing_queue_and_fresh_requests_are_served(start_server, tmp_path,
                                                                     origin):
    """One place, a deep queue, requests of 200 ms each arriving at once: with a queue-wait
    target of 100 ms and an interval of 500 ms, the first few run and the rest, waiting past
    the interval, are shed (503, reason shed) instead of reaching the app seconds late; a
    request that comes after the burst is served at once. Without CoDel all 16 reach the app,
    the last after about 3 s."""
    srv = start(start_server, tmp_path, origin, 1, 50,
                extra="queue_wait_target_ms = 100\nqueue_wait_interval_ms = 500\n")
    pending = [Pending(srv.port, "/api/sleep?ms=200&i=%d" % i) for i in range(16)]
    try:
        for p in pending:
            p.wait(30)
        statuses = [p.status for p in pending]
        assert set(statuses) == {200, 503}, statuses
        reached = origin.count("sleep")
        assert reached == statuses.count(200) and 2 <= reached <= 8, (reached, statuses)
        shed = metric(srv.port, 'lagless_upstream_errors_total{upstream="app",reason="shed"}')
        assert shed == statuses.count(503), (shed, statuses)
        r, took = ask(srv.port, "/api/ok", timeout=10)
        assert r.status == 200
    finally:
        close_all(pending)


class Held:
    """A GET sent now on its own connection with extra header lines, its answer read later."""

    def __init__(self, port, path, headers=""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: app.test\r\n%s\r\n" % (path, headers))
                          .encode())

    def answer(self):
        return read_response(self.sock)

    def close(self):
        self.sock.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("status", [503, 429])
def test_one_client_holds_at_most_its_share_of_the_app(start_server, tmp_path, origin, status):
    """client_share = 50 of max_conns 4: one client address has at most 2 requests at the app
    or in its queue; its third is refused at once (503, or 429 by client_limit_status), while
    another client (named by a trusted proxy's X-Forwarded-For) still gets its own 2."""
    conf = tmp_path / "share.conf"
    conf.write_text(UPSTREAM.format(
        server=origin.unix_server, max_conns=4, queue=8,
        extra="client_share = 50\nclient_limit_status = %d\n" % status) +
        ROUTES.format(bulkhead=""))
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "-c", str(conf),
                       "--trusted-proxies", "127.0.0.1/32")
    a = [Held(srv.port, "/api/hold?a=%d" % i, "X-Forwarded-For: 192.0.2.1\r\n") for i in range(2)]
    held = list(a)
    try:
        assert origin.wait(lambda o: o.in_flight == 2, 15), origin.in_flight
        third = Held(srv.port, "/api/hold?a=3", "X-Forwarded-For: 192.0.2.1\r\n")
        held.append(third)
        r = third.answer()
        assert r.status == status and r.header("Retry-After"), (r.status, r.headers)
        b = [Held(srv.port, "/api/hold?b=%d" % i, "X-Forwarded-For: 198.51.100.7\r\n")
             for i in range(2)]
        held += b
        assert origin.wait(lambda o: o.in_flight == 4, 15), origin.in_flight
        assert metric(srv.port, 'lagless_upstream_errors_total{upstream="app",'
                      'reason="client_limit"}') == 1
        origin.release_all()
        assert [h.answer().status for h in a + b] == [200] * 4
        # its places given back, the first client is served again
        r, took = ask(srv.port, "/api/ok", timeout=10)
        assert r.status == 200
    finally:
        origin.release_all()
        for h in held:
            h.close()
