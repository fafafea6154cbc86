"""A third-party corpus for the response parser (http/resp.c): the strict-mode response vectors
of llhttp's own test suite (tests/conformance/llhttp-responses.json says where from and how they
were taken, tests/conformance/llhttp_extract.py took them), read by build/tests/resp_replay as a
proxy reads an upstream connection (the next answer while the connection persists; the end of
the input is not taken as a close, as llhttp's tests do not call llhttp_finish).

What must hold for every vector:

* where llhttp refuses the input, lg_resp accepts nothing past the point llhttp refused: it
  refuses too, or stops before those bytes (an answer that ends the connection: the bytes after
  it are never read as a response), and completes no more messages than llhttp did;
* where llhttp accepts it, lg_resp reads the same messages with the same statuses, or refuses
  it for one of the reasons listed in STRICTER (docs/HTTP.md "Responses from an upstream"),
  never having completed a message llhttp did not."""
import json
import os
import subprocess

import pytest

from conftest import LAGLESS_BIN

CORPUS = os.path.join(os.path.dirname(__file__), "..", "conformance", "llhttp-responses.json")
with open(CORPUS) as f:
    VECTORS = json.load(f)["vectors"]
REPLAY = os.path.join(os.path.dirname(LAGLESS_BIN or "."), "tests", "resp_replay")

# Vectors llhttp accepts and lg_resp refuses on purpose: title -> lg_resp_strerror's reason.
STRICTER = {
    # empty lines before a status line (llhttp skips them; RFC 9112 2.2 lets only a server
    # skip them before a request line): here between two answers of one connection
    "HTTP 304 with Content-Length": "status_line",
    "HTTP 100 first, then 400": "status_line",
    "Should parse multiple events": "status_line",
    "Response starting with CRLF": "status_line",
    # not HTTP/1.0 or HTTP/1.1 (RFC 9112 2.3, 4)
    "RTSP response": "status_line",
    "ICE response": "status_line",
    "HTTP version 0.9": "version",
    # no SP after the status code (RFC 9112 4: status-code SP [ reason-phrase ])
    "No reason phrase": "status_line",
    # a transfer coding other than chunked: lagless sends no TE field upstream, so an app may
    # apply none (RFC 9110 10.1.4); RFC 9112 6.3 (4) would read the body until the close
    "`chunked` before other transfer-encoding": "te_not_chunked",
    "multiple transfer-encoding where chunked is not the last one": "te_not_chunked",
    "`chunkedchunked` transfer-encoding does not enable chunked enconding": "te_not_chunked",
}


@pytest.mark.timeout(60)
def test_llhttp_response_vectors(tmp_path):
    if not os.path.exists(REPLAY):
        pytest.skip("%s missing (make unit builds it)" % REPLAY)
    assert len(VECTORS) >= 60
    paths = []
    for i, v in enumerate(VECTORS):
        p = tmp_path / ("%03d%s" % (i, ".head" if v["head"] else ""))
        p.write_bytes(v["data"].encode("latin-1"))
        paths.append(str(p))
    out = subprocess.run([REPLAY] + paths, capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == len(VECTORS)
    stricter_seen = set()
    for v, line in zip(VECTORS, lines):
        got = json.loads(line)
        what = "%s: %s -> %s" % (v["file"], v["title"], line)
        assert got["messages"] <= v["messages"], what
        if v["error"] is not None:
            assert got["err"] != "ok" or got["partial"] or got["rest"] > 0, what
        elif got["err"] == "ok":
            assert got["messages"] == v["messages"], what
            assert got["statuses"] == v["statuses"][:len(got["statuses"])], what
        else:
            assert STRICTER.get(v["title"]) == got["err"], what
            stricter_seen.add(v["title"])
    assert stricter_seen == set(STRICTER), set(STRICTER) - stricter_seen
