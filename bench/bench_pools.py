"""Benchmark 7: bulkheads. Two named pools, `slow` (/heavy, one compute process, jobs of about
500 ms, niced to 19) and `fast` (/compress, one compute process, jobs of a few ms, nice 0). The
figure is the p99 latency of sequential fast requests while the slow pool is flooded (five
clients sending /heavy back to back, far more than its one process and two queue places hold)
against the fast p99 with the slow pool idle, alternating phases so that drift of a shared
machine falls on both sides. Gated: ratio <= 1.5 (issue 11). The slow pool's 503s and the fast
pool's largest queue wait are shown too.
"""

import os
import random
import subprocess
import tempfile
import time

from common import Lagless, Result, http_get, http_request, log, percentile

CONF = """
[pool slow]
compute = 1
queue = 2
nice = 19
routes = /heavy
oversubscribe = yes

[pool fast]
compute = 1
queue = 4
nice = 0
routes = /compress
oversubscribe = yes
"""

SLOW_S = 0.5
PER_PHASE = 40
FLOOD_S = 2.5         # one flooded phase: the slow pool fills, then PER_PHASE fast requests


def fast_body():
    rnd = random.Random(1)
    return bytes(rnd.choice(b"abcdefghij") for _ in range(512 * 1024))


def heavy_iterations(port, seconds):
    best = 0.0
    for _ in range(2):
        status, _, data = http_get(port, "/heavy?iterations=20000000", timeout=60)
        if status == 200:
            run_ms = float(data.decode().split('"run_ms":')[1].rstrip("}\n"))
            best = max(best, 20000000 / max(run_ms / 1000.0, 1e-3))
    return int(best * seconds)


def fast_phase(port, body, n):
    out, waits = [], []
    for _ in range(n):
        t0 = time.monotonic_ns()
        status, hdr, _ = http_request(port, "POST", "/compress?level=3", body, timeout=30)
        out.append(time.monotonic_ns() - t0 if status == 200 else None)
        waits.append(float(hdr.get("x-queue-ms", "nan")))
    return out, waits


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
        body = fast_body()
        url = "/heavy?iterations=%d" % heavy_iterations(srv.port, SLOW_S)
        alone, flooded, waits, codes = [], [], [], []
        for _ in range(max(2, cfg.rounds // 2)):
            a, _ = fast_phase(srv.port, body, PER_PHASE)
            alone += a
            t0 = time.monotonic()
            procs = flood(cfg.client, srv.port, url, FLOOD_S)
            time.sleep(SLOW_S)  # the slow pool is full by now
            f_, w = fast_phase(srv.port, body, PER_PHASE)
            flooded += f_
            waits += w
            if time.monotonic() - t0 > FLOOD_S:
                log("   (a flooded phase outlasted its flood; the machine is very busy)")
            flood_end(procs, codes)
        failed = sum(1 for x in alone + flooded if x is None)
        if failed:
            return [Result("7. fast pool p99, slow flooded / alone", skipped="%d fast "
                           "requests failed" % failed)]
        pa = percentile(sorted(alone), 99) / 1e6
        pf = percentile(sorted(flooded), 99) / 1e6
        log("   fast p99 alone %.2f ms, slow flooded %.2f ms (p50 %.2f / %.2f ms); fast queue "
            "wait max %.2f ms; slow answers %d x 200, %d x 503" % (
                pa, pf, percentile(sorted(alone), 50) / 1e6,
                percentile(sorted(flooded), 50) / 1e6, max(waits), codes.count(200),
                codes.count(503)))
        return [Result("7. fast pool p99, slow flooded / alone", pf / pa, 1.5,
                       figures={"fast_p99_alone_ms": pa, "fast_p99_flooded_ms": pf,
                                "fast_queue_wait_max_ms": max(waits),
                                "slow_200": codes.count(200), "slow_503": codes.count(503)})]
    finally:
        srv.stop()
        os.unlink(conf)
