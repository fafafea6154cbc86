"""scope = cluster on an upstream route (issue 37 item 5, docs/CACHE.md "Proxied routes"): three
replicas of the real binary in front of one real app (Debian's uvicorn serving fastapi_app.py)
share one real redis-server (test_cluster.Redis: a unix socket in a temp dir, no persistence,
stopped by its pid). App calls are counted by the app itself (GET /calls/{name}). One loop
worker per replica, the app's answers slow enough (a few hundred ms) for every request to
arrive while the first is at the app; every wait is for a condition, bounded."""

import json
import os
import signal
import urllib.parse

import pytest

from appserver import fastapi_app  # noqa: F401 (a fixture)
from conftest import request, wait_until
from test_cluster import REDIS_BIN, fire, metric, redis, total  # noqa: F401 (redis: a fixture)

pytestmark = pytest.mark.skipif(not os.access(REDIS_BIN, os.X_OK), reason="no redis-server")

CONF = """\
[upstream app]
server = {server}
max_conns = 64
queue = 256
keepalive = 32

[route /api/*]
upstream = app
deadline_ms = 20000
ttl_ms = 30000
{rule}
"""

REPLICAS = 3


@pytest.fixture
def cluster(start_server, fastapi_app, redis, tmp_path):  # noqa: F811 (the fixtures above)
    """Factory: cluster(rule="scope = cluster\\n") -> (replicas, app): the app under uvicorn
    and three lagless replicas in front of it on one redis-server, each connected to it."""
    def _start(rule="scope = cluster\n"):
        app = fastapi_app()
        conf = tmp_path / "cluster.conf"
        conf.write_text(CONF.format(server=app.server, rule=rule))
        srvs = [start_server("--loop-workers", "1", "--compute-workers", "1", "-c", str(conf),
                             "--redis", "unix:" + redis.sock, "--redis-budget-ms", "1000",
                             "--redis-breaker-ms", "300", "--cache-jitter-pct", "0",
                             "--stuck-loop-ms", "60000", start_timeout=30)
                for _ in range(REPLICAS)]
        for s in srvs:
            assert wait_until(lambda: metric(s.port, "lagless_cluster_redis_up") == 1, 20), \
                s.log()
        return srvs, app
    return _start


def set_mode(app, name, **mode):
    st, _, _ = app.request("POST", "/mode/%s?%s" % (name, urllib.parse.urlencode(mode)))
    assert st == 200


def calls(app, name):
    return json.loads(app.request("GET", "/calls/%s" % name)[2])["n"]


def spread(srvs, path, n):
    """n GETs of path sent together, round-robin over the replicas: their Responses."""
    return fire([(srvs[i % len(srvs)].port, path) for i in range(n)])


@pytest.mark.timeout(180)
def test_twenty_cold_gets_over_three_replicas_one_app_call(cluster, redis):
    srvs, app = cluster()
    set_mode(app, "c", ms=800)
    rs = spread(srvs, "/api/cc/c?k=1", 20)
    assert [r.status for r in rs] == [200] * 20, [(r.status, r.body) for r in rs]
    assert len({r.body for r in rs}) == 1, "answers differ"
    assert json.loads(rs[0].body)["n"] == 1
    assert calls(app, "c") == 1
    labels = [r.header("x-cache") for r in rs]
    assert labels.count("miss") == 1 and set(labels) <= {"miss", "coalesced", "hit"}, labels
    # the other replicas answered from the value the leader published: a hit, with the app's
    # fields and an Age, as a local hit
    assert total(srvs, "lagless_cluster_hits_total") >= 1
    assert wait_until(lambda: total(srvs, "lagless_cluster_stores_total") == 1, 10)
    assert all(r.header("content-type") == "application/json" for r in rs)
    assert all(r.header("age") is not None for r in rs if r.header("x-cache") == "hit")
    assert redis.cmd("KEYS", "lagless:*:v") != []
    assert wait_until(lambda: redis.cmd("KEYS", "lagless:*:l") == [], 10)
    # stored on every replica: later GETs are local hits, the app not asked again
    for s in srvs:
        r = request(s.port, "GET", "/api/cc/c?k=1")
        assert r.status == 200 and r.header("x-cache") == "hit" and r.body == rs[0].body, r
    assert calls(app, "c") == 1


