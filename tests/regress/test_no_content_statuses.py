"""Regression (hostile trial, issue "[reliability]" 4): a kind answering 204 or 205 sent
Content-Length and its body on a kept connection, but RFC 9110 allows no content in either
(sections 15.3.5, 15.3.6), and a 204 no Content-Length (section 8.6): a client or proxy that
follows the RFC reads the body as the start of the next response, and the connection is out
of step. The body is now dropped, as for HEAD; a 204 carries no Content-Length, a 205 says 0."""
import os
import socket

import pytest

from conftest import get, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")
pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(MODS, "faults.so")),
                                reason="test modules not built (make integration builds them)")

CONF = """
[module faults]
path = {path}
level = 1

[route /echo]
methods = GET
kind = faults.echo
"""


def recv_until(s, marker, got=b""):
    while marker not in got:
        chunk = s.recv(65536)
        assert chunk, "closed after %r" % got
        got += chunk
    return got


@pytest.mark.timeout(60)
def test_204_and_205_from_a_kind_carry_no_content(start_server, tmp_path):
    conf = tmp_path / "nc.conf"
    conf.write_text(CONF.format(path=os.path.join(MODS, "faults.so")))
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    assert wait_until(lambda: get(srv.port, "/ready").status == 200, 30)
    # the kind writes a body for a 200: the route works and has one
    r = get(srv.port, "/echo?status=200")
    assert r.status == 200 and r.body.startswith(b"GET /echo"), r
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        # three requests pipelined on one kept connection: the bytes after each head must be
        # the next response's status line, nothing of the kind's text between them
        s.sendall(b"GET /echo?status=204 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /echo?status=205 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        got = recv_until(s, b"\r\n\r\nok")
    heads = got.split(b"\r\n\r\n")
    assert len(heads) == 4 and heads[3] == b"ok", got
    h204, h205, hping = (h.lower() for h in heads[:3])
    assert h204.startswith(b"http/1.1 204 "), got
    assert b"content-length" not in h204 and b"content-type" not in h204, h204
    assert h205.startswith(b"http/1.1 205 "), got
    assert b"\r\ncontent-length: 0" in h205, h205
    assert hping.startswith(b"http/1.1 200 "), got
