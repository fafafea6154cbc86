"""Regression (found by fuzz_http): inputs where the framing check accepted a byte that
http-parser 2.9.4 refused, so the two disagreed (fail-closed 400, but a gap in the check):

* a field name that extends "Transfer-Encoding" ("Transfer-Encodingu:") is taken by
  http-parser for Transfer-Encoding;
* HTAB after a chunk size (BWS by RFC 9112 grammar) is refused by http-parser.

The first is now refused by the framing check itself. The second is accepted as BWS since
(http-parser is shown SP in its place, http/http.c), and this input is refused by the check
for what follows the HTAB, a bare LF. Both: 400, closed, and no disagreement logged."""
import os

import pytest

from conftest import connect, peer_closed, read_response

INPUTS = os.path.join(os.path.dirname(__file__), "inputs")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["fuzz-http-te-prefix.bin", "fuzz-http-chunk-htab.bin"])
def test_refused_by_the_check_not_the_parser(start_server, name):
    srv = start_server("--compute-workers", "1")
    with open(os.path.join(INPUTS, name), "rb") as f:
        data = f.read()
    with connect(srv.port) as s:
        s.sendall(data)
        r = read_response(s)
        assert r.status == 400, r
        assert r.header("connection") == "close"
        assert peer_closed(s)
    assert "disagree" not in srv.log(), srv.log()
