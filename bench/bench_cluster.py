"""12. One job per key across three replicas (docs/CACHE.md, "Across replicas"): the stampede of
benchmark 9 (100 concurrent requests on one cold key, a 200 ms job) spread round-robin over three
lagless replicas sharing one redis-server (Debian's, on a unix socket in a temp dir, no
persistence, stopped by its pid), with `scope=local` and `scope=cluster` in the same run.

Reported per scope: jobs (summed over the replicas' lagless_coalesce_jobs_total), every client's
status, and the waiters' p50/p99/max latency from each request's own send time (one client
thread, a selector, as benchmark 9). Targets (scope=cluster, gated): 1 job, waiter p99 <= job +
10 ms (the extra Redis round trips included). Not measured: nginx's proxy_cache_lock and Varnish
behind the same three-way spread.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

from bench_coalesce import http_get, metric, summary
from common import Lagless, Result, burst, log

DELAY_MS = 200
REPLICAS = 3
REDIS_BIN = "/usr/bin/redis-server"


class Redis:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="lg-bench-redis-")
        self.sock = os.path.join(self.dir, "redis.sock")
        self.proc = subprocess.Popen([REDIS_BIN, "--port", "0", "--unixsocket", self.sock,
                                      "--save", "", "--appendonly", "no", "--dir", self.dir],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 10
        while not os.path.exists(self.sock):
            if time.monotonic() > end or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def run_scope(binary, redis, scope, tag):
    rule = "/test/sleep ttl=60000 query=ms,k scope=%s" % scope
    srvs = []
    try:
        for _ in range(REPLICAS):
            srvs.append(Lagless(binary, ["--loop-workers", "1", "--compute-workers", "1",
                                         "--enable-test-jobs", "1", "--coalesce", rule,
                                         "--redis", "unix:" + redis.sock,
                                         "--redis-budget-ms", "50"]))
        end = time.monotonic() + 10
        while sum(metric(s.port, "lagless_cluster_redis_up") for s in srvs) < REPLICAS:
            if time.monotonic() > end:
                raise RuntimeError("replicas not connected to redis")
            time.sleep(0.05)
        for s in srvs:  # warm each compute process (its first run), on its own key
            http_get(s.port, "/test/sleep?ms=1&k=warm-%s-%d" % (tag, s.port))
        before = sum(metric(s.port, "lagless_coalesce_jobs_total") for s in srvs)
        got = burst([s.port for s in srvs], "/test/sleep?ms=%d&k=%s" % (DELAY_MS, tag), 100)
        # a job is counted when it starts: every one has by the last answer
        jobs = sum(metric(s.port, "lagless_coalesce_jobs_total") for s in srvs) - before
        return dict(summary(got), calls=int(jobs))
    finally:
        for s in srvs:
            s.stop()


def run(cfg, sz):
    log("== 12. one job per key across %d replicas: scope=local vs scope=cluster (redis), "
        "%d ms job, 100 cold requests" % (REPLICAS, DELAY_MS))
    if not os.access(REDIS_BIN, os.X_OK):
        log("   redis-server not installed: skipped")
        return []
    redis = Redis()
    figures = {}
    try:
        tag = "%d" % int(time.time() * 1000)
        for scope in ("local", "cluster"):
            figures[scope] = run_scope(cfg.bin, redis, scope, "%s-%s" % (scope, tag))
    finally:
        redis.stop()
    for scope, r in figures.items():
        log("   %-8s jobs %3d  codes %-12s p50 %7.1f  p99 %7.1f  max %7.1f ms" % (
            scope, r["calls"], ",".join("%s:%d" % kv for kv in sorted(r["codes"].items())),
            r["p50_ms"], r["p99_ms"], r["max_ms"]))
    cl = figures["cluster"]
    return [
        Result("12. cluster jobs, 100 cold requests over 3 replicas", cl["calls"], 1, "max",
               figures=figures),
        Result("12. cluster waiter p99 / (job + 10 ms)", cl["p99_ms"] / (DELAY_MS + 10.0), 1.0,
               "max"),
        Result("12. cluster waiters answered 200 (share)", cl["codes"].get(200, 0) / 100.0, 1.0,
               "min"),
        Result("12. local jobs (one per replica)", figures["local"]["calls"], REPLICAS, "max",
               gated=False),
    ]
