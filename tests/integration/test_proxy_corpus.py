"""A third-party corpus through the proxy to a real backend (issue 35, "Bad input and faults"):
llhttp's strict-mode request vectors (tests/conformance/llhttp-requests.json, the corpus
test_corpus_llhttp.py replays at lagless itself) are sent to an upstream route, and what the
origin (tests/integration/origin.py, a real HTTP/1.1 server on a unix socket) received is
checked, not only what the client got back:

* nothing is smuggled: the origin never sees more requests than llhttp completed in the
  input, and where llhttp refuses the input, not more than it completed before the refusal;
* a request body streams: the head goes on before the body has come, so where the input's body
  is cut short or its chunked framing is broken, the origin sees a head and part of a body and
  then the connection's end. Such a request is never followed by another on that origin
  connection (its bytes cannot be read as a second request), and it is not counted as a
  request the origin completed;
* the target of every request the origin saw is one the input holds;
* every head the origin saw is strict HTTP/1.1 (RFC 9112): a request line of three parts, one
  Host, token names, no CR, LF or NUL inside a line, no Content-Length beside
  Transfer-Encoding, Transfer-Encoding only "chunked", and no hop-by-hop field
  (RFC 9110 section 7.6.1) but that framing."""
import re

import pytest

from conftest import get, metric, wait_until
from origin import Origin
from test_corpus_llhttp import VECTORS, exchange, with_host

TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
HOP = {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"}


@pytest.fixture
def origin(tmp_path):
    o = Origin(unix_path=str(tmp_path / "app.sock")).start()
    yield o
    o.stop()


def head_faults(head):
    """What makes a head the origin received other than strict HTTP/1.1 ([] when none)."""
    out = []
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not TOKEN.match(parts[0]) or parts[2] != b"HTTP/1.1" or not parts[1]:
        out.append("request line %r" % lines[0])
    names = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not TOKEN.match(name) or any(c in value for c in b"\r\n\0"):
            out.append("field line %r" % line)
            continue
        names.append((name.lower(), value.strip(b" \t").lower()))
    got = [n for n, _ in names]
    if got.count(b"host") != 1:
        out.append("%d Host fields" % got.count(b"host"))
    te = [v for n, v in names if n == b"transfer-encoding"]
    if te and (te != [b"chunked"] or b"content-length" in got):
        out.append("framing %r" % [(n, v) for n, v in names
                                   if n in (b"transfer-encoding", b"content-length")])
    if got.count(b"content-length") > 1:
        out.append("two Content-Length fields")
    hop = set(got) & HOP
    # An upgrade (RFC 9110 7.8) is forwarded as one: a GET with one Upgrade field and exactly
    # "Connection: upgrade" (docs/OPERATIONS.md "WebSockets and upgrades").
    if (parts[0] == b"GET" and got.count(b"upgrade") == 1 and
            [v for n, v in names if n == b"connection"] == [b"upgrade"]):
        hop -= {b"connection", b"upgrade"}
    hop = sorted(hop)
    if hop:
        out.append("hop-by-hop fields %r" % hop)
    return out


def quiet(port, origin):
    """Nothing in flight or queued to the upstream, and no origin connection still open (its
    thread may not have read a request lagless sent before the client left)."""
    return (origin.in_flight == 0 and origin.open_connections == 0 and
            metric(port, 'lagless_upstream_in_flight{upstream="app"}') == 0 and
            metric(port, 'lagless_upstream_queue_depth{upstream="app"}') == 0)


@pytest.mark.timeout(300)
def test_llhttp_request_corpus_through_the_proxy(start_server, tmp_path, origin):
    conf = tmp_path / "corpus.conf"
    # keepalive = 0: every request has an origin connection of its own, closed after it, so
    # "no origin connection open" says every byte lagless sent has been read by the origin
    conf.write_text("[upstream app]\nserver = %s\nmax_conns = 4\nqueue = 16\nkeepalive = 0\n\n"
                    "[route /*]\nupstream = app\ndeadline_ms = 5000\n" % origin.unix_server)
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "-c", str(conf))
    faults, forwarded = [], 0
    for i, v in enumerate(VECTORS):
        name = "%s: %s" % (v["file"], v["title"])
        data = with_host(v["data"].encode("latin-1"))
        before = len(origin.seen)
        exchange(srv.port, data)
        # The client half-closed: lagless may have sent a request on and closed the client's
        # connection before its answer (the client is gone, as nginx takes it). What the input
        # sent has reached the origin once lagless has nothing in flight or queued and every
        # origin connection is closed; a marker request then closes this vector's window.
        assert wait_until(lambda: quiet(srv.port, origin), 10), name
        marker = "/corpus-marker-%d" % i
        assert get(srv.port, marker).status == 404  # the origin's answer to an unknown path
        assert wait_until(lambda: any(x.target == marker for x in origin.seen[before:]), 10)
        assert wait_until(lambda: origin.open_connections == 0, 10), name
        window = origin.seen[before:]
        seen = [x for x in window if not x.target.startswith("/corpus-marker-")]
        done = [x for x in seen if x.complete]
        forwarded += len(done)
        if len(done) > v["messages"]:
            faults.append("%s: the origin completed %d requests, llhttp %d (%s)"
                          % (name, len(done), v["messages"], v["error"] or "no error"))
        for s in seen:
            if not s.complete and any(x.conn == s.conn and x is not s and x.t >= s.t
                                      for x in window):
                faults.append("%s: a request followed the cut one %r on its connection"
                              % (name, s))
            for f in head_faults(s.head):
                faults.append("%s: %s in %r" % (name, f, s.head[:300]))
            path = s.target.encode("latin-1").split(b"?")[0]
            if path not in data:
                faults.append("%s: the origin saw target %r, not in the input" % (name, s.target))
    assert not faults, "\n".join(faults[:20])
    # not vacuous: 33 of the corpus's requests reach the origin whole (the others use methods
    # an upstream route does not take, HTTP/0.9 or RTSP, or are refused as invalid)
    assert forwarded >= 30, forwarded
    assert not srv.crash_reports(), srv.crash_reports()[:5]
