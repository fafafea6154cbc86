"""Regression: a first line that cannot be HTTP and has no CRLF (a TLS ClientHello sent to the
plain-text port) waited the whole head timeout and was answered 408. The framing check now
refuses, as soon as the first bytes arrive, a first byte that cannot start a method token
(RFC 9110 tchar) or a token longer than any method: 400 at once, then close (issue 10,
item 5)."""
import time

import pytest

from conftest import connect, peer_closed, read_response


@pytest.mark.timeout(30)
@pytest.mark.parametrize("data", [
    b"\x16\x03\x01\x02\x00\x01",   # TLS handshake record, ClientHello
    b"\x00\x00",                    # binary junk
    b"GET\x01",                     # a control byte inside the method
    b"A" * 40,                      # a token longer than any method, no SP yet
])
def test_not_http_is_400_at_once(start_server, data):
    srv = start_server("--compute-workers", "1", "--head-timeout-ms", "8000")
    with connect(srv.port, timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(data)
        r = read_response(s)
        assert r.status == 400, r
        assert time.monotonic() - t0 < 4.0, "waited for the head timeout"
        assert peer_closed(s, timeout=5)


@pytest.mark.timeout(30)
def test_a_method_arriving_slowly_still_works(start_server):
    srv = start_server("--compute-workers", "1")
    with connect(srv.port, timeout=10) as s:
        for piece in (b"\r", b"\nG", b"ET", b" /pi", b"ng HTTP/1.1\r\nHost: x\r\n\r\n"):
            s.sendall(piece)
            time.sleep(0.05)
        assert read_response(s).status == 200
