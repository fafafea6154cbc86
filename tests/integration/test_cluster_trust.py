"""What a shared Redis may not do to a replica (issue 33 section 2; docs/CACHE.md "What comes
from Redis is checked"): hand one version's answers to another, serve a value changed in Redis,
park a follower behind a lease without an expiry, take every cluster key off for one foreign
key, or let a replica that has just started run its own jobs. The real redis-server of
test_cluster.py; values are changed with plain commands, as another client would."""

import os
import re
import signal
import struct
import subprocess
import time

import pytest

from conftest import LAGLESS_BIN, free_port, get, wait_until
from haproxy_rig import agent_line
from test_cluster import REDIS_BIN, RULE, Redis, fire, jobs, metric, replica, total

pytestmark = pytest.mark.skipif(not os.access(REDIS_BIN, os.X_OK), reason="no redis-server")

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


@pytest.fixture
def redis():
    r = Redis()
    yield r
    r.close()


# --- a minimal msgpack codec for the value's fields (array, uint, str, bin) ---

def _unpack(b, i):
    t = b[i]
    if t <= 0x7f:
        return t, i + 1
    if 0x90 <= t <= 0x9f:
        out, i = [], i + 1
        for _ in range(t & 0x0f):
            v, i = _unpack(b, i)
            out.append(v)
        return out, i
    if 0xa0 <= t <= 0xbf:
        n = t & 0x1f
        return ("s", b[i + 1:i + 1 + n]), i + 1 + n
    sizes = {0xcc: "B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q"}
    if t in sizes:
        n = struct.calcsize(sizes[t])
        return struct.unpack(sizes[t], b[i + 1:i + 1 + n])[0], i + 1 + n
    lens = {0xc4: ("b", "B"), 0xc5: ("b", ">H"), 0xc6: ("b", ">I"),
            0xd9: ("s", "B"), 0xda: ("s", ">H"), 0xdb: ("s", ">I")}
    kind, f = lens[t]
    h = struct.calcsize(f)
    n = struct.unpack(f, b[i + 1:i + 1 + h])[0]
    return (kind, b[i + 1 + h:i + 1 + h + n]), i + 1 + h + n


def unpack(b):
    v, i = _unpack(b, 0)
    assert i == len(b)
    return v


def pack(v):
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(pack(x) for x in v)
    if isinstance(v, int):
        return b"\xcf" + struct.pack(">Q", v)
    kind, data = v
    return (b"\xdb" if kind == "s" else b"\xc6") + struct.pack(">I", len(data)) + data


def value_key(redis):
    keys = redis.cmd("KEYS", "lagless:*:v")
    assert len(keys) == 1, keys
    return keys[0]


# --- rollouts: the cluster key holds what made the answer ---

def origin_conf(tmp_path, name, so):
    conf = tmp_path / ("%s.conf" % name)
    conf.write_text("[module origin]\npath = %s\n\n[route /fetch]\nkind = origin.fetch\n"
                    "methods = GET\nttl_ms = 60000\nkey_query =\nscope = cluster\n" % so)
    return conf


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "origin.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(180)
def test_rollout_versions_never_share(start_server, redis, tmp_path):
    # v1 answers "fetched at ...", v2 (the same module, other bytes) "FETCHED AT ..."
    data = open(os.path.join(MODS, "origin.so"), "rb").read()
    assert data.count(b"fetched at") == 1
    v1, v2 = tmp_path / "v1.so", tmp_path / "v2.so"
    v1.write_bytes(data)
    v2.write_bytes(data.replace(b"fetched at", b"FETCHED AT"))
    a = replica(start_server, redis, "-c", str(origin_conf(tmp_path, "a", v1)))
    b = replica(start_server, redis, "-c", str(origin_conf(tmp_path, "b", v2)))
    ra = get(a.port, "/fetch", timeout=30)
    assert ra.status == 200 and ra.body.startswith(b"fetched at"), ra.body
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 1, 10)
    # a rolling upgrade: v2 never serves v1's answer (it once did, as a hit)
    rb = get(b.port, "/fetch", timeout=30)
    assert rb.status == 200 and rb.header("X-Cache") == "miss", (rb.header("X-Cache"), rb.body)
    assert rb.body.startswith(b"FETCHED AT"), rb.body
    assert wait_until(lambda: metric(b.port, "lagless_cluster_stores_total") == 1, 10)
    # a reload that loads v2 on a: its new generation reads v2's answer, never v1's (which is
    # still in Redis for 60 s)
    v1.write_bytes(v2.read_bytes())
    os.kill(a.pid, signal.SIGHUP)
    assert wait_until(lambda: "generation 1 retired" in a.log(), 30), a.log()[-2000:]
    r2 = get(a.port, "/fetch", timeout=30)
    assert r2.status == 200 and r2.body == rb.body, (r2.body, rb.body)
    assert r2.header("X-Cache") == "hit"


# --- values are checked like a module's answer ---

