"""Regression (hostile trial): on a kept connection, a request refused before its request line
was whole (a malformed line: 400; an over-long target: 414) was logged with the method, path
and query of the request answered before it ("GET /ping status=400 ... query=\"first\""): the
parser's request view was cleared only when the next request line was read. A client's probe
looked like a repeat of its last good request. The view is now emptied once a request is
answered, so such a refusal is logged as on a new connection ("- -")."""
import socket

import pytest

from conftest import wait_until


def exchange(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.settimeout(5)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionError:
                break
            if not chunk:
                break
            got += chunk
        return got


@pytest.mark.timeout(60)
def test_a_refused_request_line_is_not_logged_as_the_one_before(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "--access-log")
    cases = {
        "a": b"BAD LINE\r\n\r\n",
        "b": b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        "c": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n",
    }
    for tag, bad in cases.items():
        got = exchange(srv.port, b"GET /ping?first=%s HTTP/1.1\r\nHost: x\r\nUser-Agent: good\r\n"
                       b"\r\n" % tag.encode() + bad)
        assert got.count(b"HTTP/1.1 ") == 2, got

    def lines():  # ours: not the harness's start-up GET /ping
        return [ln.split(" access: ", 1)[1] for ln in srv.log().splitlines()
                if " access: " in ln and ("first=" in ln or " status=4" in ln)]
    assert wait_until(lambda: len(lines()) == 2 * len(cases), 5), lines()
    for ln in lines():
        if " status=200 " in ln:
            assert ln.startswith("GET /ping ") and 'ua="good"' in ln, ln
        else:
            assert ln.startswith("- - status=4"), ln
            assert 'query=""' in ln and 'ua=""' in ln, ln
