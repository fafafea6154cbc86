"""Routes proxied to an upstream app (issue 35, worker/upstream/): the real binary in front of a
real origin (proxy_origin.py) on loopback, checking what reaches the app and what the client
gets: admission bounded for the whole server, fast 503, 504 from the queue, strict framing of
answers, keep-alive reuse, no POST sent twice, cheap routes unaffected."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import LAGLESS_BIN, get, wait_until
from proxy_origin import Origin


@pytest.fixture
def origin():
    o = Origin()
    yield o
    o.close()


def conf(tmp_path, origin, max_conns=4, queue=8, deadline_ms=5000, extra=""):
    """/api/* proxied to origin; /api/hold (held by the origin until released) with a
    deadline of its own, longer than the tests wait."""
    p = tmp_path / "proxy.conf"
    p.write_text("[upstream app]\nserver = %s\nmax_conns = %d\nqueue = %d\n%s\n"
                 "[route /api/*]\nupstream = app\ndeadline_ms = %d\n\n"
                 "[route /api/hold]\nupstream = app\ndeadline_ms = 20000\n"
                 % (origin.address, max_conns, queue, extra, deadline_ms))
    return str(p)


def req(port, method, path, body=None, headers=None, timeout=10.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def in_threads(n, fn):
    out = [None] * n

    def run(i):
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - recorded for the assertion
            out[i] = e
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out


def test_config_check_prints_upstream_and_refuses_bad_keys(tmp_path, origin):
    c = conf(tmp_path, origin)
    out = subprocess.run([LAGLESS_BIN, "-t", "-c", c], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "upstream app" in text and "route /api/*" in text and origin.address in text
    bad = [("[upstream app]\nserver = 127.0.0.1:70000\n", ":2: key 'server'"),
           ("[upstream app]\nserver = 127.0.0.1:1\nmax_conns = 0\n", ":3: key 'max_conns'"),
           ("[upstream app]\nserver = 127.0.0.1:1\nqueue = lots\n", ":3: key 'queue'"),
           ("[upstream app]\nserver = 127.0.0.1:1\nkeep_alive = 3\n", ":3: key 'keep_alive'"),
           ("[upstream app]\nmax_conns = 3\n", ":2: upstream app: no 'server' key"),
           ("[route /x]\nupstream = nope\n", ":2: key 'upstream'"),
           ("[route /x]\nkind = heavy\nrequest_buffering = on\n", ":3: key 'request_buffering'"),
           ("[upstream app]\nserver = 127.0.0.1:1\n[route /x]\nupstream = app\n"
            "request_buffering = maybe\n", ":5: key 'request_buffering'"),
           ("[upstream app]\nserver = 127.0.0.1:1\n[route /x]\nkind = heavy\nupstream = app\n",
            ":5: key 'upstream'")]
    for i, (text_in, want) in enumerate(bad):
        p = tmp_path / ("bad%d.conf" % i)
        p.write_text(text_in)
        out = subprocess.run([LAGLESS_BIN, "-t", "-c", str(p)], capture_output=True, text=True,
                             timeout=20)
        assert out.returncode != 0, text_in
        assert str(p) + want in out.stderr, (want, out.stderr)


def test_get_forwards_end_to_end_without_hop_by_hop(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "2")
    st, hd, body = req(srv.port, "GET", "/api/echo?a=1",
                       headers={"Connection": "x-secret", "X-Secret": "1", "X-Keep": "yes",
                                "Keep-Alive": "timeout=3", "X-Request-Id": "abc-1"})
    assert st == 200
    seen = json.loads(body)
    h = seen["headers"]
    assert seen["target"] == "/api/echo?a=1"
    assert "x-secret" not in h and "keep-alive" not in h and "connection" not in h
    assert h["x-keep"] == ["yes"]
    assert h["x-forwarded-for"] == ["127.0.0.1"] and h["x-forwarded-proto"] == ["http"]
    assert h["x-request-id"] == ["abc-1"]
    assert 0 < int(h["x-lagless-deadline-ms"][0]) <= 5000
    assert "Keep-Alive" not in hd  # the app's hop-by-hop field is not passed on
    st, hd, body = req(srv.port, "GET", "/api/chunked")
    assert st == 200 and body == b"hello world"
    st, hd, body = req(srv.port, "HEAD", "/api/echo")
    assert st == 200 and body == b""


def test_bodies_stream_both_ways(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    big = b"x" * (3 * 1024 * 1024)
    st, _, body = req(srv.port, "POST", "/api/echo", body=big)
    assert st == 200 and json.loads(body)["body_len"] == len(big)

    def chunks():
        for _ in range(50):
            yield b"y" * 1000
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    c.request("POST", "/api/echo", body=chunks(), encode_chunked=True,
              headers={"Transfer-Encoding": "chunked"})
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read())["body_len"] == 50000
    c.close()


def test_keepalive_reuse(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "2")
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    for _ in range(50):
        c.request("GET", "/api/echo")
        r = c.getresponse()
        assert r.status == 200
        r.read()
    c.close()
    assert origin.count("/api/echo") == 50
    assert origin.connections <= 2, origin.connections


def test_app_never_sees_more_than_max_conns(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=2, queue=16, deadline_ms=10000),
                       "--loop-workers", "2")
    res = in_threads(12, lambda i: req(srv.port, "GET", "/api/slow?ms=150")[0])
    assert res == [200] * 12, res
    assert origin.count("/api/slow") == 12
    assert origin.max_inflight <= 2, origin.max_inflight


def test_full_is_503_at_once_and_ping_still_answers(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=0), "--loop-workers", "2")
    holder = threading.Thread(target=lambda: req(srv.port, "GET", "/api/hold"))
    holder.start()
    try:
        assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
        t0 = time.monotonic()
        st, hd, _ = req(srv.port, "POST", "/api/echo", body=b"z" * 100)
        assert st == 503 and hd.get("Retry-After") == "1"
        assert time.monotonic() - t0 < 0.5
        assert origin.count("/api/echo") == 0
        t0 = time.monotonic()
        assert get(srv.port, "/ping").status == 200
        assert time.monotonic() - t0 < 0.5
    finally:
        origin.release()
        holder.join(10)


def test_queued_past_deadline_is_504_and_never_reaches_app(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=4, deadline_ms=600),
                       "--loop-workers", "2")
    holder = threading.Thread(target=lambda: req(srv.port, "GET", "/api/hold"))
    holder.start()
    try:
        assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
        t0 = time.monotonic()
        st, _, _ = req(srv.port, "GET", "/api/echo")
        took = time.monotonic() - t0
        assert st == 504 and 0.3 < took < 3, (st, took)
        assert origin.count("/api/echo") == 0
    finally:
        origin.release()
        holder.join(10)
    # the place given back: the next request goes through
    assert req(srv.port, "GET", "/api/echo")[0] == 200


@pytest.mark.parametrize("path", ["/api/clte", "/api/badchunk", "/api/garbage"])
def test_invalid_answer_is_502_with_nothing_forwarded(tmp_path, origin, start_server, path):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    st, hd, body = req(srv.port, "GET", path)
    assert st == 502 and body == b"Bad Gateway\n"
    assert hd.get("Server") == "lagless"
    assert req(srv.port, "GET", "/api/echo")[0] == 200


def test_cut_answer_is_a_truncated_transfer(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    with pytest.raises(http.client.IncompleteRead):
        req(srv.port, "GET", "/api/cut")


def test_post_never_sent_twice_get_retried_once(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    assert req(srv.port, "GET", "/api/echo")[0] == 200  # a kept connection now
    st, _, _ = req(srv.port, "POST", "/api/drop", body=b"once")
    assert st == 502
    assert origin.count("/api/drop") == 1
    assert req(srv.port, "GET", "/api/echo")[0] == 200  # kept again
    st, _, _ = req(srv.port, "GET", "/api/drop")
    assert st == 502
    assert origin.count("/api/drop") == 3  # the GET went twice: kept, then a new connection
    assert metric_value(srv.port, 'lagless_upstream_retries_total{upstream="app"}') == 1


def test_refused_connect_is_503_or_502(tmp_path, start_server):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    p = tmp_path / "proxy.conf"
    p.write_text("[upstream app]\nserver = 127.0.0.1:%d\n\n[route /api/*]\nupstream = app\n" % port)
    srv = start_server("-c", str(p), "--loop-workers", "1")
    st, _, _ = req(srv.port, "GET", "/api/echo")
    assert st in (502, 503)
    assert get(srv.port, "/ping").status == 200


def metric_value(port, line_prefix):
    text = get(port, "/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics_per_upstream(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=0), "--loop-workers", "2")
    assert req(srv.port, "GET", "/api/echo")[0] == 200
    assert req(srv.port, "GET", "/api/garbage")[0] == 502
    holder = threading.Thread(target=lambda: req(srv.port, "GET", "/api/hold"))
    holder.start()
    try:
        assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
        assert req(srv.port, "GET", "/api/echo")[0] == 503
        u = 'upstream="app"'
        assert metric_value(srv.port, "lagless_upstream_in_flight{%s}" % u) == 1
        assert metric_value(srv.port, "lagless_upstream_max_conns{%s}" % u) == 1
        assert metric_value(srv.port, 'lagless_upstream_errors_total{%s,reason="full"}' % u) == 1
        assert metric_value(srv.port,
                            'lagless_upstream_errors_total{%s,reason="invalid"}' % u) == 1
        assert metric_value(srv.port,
                            'lagless_upstream_requests_total{%s,code="2xx"}' % u) == 1
        assert metric_value(srv.port,
                            'lagless_upstream_requests_total{%s,code="5xx"}' % u) == 2
        assert metric_value(srv.port,
                            'lagless_upstream_connections{%s,state="busy"}' % u) == 1
        assert metric_value(srv.port, "lagless_upstream_request_seconds_count{%s}" % u) == 3
        assert metric_value(srv.port, "lagless_upstream_queue_wait_seconds_count{%s}" % u) == 3
        assert metric_value(srv.port, "lagless_upstream_first_byte_seconds_count{%s}" % u) == 2
        assert metric_value(srv.port,
                            'lagless_upstream_connect_seconds_bucket{%s,le="+Inf"}' % u) >= 1
    finally:
        origin.release()
        holder.join(10)
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 0, 5)


def test_access_log_names_the_upstream_fault(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1", "--access-log")
    assert req(srv.port, "GET", "/api/garbage")[0] == 502
    assert req(srv.port, "GET", "/api/echo")[0] == 200
    assert wait_until(lambda: "upstream_error=invalid" in srv.log(), 5), srv.log()[-2000:]
    def echo_lines():
        return [ln for ln in srv.log().splitlines() if "/api/echo" in ln and "status=200" in ln]
    assert wait_until(lambda: echo_lines(), 5), srv.log()[-2000:]
    assert "upstream_error" not in echo_lines()[-1]
    assert "upstream=%s upstream_status=200 upstream_ms=" % origin.address in echo_lines()[-1]


def test_drain_finishes_a_proxied_request(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "2")
    result = {}
    holder = threading.Thread(target=lambda: result.update(r=req(srv.port, "GET", "/api/hold")))
    holder.start()
    assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
    srv.proc.send_signal(15)
    time.sleep(0.3)  # the drain is under way while the answer is held
    origin.release()
    holder.join(10)
    assert result["r"][0] == 200
    assert srv.proc.wait(10) == 0


def test_queued_client_gone_frees_its_place(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=1), "--loop-workers", "1")
    holder = threading.Thread(target=lambda: req(srv.port, "GET", "/api/hold"))
    holder.start()
    try:
        assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GET /api/echo HTTP/1.1\r\nHost: x\r\n\r\n")
        assert wait_until(lambda: metric_value(
            srv.port, 'lagless_upstream_queue_depth{upstream="app"}') == 1, 5)
        s.close()
        assert wait_until(lambda: metric_value(
            srv.port, 'lagless_upstream_queue_depth{upstream="app"}') == 0, 5)
        # its queue place is free again: the next one waits instead of a 503
        t = threading.Thread(target=lambda: req(srv.port, "GET", "/api/echo"))
        t.start()
        assert wait_until(lambda: metric_value(
            srv.port, 'lagless_upstream_queue_depth{upstream="app"}') == 1, 5)
    finally:
        origin.release()
        holder.join(10)
    t.join(10)
    assert origin.count("/api/echo") == 1


def test_dead_loop_places_are_released(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=0), "--loop-workers", "1")
    def hold():
        with pytest.raises(http.client.HTTPException):  # its loop dies: no answer
            req(srv.port, "GET", "/api/hold", timeout=5)
    holder = threading.Thread(target=hold)
    holder.start()
    assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
    loop = srv.children("loop")[0]
    os.kill(loop, signal.SIGKILL)
    holder.join(10)
    srv.expected_crash_re = "killed by signal 9"
    assert srv.wait_children("loop", 1, timeout=10, exclude=[loop])
    origin.release()
    assert wait_until(lambda: req(srv.port, "GET", "/api/echo")[0] == 200, 10)


def test_a_refusing_server_is_passed_over(tmp_path, origin, start_server):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()  # nothing listens there: refused
    p = tmp_path / "proxy.conf"
    p.write_text("[upstream app]\nserver = 127.0.0.1:%d\nserver = %s\n\n"
                 "[route /api/*]\nupstream = app\n" % (dead, origin.address))
    srv = start_server("-c", str(p), "--loop-workers", "1")
    for _ in range(10):
        assert req(srv.port, "GET", "/api/echo")[0] == 200
    assert origin.count("/api/echo") == 10


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_slow_client_download_holds_bounded_memory(tmp_path, origin, start_server):
    """A 64 MiB answer to a client that reads slowly: the app is read only as fast as the
    client takes it, so the loop's memory does not grow with the answer."""
    srv = start_server("-c", conf(tmp_path, origin, deadline_ms=60000), "--loop-workers", "1")
    loop = srv.children("loop")[0]
    base = rss_kib(loop)
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(b"GET /api/big?mb=64 HTTP/1.1\r\nHost: x\r\n\r\n")
    got, peak = 0, 0
    deadline = time.monotonic() + 60
    while got < 8 << 20 and time.monotonic() < deadline:
        d = s.recv(65536)
        assert d
        got += len(d)
        time.sleep(0.002)  # slower than the origin writes
        peak = max(peak, rss_kib(loop))
    assert got >= 8 << 20
    assert peak - base < 8 * 1024, (base, peak)  # far less than the 8 MiB taken so far
    s.close()


def test_http10_client_and_pipelined_requests(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /api/chunked HTTP/1.0\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"chunked" not in head.lower()
    assert body == b"hello world"  # the payload, then the close
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /api/echo?n=1 HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /api/echo?n=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    assert data.count(b"HTTP/1.1 200") == 3
    assert data.index(b"n=1") < data.index(b"\r\n\r\nok") < data.index(b"n=2")


def test_status_shows_each_upstream(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=3, queue=5), "--loop-workers", "2")
    assert req(srv.port, "GET", "/api/echo")[0] == 200
    # the app connection is kept just after the client got the last byte: wait for it
    assert wait_until(lambda: get(srv.port, "/status").json()["upstreams"][0]
                      ["connections_idle"] == 1, 5)
    ups = get(srv.port, "/status").json()["upstreams"]
    assert len(ups) == 1 and ups[0]["name"] == "app"
    assert (ups[0]["max_conns"], ups[0]["queue"], ups[0]["in_flight"]) == (3, 5, 0)


def test_app_that_never_answers_is_504_at_first_byte_timeout(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, extra="first_byte_timeout_ms = 300\n"),
                       "--loop-workers", "1")
    t0 = time.monotonic()
    st, _, _ = req(srv.port, "GET", "/api/silent")
    took = time.monotonic() - t0
    assert st == 504 and 0.2 < took < 3, (st, took)
    assert metric_value(
        srv.port, 'lagless_upstream_errors_total{upstream="app",reason="first_byte_timeout"}') == 1


def test_reload_with_a_changed_upstream_applies_to_new_requests(tmp_path, origin, start_server):
    other = Origin()
    try:
        path = conf(tmp_path, origin)
        srv = start_server("-c", path, "--loop-workers", "1")
        assert req(srv.port, "GET", "/api/echo")[0] == 200
        assert origin.count("/api/echo") == 1
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(origin.address, other.address))
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: req(srv.port, "GET", "/api/echo")[0] == 200 and
                          other.count("/api/echo") > 0, 15)
        # Until the old generation's loop takes its SIGTERM it still accepts beside the new one
        # (as nginx's old workers do until QUIT). Its drain closes its listen socket first, then
        # its kept connection to the old server: once that is gone, every new request is the new
        # generation's and goes to the new server.
        assert wait_until(lambda: origin.open == 0, 10), origin.open
        before = origin.count("/api/echo")
        n = other.count("/api/echo")
        for _ in range(3):
            assert req(srv.port, "GET", "/api/echo")[0] == 200
        assert other.count("/api/echo") == n + 3
        assert origin.count("/api/echo") == before
    finally:
        other.close()


def test_app_that_reads_nothing_pauses_the_upload_until_the_deadline(tmp_path, origin,
                                                                     start_server):
    srv = start_server("-c", conf(tmp_path, origin, deadline_ms=800), "--loop-workers", "1")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    n = 64 << 20
    s.sendall(b"POST /api/noread HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
    sent, t0 = 0, time.monotonic()
    s.setblocking(False)
    block = b"u" * 65536
    answer = b""
    while time.monotonic() - t0 < 10:
        try:
            sent += s.send(block)
        except BlockingIOError:
            pass
        except OSError:
            break
        try:
            d = s.recv(65536)
            if not d:
                break
            answer += d
            if b"\r\n\r\n" in answer:
                break
        except BlockingIOError:
            time.sleep(0.01)
    s.close()
    assert answer.startswith(b"HTTP/1.1 504"), answer[:200]
    assert sent < n // 4  # the client was paused: lagless did not swallow the upload
    assert origin.count("/api/noread") == 1


def test_overload_bounded_fast_refusals_and_deadlines_kept(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin, max_conns=2, queue=2, deadline_ms=3000),
                       "--loop-workers", "2")

    def one(i):
        t0 = time.monotonic()
        st = req(srv.port, "GET", "/api/slow?ms=300")[0]
        return st, time.monotonic() - t0
    res = in_threads(12, one)
    assert all(not isinstance(r, Exception) for r in res), res
    ok = [t for st, t in res if st == 200]
    refused = [t for st, t in res if st == 503]
    assert len(ok) + len(refused) == 12, res
    assert len(ok) >= 4 and refused, res
    assert max(refused) < 0.5, refused  # at once, not after a wait
    assert max(ok) < 3.0, ok           # every admitted one answered before its deadline
    assert origin.max_inflight <= 2, origin.max_inflight


def test_expect_100_continue_is_lagless_s_own(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
              b"Expect: 100-continue\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        got += s.recv(4096)
    assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    s.sendall(b"hello")
    got = got[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
    while b"body_len" not in got:
        got += s.recv(65536)
    s.close()
    assert got.startswith(b"HTTP/1.1 200") and b'"body_len": 5' in got
    assert b"HTTP/1.1 100" not in got  # the app's interim answer (if any) is not passed on
    assert b"expect" not in origin.heads[-1].lower()


def test_json_access_line_of_a_proxied_request(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1", "--access-log",
                       "--access-log-json")
    assert req(srv.port, "GET", "/api/garbage")[0] == 502

    def lines():
        out = []
        for ln in srv.log().splitlines():
            if ln.startswith("{") and "/api/garbage" in ln:
                out.append(json.loads(ln))
        return out
    assert wait_until(lambda: lines(), 5), srv.log()[-2000:]
    doc = lines()[-1]
    assert doc["status"] == 502 and doc["upstream_error"] == "invalid"
    assert doc["upstream"] == origin.address and doc["upstream_status"] == 0
    # made here (no X-Request-Id came): the loop's pid and a request counter, 24 hex digits,
    # the same id the app was sent
    loop = srv.children("loop")[0]
    assert re.fullmatch("%08x[0-9a-f]{16}" % loop, doc["request_id"]), doc["request_id"]
    assert req(srv.port, "GET", "/api/echo")[0] == 200
    sent = [ln.split(b":", 1)[1].strip().decode() for ln in origin.heads[-1].split(b"\r\n")
            if ln.lower().startswith(b"x-request-id:")]
    assert len(sent) == 1 and re.fullmatch("%08x[0-9a-f]{16}" % loop, sent[0]), sent
    assert int(sent[0][8:], 16) > int(doc["request_id"][8:], 16)



def test_reload_finishes_a_proxied_request(tmp_path, origin, start_server):
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    result = {}
    holder = threading.Thread(target=lambda: result.update(r=req(srv.port, "GET", "/api/hold")))
    holder.start()
    assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
    old = srv.children("loop")
    srv.proc.send_signal(signal.SIGHUP)
    # the new generation serves while the old loop still holds the proxied request
    assert wait_until(lambda: set(srv.children("loop")) - set(old), 10)
    assert req(srv.port, "GET", "/api/echo")[0] == 200
    origin.release()
    holder.join(10)
    assert result["r"][0] == 200
    assert srv.wait_children("loop", 1, timeout=10, exclude=old)


def test_agent_weight_counts_an_upstream_s_saturation(tmp_path, origin, start_server):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    agent = s.getsockname()[1]
    s.close()
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=3),
                       "--loop-workers", "2", "--agent-listen", "127.0.0.1:%d" % agent)

    def weight():
        with socket.create_connection(("127.0.0.1", agent), timeout=3) as a:
            data = b""
            while True:
                d = a.recv(256)
                if not d:
                    return int(data.split()[1].rstrip(b"%"))
                data += d
    assert weight() == 100
    holders = [threading.Thread(target=lambda: req(srv.port, "GET", "/api/hold"))
               for _ in range(4)]
    for t in holders:
        t.start()
    try:
        assert wait_until(lambda: metric_value(
            srv.port, 'lagless_upstream_load{upstream="app"}') == 4, 5)
        assert wait_until(lambda: weight() < 100, 5)
    finally:
        origin.release()
        for t in holders:
            t.join(10)


def test_a_head_too_large_to_keep_whole_is_refused_not_cut(tmp_path, origin, start_server):
    """A proxied request forwards every field the parser kept. With the default limits every
    head the parser accepts is kept whole (http/http.h: LG_HTTP_FIELD_BUF is the default
    --max-head, LG_HTTP_KEPT the default --max-fields), so a browser's 5 KB cookie and 90 field
    lines reach the app whole (it was a 431 with 4 KiB and 32 lines). Past the kept buffer (a
    --max-head above it) the request is a 431, never sent with a field silently missing."""
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1")
    cookie = "c=" + "x" * 5000
    many = {"X-F%d" % i: "v%d" % i for i in range(90)}
    many["Cookie"] = cookie
    st, _, _ = req(srv.port, "GET", "/api/echo", headers=many)
    assert st == 200
    head = origin.heads[-1]
    assert ("Cookie: " + cookie).encode() in head and b"X-F89: v89" in head
    # a head just under the default --max-head (16 KiB) still has room for the fields lagless
    # adds on its way to the app
    big = "c=" + "y" * 16000
    st, _, _ = req(srv.port, "GET", "/api/echo", headers={"Cookie": big,
                                                          "X-Forwarded-For": "10.9.8.7"})
    assert st == 200
    assert ("Cookie: " + big).encode() in origin.heads[-1]
    srv2 = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1", "--max-head", "64K")
    n = origin.count("/api/echo")
    st, _, _ = req(srv2.port, "GET", "/api/echo", headers={"Cookie": "c=" + "x" * 20000})
    assert st == 431
    assert origin.count("/api/echo") == n
    assert req(srv2.port, "GET", "/api/echo", headers={"Cookie": cookie})[0] == 200


def test_client_gone_mid_exchange_keeps_its_place_until_the_app_answered(tmp_path, origin,
                                                                          start_server):
    """A client that leaves while its request is at the app does not stop the app working on
    it: the place stays taken until the app's answer came whole (read and dropped), so the
    next request reaches the app only then and the app never has more than max_conns. Its
    access line says client_gone, and so does the metric."""
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=4), "--loop-workers", "2",
                       "--access-log")
    a = socket.create_connection(("127.0.0.1", srv.port))
    a.sendall(b"GET /api/slow?ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert wait_until(lambda: origin.count("/api/slow") == 1, 5)
    a.close()
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_errors_total{upstream="app",reason="client_gone"}') == 1, 5)
    st, _, _ = req(srv.port, "GET", "/api/echo")
    assert st == 200
    assert origin.max_inflight == 1, origin.max_inflight
    assert wait_until(lambda: any("/api/slow" in ln and "upstream_error=client_gone" in ln
                                  for ln in srv.log().splitlines()), 5), srv.log()[-2000:]
    line = [ln for ln in srv.log().splitlines() if "/api/slow" in ln and "status=" in ln][-1]
    assert "status=499 " in line and "upstream=%s " % origin.address in line, line
    # the app's answer was read whole: its connection is kept and serves the next request
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 0, 5)


def test_client_gone_place_is_freed_at_the_first_byte_timeout(tmp_path, origin, start_server):
    """An app still working on a request whose client left: the place stays taken past the
    request's deadline (the app works on, and a new request would wait behind it in the app),
    and goes back at the first-byte timeout, the app connection closed then."""
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=4, deadline_ms=800,
                                  extra="first_byte_timeout_ms = 2000\n"), "--loop-workers", "1")
    a = socket.create_connection(("127.0.0.1", srv.port))
    a.sendall(b"GET /api/slow?ms=6000 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert wait_until(lambda: origin.count("/api/slow") == 1, 5)
    t0 = time.monotonic()
    a.close()
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 0, 8)
    assert 1.0 <= time.monotonic() - t0 < 6.0, time.monotonic() - t0
    st, _, _ = req(srv.port, "GET", "/api/echo")
    assert st == 200


def test_a_deadline_504_keeps_the_place_while_the_app_works_on(tmp_path, origin, start_server):
    """The client's deadline passes while the app works on its request: the client gets its
    504 then, but the app still has the request, so its place stays taken until the app
    answers (read and dropped): the next request reaches the app only then, never while it is
    busy with the abandoned one (after a stall the app started such requests seconds late:
    benchmark 13g). Fails before: the 504 closed the app connection and freed the place at
    once, and the app had 2 requests at once."""
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=4, deadline_ms=500,
                                  extra="first_byte_timeout_ms = 10000\n"), "--loop-workers", "1")
    t0 = time.monotonic()
    st, _, _ = req(srv.port, "GET", "/api/slow?ms=2500")
    assert st == 504 and time.monotonic() - t0 < 2.0, (st, time.monotonic() - t0)
    assert metric_value(srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 1
    origin.release()  # /api/hold (its route's deadline 20 s) answers at once once it arrives
    st, _, body = req(srv.port, "GET", "/api/hold", timeout=15)
    assert st == 200, st
    assert time.monotonic() - t0 >= 2.4  # it waited for the app's answer to the first
    assert origin.max_inflight == 1, origin.max_inflight


def test_access_line_of_an_answer_cut_after_its_head(tmp_path, origin, start_server):
    """An app that closes mid-body after the answer's head went out, and a client that leaves
    mid-download: each exchange ends without an answer's end, and each still has its access
    line, with the app's status, the reason, and the metric label."""
    srv = start_server("-c", conf(tmp_path, origin), "--loop-workers", "1", "--access-log")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /api/cut HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    assert got.startswith(b"HTTP/1.1 200 ")

    def line(path):
        ls = [ln for ln in srv.log().splitlines() if path in ln and "status=" in ln]
        return ls[-1] if ls else None
    assert wait_until(lambda: line("/api/cut"), 5), srv.log()[-2000:]
    cut = line("/api/cut")
    assert "status=200 " in cut and "upstream_error=truncated" in cut, cut
    assert metric_value(srv.port,
                        'lagless_upstream_errors_total{upstream="app",reason="truncated"}') == 1

    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /api/big?mb=64 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    s.close()
    assert wait_until(lambda: line("/api/big"), 10), srv.log()[-2000:]
    assert "status=200 " in line("/api/big") and "upstream_error=client_gone" in line("/api/big")
    assert req(srv.port, "GET", "/api/echo")[0] == 200


def app_send_queue(origin):
    """Bytes the origin has sent lagless and lagless has not read yet (/proc/net/tcp)."""
    port = ":%04X" % int(origin.address.rsplit(":", 1)[1])
    with open("/proc/net/tcp") as f:
        return sum(int(ln.split()[4].split(":")[0], 16) for ln in f.readlines()[1:]
                   if ln.split()[1].endswith(port))


def test_client_gone_mid_download_drops_the_rest_at_once(tmp_path, origin, start_server):
    """A client that stops reading a large answer (the exchange's input buffer full of the
    app's bytes waiting for it) and then leaves: the rest of the answer is read and dropped
    as fast as the app sends it, and the place goes back then, with the app connection kept:
    not at the request's deadline (here 20 s), holding a max_conns place all along."""
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=4, deadline_ms=20000),
                       "--loop-workers", "1")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /api/big?mb=16 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
    # lagless stops reading the app once the client's socket and its own buffer are full:
    # the app's bytes back up in the app's send queue
    assert wait_until(lambda: app_send_queue(origin) > 0, 10)
    s.close()
    t0 = time.monotonic()
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 0, 8), srv.log()[-2000:]
    assert time.monotonic() - t0 < 5.0
    assert req(srv.port, "GET", "/api/echo")[0] == 200
    assert origin.connections == 1  # the answer was read to its end: its connection kept


def sizing_json(*args):
    out = subprocess.run([LAGLESS_BIN, *args], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][0]
    return json.loads(line)


def test_memory_budget_counts_what_proxying_holds(tmp_path, origin):
    """The memory budget leaves room for what the loop workers' proxying may hold: an exchange
    (96 KiB) per request in flight or queued for the whole server, and an app connection (4
    KiB) per kept one (keepalive per loop and server) and per busy one; --print-sizing and -t
    print it as memory_proxy, and the transit budget is that much smaller."""
    mib = 1 << 20
    common = ("--memory-limit", str(1024 * mib), "--loop-workers", "2", "--compute-workers", "1")
    plain = tmp_path / "plain.conf"
    plain.write_text("[route /api/*]\nkind = heavy\n\n[route /api/hold]\nkind = heavy\n")
    base = sizing_json("--print-sizing", "-c", str(plain), *common)
    assert base["memory_proxy"] == 0, base
    c = conf(tmp_path, origin, max_conns=6, queue=10, extra="keepalive = 8\n")
    for how in ("--print-sizing", "-t"):
        m = sizing_json(how, "-c", c, *common)
        want = (6 + 10) * 96 * 1024 + (2 * 1 * 8 + 6) * 4096
        assert m["memory_proxy"] == want, (how, m)
        assert m["shm_budget"] == (m["memory_limit"] - m["memory_reserve"] - m["shm_fixed"]
                                   - m["shm_cache"] - want), m
        assert m["shm_budget"] == base["shm_budget"] - want, (m, base)


def test_upstreams_that_leave_no_memory_budget_are_warned_of(tmp_path, origin):
    """Regression (hostile trial): upstreams whose memory_proxy is over the memory limit left a
    shared-memory budget of 0 in silence (-t: valid, no warning at start), and then every
    request body to a kind or a request_buffering route was a 503. -t, --print-sizing and the
    start-up log now say so."""
    c = conf(tmp_path, origin, max_conns=60000, queue=60000)
    args = ("--memory-limit", str(1 << 30), "--loop-workers", "1", "--compute-workers", "1")
    m = sizing_json("--print-sizing", "-c", c, *args)
    assert m["shm_budget"] == 0 and m["memory_proxy"] > 1 << 30, m
    assert "memory_proxy" in m.get("note", ""), m
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", c, *args], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0 and "warning: " in r.stderr and "memory_proxy" in r.stderr, r.stderr
    ok = conf(tmp_path, origin, max_conns=6, queue=10)
    assert "note" not in sizing_json("--print-sizing", "-c", ok, *args)


def test_client_gone_mid_upload_ends_the_request_toward_the_app(tmp_path, origin, start_server):
    """A client that leaves mid-upload: the app is told the request ends there (the write side
    of its connection shut, so it reads the end of its input instead of waiting for bytes that
    never come), its answer is read and dropped, and only then the next request goes in: well
    before the deadline, never two at the app."""
    srv = start_server("-c", conf(tmp_path, origin, max_conns=1, queue=4), "--loop-workers", "1",
                       "--access-log")
    a = socket.create_connection(("127.0.0.1", srv.port))
    a.sendall(b"POST /api/slow?ms=800 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
              + b"x" * 10)
    assert wait_until(lambda: origin.heads_read == 1, 5)  # the head, and the 10 bytes with it
    a.close()
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_errors_total{upstream="app",reason="client_gone"}') == 1, 5)
    t0 = time.monotonic()
    st, _, _ = req(srv.port, "GET", "/api/echo")
    assert st == 200 and time.monotonic() - t0 < 3.0
    assert origin.max_inflight == 1, origin.max_inflight
    assert (("/api/slow", b"x" * 10) in origin.bodies), origin.bodies


def test_a_refusal_mid_upload_ends_the_exchange_at_once(tmp_path, origin, start_server):
    """Regression (hostile trial): a streamed chunked upload refused mid-body (413 past the
    route's max_body) left its exchange on the lingering connection: the app kept a request
    whose body never ended, and its place stayed taken until the client closed or the
    lingering close timed out (--lingering-timeout-ms, up to --lingering-time-ms). The
    request is now ended toward the app when lagless answers it itself."""
    c = conf(tmp_path, origin, max_conns=1, queue=4, deadline_ms=30000)
    with open(c, "a") as f:
        f.write("\n[route /api/small]\nupstream = app\nmax_body = 1000\ndeadline_ms = 30000\n")
    srv = start_server("-c", c, "--loop-workers", "1", "--lingering-timeout-ms", "20000")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /api/small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"258\r\n" + b"a" * 600 + b"\r\n")
    assert wait_until(lambda: origin.heads_read == 1, 5)
    s.sendall(b"258\r\n" + b"b" * 600 + b"\r\n0\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 413 ")
    # the client stays connected (lingering): the app's place must come back regardless
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 0, 5), srv.log()[-2000:]
    st, _, _ = req(srv.port, "GET", "/api/echo")
    assert st == 200
    s.close()


def buffered_conf(tmp_path, origin, max_conns=1, queue=4, extra_route="", extra_up=""):
    p = tmp_path / "buffered.conf"
    p.write_text("[upstream app]\nserver = %s\nmax_conns = %d\nqueue = %d\n%s\n"
                 "[route /api/*]\nupstream = app\ndeadline_ms = 5000\nrequest_buffering = on\n%s"
                 % (origin.address, max_conns, queue, extra_up, extra_route))
    return str(p)


def test_buffered_upload_holds_no_place_while_it_uploads(tmp_path, origin, start_server):
    """request_buffering = on: a slow upload is received whole before the request takes an
    upstream place, so with max_conns = 1 another client's request is served meanwhile; the
    app then gets the body with its Content-Length, exactly as sent."""
    srv = start_server("-c", buffered_conf(tmp_path, origin), "--loop-workers", "2")
    body = bytes(range(256)) * 200
    a = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    a.sendall(b"POST /api/echo?who=a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body[:1000])
    assert req(srv.port, "GET", "/api/echo?who=b")[0] == 200  # served while a uploads
    assert origin.count("/api/echo") == 1
    a.sendall(body[1000:])
    a.settimeout(10)
    got = b""
    while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 10:
        d = a.recv(65536)
        if not d:
            break
        got += d
    a.close()
    assert got.startswith(b"HTTP/1.1 200 "), got[:200]
    assert wait_until(lambda: origin.count("/api/echo") == 2, 5)
    head = [h for h in origin.heads if b"who=a" in h][0].lower()
    assert b"content-length: %d\r\n" % len(body) in head and b"transfer-encoding" not in head
    assert ("/api/echo", body) in origin.bodies


def test_buffered_chunked_upload_reaches_the_app_with_its_length(tmp_path, origin,
                                                                 start_server):
    srv = start_server("-c", buffered_conf(tmp_path, origin), "--loop-workers", "1")
    parts = [b"hello ", b"x" * 5000, b" world"]
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
              + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n")
    got = s.recv(65536)
    s.close()
    assert got.startswith(b"HTTP/1.1 200 "), got[:200]
    head = origin.heads[-1].lower()
    assert b"content-length: %d\r\n" % len(b"".join(parts)) in head, head
    assert b"transfer-encoding" not in head, head
    assert origin.bodies[-1] == ("/api/echo", b"".join(parts))


def test_buffered_upload_full_is_503_before_the_body_and_413_over_max_body(tmp_path, origin,
                                                                           start_server):
    srv = start_server("-c", buffered_conf(tmp_path, origin, max_conns=1, queue=0,
                                           extra_route="max_body = 4096\n"),
                       "--loop-workers", "1")
    st, _, _ = req(srv.port, "POST", "/api/echo", body=b"y" * 5000)
    assert st == 413
    holder = threading.Thread(target=lambda: req(srv.port, "GET", "/api/hold"))
    holder.start()
    try:
        assert wait_until(lambda: origin.count("/api/hold") == 1, 5)
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        got = s.recv(65536)  # the answer comes without a byte of the body sent (no 100)
        s.close()
        assert got.startswith(b"HTTP/1.1 503 "), got[:200]
        assert b"retry-after" in got.lower()
    finally:
        origin.release()
        holder.join(10)
    assert origin.count("/api/echo") == 0


def test_buffered_uploads_give_their_transit_buffer_back(tmp_path, origin, start_server):
    """Each buffered body's transit buffer goes back once its answer is written: more requests
    on one kept connection than the server has transit buffers all succeed, and a client that
    leaves mid-upload frees its buffer too."""
    srv = start_server("-c", buffered_conf(tmp_path, origin, max_conns=2), "--loop-workers", "1",
                       "--compute-workers", "1", "--transit-buffers", "4")
    uploading = 'lagless_transit_buffers_in_use{state="uploading"}'
    leavers = []
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\nabc")
        leavers.append(s)
    # the three hold a buffer each (one client address may hold 3 of 4), then leave: their
    # buffers must come back before the next requests, or those would meet the client's share
    assert wait_until(lambda: metric_value(srv.port, uploading) == 3, 10)
    for s in leavers:
        s.close()
    assert wait_until(lambda: metric_value(srv.port, uploading) == 0, 10)
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        for i in range(12):
            body = (b"%d-" % i) * 700
            c.request("POST", "/api/echo?i=%d" % i, body=body)
            r = c.getresponse()
            assert r.status == 200, (i, r.status, r.read())
            assert json.loads(r.read())["body_len"] == len(body)
    finally:
        c.close()
    assert [b for p, b in origin.bodies if p == "/api/echo"][-1] == b"11-" * 700


def test_buffered_large_body_and_client_gone_while_it_is_sent(tmp_path, origin, start_server):
    """A buffered body larger than the sockets' buffers goes out whole from its transit buffer;
    a client that leaves while it is still being sent to an app that reads nothing ends the
    request toward the app, and its place and buffer go back (at once when the request was
    not all written; at the first-byte timeout when the kernel took all of it: the app then
    has the whole request, as far as lagless can tell)."""
    srv = start_server("-c", buffered_conf(tmp_path, origin, max_conns=1,
                                           extra_up="first_byte_timeout_ms = 1500\n"),
                       "--loop-workers", "1", "--max-body", "8M")
    body = os.urandom(3 << 20)
    st, _, out = req(srv.port, "POST", "/api/echo", body=body, timeout=30)
    assert st == 200 and json.loads(out)["body_len"] == len(body)
    assert origin.bodies[-1] == ("/api/echo", body)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /api/noread HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body)
    assert wait_until(lambda: origin.count("/api/noread") == 1, 10)
    s.close()
    assert wait_until(lambda: metric_value(
        srv.port, 'lagless_upstream_in_flight{upstream="app"}') == 0, 8)
    assert req(srv.port, "POST", "/api/echo", body=b"after")[0] == 200
