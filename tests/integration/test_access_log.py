"""The access log operators expect: client address (from a trusted proxy, the address it
forwarded), the query, the user agent and a request id (the client's X-Request-Id or a
generated one, echoed with --request-id), in text or JSON lines."""
import json
import re

import pytest

from conftest import connect, read_response, request, wait_until


def access_lines(srv):
    return [line for line in srv.log().splitlines() if " access: " in line]


def json_lines(srv):
    out = []
    for line in srv.log().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


@pytest.mark.timeout(60)
def test_text_line_has_client_query_agent_and_id(start_server):
    srv = start_server("--access-log", "--request-id", "--compute-workers", "1")
    r = request(srv.port, "GET", "/heavy?iterations=5&tag=%22q%22",
                headers={"User-Agent": 'probe "1"', "X-Request-Id": "req-42.a"})
    assert r.status == 200 and r.header("X-Request-Id") == "req-42.a", r
    r2 = request(srv.port, "GET", "/ping", headers={"X-Request-Id": "bad id!"})
    gen = r2.header("X-Request-Id")
    assert gen and re.fullmatch(r"[0-9a-f]{24}", gen), r2  # refused: one is generated
    # (the harness's own /ping calls of the start-up are logged too)
    # Each loop writes its line after its response is sent, so the two loops' lines may land
    # in either order: each is picked by what it is.
    heavies = lambda: [ln for ln in access_lines(srv) if "/heavy" in ln]
    pings = lambda: [ln for ln in access_lines(srv) if "/ping" in ln and "id=%s" % gen in ln]
    assert wait_until(lambda: len(heavies()) == 1 and len(pings()) == 1, 5), srv.log()
    (heavy,), (ping,) = heavies(), pings()
    assert 'GET /heavy status=200' in heavy, heavy
    assert 'query="iterations=5&tag=%22q%22"' in heavy, heavy
    assert 'client=127.0.0.1 ' in heavy and 'ua="probe \\"1\\""' in heavy, heavy
    assert heavy.endswith(" id=req-42.a"), heavy
    assert ping.endswith(" id=%s" % gen), ping


