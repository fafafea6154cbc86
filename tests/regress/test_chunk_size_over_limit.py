"""Regression: a chunk size above --max-body was accepted, and the server waited for the data.

The limit was only checked as chunk data arrived, so a client announcing a 128 MiB chunk held
the connection (and, on an offloaded route, a job slot) while it trickled in. The framing check
now refuses the chunk when its size line is read: 413 and a closed connection.
"""
import pytest

from conftest import connect, peer_closed, read_response


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", ["/compress", "/ping"])
def test_chunk_size_over_max_body_is_413_at_once(start_server, path):
    srv = start_server("--max-body", "1M")
    with connect(srv.port) as s:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"8000000\r\n" % path.encode())
        s.settimeout(5)  # no chunk data is ever sent: the answer must not wait for it
        assert read_response(s).status == 413
        assert peer_closed(s)


@pytest.mark.timeout(30)
def test_chunks_adding_up_over_max_body_are_413(start_server):
    srv = start_server("--max-body", "1K")
    with connect(srv.port) as s:
        s.sendall(b"POST /compress HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"200\r\n" + b"a" * 0x200 + b"\r\n200\r\n" + b"b" * 0x200 + b"\r\n1\r\n")
        assert read_response(s).status == 413