TAMPER = [
    # (what, the change to the fields [version, key, status, ctype, stored, ttl, body])
    ("CR/LF in the content type", lambda f: f.__setitem__(3, ("s", b"text/plain\r\nSet-Cookie: a=b"))),
    ("status 0", lambda f: f.__setitem__(2, 0)),
    ("status 204 with a body", lambda f: f.__setitem__(2, 204)),
    ("status 101", lambda f: f.__setitem__(2, 101)),
    ("a TTL of 10^15 ms", lambda f: f.__setitem__(5, 10 ** 15)),
    # stored longer ago than its TTL, still in Redis (a PERSIST, another replica's clock): it
    # was served as a hit with an Age past the rule's ttl for as long as the key stayed
    ("past its own TTL", lambda f: f.__setitem__(4, f[4] - f[5] - 1000)),
    ("trailing bytes", None),
]


@pytest.mark.parametrize("what,change", TAMPER, ids=[t[0] for t in TAMPER])
@pytest.mark.timeout(120)
def test_values_from_redis_are_checked(start_server, redis, what, change):
    a = replica(start_server, redis)
    b = replica(start_server, redis)
    path = "/test/sleep?ms=100"
    assert get(a.port, path, timeout=30).status == 200
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 1, 10)
    key = value_key(redis)
    raw = redis.cmd("GET", key)
    fields = unpack(raw)
    if change is None:
        new = raw + b"\x00"
    else:
        change(fields)
        new = pack(fields)
    redis.cmd("SET", key, new, "PX", 60000)
    # the changed value is a miss: computed here, counted, never served
    r = get(b.port, path, timeout=30)
    assert r.status == 200, (r.status, r.body)
    assert r.header("X-Cache") == "miss", r.header("X-Cache")
    assert r.header("Set-Cookie") is None
    assert r.body == b"slept 100 ms\n", r.body
    assert metric(b.port, "lagless_cluster_bad_values_total") == 1
    assert metric(b.port, "lagless_cluster_hits_total") == 0
    assert metric(b.port, "lagless_cluster_breaker_trips_total") == 0


# --- a lease without an expiry is not a lease ---

@pytest.mark.timeout(120)
def test_lease_without_expiry_is_not_waited_for(start_server, redis):
    a = replica(start_server, redis)
    b = replica(start_server, redis, "--deadline-ms", "6000")
    path = "/test/sleep?ms=200"
    assert get(a.port, path, timeout=30).status == 200
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 1, 10)
    key = value_key(redis)
    lease = key[:-2] + b":l"
    redis.cmd("DEL", key)
    redis.cmd("SET", lease, "someone:else")  # a foreign SET: no expiry
    redis.cmd("CONFIG", "RESETSTAT")
    t0 = time.monotonic()
    r = get(b.port, path, timeout=30)
    took = time.monotonic() - t0
    assert r.status == 200 and r.body == b"slept 200 ms\n", (r.status, r.body)
    # computed here at once: one script, not a poll every 5 ms until the deadline (6 s)
    assert took < 3.0, took
    stats = redis.cmd("INFO", "commandstats").decode()
    calls = sum(int(n) for n in re.findall(r"cmdstat_eval(?:sha)?:calls=(\d+)", stats))
    assert calls <= 3, stats
    assert jobs(b) == 1


# --- one foreign key is that key's miss ---

@pytest.mark.timeout(120)
def test_foreign_type_and_huge_value_are_one_keys_miss(start_server, redis):
    a = replica(start_server, redis)
    b = replica(start_server, redis)
    for ms in (100, 101):
        assert get(a.port, "/test/sleep?ms=%d" % ms, timeout=30).status == 200
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 2, 10)
    keys = sorted(redis.cmd("KEYS", "lagless:*:v"))
    assert len(keys) == 2
    # which key is which: the value holds its request line
    k100 = [k for k in keys if b"ms=100" in redis.cmd("GET", k)][0]
    k101 = [k for k in keys if k != k100][0]
    redis.cmd("DEL", k100)
    redis.cmd("RPUSH", k100, "x")  # WRONGTYPE for GET
    r = get(b.port, "/test/sleep?ms=100", timeout=30)  # that key's miss, never a trip
    assert r.status == 200 and r.body == b"slept 100 ms\n"
    assert metric(b.port, "lagless_cluster_breaker_trips_total") == 0
    # the other key is still shared: a hit from Redis
    r = get(b.port, "/test/sleep?ms=101", timeout=30)
    assert r.status == 200 and r.header("X-Cache") == "hit", r.header("X-Cache")
    assert metric(b.port, "lagless_cluster_hits_total") == 1
    # a value of 8 MB is not transferred: that key's miss, no trip
    redis.cmd("DEL", k101)
    assert get(a.port, "/test/sleep?ms=102", timeout=30).status == 200
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 3, 10)
    big = [k for k in redis.cmd("KEYS", "lagless:*:v") if k != k100][0]
    redis.cmd("SET", big, b"x" * (8 << 20), "PX", 60000)
    r = get(b.port, "/test/sleep?ms=102", timeout=30)
    assert r.status == 200 and r.body == b"slept 102 ms\n"
    assert metric(b.port, "lagless_cluster_breaker_trips_total") == 0
    assert metric(b.port, "lagless_cluster_bad_values_total") == 2
    # one debug line per refused key at most, no warning per request
    assert "error reply" not in b.log()


