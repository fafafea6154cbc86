"""Regression: more than 16 KiB of empty lines before a request line got a reset, not a 4xx.

RFC 9112 section 2.2 lets a server ignore empty lines before the request line, and lagless
does, but they filled the input buffer without being consumed: the next read(2) asked for 0
bytes, got 0, took it for EOF and closed with unread input, so the kernel reset the connection.
They now count against the head limit (431 with a staged close), and a full buffer the parser
cannot consume is a 431 in any case.
"""
import pytest

from conftest import connect, read_response


@pytest.mark.timeout(30)
@pytest.mark.parametrize("lines", [8200, 20000])
def test_many_empty_lines_get_431(server, lines):
    with connect(server.port) as s:
        s.sendall(b"\r\n" * lines + b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(s).status == 431


@pytest.mark.timeout(30)
def test_a_few_empty_lines_are_ignored(server):
    with connect(server.port) as s:
        s.sendall(b"\r\n" * 100 + b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(s).status == 200
