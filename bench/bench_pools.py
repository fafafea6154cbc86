"""Benchmark 7: bulkheads. Two named pools, `slow` (route /slow: heavy jobs of about 500 ms, one
compute process niced to 19) and `fast` (route /fast: heavy jobs of about 5 ms, one process at
nice 0). The figure is the p99 latency of sequential fast requests (bench/latency, keep-alive)
while the slow pool is flooded (five bench/latency clients sending /slow, far more than its one
process and two queue places hold) against the fast p99 with the slow pool idle, alternating
phases so that drift of a shared machine falls on both sides. Gated: ratio <= 1.5 (issue 11).
The slow pool's 200/503 counts are shown too.
"""

import os
import subprocess
import tempfile
import time

from common import Lagless, Result, http_get, log, percentile, run_client

CONF = """
[pool slow]
compute = 1
queue = 2
nice = 19
oversubscribe = yes

[pool fast]
compute = 1
queue = 4
nice = 0
oversubscribe = yes

[route /slow]
methods = GET
kind = heavy
pool = slow

[route /fast]
methods = GET
kind = heavy
pool = fast
"""

SLOW_S = 0.5
FAST_S = 0.005
PER_PHASE = 100
FLOOD_S = 2.5         # one flooded phase: the slow pool fills, then PER_PHASE fast requests


def heavy_iterations(port, seconds):
    best = 0.0
    for _ in range(2):
        status, _, data = http_get(port, "/heavy?iterations=20000000", timeout=60)
        if status == 200:
            run_ms = float(data.decode().split('"run_ms":')[1].rstrip("}\n"))
            best = max(best, 20000000 / max(run_ms / 1000.0, 1e-3))
    return int(best * seconds)


def fast_phase(client, port, url, n):
    """Latencies (ns) of n sequential keep-alive requests, None for a failed one."""
    return [ns if status == 200 else None
            for status, ns in run_client(client, port, path=url, count=n, max_seconds=30)]


def flood(client, port, url, seconds):
    """Five bench/latency clients in processes of their own (so they take nothing from this
    process's fast client), each sending url one at a time, one start every 100 ms at most (a
    503 closes its connection: the pace spares the machine's local ports)."""
    procs = []
    for _ in range(5):
        fd, out = tempfile.mkstemp(prefix="flood-", suffix=".txt")
        os.close(fd)
        procs.append((subprocess.Popen(
            [client, "--port", str(port), "--path", url, "--count", "100000", "--max-seconds",
             str(seconds), "--interval-us", "100000", "--out", out],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out))
    return procs


def flood_end(procs, codes):
    for p, out in procs:
        p.wait(60)
        with open(out) as f:
            codes += [int(line.split()[0]) for line in f if line.strip()]
        os.unlink(out)


def run(cfg, sz):
    log("== 7. bulkheads: fast pool p99 with the slow pool flooded vs alone")
    fd, conf = tempfile.mkstemp(prefix="lagless-pools-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(CONF)
    srv = Lagless(cfg.bin, ["-c", conf, "--deadline-ms", "60000"])
    try:
        per_s = heavy_iterations(srv.port, 1.0)
        url = "/slow?iterations=%d" % int(per_s * SLOW_S)
        fast = "/fast?iterations=%d" % int(per_s * FAST_S)
        alone, flooded, codes = [], [], []
        for _ in range(max(2, cfg.rounds // 2)):
            alone += fast_phase(cfg.client, srv.port, fast, PER_PHASE)
            t0 = time.monotonic()
            procs = flood(cfg.client, srv.port, url, FLOOD_S)
            time.sleep(SLOW_S)  # the slow pool is full by now
            flooded += fast_phase(cfg.client, srv.port, fast, PER_PHASE)
            if time.monotonic() - t0 > FLOOD_S:
                log("   (a flooded phase outlasted its flood; the machine is very busy)")
            flood_end(procs, codes)
        failed = sum(1 for x in alone + flooded if x is None)
        if failed:
            return [Result("7. fast pool p99, slow flooded / alone", skipped="%d fast "
                           "requests failed" % failed)]
        pa = percentile(sorted(alone), 99) / 1e6
        pf = percentile(sorted(flooded), 99) / 1e6
        log("   fast p99 alone %.2f ms, slow flooded %.2f ms (p50 %.2f / %.2f ms, %d requests "
            "each); slow answers %d x 200, %d x 503" % (
                pa, pf, percentile(sorted(alone), 50) / 1e6,
                percentile(sorted(flooded), 50) / 1e6, len(alone), codes.count(200),
                codes.count(503)))
        return [Result("7. fast pool p99, slow flooded / alone", pf / pa, 1.5,
                       figures={"fast_p99_alone_ms": pa, "fast_p99_flooded_ms": pf,
                                "slow_200": codes.count(200), "slow_503": codes.count(503)})]
    finally:
        srv.stop()
        os.unlink(conf)
