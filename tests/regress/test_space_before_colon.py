"""Regression: "Content-Length : 5" was read as a Content-Length.

Debian builds http-parser non-strict, which lets spaces into field names. RFC 9112 section 5.1
requires a 400 for whitespace between a field name and the colon, since two parsers that
disagree on it can be made to frame a request differently (request smuggling).
"""
import pytest

from conftest import connect, peer_closed, read_response


@pytest.mark.timeout(30)
def test_space_before_colon_is_400_and_close(server):
    req = b"POST /compress HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello"
    with connect(server.port) as s:
        s.sendall(req)
        resp = read_response(s)
        assert resp.status == 400
        assert peer_closed(s)
