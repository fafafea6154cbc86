"""The test origin (origin.py) checked on its own, without lagless: each behaviour the upstream
routes' tests rely on answers as its docstring says, over TCP and over the unix socket, and
stop() ends every thread even with requests held; and the FastAPI app (fastapi_app.py) starts
under uvicorn and answers at the root and under /api. Fast: no test waits for more than a
condition."""

import http.client
import json
import socket
import threading
import time

import pytest

from appserver import fastapi_app  # noqa: F401 (a fixture)
from origin import Origin, pattern


@pytest.fixture
def origin():
    o = Origin().start()
    yield o
    o.stop()


def tcp(o, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", o.port), timeout=timeout)
    s.settimeout(timeout)
    return s


def unix(o, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(o.unix_path)
    return s


def read_to_close(s):
    """Every byte until the peer's FIN (or reset: what came before it)."""
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d
    except ConnectionResetError:
        return out


def exchange(s, data):
    s.sendall(data)
    return read_to_close(s)


@pytest.mark.timeout(20)
def test_ok_over_tcp_and_unix(origin):
    c = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=5)
    c.request("GET", "/ok")
    r = c.getresponse()
    assert (r.status, r.read()) == (200, b"ok\n")
    c.close()
    with unix(origin) as s:
        out = exchange(s, b"GET /api/ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"\r\n\r\nok\n")
    assert [x.path for x in origin.seen] == ["/ok", "/api/ok"]
    assert origin.connections == 2


@pytest.mark.timeout(20)
def test_echo_records_head_and_body(origin):
    c = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=5)
    c.request("POST", "/echo?a=1", body=b"hello", headers={"X-Test": " v "})
    r = c.getresponse()
    doc = json.loads(r.read())
    c.close()
    assert doc["method"] == "POST" and doc["target"] == "/echo?a=1"
    assert doc["body"] == "hello" and doc["body_len"] == 5
    assert ["X-Test", "v"] in doc["headers"]
    s = origin.seen[0]
    assert s.head.startswith(b"POST /echo?a=1 HTTP/1.1\r\n") and s.head.endswith(b"\r\n\r\n")
    assert s.body == b"hello" and s.complete and s.query == {"a": ["1"]}
    assert s.header("x-test") == "v" and s.behaviour == "echo"


@pytest.mark.timeout(20)
def test_chunked_request_body_decoded(origin):
    with tcp(origin) as s:
        exchange(s, b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                    b"Connection: close\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n")
    seen = origin.seen[0]
    assert seen.body == b"abcde"
    assert seen.raw_body == b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n"


@pytest.mark.timeout(20)
def test_keep_alive_counts_one_connection(origin):
    c = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=5)
    for _ in range(5):
        c.request("GET", "/ok")
        assert c.getresponse().read() == b"ok\n"
    c.close()
    assert origin.connections == 1 and len(origin.seen) == 5
    assert {s.conn for s in origin.seen} == {1}


@pytest.mark.timeout(20)
def test_hold_release_and_max_in_flight(origin):
    results = []

    def one():
        c = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=10)
        c.request("GET", "/hold")
        r = c.getresponse()
        results.append((r.status, r.read()))
        c.close()

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    assert origin.wait(lambda o: o.in_flight == 3, 10)
    assert results == []
    origin.release_all()
    for t in threads:
        t.join(10)
    assert results == [(200, b"released\n")] * 3
    assert origin.max_in_flight == 3
    # an answer stops counting before its last bytes go, so a client that has it never sees
    # the origin count it still (a proxy sends the next request as soon as it has them)
    assert origin.in_flight == 0


