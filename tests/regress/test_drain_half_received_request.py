"""Regression: a graceful drain closed connections whose request head was partly received,
because the parser had consumed those bytes and the buffer looked empty (idle). A request that
has begun must be answered (with Connection: close), not dropped."""

import os
import signal
import time

import pytest

from conftest import connect, read_response


@pytest.mark.timeout(60)
def test_half_received_request_answered_during_drain(start_server):
    srv = start_server("--loop-workers", "1", "--drain-timeout-ms", "10000")
    s = connect(srv.port)
    s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")
    time.sleep(0.2)
    os.kill(srv.pid, signal.SIGTERM)
    time.sleep(0.3)
    s.sendall(b"\r\n")
    r = read_response(s)
    s.close()
    assert r.status == 200 and r.body == b"ok", r
    assert (r.header("connection") or "").lower() == "close", r.headers
    assert srv.stop(timeout=15) == 0