@pytest.mark.timeout(180)
def test_a_forged_value_is_not_served(cluster, redis):
    # a value in Redis is decided again by the replica that reads it (RFC 9111): one whose
    # fields were changed to set a cookie is refused, and the key is proxied there
    srvs, app = cluster()
    set_mode(app, "f", ms=0)
    r = request(srvs[0].port, "GET", "/api/cc/f")
    assert r.status == 200 and r.header("x-cache") == "miss", r
    # the leader's store goes after its answer
    assert wait_until(lambda: len(redis.cmd("KEYS", "lagless:*:v")) == 1, 10)
    keys = redis.cmd("KEYS", "lagless:*:v")
    value = redis.cmd("GET", keys[0])
    honest = b"content-type: application/json"
    forged = b"set-cookie: a=".ljust(len(honest), b"b")  # the same length: flen holds
    assert value.count(honest) == 1, value
    assert redis.cmd("SET", keys[0], value.replace(honest, forged), "KEEPTTL") == "OK"
    r = request(srvs[1].port, "GET", "/api/cc/f")
    assert r.status == 200 and r.header("set-cookie") is None, r
    assert json.loads(r.body)["n"] == 2 and calls(app, "f") == 2
    assert metric(srvs[1].port, "lagless_cluster_bad_values_total") == 1
    # the honest value is served as a hit
    assert redis.cmd("SET", keys[0], value, "KEEPTTL") == "OK"
    r = request(srvs[2].port, "GET", "/api/cc/f")
    assert r.status == 200 and r.header("x-cache") == "hit" and json.loads(r.body)["n"] == 1, r
    assert r.header("content-type") == "application/json"
    assert calls(app, "f") == 2


@pytest.mark.timeout(180)
def test_private_answer_is_not_shared_across_replicas(cluster, redis):
    srvs, app = cluster()
    set_mode(app, "p", ms=300, cache_control="private")
    rs = spread(srvs, "/api/cc/p", 6)
    assert [r.status for r in rs] == [200] * 6, [(r.status, r.body) for r in rs]
    # each request got an answer of its own call: none was handed to another client
    ns = sorted(json.loads(r.body)["n"] for r in rs)
    assert ns == list(range(1, 7)), ns
    assert calls(app, "p") == 6
    assert all(r.header("cache-control") == "private" for r in rs)
    assert redis.cmd("KEYS", "lagless:*:v") == []
    assert total(srvs, "lagless_cluster_stores_total") == 0
    # the lease given back leaves none behind
    assert wait_until(lambda: redis.cmd("KEYS", "lagless:*:l") == [], 10)


@pytest.mark.timeout(180)
def test_redis_stopped_is_local_single_flight(cluster, redis):
    srvs, app = cluster()
    set_mode(app, "d", ms=800)
    redis.stop()  # killed by its pid: every replica's next ask fails, and opens its breaker
    rs = spread(srvs, "/api/cc/d", 20)
    assert [r.status for r in rs] == [200] * 20, [(r.status, r.body) for r in rs]
    # each replica's own single-flight: at most one call each
    assert 1 <= calls(app, "d") <= REPLICAS, calls(app, "d")
    assert len({r.body for r in rs}) == calls(app, "d")


@pytest.mark.timeout(180)
def test_redis_not_answering_is_local_single_flight(cluster, redis):
    srvs, app = cluster()
    set_mode(app, "t", ms=300)
    os.kill(redis.proc.pid, signal.SIGSTOP)  # connected, silent: each ask is over its budget
    try:
        rs = spread(srvs, "/api/cc/t", 12)
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    assert [r.status for r in rs] == [200] * 12, [(r.status, r.body) for r in rs]
    assert 1 <= calls(app, "t") <= REPLICAS, calls(app, "t")
    assert total(srvs, "lagless_cluster_local_total") >= 1


@pytest.mark.timeout(120)
def test_a_rule_without_a_ttl_stays_local(start_server, fastapi_app, redis, tmp_path):  # noqa: F811
    # nothing is stored, so nothing would be shared: the key never asks Redis
    app = fastapi_app()
    conf = tmp_path / "nottl.conf"
    conf.write_text(CONF.format(server=app.server, rule="scope = cluster\n").replace(
        "ttl_ms = 30000\n", "coalesce = on\n"))
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "-c", str(conf),
                       "--redis", "unix:" + redis.sock, start_timeout=30)
    assert wait_until(lambda: metric(srv.port, "lagless_cluster_redis_up") == 1, 20), srv.log()
    set_mode(app, "n", ms=300)
    rs = fire([(srv.port, "/api/cc/n")] * 5)
    assert [r.status for r in rs] == [200] * 5
    assert calls(app, "n") == 1
    assert metric(srv.port, "lagless_cluster_leases_won_total") == 0
    assert redis.cmd("KEYS", "lagless:*") == []