# --- a replica is not ready before its Redis is up (bounded) ---

def ready(port):
    try:
        return get(port, "/ready", timeout=10).status
    except OSError:
        return None


@pytest.mark.timeout(120)
def test_ready_held_until_redis_is_up(start_server, redis):
    # Redis stopped: the connect is accepted, the subscription is not confirmed
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        agent = free_port()
        srv = start_server("--loop-workers", "1", "--compute-workers", "1",
                           "--enable-test-jobs", "1", "--coalesce", RULE,
                           "--redis", "unix:" + redis.sock, "--redis-budget-ms", "1000",
                           "--redis-breaker-ms", "4000",
                           "--agent-listen", "127.0.0.1:%d" % agent, start_timeout=30)
        t0 = time.monotonic()
        assert get(srv.port, "/ping").status == 200
        assert ready(srv.port) == 503
        assert agent_line(agent).startswith(b"drain"), agent_line(agent)
        # Redis back: ready once connected (at the next connect, after the breaker period)
        os.kill(redis.proc.pid, signal.SIGCONT)
        assert wait_until(lambda: ready(srv.port) == 200, 30)
        assert wait_until(lambda: agent_line(agent).startswith(b"ready"), 10)
        assert metric(srv.port, "lagless_cluster_redis_up") == 1
        assert time.monotonic() - t0 < 20
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)


@pytest.mark.timeout(120)
def test_ready_fails_open_when_redis_stays_down(start_server, redis):
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        srv = start_server("--loop-workers", "1", "--compute-workers", "1",
                           "--enable-test-jobs", "1", "--coalesce", RULE,
                           "--redis", "unix:" + redis.sock, "--redis-budget-ms", "200",
                           "--redis-breaker-ms", "1000", start_timeout=30)
        # bound: two budgets and a breaker period (1.4 s); then ready, keys local
        assert wait_until(lambda: ready(srv.port) == 200, 30)
        assert "ready without it" in srv.log()
        r = get(srv.port, "/test/sleep?ms=50", timeout=30)
        assert r.status == 200
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)


@pytest.mark.timeout(240)
def test_replicas_started_together_run_one_job(start_server, redis):
    srvs = [start_server("--loop-workers", "1", "--compute-workers", "1", "--queue", "4",
                         "--enable-test-jobs", "1", "--coalesce", RULE,
                         "--redis", "unix:" + redis.sock, "--redis-budget-ms", "1000",
                         "--redis-lease-ms", "5000", start_timeout=30) for _ in range(3)]
    # as soon as each says it is ready (not /ping)
    assert wait_until(lambda: all(ready(s.port) == 200 for s in srvs), 30)
    got = fire([(srvs[i % 3].port, "/test/sleep?ms=1500") for i in range(60)])
    assert [r.status for r in got] == [200] * 60
    assert sum(jobs(s) for s in srvs) == 1, [jobs(s) for s in srvs]


# --- scope = cluster without --redis is said ---

def test_cluster_scope_without_redis_is_said():
    out = subprocess.run([LAGLESS_BIN, "-t", "--enable-test-jobs", "1", "--coalesce", RULE],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "scope = cluster and no --redis" in out.stderr + out.stdout


# --- EVALSHA, with EVAL after a SCRIPT FLUSH ---

@pytest.mark.timeout(120)
def test_scripts_sent_by_sha(start_server, redis):
    a = replica(start_server, redis)
    b = replica(start_server, redis)
    redis.cmd("CONFIG", "RESETSTAT")
    for i in range(4):
        assert get(a.port, "/test/sleep?ms=%d" % (60 + i), timeout=30).status == 200
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 4, 10)
    stats = redis.cmd("INFO", "commandstats").decode()
    assert "cmdstat_evalsha:" in stats and "cmdstat_eval:" not in stats, stats
    # the script cache emptied (a restart, SCRIPT FLUSH): NOSCRIPT, then EVAL, no trip
    redis.cmd("SCRIPT", "FLUSH")
    r = get(b.port, "/test/sleep?ms=60", timeout=30)
    assert r.status == 200 and r.header("X-Cache") == "hit"
    r = get(b.port, "/test/sleep?ms=70", timeout=30)
    assert r.status == 200 and r.header("X-Cache") == "miss"
    assert wait_until(lambda: metric(b.port, "lagless_cluster_stores_total") == 1, 10)
    assert total([a, b], "lagless_cluster_breaker_trips_total") == 0


# --- a Redis host name is resolved by the master, never on a loop ---

@pytest.mark.timeout(60)
def test_redis_host_name_resolved_before_the_loops(start_server):
    # nothing listens on port 1: the loop's connect fails at once and names its address
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "--enable-test-jobs",
                       "1", "--coalesce", RULE, "--redis", "localhost:1",
                       "--redis-budget-ms", "50", "--redis-breaker-ms", "200")
    assert wait_until(lambda: re.search(r"redis (127\.0\.0\.1|\[::1\]):1: ", srv.log()), 20), \
        srv.log()[-2000:]
    assert "redis localhost:1" not in srv.log()
