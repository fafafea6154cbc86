"""Single-flight and the cache for upstream routes' GETs (issue 37, docs/CACHE.md "Proxied
routes"), against a real app: Debian's uvicorn serving fastapi_app.py, whose /cc/{name} counts
its calls and answers with the status and fields its mode says (POST /mode/{name}).

Each rule: one app call for many concurrent cold GETs; an answer that is private, sets a
cookie or varies on a field outside the key is never handed to another client, not even to
the requests that joined its flight (each goes to the app); max-age shortens the route's TTL;
a flood of distinct query strings does not push out a key in use; a failing app's answer
reaches every waiter at once; clients that reset while waiting (or the flight's owner) do not
break the flight. Every wait is for a condition, bounded; two loop workers, so that waiters on
the other loop are woken through the completion channel."""

import json
import socket
import struct
import time
import urllib.parse

import pytest

from appserver import fastapi_app  # noqa: F401 (a fixture)
from conftest import connect, metric, read_response, request, send_all_at_once, wait_until

CONF = """\
[upstream app]
server = {server}
max_conns = 64
queue = 256
keepalive = 32
first_byte_timeout_ms = {first_byte_ms}

[route /api/*]
upstream = app
deadline_ms = {deadline_ms}
{rule}
"""


@pytest.fixture
def stack(start_server, fastapi_app, tmp_path):  # noqa: F811 (the fixture above)
    """Factory: stack(rule, deadline_ms=10000, args=()) -> (server, app): the app under
    uvicorn and lagless in front of it, /api/* proxied with the coalescing keys in rule."""
    def _start(rule, deadline_ms=10000, args=()):
        app = fastapi_app()
        conf = tmp_path / "cache.conf"
        conf.write_text(CONF.format(server=app.server, deadline_ms=deadline_ms, rule=rule,
                                    first_byte_ms=20000))
        srv = start_server("--loop-workers", "2", "--compute-workers", "1", "-c", str(conf),
                           "--cache-jitter-pct", "0", *args)
        return srv, app
    return _start


def set_mode(app, name, **mode):
    q = urllib.parse.urlencode(mode)
    st, _, _ = app.request("POST", "/mode/%s?%s" % (name, q))
    assert st == 200


def calls(app, name):
    return json.loads(app.request("GET", "/calls/%s" % name)[2])["n"]


