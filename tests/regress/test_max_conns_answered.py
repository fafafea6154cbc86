"""Regression: a client over --max-conns connected and then hung with no answer and no close,
and /health, /ready and /metrics hung with it, so a liveness probe failed by timing out. A full
loop worker now accepts what is still queued on its tick, answers a fixed 503 with
Retry-After: 1 and Connection: close, closes, counts it in
lagless_connections_refused_total and logs it rate-limited (issue 10, item 5)."""
import re
import time

import pytest

from conftest import connect, get, peer_closed, read_response, wait_until


def health_ok(port):
    try:
        return get(port, "/health", timeout=2).status == 200
    except OSError:
        return False


@pytest.mark.timeout(60)
def test_over_max_conns_gets_503_and_close(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "--max-conns", "2")
    held = [connect(srv.port), connect(srv.port)]
    try:
        # the two idle connections hold the worker's whole allowance
        t0 = time.monotonic()
        third = connect(srv.port)
        third.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        r = read_response(third)
        assert r.status == 503, r
        assert r.header("retry-after") == "1"
        assert r.header("connection") == "close"
        assert peer_closed(third, timeout=5)
        third.close()
        # a probe that sends nothing is answered the same way
        quiet = connect(srv.port)
        assert read_response(quiet).status == 503
        quiet.close()
        assert time.monotonic() - t0 < 4.0, "the refusals waited for a timeout"
    finally:
        for s in held:
            s.close()
    assert wait_until(lambda: health_ok(srv.port), 10)
    text = get(srv.port, "/metrics").body.decode()
    m = re.search(r"^lagless_connections_refused_total (\d+)$", text, re.M)
    assert m and int(m.group(1)) >= 2, text[:2000]
    assert "over --max-conns 2 refused with 503" in srv.log()