@pytest.mark.timeout(60)
def test_pipelined_requests_get_ids_of_their_own(start_server):
    """Requests parsed in one callback begin at the same clock reading: each still gets its
    own generated id, in the header and in the log (a hostile trial found the first two of a
    pipelined batch sharing one)."""
    srv = start_server("--access-log", "--request-id", "--loop-workers", "1",
                       "--compute-workers", "1")
    s = connect(srv.port)
    try:
        s.sendall(b"GET /ping?pipe=1 HTTP/1.1\r\nHost: a\r\n\r\n" * 5 +
                  b"GET /heavy?iterations=5&pipe=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        ids = [read_response(s).header("X-Request-Id") for _ in range(6)]
    finally:
        s.close()
    assert all(i and re.fullmatch(r"[0-9a-f]{24}", i) for i in ids), ids
    assert len(set(ids)) == 6, ids
    mine = lambda: [ln for ln in access_lines(srv) if "pipe=1" in ln]
    assert wait_until(lambda: len(mine()) == 6, 5), srv.log()
    assert sorted(ln.rsplit(" id=", 1)[1] for ln in mine()) == sorted(ids), mine()


@pytest.mark.timeout(60)
def test_json_lines_and_trusted_forwarded_for(start_server):
    srv = start_server("--access-log", "--access-log-json", "--trusted-proxies", "127.0.0.0/8",
                       "--compute-workers", "1")
    r = request(srv.port, "GET", "/ping?a=1",
                headers={"X-Forwarded-For": "203.0.113.9, 10.1.1.1, 127.0.0.5",
                         "User-Agent": "agent\u00e9"})
    assert r.status == 200 and r.header("X-Request-Id") is None  # no echo without the switch
    mine = lambda: [d for d in json_lines(srv) if d["query"] == "a=1"]
    assert wait_until(mine, 5), srv.log()
    (doc,) = mine()
    # 127.0.0.5 is trusted; 10.1.1.1 is not, so it is the client (rightmost untrusted)
    assert doc["client"] == "10.1.1.1", doc
    assert doc["method"] == "GET" and doc["path"] == "/ping" and doc["query"] == "a=1", doc
    assert doc["status"] == 200 and doc["bytes"] == 2 and doc["ua"] == "agent\u00e9", doc
    assert re.fullmatch(r"[0-9a-f]{24}", doc["request_id"]) and doc["pid"] > 0, doc
    assert doc["time"].endswith("Z") and doc["time_ms"] >= 0, doc


@pytest.mark.timeout(60)
def test_forwarded_for_ignored_from_an_untrusted_peer(start_server):
    srv = start_server("--access-log", "--trusted-proxies", "10.0.0.0/8",
                       "--compute-workers", "1")
    request(srv.port, "GET", "/ping?x=1", headers={"X-Forwarded-For": "203.0.113.9"})
    mine = lambda: [ln for ln in access_lines(srv) if 'query="x=1"' in ln]
    assert wait_until(mine, 5), srv.log()
    assert " client=127.0.0.1 " in mine()[0], mine()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", ["10.0.0.0/33", "not-an-address", "::1/129"])
def test_bad_trusted_proxies_fail_the_check(value):
    import subprocess
    from conftest import LAGLESS_BIN
    r = subprocess.run([LAGLESS_BIN, "-t", "--trusted-proxies", value], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1 and "--trusted-proxies" in r.stderr, r.stderr


def raw_request(srv, target, headers):
    """One GET with the given target and header bytes, sent as they are; its response."""
    s = connect(srv.port)
    try:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n" +
                  b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n")
        return read_response(s)
    finally:
        s.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("json_lines_on", [True, False])
def test_a_long_query_or_agent_is_cut_and_the_line_stays_whole(start_server, json_lines_on):
    """A query or User-Agent longer than the log keeps is cut with "...": the line still ends
    with its id (and, in JSON, its closing brace). A hostile trial found a 2,500-byte query, or
    400 bytes of 0xff in the User-Agent, cutting the JSON line at 2,046 bytes (no brace, no
    request_id: not JSON) and the text line at 1,022 (no client, ua or id)."""
    srv = start_server("--access-log", "--request-id", "--compute-workers", "1",
                       *(["--access-log-json"] if json_lines_on else []))
    cases = ((b"/ping?cut=1&q=" + b"x" * 2500, b"probe", "cutq"),
             (b"/ping?cut=2", b"\xff" * 400, "cutua"),
             (b"/ping?cut=3&" + b"y" * 900, b"z" * 900, "cutboth"),
             # exactly at the limits: whole, nothing cut (a later trial found the last three
             # bytes of a value that fits replaced by "...")
             (b"/ping?cut=4&" + b"w" * (1024 - 6), b"v" * 512, "fits"))
    for target, ua, rid in cases:
        r = raw_request(srv, target, ((b"User-Agent", ua), (b"X-Request-Id", rid.encode())))
        assert r.status == 200 and r.header("X-Request-Id") == rid, r
    if json_lines_on:
        mine = lambda: {d["request_id"]: d for d in json_lines(srv) if "cut=" in d["query"]}
    else:
        mine = lambda: {ln.rsplit(" id=", 1)[1]: ln for ln in access_lines(srv)
                        if "cut=" in ln}
    assert wait_until(lambda: len(mine()) == 4, 5), srv.log()
    got = mine()
    if json_lines_on:
        q = got["cutq"]["query"]
        assert q.startswith("cut=1&q=xxx") and q.endswith("...") and len(q) == 1024, len(q)
        assert got["cutq"]["ua"] == "probe", got["cutq"]
        ua = got["cutua"]["ua"]  # each 0xff is \u00ff: 6 logged bytes of the 512 kept
        assert ua == "\u00ff" * 84 + "...", ua
        assert got["cutboth"]["query"] == "cut=3&" + "y" * 900
        assert got["cutboth"]["ua"] == "z" * 509 + "...", got["cutboth"]
        assert got["fits"]["query"] == "cut=4&" + "w" * 1018, got["fits"]
        assert got["fits"]["ua"] == "v" * 512, got["fits"]
    else:
        line = got["cutq"]
        assert 'query="cut=1&q=xxx' in line and 'x..." client=127.0.0.1 ua="probe"' in line, line
        assert 'ua="' + "\\u00ff" * 84 + '..."' in got["cutua"], got["cutua"]
        assert 'query="cut=4&' + "w" * 1018 + '" ' in got["fits"], got["fits"]
        assert 'ua="' + "v" * 512 + '" ' in got["fits"], got["fits"]


@pytest.mark.timeout(60)
def test_utf8_is_logged_as_its_characters(start_server):
    """Well-formed UTF-8 in a logged field is its code points in the JSON line ("é" was two
    escapes of its bytes, read back as "Ã©"); a byte that is not UTF-8 is its Latin-1
    character, as before."""
    srv = start_server("--access-log", "--access-log-json", "--compute-workers", "1")
    r = raw_request(srv, b"/ping?utf=1", ((b"User-Agent", "caf\u00e9 \u20ac \U0001f600".encode()
                                           + b" \xe9"),))
    assert r.status == 200, r
    mine = lambda: [d for d in json_lines(srv) if d["query"] == "utf=1"]
    assert wait_until(mine, 5), srv.log()
    assert mine()[0]["ua"] == "caf\u00e9 \u20ac \U0001f600 \u00e9", mine()
    line = [ln for ln in srv.log().splitlines() if '"utf=1"' in ln][0]
    assert line.isascii() and "\\u20ac" in line and "\\ud83d\\ude00" in line, line


@pytest.mark.timeout(30)
def test_json_form_without_the_log_is_warned_of():
    """--access-log-json alone writes nothing (it picks the form of --access-log's lines): -t
    says so instead of passing in silence (found by a hostile trial)."""
    import subprocess
    from conftest import LAGLESS_BIN
    r = subprocess.run([LAGLESS_BIN, "-t", "--access-log-json"], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0 and "access_log is off: no access lines" in r.stderr, r.stderr
    r = subprocess.run([LAGLESS_BIN, "-t", "--access-log-json", "--access-log"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and "access_log is off" not in r.stderr, r.stderr
