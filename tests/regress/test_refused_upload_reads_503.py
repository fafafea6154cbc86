"""Regression (issue "[deploy]" 2): a large POST refused before its body was read (a full pool:
503; a Content-Length over --max-body: 413) reached Python's http.client and httpx as
`Broken pipe`, not as the answer: lagless answered, shut its write side and drained the rest for
at most 2 s or 1 MiB, then closed with input unread, which is a reset (RFC 9293 section
3.10.7.1), and a client still writing its body gets EPIPE before it reads anything. As nginx's
lingering_close does, the rest of the body is now read and dropped for --lingering-time-ms
(whole) and --lingering-timeout-ms (silence), up to --lingering-bytes, so the client finishes
its write and reads the refusal; past the bounds the connection is closed as before."""
import http.client
import socket
import time

import pytest

from conftest import Call, get, wait_jobs, wait_until

BODY = b"x" * (24 << 20)  # 24 MiB: far more than the kernel's socket buffers hold


def post(port, path, body, timeout=60):
    """http.client as a FastAPI service uses it: the whole body is written, then the answer
    read. Returns (status, body) or the exception it raised."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/octet-stream"})
        r = conn.getresponse()
        return r.status, r.read()
    except OSError as e:
        return e
    finally:
        conn.close()


@pytest.mark.timeout(120)
def test_a_body_over_max_body_gets_413_not_a_broken_pipe(start_server):
    srv = start_server("--compute-workers", "1", "--max-body", "1M")
    got = post(srv.port, "/compress", BODY)
    assert not isinstance(got, Exception), "the client saw %r, not the 413" % (got,)
    assert got[0] == 413, got


@pytest.mark.timeout(120)
def test_a_refused_upload_reaches_the_client_as_503(start_server):
    srv = start_server("--compute-workers", "1", "--queue", "0", "--enable-test-jobs", "1",
                       "--max-discard", "64K")
    hold = Call(get, srv.port, "/test/sleep?ms=20000", timeout=60)
    hold.start()
    try:
        assert wait_jobs(srv.port, running=1)
        got = post(srv.port, "/compress", BODY)
        assert not isinstance(got, Exception), "the client saw %r, not the 503" % (got,)
        assert got[0] == 503, got
    finally:
        hold.get(60)


@pytest.mark.timeout(120)
def test_lingering_is_bounded_by_bytes_and_time(start_server):
    """A client that keeps sending after a refusal is cut off at --lingering-bytes (and at
    --lingering-time-ms): lingering costs a bounded amount, never a connection held for good."""
    srv = start_server("--compute-workers", "1", "--max-body", "1M", "--lingering-bytes", "2M",
                       "--lingering-time-ms", "3000")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
    sent, t0, cut = 0, time.monotonic(), None
    chunk = b"y" * 65536
    while time.monotonic() - t0 < 20:
        try:
            sent += s.send(chunk)
        except OSError as e:
            cut = e
            break
    assert cut is not None, "still accepted after %d bytes" % sent
    # the server read at most the bound (plus what the kernel's buffers hold) before it cut
    assert sent < (2 << 20) + (32 << 20), sent
    s.close()
    # a slow one (a byte a second, under --lingering-timeout-ms) is cut at the whole bound
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
    assert s.recv(12).startswith(b"HTTP/1.1 413"), "no 413"
    t0 = time.monotonic()

    def trickle_cut():
        try:
            s.send(b"z")
            return False
        except OSError:
            return True
    assert wait_until(trickle_cut, 15, interval=0.5)
    assert 2.5 < time.monotonic() - t0 < 12, time.monotonic() - t0
    s.close()
