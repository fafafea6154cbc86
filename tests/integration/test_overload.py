"""A full pool (every compute process busy, every queue place taken) is refused at once with 503,
before any body byte is read, while inline routes keep answering fast."""

import statistics
import time

import pytest

from conftest import (Call, connect, get, heavy_iterations_for, heavy_result, job_slots,
                      peer_closed, read_response, wait_jobs)

# each long job should run at least this long (seconds), measured on the server itself
LONG_JOB_S = 3.0


def check_503(r, close=False):
    """A queue-full refusal: Retry-After, and Connection: close only when the body was left
    unread (a request without one keeps its connection)."""
    assert r.status == 503, r
    assert r.header("retry-after") == "1", r.headers
    assert ((r.header("connection") or "").lower() == "close") == close, r.headers


@pytest.mark.timeout(120)
def test_full_pool_503_fast_and_ping_unaffected(start_server):
    srv = start_server("--compute-workers", "1", "--queue", "1", "--deadline-ms", "120000")
    n = heavy_iterations_for(srv.port, LONG_JOB_S)
    url = "/heavy?iterations=%d" % n

    a = Call(get, srv.port, url, timeout=90)
    a.start()
    b = Call(get, srv.port, url, timeout=90)
    b.start()
    # both accepted, one running and one queued (waited for: on a loaded machine a fixed sleep
    # could end before b was queued, and the third request below would take its place)
    assert wait_jobs(srv.port, running=1, queued=1), job_slots(srv.port)
    assert a.is_alive() and b.is_alive(), "the long jobs ended too early to test a full pool"

    # 1. a third heavy request is refused at once
    t0 = time.monotonic()
    r = get(srv.port, "/heavy?iterations=1000", timeout=5)
    elapsed = time.monotonic() - t0
    check_503(r)
    assert elapsed < 0.5, "503 took %.3f s" % elapsed

    # 2. a POST /compress with a large body is refused before a body byte is sent
    with connect(srv.port, timeout=5) as s:
        t0 = time.monotonic()
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                  b"Content-Length: 8000000\r\n\r\n")
        r = read_response(s)
        elapsed = time.monotonic() - t0
        check_503(r, close=True)
        assert elapsed < 0.5, "503 for /compress took %.3f s" % elapsed
        # Connection: close means the server closes the connection (it must not wait for a body)
        assert peer_closed(s, timeout=3.0), "connection left open after 503 Connection: close"

    # 3. inline routes stay fast: fresh connections and a keep-alive one
    lat = []
    for i in range(50):
        t0 = time.monotonic()
        r = get(srv.port, "/ping", timeout=5)
        lat.append(time.monotonic() - t0)
        assert r.status == 200 and r.body == b"ok", r
    lat.sort()
    med = statistics.median(lat)
    assert med < 0.050, "median /ping %.1f ms under full pool (all: %r)" % (med * 1e3, lat)
    assert lat[-1] < 1.0, "slowest /ping %.3f s" % lat[-1]
    assert get(srv.port, "/health", timeout=5).status == 200

    # the pool is still full (otherwise the assertions above proved less than they claim)
    assert a.is_alive() or b.is_alive(), "long jobs finished during the overload checks"
    check_503(get(srv.port, "/heavy?iterations=1", timeout=5))

    # 4. both long jobs complete with correct results; the second one waited in the queue
    ra = a.get(100)
    rb = b.get(100)
    for r in (ra, rb):
        assert r.status == 200, r
        doc = r.json()
        assert doc["iterations"] == n and doc["result"] == heavy_result(n), (doc, heavy_result(n))
    waited = max(ra.json()["queue_ms"], rb.json()["queue_ms"])
    ran = min(ra.json()["run_ms"], rb.json()["run_ms"])
    assert waited >= 0.5 * ran, ("one job must have queued behind the other", ra.json(), rb.json())

    # 5. the pool is free again
    r = get(srv.port, "/heavy?iterations=1000", timeout=30)
    assert r.status == 200 and r.json()["result"] == heavy_result(1000), r


@pytest.mark.timeout(120)
def test_503_keeps_the_connection_when_the_body_is_cheap_to_drop(start_server):
    """No free slot: a request without a body, or with one within --max-discard (read and
    dropped, Content-Length or chunked), gets 503 + Retry-After on a connection that stays
    open, and pipelined requests behind it are answered in order; a body declared over the
    limit, or held back for a 100 Continue, gets 503 and the connection closes unread."""
    srv = start_server("--compute-workers", "1", "--queue", "0", "--deadline-ms", "120000",
                       "--max-discard", "1K")
    n = heavy_iterations_for(srv.port, LONG_JOB_S)
    a = Call(get, srv.port, "/heavy?iterations=%d" % n, timeout=90)
    a.start()
    assert wait_jobs(srv.port, running=1), job_slots(srv.port)
    assert a.is_alive(), "the long job ended too early to test a full pool"
    small = b"x" * 1000
    reqs = (b"GET /heavy?iterations=1 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            b"POST /compress HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3e8\r\n%s\r\n0\r\n\r\n"
            b"HEAD /heavy HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n") % (len(small), small, small)
    with connect(srv.port, timeout=10) as s:
        for _ in range(3):  # the same connection, again and again
            s.sendall(reqs)
            got = []
            for i in range(6):
                r = read_response(s, read_body=(i != 4))
                got.append(r.status)
                assert (r.header("connection") or "") != "close", (i, r)
                if r.status == 503:
                    assert r.header("retry-after") == "1", r.headers
            assert got == [503, 200, 503, 503, 503, 200], got
    # over the limit, or waiting for a 100 Continue: refused at once, closed, body unread
    for extra in (b"Content-Length: 1025\r\n", b"Content-Length: 10\r\nExpect: 100-continue\r\n"):
        with connect(srv.port, timeout=10) as s:
            s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
            check_503(read_response(s), close=True)
            assert peer_closed(s, timeout=3.0)
    # a chunked body that grows past the limit: 503 once it does, closed
    with connect(srv.port, timeout=10) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"800\r\n" + b"y" * 2048 + b"\r\n")
        check_503(read_response(s), close=True)
        assert peer_closed(s, timeout=3.0)
    a.get(90)


@pytest.mark.timeout(120)
def test_slots_are_global_across_loop_workers(start_server):
    # two loop workers, one slot in all: the bound is global, not per loop worker
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", "--queue", "0",
                       "--deadline-ms", "120000")
    n = heavy_iterations_for(srv.port, LONG_JOB_S)
    a = Call(get, srv.port, "/heavy?iterations=%d" % n, timeout=90)
    a.start()
    assert wait_jobs(srv.port, running=1), job_slots(srv.port)
    assert a.is_alive(), "the long job ended too early"
    # many fresh connections land on either loop worker; every one must be refused
    statuses = []
    for i in range(10):
        r = get(srv.port, "/heavy?iterations=1000", timeout=5)
        statuses.append(r.status)
    assert a.is_alive(), "the long job ended during the checks"
    assert statuses == [503] * 10, statuses
    r = a.get(100)
    assert r.status == 200 and r.json()["result"] == heavy_result(n), r
