"""Regression (hostile trial, issue "[reliability]" 1): routes were matched on the raw path, so
`[route /p/exact]` with `methods = POST` beside `[route /p/*]` answered `GET /p/exact` 405 but
let `GET /p/%65xact`, `/p/../p/exact` and `/p//exact` reach the prefix route (200), and the kind
saw the raw path: an exact route's methods (or `off = yes`, `deadline_ms`, `max_body`) were
bypassed by percent-encoding an unreserved character or adding a dot segment. The path is now
normalized once (RFC 3986 section 6.2.2, http/path.c) before routing, and the kind, the cache
key and the access log see that form; what has no normal form is a 400."""
import os
import socket

import pytest

from conftest import get, read_response, request, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")
pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(MODS, "faults.so")),
                                reason="test modules not built (make integration builds them)")

CONF = """
[module faults]
path = {path}
level = 1

[route /p/exact]
methods = POST
kind = faults.echo

[route /p/*]
methods = GET, POST
kind = faults.echo
"""


def server(start_server, tmp_path, *args):
    conf = tmp_path / "paths.conf"
    conf.write_text(CONF.format(path=os.path.join(MODS, "faults.so")))
    srv = start_server("-c", str(conf), "--compute-workers", "1", *args)
    assert wait_until(lambda: get(srv.port, "/ready").status == 200, 30)
    return srv


def status_and_close(port, target, closes=False):
    """The status of GET target on a raw connection; with closes, also whether the server then
    closed it (a keep-alive connection stays open: that is not waited for)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
        r = read_response(s)
        if not closes:
            return r.status, None
        try:
            closed = s.recv(1) == b""
        except ConnectionResetError:
            closed = True
        return r.status, closed
    finally:
        s.close()


@pytest.mark.timeout(90)
def test_other_spellings_of_an_exact_route_take_that_route(start_server, tmp_path):
    srv = server(start_server, tmp_path)
    for target in (b"/p/exact", b"/p/%65xact", b"/p/%65%78%61%63%74", b"/p/./exact",
                   b"/p//exact", b"/p/x/../exact", b"/p/%2e%2e/p/exact", b"//p///exact",
                   b"/p/exact/."):
        st, _ = status_and_close(srv.port, target)
        want = 405 if not target.endswith(b"/.") else 200  # "/p/exact/" is another path
        assert st == want, (target, st)
    # the exact route takes what it allows, and its kind sees the normalized path
    r = request(srv.port, "POST", "/p/%65xact?q=%41", body=b"abc")
    assert r.status == 200 and r.body.startswith(b"POST /p/exact ?q=%41 body=3"), r
    # the prefix route's kind sees the normal form too (the query is not touched)
    r = get(srv.port, "/p/a/./b/../%63%2a?x=%2e%2e")
    assert r.status == 200 and r.body.startswith(b"GET /p/a/c%2A ?x=%2e%2e"), r
    # leaving the prefix by dot segments leaves its route
    assert get(srv.port, "/p/../v").status == 404


@pytest.mark.timeout(90)
def test_paths_without_a_normal_form_are_400_and_close(start_server, tmp_path):
    srv = server(start_server, tmp_path)
    for target in (b"/p/a%2Fb", b"/p/a%2fb", b"/p/a%00b", b"/p/../../x", b"/../p/x",
                   b"/p/%2e%2e/%2e%2e/x"):
        st, closed = status_and_close(srv.port, target, closes=True)
        assert (st, closed) == (400, True), target
    assert get(srv.port, "/p/fine").status == 200  # the server is unharmed


@pytest.mark.timeout(90)
def test_merge_slashes_off_keeps_empty_segments(start_server, tmp_path):
    srv = server(start_server, tmp_path, "--merge-slashes=no")
    r = get(srv.port, "/p//exact")
    assert r.status == 200 and r.body.startswith(b"GET /p//exact "), r  # not /p/exact
    assert status_and_close(srv.port, b"/p/%65xact")[0] == 405  # the rest still applies


@pytest.mark.timeout(90)
def test_the_cache_key_takes_the_normalized_path(start_server):
    srv = start_server("--compute-workers", "1", "--coalesce", "/heavy ttl=60000 query=iterations")
    first = get(srv.port, "/heavy?iterations=1000")
    assert first.status == 200 and first.header("X-Cache") == "miss", first
    for target in ("/%68eavy?iterations=1000", "//heavy?iterations=1000",
                   "/x/../heavy?iterations=1000"):
        r = get(srv.port, target)
        assert r.status == 200 and r.header("X-Cache") == "hit", (target, r)
        assert r.body == first.body
