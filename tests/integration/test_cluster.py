"""The cluster scope of a coalescing rule (scope=cluster, --redis; docs/CACHE.md "Across
replicas"): several replicas of the real binary share one real redis-server (Debian's, started
here on a unix socket in a temp dir without persistence, stopped by its pid). Jobs are counted
from each replica's lagless_coalesce_jobs_total (jobs started), summed over the replicas. The
job is test-sleep (no CPU), so three replicas fit on a loaded 2-core machine, also under ASan:
every margin below is wide, and every wait is for a condition."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import Call, get, job_slots, send_all_at_once_to, wait_jobs, wait_until

REDIS_BIN = "/usr/bin/redis-server"
pytestmark = pytest.mark.skipif(not os.access(REDIS_BIN, os.X_OK), reason="no redis-server")

# A rule sharing /test/sleep across replicas (the kind's ms and fail parameters are in the key).
RULE = "/test/sleep ttl=60000 scope=cluster"


class Redis:
    """redis-server on a unix socket in its own temp dir (a short path: sun_path is 108 bytes)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="lg-redis-")
        self.sock = os.path.join(self.dir, "redis.sock")
        self.log = open(os.path.join(self.dir, "redis.log"), "wb")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            [REDIS_BIN, "--port", "0", "--unixsocket", self.sock, "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, start_new_session=True)
        assert wait_until(self._pings, 20), "redis-server did not answer PING"

    def _pings(self):
        try:
            return self.cmd("PING") == "PONG"
        except OSError:
            return False

    def cmd(self, *args, timeout=5.0):
        """One command over RESP; returns str/bytes/int/list/None (bulk strings as bytes)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.sock)
            out = b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
            s.sendall(out)
            f = s.makefile("rb")
            return _resp(f)
        finally:
            s.close()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def close(self):
        self.stop()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _resp(f):
    line = f.readline()
    if not line:
        raise ConnectionError("redis closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise AssertionError("redis error: %s" % rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp(f) for _ in range(n)]
    raise AssertionError("bad RESP line %r" % line)


@pytest.fixture
def redis():
    r = Redis()
    yield r
    r.close()


def metric(port, name):
    text = get(port, "/metrics", timeout=20).body.decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def jobs(srv):
    return metric(srv.port, "lagless_coalesce_jobs_total")


def total(srvs, name):
    return sum(metric(s.port, name) for s in srvs)


def replica(start_server, redis, *extra, lease_ms=5000, budget_ms=1000):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "--queue", "4",
                       "--enable-test-jobs", "1", "--coalesce", RULE,
                       "--redis", "unix:" + redis.sock, "--redis-budget-ms", str(budget_ms),
                       "--redis-breaker-ms", "300", "--redis-lease-ms", str(lease_ms),
                       "--stuck-loop-ms", "60000", *extra, start_timeout=30)
    assert wait_until(lambda: metric(srv.port, "lagless_cluster_redis_up") == 1, 20), srv.log()
    return srv


def fire(reqs, timeout=90.0):
    """reqs: (port, path) pairs, each on its own connection, all connected first and sent
    together; returns the Response of each."""
    return [r for r, _ in send_all_at_once_to(
        [(port, ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode()) for port, path in reqs],
        timeout)]


def leader_of(srvs):
    won = [s for s in srvs if metric(s.port, "lagless_cluster_leases_won_total") +
           metric(s.port, "lagless_cluster_leases_taken_over_total") > 0]
    return won[0] if len(won) == 1 else None


@pytest.mark.timeout(180)
def test_three_replicas_sixty_requests_one_job(start_server, redis):
    srvs = [replica(start_server, redis) for _ in range(3)]
    path = "/test/sleep?ms=1500"
    got = fire([(srvs[i % 3].port, path) for i in range(60)])
    assert [r.status for r in got] == [200] * 60, [r.status for r in got]
    assert len({r.body for r in got}) == 1, "answers differ"
    assert sum(jobs(s) for s in srvs) == 1, [jobs(s) for s in srvs]
    assert total(srvs, "lagless_cluster_leases_won_total") == 1
    # the leader counts its store when the script's reply is read (the followers may be
    # answered first: the PUBLISH is inside the script)
    assert wait_until(lambda: total(srvs, "lagless_cluster_stores_total") == 1, 10)
    assert total(srvs, "lagless_cluster_breaker_trips_total") == 0
    # one follower wait per key per replica (one loop each), not one per request
    assert total(srvs, "lagless_cluster_follower_waits_total") <= 2
    # later requests: a local hit on every replica (filled from the shared value)
    for s in srvs:
        r = get(s.port, path)
        assert r.status == 200 and r.header("X-Cache") == "hit" and r.header("Age") is not None
    assert sum(jobs(s) for s in srvs) == 1


@pytest.mark.timeout(180)
def test_leader_compute_killed_is_taken_over(start_server, redis):
    srvs = [replica(start_server, redis, lease_ms=4000) for _ in range(3)]
    path = "/test/sleep?ms=3000"
    call = Call(fire, [(srvs[i % 3].port, path) for i in range(15)])
    call.start()
    assert wait_until(lambda: leader_of(srvs) is not None, 30)
    lead = leader_of(srvs)
    assert wait_jobs(lead.port, running=1, timeout=30)
    compute = lead.children("compute")
    assert len(compute) == 1
    os.kill(compute[0], signal.SIGKILL)  # SIGKILL (9) is not a crash signal of CRASH_RE
    t0 = time.monotonic()
    got = call.get(120)
    assert all(r.status in (200, 502) for r in got), [r.status for r in got]
    assert sum(jobs(s) for s in srvs) <= 2, [jobs(s) for s in srvs]
    others = [r for i, r in enumerate(got) if srvs[i % 3] is not lead]
    assert all(r.status == 200 for r in others), [r.status for r in others]
    assert total(srvs, "lagless_cluster_leases_taken_over_total") == 1
    # within the lease and a run of the job, generously
    assert time.monotonic() - t0 < 60


@pytest.mark.timeout(180)
def test_paused_leader_store_is_fenced(start_server, redis):
    a = replica(start_server, redis, lease_ms=1000)
    b = replica(start_server, redis, lease_ms=1000)
    path = "/test/sleep?ms=2500"
    ca = Call(fire, [(a.port, path)])
    ca.start()
    assert wait_until(lambda: metric(a.port, "lagless_cluster_leases_won_total") == 1, 30)
    loop = a.children("loop")
    assert len(loop) == 1
    os.kill(loop[0], signal.SIGSTOP)
    try:
        # b follows, takes the lease over when it ends, runs its own job and stores it
        cb = Call(fire, [(b.port, path)])
        cb.start()
        assert cb.get(90)[0].status == 200
        assert metric(b.port, "lagless_cluster_leases_taken_over_total") == 1
        # b's job outlived the 1 s lease: b renewed it while it ran, so its store counts
        assert wait_until(lambda: metric(b.port, "lagless_cluster_stores_total") == 1, 30)
        keys = redis.cmd("KEYS", "lagless:*:v")
        assert len(keys) == 1
        value = redis.cmd("GET", keys[0])
        # a's job has ended meanwhile (its compute process ran on, 2.5 s from its start)
        assert wait_until(lambda: job_slots(b.port)["running"] == 0, 30)
    finally:
        os.kill(loop[0], signal.SIGCONT)
    assert ca.get(90)[0].status == 200  # a's own client still gets a's answer
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_refused_total") == 1, 30)
    assert metric(a.port, "lagless_cluster_stores_total") == 0
    assert redis.cmd("GET", keys[0]) == value, "the late store overwrote the new value"


def ping_times(port, n):
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        assert get(port, "/ping", timeout=10).status == 200
        out.append(time.monotonic() - t0)
    return out


@pytest.mark.timeout(240)
def test_redis_killed_then_hung_fails_open(start_server, redis):
    srvs = [replica(start_server, redis, budget_ms=200) for _ in range(3)]
    # a refusal: redis killed
    redis.stop()
    got = fire([(srvs[i % 3].port, "/test/sleep?ms=800") for i in range(12)])
    assert [r.status for r in got] == [200] * 12
    assert all(jobs(s) <= 1 for s in srvs), [jobs(s) for s in srvs]
    assert all(metric(s.port, "lagless_cluster_breaker_trips_total") >= 1 for s in srvs)
    # a hang: redis back, then stopped (connections accepted, nothing answered)
    redis.start()
    assert wait_until(lambda: all(metric(s.port, "lagless_cluster_redis_up") == 1
                                  for s in srvs), 30)
    trips = [metric(s.port, "lagless_cluster_breaker_trips_total") for s in srvs]
    before = [jobs(s) for s in srvs]
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        call = Call(fire, [(srvs[i % 3].port, "/test/sleep?ms=1500") for i in range(12)])
        call.start()
        pings = ping_times(srvs[0].port, 20)
        got = call.get(120)
        assert [r.status for r in got] == [200] * 12
        assert all(jobs(s) - b <= 1 for s, b in zip(srvs, before))
        assert all(metric(s.port, "lagless_cluster_breaker_trips_total") > t
                   for s, t in zip(srvs, trips))
        # the loop never waited on Redis: /ping answered at once throughout (wide margin)
        assert max(pings) < 1.0, pings
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)


@pytest.mark.timeout(180)
def test_subscription_killed_while_followers_wait(start_server, redis):
    srvs = [replica(start_server, redis, lease_ms=20000) for _ in range(3)]
    path = "/test/sleep?ms=3000"
    lead = srvs[0]
    c0 = Call(fire, [(lead.port, path)])
    c0.start()
    assert wait_until(lambda: metric(lead.port, "lagless_cluster_leases_won_total") == 1, 30)
    call = Call(fire, [(srvs[1 + i % 2].port, path) for i in range(10)])
    call.start()
    assert wait_until(lambda: total(srvs[1:], "lagless_cluster_follower_waits_total") == 2, 30)
    killed = redis.cmd("CLIENT", "KILL", "TYPE", "pubsub")
    assert killed >= 3
    got = call.get(90)
    assert [r.status for r in got] == [200] * 10
    assert c0.get(60)[0].status == 200
    assert len({r.body for r in got}) == 1
    # well before the 20 s lease: woken by the re-made subscription's re-read or its PUBLISH
    assert sum(jobs(s) for s in srvs) == 1, [jobs(s) for s in srvs]
    assert total(srvs, "lagless_cluster_breaker_trips_total") == 0


@pytest.mark.timeout(180)
def test_restarted_replica_finds_the_value(start_server, redis):
    a = replica(start_server, redis)
    path = "/test/sleep?ms=300"
    assert get(a.port, path, timeout=30).header("X-Cache") == "miss"
    assert wait_until(lambda: metric(a.port, "lagless_cluster_stores_total") == 1, 10)
    a.stop()
    a2 = replica(start_server, redis)
    r = get(a2.port, path, timeout=30)
    assert r.status == 200 and r.header("X-Cache") == "hit" and r.header("Age") is not None
    assert r.body == b"slept 300 ms\n"
    assert jobs(a2) == 0
    assert metric(a2.port, "lagless_cluster_hits_total") == 1


@pytest.mark.timeout(120)
def test_failures_follow_the_local_rules(start_server, redis):
    a = replica(start_server, redis)
    b = replica(start_server, redis)
    # a kind error without negative-ttl: answered, never stored in Redis
    got = fire([(a.port, "/test/sleep?ms=300&fail=1"), (b.port, "/test/sleep?ms=300&fail=1")])
    assert [r.status for r in got] == [500, 500]
    assert redis.cmd("KEYS", "lagless:*:v") == []
    assert total([a, b], "lagless_cluster_stores_total") == 0
    # a lease given back on failure leaves no lease behind
    assert wait_until(lambda: redis.cmd("KEYS", "lagless:*:l") == [], 10)


@pytest.mark.timeout(60)
def test_cluster_scope_without_redis_is_local(start_server):
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "--enable-test-jobs",
                       "1", "--coalesce", RULE)
    got = fire([(srv.port, "/test/sleep?ms=300")] * 5)
    assert [r.status for r in got] == [200] * 5
    assert jobs(srv) == 1
    assert "lagless_cluster_" not in get(srv.port, "/metrics").body.decode()


@pytest.mark.timeout(120)
def test_lease_from_the_kinds_run_time(start_server, redis):
    a = replica(start_server, redis, lease_ms=0)

    def lease_pttls(call):
        seen = []
        while call.is_alive() and len(seen) < 15:
            keys = redis.cmd("KEYS", "lagless:*:l")
            t = redis.cmd("PTTL", keys[0]) if keys else None
            if t is not None and t >= 0:
                seen.append(t)
            time.sleep(0.05)
        return seen

    # before the kind has run here: the cold lease, 2 s (renewed every third of it)
    c = Call(get, a.port, "/test/sleep?ms=1200", timeout=60)
    c.start()
    seen = lease_pttls(c)
    assert c.get(60).status == 200
    assert seen and max(seen) > 1000 and max(seen) <= 2000, seen
    # a fresh replica learns from three short jobs (their p99 bucket: 0.1 s, or a few more on a
    # loaded machine): a lease of 200 ms (the floor) to 1 s, renewed while a longer job runs
    # past it
    b = replica(start_server, redis, lease_ms=0)
    for i in range(3):
        assert get(b.port, "/test/sleep?ms=%d" % (50 + i), timeout=60).status == 200
    c = Call(get, b.port, "/test/sleep?ms=1300", timeout=60)
    c.start()
    seen = lease_pttls(c)
    assert c.get(60).status == 200
    assert seen and max(seen) <= 1000, seen
    assert wait_until(lambda: metric(b.port, "lagless_cluster_stores_total") == 4, 10)


@pytest.mark.timeout(120)
def test_followers_wait_as_long_as_the_leader_renews(start_server, redis):
    # A 200 ms lease and a 1.5 s job: the leader renews its lease seven times; its followers
    # see the same holder each time and keep waiting (they once gave up after three waits and
    # ran the job themselves: one job per replica, found by benchmark 12).
    srvs = [replica(start_server, redis, lease_ms=200) for _ in range(3)]
    got = fire([(srvs[i % 3].port, "/test/sleep?ms=1500") for i in range(30)])
    assert [r.status for r in got] == [200] * 30
    assert sum(jobs(s) for s in srvs) == 1, [jobs(s) for s in srvs]
    assert total(srvs, "lagless_cluster_local_total") == 0
    assert total(srvs, "lagless_cluster_leases_taken_over_total") == 0


@pytest.mark.timeout(120)
def test_route_section_scope_and_the_value_bound(start_server, redis, tmp_path):
    # scope = cluster as a key of the route's section; an answer over --cluster-max-value is
    # not stored in Redis (the lease is given back, and the other replica runs its own job)
    conf = tmp_path / "site.conf"
    conf.write_text("[route /shared]\nkind = test-sleep\nmethods = GET\nttl_ms = 60000\n"
                    "scope = cluster\n")
    a, b = [replica(start_server, redis, "-c", str(conf), "--cluster-max-value", "4")
            for _ in range(2)]
    r = get(a.port, "/shared?ms=100", timeout=30)
    assert r.status == 200 and r.header("X-Cache") == "miss" and r.body == b"slept 100 ms\n"
    assert metric(a.port, "lagless_cluster_leases_won_total") == 1
    assert wait_until(lambda: metric(a.port, "lagless_cluster_too_large_total") == 1, 10)
    assert redis.cmd("KEYS", "lagless:*:v") == []
    assert wait_until(lambda: redis.cmd("KEYS", "lagless:*:l") == [], 10)
    assert get(b.port, "/shared?ms=100", timeout=30).header("X-Cache") == "miss"
    assert jobs(a) == 1 and jobs(b) == 1
    # still a local hit on each
    assert get(a.port, "/shared?ms=100").header("X-Cache") == "hit"


# Regression (issue "[deploy]" 6): with Redis down, one loop wrote 43 warning lines in 20 s.
# An outage is one warning when it begins (and an info line when Redis is back); the
# breaker's retries while it lasts are at debug level, counted in
# lagless_cluster_breaker_trips_total. The start-up bound ("ready without it") is logged once
# too: its timer once repeated every period.
def redis_warnings(log):
    return [l for l in log.splitlines() if " warn " in l and "redis" in l]


@pytest.mark.timeout(120)
def test_an_outage_is_one_warning_not_one_per_retry(start_server, redis):
    srv = replica(start_server, redis)  # --redis-breaker-ms 300
    assert redis_warnings(srv.log()) == [], srv.log()
    redis.stop()
    n = 0

    def retried_often():
        nonlocal n
        n += 1  # requests for cluster keys while it is down: each may try Redis
        assert get(srv.port, "/test/sleep?ms=1&n=%d" % n, timeout=20).status == 200
        return metric(srv.port, "lagless_cluster_breaker_trips_total") >= 6
    assert wait_until(retried_often, 60), srv.log()
    lines = redis_warnings(srv.log())
    assert 1 <= len(lines) <= 2, "\n".join(lines)
    # back: one line says so, and a new outage is warned of again
    redis.start()
    assert wait_until(lambda: metric(srv.port, "lagless_cluster_redis_up") == 1, 30)
    assert wait_until(lambda: re.search(r"redis .*: connected", srv.log()), 10), srv.log()


@pytest.mark.timeout(60)
def test_a_redis_never_up_warns_once_that_ready_goes_without_it(start_server, tmp_path):
    sock = str(tmp_path / "none.sock")  # nothing listens there
    srv = start_server("--loop-workers", "1", "--compute-workers", "1", "--enable-test-jobs",
                       "1", "--coalesce", "/test/sleep ttl=60000 scope=cluster",
                       "--redis", "unix:" + sock, "--redis-budget-ms", "100",
                       "--redis-breaker-ms", "200", start_timeout=30)
    assert wait_until(lambda: metric(srv.port, "lagless_cluster_breaker_trips_total") >= 10,
                      30), srv.log()
    lines = redis_warnings(srv.log())
    assert len([l for l in lines if "ready without it" in l]) == 1, "\n".join(lines)
    assert len(lines) <= 2, "\n".join(lines)
