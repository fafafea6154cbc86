"""Regression (found by fuzz_http): an offloaded request without a query string computed
NULL + 0 in query_param, undefined behaviour that UBSan reports (worker/route/routes.c). The input
libFuzzer saved is replayed against the real server; under SAN=1 a report fails the test via
the start_server fixture's crash check."""
import os

import pytest

from conftest import connect, read_response

INPUT = os.path.join(os.path.dirname(__file__), "inputs", "fuzz-http-query-null.bin")


@pytest.mark.timeout(30)
def test_offloaded_request_without_query(start_server):
    srv = start_server("--compute-workers", "1")
    with open(INPUT, "rb") as f:
        data = f.read()
    assert b"?" not in data.split(b"\r\n")[0]
    with connect(srv.port) as s:
        s.sendall(data)
        r = read_response(s)
    assert r.status == 200, r
    for path in ("/heavy", "/compress"):
        with connect(srv.port) as s:
            method = b"GET" if path == "/heavy" else b"POST"
            s.sendall(method + b" " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 0\r\n\r\n" if path == "/compress" else
                      b"GET /heavy HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(s).status in (200, 503)