def get_req(path, headers=None):
    lines = ["GET %s HTTP/1.1" % path, "Host: t"]
    lines += ["%s: %s" % kv for kv in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def stampede(port, path, n, headers=None):
    """n identical GETs sent at once, each on its own connection: their Responses."""
    return [r for r, _ in send_all_at_once(port, [get_req(path, headers)] * n, timeout=60)]


def park_behind_owner(srv, app, name, path, owner_headers=None, n=10, joiner_headers=None):
    """The owner's GET of path is sent first and reaches the app (its call counted), then n
    more GETs of the same key on their own connections, each of which parks on its flight
    (the route hit counted before the owner's answer). Returns (owner socket, joiner sockets)."""
    base = calls(app, name)
    parked = metric(srv.port, "lagless_coalesced_waiters_total")
    owner = connect(srv.port, timeout=30)
    owner.sendall(get_req(path, owner_headers))
    assert wait_until(lambda: calls(app, name) == base + 1, 10)
    socks = []
    for _ in range(n):
        s = connect(srv.port, timeout=30)
        s.sendall(get_req(path, joiner_headers))
        socks.append(s)
    # parked, not only sent: on a loaded machine a joiner read after the owner's answer would
    # be a hit or a fresh owner, not the waiter the caller tests
    assert wait_until(lambda: metric(srv.port, "lagless_coalesced_waiters_total") >=
                      parked + n, 10), (metric(srv.port, "lagless_coalesced_waiters_total"),
                                        parked, n)
    return owner, socks


def read(sock):
    r = read_response(sock)
    sock.close()
    return r


@pytest.mark.timeout(120)
def test_hundred_cold_gets_are_one_app_call(stack):
    srv, app = stack("ttl_ms = 30000\n")
    set_mode(app, "a", ms=300)
    rs = stampede(srv.port, "/api/cc/a?x=1&y=2", 100)
    assert [r.status for r in rs] == [200] * 100
    bodies = {r.body for r in rs}
    assert len(bodies) == 1 and json.loads(bodies.pop())["n"] == 1
    assert calls(app, "a") == 1
    labels = sorted(r.header("x-cache") for r in rs)
    assert labels.count("miss") == 1 and set(labels) <= {"miss", "coalesced", "hit"}, labels
    assert all(r.header("age") is not None for r in rs if r.header("x-cache") != "miss")
    # the same key is a hit with its Age; the whole query string is the key
    r = request(srv.port, "GET", "/api/cc/a?x=1&y=2")
    assert r.header("x-cache") == "hit" and r.header("age") is not None, r
    assert json.loads(r.body)["n"] == 1
    r = request(srv.port, "GET", "/api/cc/a?y=2&x=1")
    assert r.header("x-cache") == "miss" and json.loads(r.body)["n"] == 2, r
    # HEAD shares the GET's answer (its head only); other methods are proxied as they were
    r = request(srv.port, "HEAD", "/api/cc/a?x=1&y=2")
    assert r.status == 200 and r.header("x-cache") == "hit" and r.body == b"", r
    assert calls(app, "a") == 2
    # a HEAD, a conditional or a range request never makes the key's answer: its own may be
    # a 304, a 206 or have no body
    for method, h in (("HEAD", {}), ("GET", {"If-None-Match": '"x"'}),
                      ("GET", {"Range": "bytes=0-3"})):
        r = request(srv.port, method, "/api/cc/a?new", headers=h)
        assert r.header("x-cache") == "bypass", (method, h, r)
    r = request(srv.port, "GET", "/api/cc/a?new")
    assert r.header("x-cache") == "miss", r
    assert request(srv.port, "GET", "/api/cc/a?new", headers={"Range": "bytes=0-3"}).header(
        "x-cache") == "hit"
    # another method is proxied as before, without X-Cache
    r = request(srv.port, "DELETE", "/api/cc/a?x=1&y=2")
    assert r.status == 405 and r.header("x-cache") is None, r


@pytest.mark.timeout(120)
def test_private_answer_never_reaches_another_user(stack):
    # the key does not hold X-User: the app answers alice privately and bob publicly
    srv, app = stack("ttl_ms = 30000\n")
    set_mode(app, "p", ms=400, private_for="alice")
    owner, socks = park_behind_owner(srv, app, "p", "/api/cc/p", {"X-User": "alice"}, n=10,
                                     joiner_headers={"X-User": "bob"})
    mine = read(owner)
    assert mine.status == 200 and json.loads(mine.body)["user"] == "alice"
    assert mine.header("cache-control") == "private" and mine.header("x-cache") == "miss"
    for s in socks:  # each went to the app itself, none got alice's answer
        r = read(s)
        assert r.status == 200 and json.loads(r.body)["user"] == "bob", r
        assert r.header("x-cache") == "bypass", r
    assert calls(app, "p") == 11
    # hit-for-miss: the key bypasses coalescing and the cache for a while, never alice's
    r = request(srv.port, "GET", "/api/cc/p", headers={"X-User": "bob"})
    assert json.loads(r.body)["user"] == "bob" and r.header("x-cache") == "bypass", r
    assert calls(app, "p") == 12


@pytest.mark.timeout(120)
def test_set_cookie_answer_is_not_shared(stack):
    srv, app = stack("ttl_ms = 30000\n")
    set_mode(app, "k", ms=400, set_cookie=1)
    owner, socks = park_behind_owner(srv, app, "k", "/api/cc/k", n=10)
    assert read(owner).header("set-cookie") == "sid=1"
    cookies = set()
    for s in socks:
        r = read(s)
        assert r.status == 200 and r.header("x-cache") == "bypass", r
        cookies.add(r.header("set-cookie"))
    assert "sid=1" not in cookies and len(cookies) == 10, cookies
    assert calls(app, "k") == 11
    # nothing was stored
    r = request(srv.port, "GET", "/api/cc/k")
    assert r.header("set-cookie") == "sid=12", r


@pytest.mark.timeout(120)
def test_vary_outside_the_key_is_not_shared(stack):
    srv, app = stack("ttl_ms = 30000\nkey_headers = accept\n")
    # Vary on a field the key holds: shared and stored
    set_mode(app, "v", ms=400, vary="Accept")
    rs = stampede(srv.port, "/api/cc/v?k=1", 20, {"Accept": "text/x"})
    assert {json.loads(r.body)["n"] for r in rs} == {1} and calls(app, "v") == 1
    assert all(r.header("vary") == "Accept" for r in rs)
    # the app changes its Vary to a field outside the key: no longer shared
    set_mode(app, "v", ms=400, vary="User-Agent")
    owner, socks = park_behind_owner(srv, app, "v", "/api/cc/v?k=2", n=8)
    assert read(owner).header("x-cache") == "miss"
    ns = {json.loads(read(s).body)["n"] for s in socks}
    assert len(ns) == 8 and 2 not in ns, ns
    assert calls(app, "v") == 10
    # and the first key's stored answer still holds
    r = request(srv.port, "GET", "/api/cc/v?k=1", headers={"Accept": "text/x"})
    assert r.header("x-cache") == "hit" and json.loads(r.body)["n"] == 1, r


def expiry(port, path, since, bound):
    """Seconds from since until a GET of path is a miss again (polled, bounded)."""
    end = time.monotonic() + bound
    while time.monotonic() < end:
        if request(port, "GET", path).header("x-cache") == "miss":
            return time.monotonic() - since
        time.sleep(0.05)  # polls a condition (the answer expired), bounded above
    raise AssertionError("%s still a hit after %.1f s" % (path, bound))


@pytest.mark.timeout(120)
def test_max_age_shortens_the_ttl_never_lengthens_it(stack):
    srv, app = stack("ttl_ms = 1500\n")
    # max-age=1 under a 1.5 s route TTL: 1 s; the app's Age counts
    set_mode(app, "m", cache_control="max-age=1")
    t0 = time.monotonic()
    assert request(srv.port, "GET", "/api/cc/m?a").header("x-cache") == "miss"
    assert request(srv.port, "GET", "/api/cc/m?a").header("x-cache") == "hit"
    assert 0.9 <= expiry(srv.port, "/api/cc/m?a", t0, 10) < 1.45
    # max-age=3600 does not lengthen the route's 1.5 s
    set_mode(app, "n", cache_control="public, max-age=3600")
    t0 = time.monotonic()
    assert request(srv.port, "GET", "/api/cc/n?a").header("x-cache") == "miss"
    assert request(srv.port, "GET", "/api/cc/n?a").header("x-cache") == "hit"
    assert 1.4 <= expiry(srv.port, "/api/cc/n?a", t0, 10) < 5
    # the app's Age counts: 1 s old of the route's 1.5 s leaves 0.5 s, and the Age lagless
    # sends counts from the app's
    set_mode(app, "g", cache_control="max-age=60", age="1")
    t0 = time.monotonic()
    assert request(srv.port, "GET", "/api/cc/g?a").header("x-cache") == "miss"
    r = request(srv.port, "GET", "/api/cc/g?a")
    assert r.header("x-cache") == "hit" and int(r.header("age")) >= 1, r
    assert 0.4 <= expiry(srv.port, "/api/cc/g?a", t0, 10) < 0.95
    # an Age past its freshness: not stored at all
    set_mode(app, "o", cache_control="max-age=3", age="2")
    request(srv.port, "GET", "/api/cc/o?a")
    assert request(srv.port, "GET", "/api/cc/o?a").header("x-cache") != "hit"
    # no-store and no-cache: never stored
    for cc in ("no-store", "no-cache"):
        set_mode(app, "s", cache_control=cc)
        request(srv.port, "GET", "/api/cc/s?" + cc)
        assert request(srv.port, "GET", "/api/cc/s?" + cc).header("x-cache") == "bypass"


@pytest.mark.timeout(180)
def test_query_flood_does_not_push_out_a_key_in_use(stack):
    # a small cache: 64 KiB of 2 KiB entries, 32 of them; a client sends 600 distinct query
    # strings of one path; the key other clients keep asking for stays a hit throughout (its
    # set's least recently used entry goes, never it), while an idle key is pushed out
    srv, app = stack("ttl_ms = 60000\npath_share = 0\n", args=("--cache-bytes", "64K",
                                                                "--cache-max-entry", "2K"))
    assert request(srv.port, "GET", "/api/cc/hot").header("x-cache") == "miss"
    assert request(srv.port, "GET", "/api/cc/cold").header("x-cache") == "miss"
    with connect(srv.port, timeout=30) as s:
        for i in range(600):
            s.sendall(get_req("/api/cc/flood?r=%d" % i))
            assert read_response(s).status == 200
            if i % 4 == 0:
                r = request(srv.port, "GET", "/api/cc/hot")
                assert r.header("x-cache") == "hit", (i, r)
    assert calls(app, "hot") == 1 and calls(app, "flood") == 600
    assert request(srv.port, "GET", "/api/cc/cold").header("x-cache") == "miss"


@pytest.mark.timeout(180)
def test_query_flood_holds_only_its_path_share(stack):
    # the same small cache, the route's default path_share (25): answers of four paths are
    # stored, then one client sends 600 distinct query strings of another path while nobody
    # asks for the four; they are all still hits afterwards (no new app call), the flooded
    # path holds at most its share of the entries, and the answers over it were served and
    # counted as refused, not stored
    srv, app = stack("ttl_ms = 60000\n", args=("--cache-bytes", "64K",
                                               "--cache-max-entry", "2K"))
    hot = ["/api/cc/hot%d" % i for i in range(4)]
    for path in hot:
        assert request(srv.port, "GET", path).header("x-cache") == "miss"
        assert request(srv.port, "GET", path).header("x-cache") == "hit"
    share = max(1, int(metric(srv.port, "lagless_cache_capacity_entries")) * 25 // 100)
    with connect(srv.port, timeout=30) as s:
        for i in range(600):
            s.sendall(get_req("/api/cc/flood?r=%d" % i))
            r = read_response(s)
            assert r.status == 200 and r.header("x-cache") == "miss", (i, r)
    assert calls(app, "flood") == 600
    for i, path in enumerate(hot):
        assert request(srv.port, "GET", path).header("x-cache") == "hit", path
        assert calls(app, "hot%d" % i) == 1
    assert metric(srv.port, "lagless_cache_refused_total") >= 600 - share
    # every stored answer is a hot key's or the flood's; the master's sweep counts the entries
    assert wait_until(lambda: metric(srv.port, "lagless_cache_entries") > len(hot), 10)
    assert metric(srv.port, "lagless_cache_entries") <= len(hot) + share


@pytest.mark.timeout(120)
def test_failing_app_tells_every_waiter_at_once(stack):
    srv, app = stack("ttl_ms = 30000\n")
    set_mode(app, "f", ms=500, status=500)
    t0 = time.monotonic()
    out = send_all_at_once(srv.port, [get_req("/api/cc/f")] * 50, timeout=60)
    assert {r.status for r, _ in out} == {500}
    assert {json.loads(r.body)["n"] for r, _ in out} == {1} and calls(app, "f") == 1
    ends = [t for _, t in out]
    assert max(ends) - min(ends) < 0.4, (min(ends) - t0, max(ends) - t0)
    # a 500 is never stored
    assert request(srv.port, "GET", "/api/cc/f").header("x-cache") == "miss"
    assert calls(app, "f") == 2


@pytest.mark.timeout(120)
def test_app_that_never_answers_every_waiter_told_at_once(start_server, tmp_path):
    # an app that takes connections and never answers: the owner's first-byte timeout is a
    # 504 for the owner and every waiter of its flight at the same moment
    app = socket.socket()
    app.bind(("127.0.0.1", 0))
    app.listen(128)
    try:
        conf = tmp_path / "mute.conf"
        conf.write_text(CONF.format(server="127.0.0.1:%d" % app.getsockname()[1],
                                    deadline_ms=20000, rule="ttl_ms = 30000\n",
                                    first_byte_ms=1500))
        srv = start_server("--loop-workers", "2", "--compute-workers", "1", "-c", str(conf))
        out = send_all_at_once(srv.port, [get_req("/api/cc/x")] * 30, timeout=60)
        assert {r.status for r, _ in out} == {504}, {r.status for r, _ in out}
        labels = [r.header("x-cache") for r, _ in out]
        assert labels.count("coalesced") >= 20 and labels.count("miss") == 1, labels
        assert set(labels) == {"miss", "coalesced"}, labels
        ends = [t for _, t in out]
        assert max(ends) - min(ends) < 0.4, max(ends) - min(ends)
    finally:
        app.close()


def reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.timeout(120)
def test_waiters_and_owner_that_reset_do_not_break_the_flight(stack):
    srv, app = stack("ttl_ms = 30000\n")
    set_mode(app, "r", ms=600)
    owner, socks = park_behind_owner(srv, app, "r", "/api/cc/r", n=12)
    for s in socks[:6]:  # half the waiters leave, and the owner's client with them
        reset(s)
    reset(owner)
    for s in socks[6:]:
        r = read(s)
        assert r.status == 200 and json.loads(r.body)["n"] == 1, r
        assert r.header("x-cache") == "coalesced", r
    assert calls(app, "r") == 1
    # the owner's answer was read to its end and stored
    r = request(srv.port, "GET", "/api/cc/r")
    assert r.header("x-cache") == "hit" and json.loads(r.body)["n"] == 1, r
    assert srv.running()


@pytest.mark.timeout(120)
def test_credentials_bypass_and_key(stack):
    srv, app = stack("ttl_ms = 30000\n")
    # credentials = bypass (the default): a request with a Cookie goes alone, nothing stored
    for _ in range(2):
        r = request(srv.port, "GET", "/api/cc/c", headers={"Cookie": "u=1"})
        assert r.header("x-cache") == "bypass", r
    assert calls(app, "c") == 2
    assert request(srv.port, "GET", "/api/cc/c").header("x-cache") == "miss"


@pytest.mark.timeout(120)
def test_credentials_in_key_share_only_public_answers(stack):
    srv, app = stack("ttl_ms = 30000\ncredentials = key\n")
    # RFC 9111 3.5: an answer to a request with credentials is shared only when it says so
    set_mode(app, "d", ms=400)
    owner, socks = park_behind_owner(srv, app, "d", "/api/cc/d", {"Cookie": "u=1"}, n=5,
                                     joiner_headers={"Cookie": "u=1"})
    assert read(owner).header("x-cache") == "miss"
    assert {read(s).header("x-cache") for s in socks} == {"bypass"}
    assert calls(app, "d") == 6
    set_mode(app, "e", ms=400, cache_control="public")
    owner, socks = park_behind_owner(srv, app, "e", "/api/cc/e", {"Cookie": "u=1"}, n=5,
                                     joiner_headers={"Cookie": "u=1"})
    assert read(owner).header("x-cache") == "miss"
    assert {read(s).header("x-cache") for s in socks} == {"coalesced"}
    assert calls(app, "e") == 1
    # stored for that cookie only
    assert request(srv.port, "GET", "/api/cc/e", headers={"Cookie": "u=1"}).header(
        "x-cache") == "hit"
    r = request(srv.port, "GET", "/api/cc/e", headers={"Cookie": "u=2"})
    assert r.header("x-cache") == "miss" and json.loads(r.body)["n"] == 2, r


@pytest.mark.timeout(120)
def test_answer_over_the_entry_limit_is_not_coalesced(stack):
    # an answer larger than --cache-max-entry goes to its owner only; each waiter goes to the
    # app itself, and gets the whole answer
    srv, app = stack("ttl_ms = 30000\n", args=("--cache-max-entry", "8K"))
    set_mode(app, "big", ms=400, pad=20000)
    owner, socks = park_behind_owner(srv, app, "big", "/api/cc/big", n=5)
    r = read(owner)
    assert r.header("x-cache") == "miss" and len(json.loads(r.body)["pad"]) == 20000
    for s in socks:
        r = read(s)
        assert r.header("x-cache") == "bypass" and len(json.loads(r.body)["pad"]) == 20000, r
    assert calls(app, "big") == 6
    assert request(srv.port, "GET", "/api/cc/big").header("x-cache") == "miss"
    # under the limit: one call
    set_mode(app, "small", ms=400, pad=4000)
    rs = stampede(srv.port, "/api/cc/small", 10)
    assert {len(json.loads(r.body)["pad"]) for r in rs} == {4000} and calls(app, "small") == 1


@pytest.mark.timeout(120)
def test_stale_while_revalidate_one_refresh(stack):
    # RFC 5861 3: past ttl_ms, within stale_ms, the old answer at once and one refresh
    srv, app = stack("ttl_ms = 300\nstale_ms = 30000\n")
    set_mode(app, "w", ms=300)
    assert request(srv.port, "GET", "/api/cc/w").header("x-cache") == "miss"
    assert wait_until(
        lambda: request(srv.port, "GET", "/api/cc/w").header("x-cache") == "stale", 5)
    # concurrent stale requests while the refresh runs: each answered from the cache (none
    # waits for the app's 300 ms: no coalesced, no new value), one refresh in all
    rs = stampede(srv.port, "/api/cc/w", 20)
    assert {r.header("x-cache") for r in rs} <= {"stale", "hit"}, rs
    assert {json.loads(r.body)["n"] for r in rs} == {1}
    # the refresh's answer replaces the stale one
    assert wait_until(lambda: request(srv.port, "GET", "/api/cc/w").header("x-cache") == "hit",
                      5)
    assert json.loads(request(srv.port, "GET", "/api/cc/w").body)["n"] == 2
    assert calls(app, "w") == 2


@pytest.mark.timeout(120)
def test_stale_if_error_serves_the_good_answer_and_backs_off(stack):
    # RFC 5861 4: the app fails during a refresh: the stale answer goes on being served, never
    # the failure, and the refreshes back off (1 s, then 2 s ...), one at a time
    srv, app = stack("ttl_ms = 200\nstale_ms = 60000\n")
    assert request(srv.port, "GET", "/api/cc/e").header("x-cache") == "miss"
    set_mode(app, "e", status=500)
    end = time.monotonic() + 2.5
    n = 0
    while time.monotonic() < end:
        r = request(srv.port, "GET", "/api/cc/e")
        assert r.status == 200 and json.loads(r.body)["n"] == 1, r
        n += 1
    assert n > 20
    assert 2 <= calls(app, "e") <= 4, calls(app, "e")  # the first, then at most 3 refreshes
    # the app heals: the next refresh replaces the stale answer
    set_mode(app, "e")
    assert wait_until(
        lambda: json.loads(request(srv.port, "GET", "/api/cc/e").body)["n"] > 1, 10)


@pytest.mark.timeout(120)
def test_must_revalidate_is_never_served_stale(stack):
    srv, app = stack("ttl_ms = 300\nstale_ms = 30000\n")
    set_mode(app, "mr", cache_control="must-revalidate")
    assert request(srv.port, "GET", "/api/cc/mr").header("x-cache") == "miss"
    assert request(srv.port, "GET", "/api/cc/mr").header("x-cache") == "hit"
    assert wait_until(
        lambda: request(srv.port, "GET", "/api/cc/mr").header("x-cache") == "miss", 5)
