"""Regression: a request head over 16 KiB that arrived in one read was not refused.

http-parser 2.9 keeps its head byte count in a local variable during execute, so the hooks saw
only earlier reads and a 20 KB head passed (it got a 404). Now the parser's own limit is set,
and the head gets 431 and a closed connection however it is split.
"""
import pytest

from conftest import connect, peer_closed, read_response


@pytest.mark.timeout(30)
def test_20k_head_in_one_write_gets_431(server):
    head = (b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
    with connect(server.port) as s:
        s.sendall(head)
        resp = read_response(s)
        assert resp.status == 431
        assert peer_closed(s)


@pytest.mark.timeout(30)
def test_head_just_under_limit_is_served(server):
    head = b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 15000 + b"\r\n\r\n"
    with connect(server.port) as s:
        s.sendall(head)
        assert read_response(s).status == 200
