"""Requests with a body on a coalescing route (docs/CACHE.md, "Requests with a body"): the key
holds the method, the body's Content-Type and Content-Encoding and a hash of its bytes, over
real HTTP against the real binary. /echo is test-sleep with ?echo=1: the answer repeats the
body and the Content-Type the kind saw, so a shared answer shows which request it came from.
Key equality is tested through the TTL cache (a repeat is a hit exactly when its key is equal),
which needs no timing; coalescing itself through a burst against a job long enough to join."""


import pytest

from conftest import connect, metric, read_response, request, send_all_at_once

ECHO = """
[route /echo]
kind = test-sleep
methods = POST, PUT
fields = content-type
"""


def jobs(port):
    return metric(port, 'lagless_job_run_seconds_count{kind="test-sleep"}')


def echo_server(start_server, tmp_path, rule, *args):
    conf = tmp_path / "echo.conf"
    conf.write_text(ECHO)
    return start_server("-c", str(conf), "--enable-test-jobs", "1", "--cache-jitter-pct", "0",
                        "--coalesce", rule, *args)


def post(port, body, ctype="application/octet-stream", path="/echo?ms=1&echo=1",
         method="POST", timeout=30.0):
    return request(port, method, path, body=body, headers={"Content-Type": ctype},
                   timeout=timeout)


def post_chunked(port, pieces, ctype="application/octet-stream", path="/echo?ms=1&echo=1"):
    s = connect(port, timeout=30)
    head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
            "Transfer-Encoding: chunked\r\n\r\n" % (path, ctype)).encode()
    s.sendall(head + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n")
    r = read_response(s)
    s.close()
    return r


def echoed(r, ctype, body):
    return r.status == 200 and r.body.endswith(b"content-type=%s\n%s" % (ctype.encode(), body))


@pytest.mark.timeout(60)
def test_equal_bodies_one_job_different_bodies_own_jobs(start_server, tmp_path):
    srv = echo_server(start_server, tmp_path, "/echo ttl=60000")
    a = post(srv.port, b'{"image": 1}', "application/json")
    assert echoed(a, "application/json", b'{"image": 1}') and a.header("X-Cache") == "miss", a
    b = post(srv.port, b'{"image": 1}', "application/json")
    assert b.header("X-Cache") == "hit" and b.body == a.body, b
    # one byte different: its own key, its own answer
    c = post(srv.port, b'{"image": 2}', "application/json")
    assert echoed(c, "application/json", b'{"image": 2}') and c.header("X-Cache") == "miss", c
    # the same bytes as another Content-Type mean something else to the kind: not shared
    d = post(srv.port, b'{"image": 1}', "text/plain")
    assert echoed(d, "text/plain", b'{"image": 1}') and d.header("X-Cache") == "miss", d
    # nor under another method, nor with another Content-Encoding
    e = post(srv.port, b'{"image": 1}', "application/json", method="PUT")
    assert e.status == 200 and e.header("X-Cache") == "miss", e
    f = request(srv.port, "POST", "/echo?ms=1&echo=1", body=b'{"image": 1}',
                headers={"Content-Type": "application/json", "Content-Encoding": "identity"})
    assert f.status == 200 and f.header("X-Cache") == "miss", f
    # an empty body and no body are the same empty input
    g = post(srv.port, b"")
    assert g.status == 200 and g.header("X-Cache") == "miss", g
    assert post(srv.port, b"").header("X-Cache") == "hit"
    assert jobs(srv.port) == 6
    assert metric(srv.port, "lagless_cache_hits_total") == 2


@pytest.mark.timeout(60)
def test_chunked_body_shares_with_the_same_bytes_sent_with_a_length(start_server, tmp_path):
    srv = echo_server(start_server, tmp_path, "/echo ttl=60000")
    body = bytes(range(256)) * 40  # 10 KiB
    a = post(srv.port, body)
    assert echoed(a, "application/octet-stream", body) and a.header("X-Cache") == "miss", a
    r = post_chunked(srv.port, [body[:1000], body[1000:5000], body[5000:]])
    assert r.status == 200 and r.header("X-Cache") == "hit" and r.body == a.body, r
    # chunked first this time, with other bytes: a miss, then a hit for the same bytes
    other = body[::-1]
    r = post_chunked(srv.port, [other[:7], other[7:]])
    assert echoed(r, "application/octet-stream", other) and r.header("X-Cache") == "miss", r
    assert post(srv.port, other).header("X-Cache") == "hit"
    assert jobs(srv.port) == 2


@pytest.mark.timeout(90)
def test_body_up_to_body_max_is_keyed_longer_runs_alone(start_server, tmp_path):
    limit = 1 << 20  # the default body-max
    srv = echo_server(start_server, tmp_path, "/echo ttl=60000")
    path = "/echo?ms=1"  # no echo: a short answer, whatever the body
    big = bytes((i * 7) & 0xff for i in range(limit))
    a = post(srv.port, big, path=path)
    assert a.status == 200 and a.header("X-Cache") == "miss", a
    assert post(srv.port, big, path=path).header("X-Cache") == "hit"
    # the last byte is part of the key
    tail = big[:-1] + bytes([big[-1] ^ 1])
    assert post(srv.port, tail, path=path).header("X-Cache") == "miss"
    # one byte over body-max: not hashed, its own job every time, never cached
    over = big + b"x"
    for _ in range(2):
        r = post(srv.port, over, path=path)
        assert r.status == 200 and r.header("X-Cache") == "bypass", r
    assert metric(srv.port, "lagless_coalesce_body_too_large_total") == 2
    assert jobs(srv.port) == 4
    # a rule's own bound
    srv2 = echo_server(start_server, tmp_path, "/echo ttl=60000 body-max=4K")
    assert post(srv2.port, b"y" * 4096, path=path).header("X-Cache") == "miss"
    assert post(srv2.port, b"y" * 4096, path=path).header("X-Cache") == "hit"
    assert post(srv2.port, b"y" * 4097, path=path).header("X-Cache") == "bypass"


def burst_posts(port, bodies, path, timeout=60.0):
    """Every POST at once, each on its own connection (all connected first): (Response, end)."""
    return send_all_at_once(port, [("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                    "application/json\r\nContent-Length: %d\r\n\r\n"
                                    % (path, len(b))).encode() + b for b in bodies], timeout)


@pytest.mark.timeout(90)
def test_concurrent_equal_bodies_coalesce_into_one_job(start_server, tmp_path):
    # 2 bodies x 8 requests at once: 2 jobs, each body's 8 answers its own. Without a TTL a
    # request that came after its job ended would start another one, so the job is long (2 s)
    # next to the time 16 requests take to arrive, even on a loaded machine.
    srv = echo_server(start_server, tmp_path, "/echo", "--compute-workers", "1", "--queue", "4",
                      "--transit-buffers", "32")
    bodies = [b'{"n": %d}' % (i % 2) for i in range(16)]
    got = burst_posts(srv.port, bodies, "/echo?ms=2000&echo=1")
    for (r, _), body in zip(got, bodies):
        assert echoed(r, "application/json", body), r
    labels = sorted(r.header("X-Cache") for r, _ in got)
    assert labels.count("miss") == 2 and labels.count("coalesced") == 14, labels
    assert jobs(srv.port) == 2
    # the waiters' transit buffers were all given back
    health = request(srv.port, "GET", "/health").json()
    assert health["transit_buffers"]["free"] == health["transit_buffers"]["total"], health
