"""Regression: two X-Forwarded-For field lines named the leftmost, client-forged entry.

HAProxy's "option forwardfor" appends its own X-Forwarded-For line when the client sent one.
RFC 9110 section 5.3: the field lines of a list field combine, in order, into one list, so the
rightmost untrusted entry of the combined list is the client, as for the same list on one line.
"""
import json

import pytest

from conftest import connect, read_response, wait_until


def _send(port, tag, xff_lines):
    head = b"GET /ping?t=%s HTTP/1.1\r\nHost: a\r\n" % tag.encode()
    for v in xff_lines:
        head += b"X-Forwarded-For: " + v + b"\r\n"
    with connect(port) as s:
        s.sendall(head + b"Connection: close\r\n\r\n")
        assert read_response(s).status == 200


@pytest.mark.timeout(60)
def test_forwarded_for_lines_combine_into_one_list(start_server):
    srv = start_server("--access-log", "--access-log-json", "--trusted-proxies", "127.0.0.1/32")
    cases = {
        "two": [b"6.6.6.6", b"5.5.5.5"],
        "one": [b"6.6.6.6, 5.5.5.5"],
        # trusted hops on the last line: look further left, into the earlier line
        "hop": [b"6.6.6.6, 7.7.7.7", b"127.0.0.1"],
        "three": [b"6.6.6.6", b"8.8.8.8, 127.0.0.1", b"127.0.0.1"],
    }
    for tag, lines in cases.items():
        _send(srv.port, tag, lines)

    def docs():
        out = {}
        for line in srv.log().splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                if d.get("query", "").startswith("t="):
                    out[d["query"][2:]] = d["client"]
        return out

    assert wait_until(lambda: len(docs()) == len(cases), 10), srv.log()
    assert docs() == {"two": "5.5.5.5", "one": "5.5.5.5", "hop": "7.7.7.7",
                      "three": "8.8.8.8"}, srv.log()
