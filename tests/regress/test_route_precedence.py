"""Regression (hostile trial): routes matched in table order, first match winning, so a
catch-all `[route /*]` took /ping, /health and /ready into the compute pool (they answered
heavy JSON, and would get 503 with the pool full), and a GET to `/heavy/x` under a POST-only
`[route /heavy/*]` fell through to `/*` instead of 405. The rule is now nginx's: an exact
path wins, then the longest prefix, and the best match's methods decide."""
import pytest

from conftest import get, request, wait_until


@pytest.mark.timeout(60)
def test_exact_routes_beat_a_catch_all_and_the_longest_prefix_decides(start_server, tmp_path):
    conf = tmp_path / "pre.conf"
    conf.write_text("[lagless]\n[route /*]\nkind = heavy\nmethods = GET\n"
                    "[route /heavy/*]\nkind = compress\nmethods = POST\n")
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    # /ready says 503 until every process is up (slow under ASan): wait for that first
    assert wait_until(lambda: get(srv.port, "/ready").status == 200, 30)
    plain = get(srv.port, "/ping")
    assert plain.status == 200 and not plain.body.startswith(b"{"), plain
    for path in ("/health", "/ready"):
        r = get(srv.port, path + "?iterations=3")
        assert r.status == 200 and b"iterations" not in r.body, (path, r)
    # the catch-all serves what nothing more specific takes
    r = get(srv.port, "/other?iterations=3")
    assert r.status == 200 and b"iterations" in r.body, r
    # /heavy/* is the best match for /heavy/x: its methods decide (405, not the catch-all)
    r = get(srv.port, "/heavy/x?iterations=3")
    assert r.status == 405, r
    r = request(srv.port, "POST", "/heavy/x", body=b"abc" * 100)
    assert r.status == 200, r


def first_line(port, data):
    """Sends data (the server may answer and close before it has all of it) and returns the
    status line of the answer."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # answered and closed early: the answer is still readable
        got = b""
        while b"\r\n" not in got:
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return got.split(b"\r\n")[0]
    finally:
        s.close()


@pytest.mark.timeout(60)
def test_unknown_path_is_404_whatever_the_body_framing(start_server):
    """Regression (hostile trial): a chunked body over --max-discard sent to a path with no
    route got 413, while the same body with a Content-Length got 404."""
    srv = start_server("--compute-workers", "1", "--max-discard", "64K")
    cl = first_line(srv.port, b"POST /nope HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n"
                    b"\r\n" + b"a" * 70000)
    chunked = first_line(srv.port, b"POST /nope HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
                         b"chunked\r\n\r\n" + (b"400\r\n" + b"a" * 1024 + b"\r\n") * 70)
    assert cl.startswith(b"HTTP/1.1 404"), cl
    assert chunked.startswith(b"HTTP/1.1 404"), chunked
