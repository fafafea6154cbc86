"""Table-driven HTTP/1.1 conformance: every tests/conformance/cases/*.http file (format in
tests/conformance/README.md) is sent to the real binary over raw TCP three ways:

* whole, in one write;
* one byte per send() (TCP_NODELAY), so the server sees it in many small reads;
* split in two at every offset of its head, with a pause between the parts (heads over 2 KiB,
  the limit cases, at the first and last 512 offsets and every 61st in between).

Each time the responses (status, Content-Length, Date, Server; Connection: close on a closing
one), whether the connection stays usable or is closed with nothing more sent, and how much each
route's hit counter grew (/health "routes") must match the case: a refused request never reaches
a handler or the compute pool.
"""

import concurrent.futures
import glob
import os
import re
import socket
import time

import pytest

from conftest import LAGLESS_BIN, Server, get

CASES_DIR = os.path.join(os.path.dirname(__file__), "..", "conformance", "cases")
PROBE = b"GET /probe HTTP/1.1\r\nHost: x\r\n\r\n"
REPEAT_RE = re.compile(rb"<<(\d+)x(.)>>")


def decode(text):
    """The request part of a case file: line breaks dropped, escapes and <<NxC>> expanded."""
    raw = "".join(text.split("\n")).encode("latin-1")
    raw = REPEAT_RE.sub(lambda m: m.group(2) * int(m.group(1)), raw)
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i:i + 1]
        if c != b"\\":
            out += c
            i += 1
            continue
        e = raw[i + 1:i + 2]
        if e == b"x":
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
            continue
        out += {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"\\": b"\\"}[e]
        i += 2
    return bytes(out)


def load(path):
    with open(path, encoding="latin-1") as f:
        header, sep, body = f.read().partition("\n---\n")
    assert sep, "%s: no --- line" % path
    exp = {}
    for line in header.splitlines():
        k, _, v = line.partition(":")
        exp[k.strip()] = v.strip()
    hits = {}
    for item in exp.get("hits", "").split():
        route, _, n = item.partition("=")
        hits[route] = int(n)
    return {
        "name": os.path.basename(path),
        "statuses": [int(s) for s in exp["status"].split()],
        "open": {"yes": True, "no": False}[exp["open"]],
        "hits": hits,
        "bodyless": {int(i) for i in exp.get("bodyless", "").split()},
        "data": decode(body.rstrip("\n")),
    }


CASES = [load(p) for p in sorted(glob.glob(os.path.join(CASES_DIR, "*.http")))]


def test_enough_cases():
    assert len(CASES) >= 60, len(CASES)


@pytest.fixture(scope="module")
def conf_server(tmp_path_factory):
    if LAGLESS_BIN is None:
        pytest.skip("lagless binary missing")
    srv = Server(["--loop-workers", "2", "--compute-workers", "1", "--queue", "16",
                  "--max-body", "64K"], workdir=str(tmp_path_factory.mktemp("conformance")))
    yield srv
    srv.kill_all()
    crashes = srv.crash_reports()
    assert not crashes, "server log shows a crash or sanitizer report: %r" % crashes[:10]
    # every refusal must come from the framing check, never from http-parser disagreeing
    disagree = [l for l in srv.log().splitlines() if "disagree" in l]
    assert not disagree, "framing check and http-parser disagreed: %r" % disagree[:10]


def route_hits(port):
    return get(port, "/health", timeout=10).json()["routes"]


def read_responses(sock, count, bodyless):
    """Reads count final responses (1xx skipped); returns [(status, headers)] and leftover."""
    buf = b""
    out = []
    while len(out) < count:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError("closed after %d of %d responses: %r" % (len(out), count, buf[:200]))
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.1 (\d{3}) ", lines[0] + " ")
        assert m, "bad status line %r" % lines[0]
        status = int(m.group(1))
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            assert name and name == name.strip(), "bad response field %r" % line
            headers[name.lower()] = value.strip()
        if 100 <= status < 200:
            continue
        for name in ("content-length", "date", "server"):
            assert name in headers, "response without %s: %r" % (name, headers)
        n = 0 if len(out) + 1 in bodyless else int(headers["content-length"])
        while len(buf) < n:
            chunk = sock.recv(65536)
            assert chunk, "closed inside a response body"
            buf += chunk
        buf = buf[n:]
        out.append((status, headers))
    return out, buf


def check_after(sock, case, responses, leftover):
    got = [s for s, _ in responses]
    assert got == case["statuses"], "%s: statuses %r, want %r" % (case["name"], got, case["statuses"])
    assert leftover == b"", "%s: unexpected bytes after the responses: %r" % (case["name"], leftover[:200])
    last = responses[-1][1]
    if case["open"]:
        assert last.get("connection", "").lower() != "close", (case["name"], last)
        sock.sendall(PROBE)
        probe, rest = read_responses(sock, 1, set())
        assert probe[0][0] == 404 and rest == b"", (case["name"], probe, rest)
    else:
        assert last.get("connection", "").lower() == "close", (case["name"], last)
        data = sock.recv(65536)
        assert data == b"", "%s: bytes after a closing response: %r" % (case["name"], data[:200])


def run_once(port, case, send):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.settimeout(10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            send(s, case["data"])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused early and closed; the responses are still readable
        responses, leftover = read_responses(s, len(case["statuses"]), case["bodyless"])
        check_after(s, case, responses, leftover)


def send_whole(s, data):
    s.sendall(data)


def send_bytewise(s, data):
    for i in range(len(data)):
        s.send(data[i:i + 1])


def head_len(data):
    i = data.find(b"\r\n\r\n")
    return len(data) if i < 0 else i + 4


def split_offsets(data):
    n = head_len(data)
    if n <= 2048:
        return list(range(1, n))
    return sorted(set(range(1, 512)) | set(range(n - 512, n)) | set(range(512, n - 512, 61)))


def splitter(k):
    def send(s, data):
        s.sendall(data[:k])
        time.sleep(0.002)
        s.sendall(data[k:])
    return send


def assert_hits(case, before, after, times):
    for route, n in case["hits"].items():
        grew = after.get(route, 0) - before.get(route, 0)
        assert grew == n * times, "%s: %s hit %d times, want %d" % (case["name"], route, grew, n * times)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_whole_and_bytewise(conf_server, case):
    port = conf_server.port
    for send in (send_whole, send_bytewise):
        before = route_hits(port)
        run_once(port, case, send)
        assert_hits(case, before, route_hits(port), 1)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_split_at_every_head_offset(conf_server, case):
    port = conf_server.port
    offsets = split_offsets(case["data"])
    before = route_hits(port)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        futures = {pool.submit(run_once, port, case, splitter(k)): k for k in offsets}
        for f in concurrent.futures.as_completed(futures):
            try:
                f.result()
            except AssertionError as e:
                raise AssertionError("split at %d: %s" % (futures[f], e)) from None
    assert_hits(case, before, route_hits(port), len(offsets))