@pytest.mark.timeout(20)
def test_big_length_and_chunked(origin):
    n = 300_000 + 7
    for mode in ("length", "chunked"):
        c = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=10)
        c.request("GET", "/big?bytes=%d&mode=%s" % (n, mode))
        r = c.getresponse()
        assert r.status == 200
        assert (r.getheader("Transfer-Encoding") == "chunked") == (mode == "chunked")
        assert r.read() == pattern(n)
        c.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("path,want", [
    ("/cl-and-te", [b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n"]),
    ("/two-cl", [b"Content-Length: 5\r\n", b"Content-Length: 6\r\n"]),
    ("/bad-chunk", [b"\r\n\r\nzz\r\n"]),
    ("/bad-chunk?mid=1", [b"5\r\nhello\r\nzz\r\n"]),
    ("/garbage", [b"HELLO, THIS IS NOT HTTP"]),
    ("/interim", [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"]),
    ("/chunked-trailers", [b"0\r\nX-Sum: 11\r\n\r\n"]),
    ("/status?code=503", [b"HTTP/1.1 503 Status\r\n"]),
    ("/status?code=204", [b"HTTP/1.1 204 Status\r\n\r\n"]),
    ("/nothing-here", [b"HTTP/1.1 404 Not Found\r\n"]),
])
def test_raw_answers(origin, path, want):
    with tcp(origin) as s:
        out = exchange(s, b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                       % path.encode())
    for w in want:
        assert w in out, (path, out)


@pytest.mark.timeout(20)
def test_short_body_then_close(origin):
    with tcp(origin) as s:
        out = exchange(s, b"GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out == b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"


@pytest.mark.timeout(20)
def test_reset_after_reading_the_request(origin):
    for q, partial in (("", True), ("?at=0", False)):
        with tcp(origin) as s:
            s.sendall(b"POST /reset%s HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                      % q.encode())
            got, reset = b"", False
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    got += d
            except ConnectionResetError:
                reset = True
        assert reset, got  # a reset, never a FIN
        assert not got or partial
    assert [x.body for x in origin.seen] == [b"abc", b"abc"]


@pytest.mark.timeout(20)
def test_huge_head(origin):
    with tcp(origin) as s:
        out = exchange(s, b"GET /huge-head?bytes=300000 HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert len(head) > 300_000 and body == b"ok"
    with tcp(origin) as s:  # the default 10 MiB: the reader may stop early, the origin copes
        s.sendall(b"GET /huge-head HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(17) == b"HTTP/1.1 200 OK\r\n"


@pytest.mark.timeout(20)
def test_close_idle_closes_after_a_keep_alive_answer(origin):
    with tcp(origin) as s:
        out = exchange(s, b"GET /close-idle HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out == b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"


@pytest.mark.timeout(20)
def test_no_read(origin):
    with tcp(origin) as s:
        s.sendall(b"POST /no-read?answer=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        s.sendall(b"x" * 1000)
        assert s.recv(12) == b"HTTP/1.1 200"
    assert origin.wait(lambda o: o.in_flight == 1, 5)
    assert not origin.seen[0].complete  # the body was never read
    with tcp(origin) as s:
        s.sendall(b"POST /no-read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        assert origin.wait(lambda o: o.in_flight == 2, 5)
        origin.release_all()
        assert read_to_close(s) == b""  # nothing answered, then the close
    assert origin.wait(lambda o: o.in_flight == 0, 5)


@pytest.mark.timeout(20)
def test_sleep(origin):
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=5)
    c.request("GET", "/sleep?ms=100")
    assert c.getresponse().read() == b"slept\n"
    c.close()
    assert time.monotonic() - t0 >= 0.1


@pytest.mark.timeout(20)
def test_stop_ends_held_requests_and_threads():
    o = Origin().start()
    socks = [tcp(o) for _ in range(3)]
    socks[0].sendall(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
    socks[1].sendall(b"POST /no-read HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
    socks[2].sendall(b"GET /sleep?ms=60000 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert o.wait(lambda x: x.in_flight == 3, 5)
    t0 = time.monotonic()
    o.stop()  # asserts that every thread ended
    assert time.monotonic() - t0 < 3
    for s in socks:
        s.close()


@pytest.mark.timeout(60)
def test_fastapi_app_on_a_unix_socket(fastapi_app):
    app = fastapi_app(uds=True)
    assert app.request("GET", "/api/items/5")[2] == b'{"id":5}'
    assert app.request("GET", "/items/6")[2] == b'{"id":6}'
    status, _, body = app.request("POST", "/api/echo", body=b"x" * 1000)
    doc = json.loads(body)
    assert status == 200 and doc["body_len"] == 1000
    assert ["content-length", "1000"] in doc["headers"]
    assert json.loads(app.request("GET", "/fib?n=15")[2]) == {"n": 15, "fib": 610}
    assert app.request("GET", "/fib?n=99")[0] == 400
    assert json.loads(app.request("GET", "/api/slow?ms=20")[2]) == {"slept_ms": 20}
