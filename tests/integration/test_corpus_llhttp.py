"""A third-party corpus: the strict-mode request vectors of llhttp's own test suite
(tests/conformance/llhttp-requests.json says where from and how they were taken), replayed
against the real binary.

lagless is stricter than llhttp in places (no fragment in a target, no RTSP or HTTP/0.9, no
coding before chunked, Host required), so a vector llhttp accepts may get a 4xx. What must hold
for every vector is what matters for smuggling and desynchronisation:

* the framing check and http-parser never disagree (no "disagree" in the log), nothing crashes;
* no request is answered twice: at most as many answers as llhttp completed messages, plus one
  refusal;
* where llhttp refuses the input, lagless accepts nothing past the point llhttp refused: its last
  answer, if any, is a refusal (>= 400) on a closed connection, or it is still waiting for bytes
  (an incomplete message, closed at our end of input).

The client half-closes after sending, so the server answers what is complete and closes at the
end of input instead of waiting for a timeout."""
import json
import os
import re
import socket

import pytest

from conftest import LAGLESS_BIN, Server

CORPUS = os.path.join(os.path.dirname(__file__), "..", "conformance", "llhttp-requests.json")
with open(CORPUS) as f:
    VECTORS = json.load(f)["vectors"]
HOST_RE = re.compile(rb"(^|\r\n\r\n)([A-Z-]+ [^\r\n]* HTTP/1\.1\r\n)", re.M)


def with_host(data):
    """Adds 'Host: x' to each HTTP/1.1 request line when the input has no Host field at all."""
    if b"\r\nhost:" in data.lower():
        return data
    return HOST_RE.sub(lambda m: m.group(1) + m.group(2) + b"Host: x\r\n", data)


@pytest.fixture(scope="module")
def corpus_server(tmp_path_factory):
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    srv = Server(["--loop-workers", "1", "--compute-workers", "1"],
                 workdir=str(tmp_path_factory.mktemp("llhttp")))
    yield srv
    srv.kill_all()
    assert not srv.crash_reports(), srv.crash_reports()[:10]


def exchange(port, data):
    """Sends data, half-closes, and returns the statuses of every answer until the server
    closes, and whether it closed cleanly."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except ConnectionResetError:
            pass
    return [int(x) for x in re.findall(rb"(?:^|\n)HTTP/1\.1 (\d{3}) ", buf)]


@pytest.mark.timeout(120)
def test_llhttp_request_corpus(corpus_server):
    assert len(VECTORS) >= 90
    port = corpus_server.port
    faults = []
    for v in VECTORS:
        data = with_host(v["data"].encode("latin-1"))
        statuses = exchange(port, data)
        name = "%s: %s" % (v["file"], v["title"])
        if len(statuses) > v["messages"] + 1:
            faults.append("%s: %d answers to %d messages %r" % (name, len(statuses), v["messages"],
                                                               statuses))
        if v["error"] and statuses and statuses[-1] < 400:
            faults.append("%s: llhttp refuses (%s), lagless answered %r" % (name, v["error"],
                                                                           statuses))
    disagree = [l for l in corpus_server.log().splitlines() if "disagree" in l]
    assert not disagree, disagree[:10]
    assert not faults, faults
