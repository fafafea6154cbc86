#!/usr/bin/env python3
"""lagless benchmark suite: the promises of DESIGN.md as ratios measured in one run against a
reference, never as absolute timings (see docs/BENCHMARKS.md).

usage: run.py --bin build/lagless --client build/bench/latency [--out results.json]
              [--only 1,3] [--rounds N] [--pings N] [--probes N]
Environment: BENCH_STRICT=0 reports a missed target without failing (exit 0).
Exit status: 0 when every gated target is met (or BENCH_STRICT=0), 1 when one is missed, 2 when
the suite itself could not run.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_argon2  # noqa: E402
import bench_cluster  # noqa: E402
import bench_conn  # noqa: E402
import bench_coalesce  # noqa: E402
import bench_fastapi  # noqa: E402
import bench_instr  # noqa: E402
import bench_latency  # noqa: E402
import bench_memory  # noqa: E402
import bench_pools  # noqa: E402
import bench_proxy  # noqa: E402
import bench_python  # noqa: E402
import bench_scenarios  # noqa: E402
import bench_module  # noqa: E402
import bench_pcache  # noqa: E402
import bench_throughput  # noqa: E402
from common import Lagless, log, sizing  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True, help="the lagless binary")
    p.add_argument("--client", required=True, help="the bench/latency client binary")
    p.add_argument("--out", help="write every figure as JSON here")
    p.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
                   help="comma-separated benchmark numbers (13a..13g: a part of 13)")
    p.add_argument("--load", default="", help="the lagless-load binary (11; default: beside --bin)")
    p.add_argument("--idle-sizes", default="2000,10000",
                   help="idle keep-alive connections held in 6a (100000 takes minutes)")
    p.add_argument("--modcall", default="", help="the bench/modcall client binary (8)")
    p.add_argument("--bare", default="", help="the bench/bare server binary (6c, 6d ceilings)")
    p.add_argument("--test-modules", default="", help="directory of the tests/modules .so (8)")
    p.add_argument("--rounds", type=int, default=8, help="idle/loaded alternations (1, 2)")
    p.add_argument("--pings", type=int, default=750, help="keep-alive /ping per phase")
    p.add_argument("--probes", type=int, default=400, help="fresh-connection requests per phase")
    p.add_argument("--interval-us", type=int, default=500,
                   help="pace of the latency client (0: back to back)")
    p.add_argument("--compute-policy", default="",
                   help="normal|batch|idle: passed to the servers of 1, 2 and 6 (default: the "
                   "server's own, normal) and 9 (default normal, as its origins), to compare "
                   "scheduling policies")
    p.add_argument("--max-seconds", type=float, default=20.0, help="bound of one client run")
    return p.parse_args()


def policy_args(cfg):
    return ["--compute-policy", cfg.compute_policy] if cfg.compute_policy else []


def bench_1_2(cfg, sz):
    log("== 1. cheap stays cheap: /ping latency, idle vs every compute process busy and the "
        "queue full")
    srv = Lagless(cfg.bin, policy_args(cfg))
    try:
        if cfg.compute_policy:
            log("   compute processes under --compute-policy %s (sched(7))" % cfg.compute_policy)
        return bench_latency.run(srv, cfg.client, sz, cfg)
    finally:
        srv.stop()


def main():
    cfg = parse_args()
    strict = os.environ.get("BENCH_STRICT", "1") != "0"
    only = {s.strip() for s in cfg.only.split(",")}
    sz = sizing(cfg.bin)
    t0 = time.monotonic()
    log("lagless benchmarks: %s, %d online CPUs, load average %s"
        % (cfg.bin, os.cpu_count(), open("/proc/loadavg").read().split()[0]))
    log("")
    results = []
    if only & {"1", "2"}:
        results += bench_1_2(cfg, sz)
        log("")
    if "3" in only:
        results += bench_throughput.run(cfg, sz)
        log("")
    if "4" in only:
        results += bench_memory.run(cfg, sz)
        log("")
    if "5" in only:
        results += bench_argon2.run(cfg, sz)
        log("")
    if "6" in only:
        results += bench_conn.run(cfg, sz)
        results += bench_instr.run(cfg)
        log("")
    if "7" in only:
        results += bench_pools.run(cfg, sz)
        log("")
    if "8" in only:
        results += bench_module.run(cfg, sz)
        log("")
    if "9" in only:
        results += bench_coalesce.run(cfg, sz)
        log("")
    if "10" in only:
        results += bench_python.run(cfg, sz)
        log("")
    if "11" in only:
        results += bench_scenarios.run(cfg, sz)
        log("")
    if "12" in only:
        results += bench_cluster.run(cfg, sz)
        log("")
    parts = "".join(x for x in "abcdefg" if {"13", "13" + x} & only)
    if parts:
        results += bench_proxy.run(cfg, sz, parts)
        log("")
    if "14" in only:
        results += bench_fastapi.run(cfg, sz)
        log("")
    if "15" in only:
        results += bench_pcache.run(cfg, sz)
        log("")
    log("== summary (%.0f s)" % (time.monotonic() - t0))
    for r in results:
        log("   " + r.line())
    missed = [r for r in results if r.gated and r.met is False]
    if cfg.out:
        os.makedirs(os.path.dirname(cfg.out) or ".", exist_ok=True)
        with open(cfg.out, "w") as f:
            json.dump({"sizing": sz, "strict": strict,
                       "results": [r.as_dict() for r in results]}, f, indent=1)
        log("   figures written to %s" % cfg.out)
    if missed:
        log("   %d gated target(s) missed%s" % (len(missed), "" if strict else
                                                " (BENCH_STRICT=0: reported only)"))
        return 1 if strict else 0
    log("   every gated target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
