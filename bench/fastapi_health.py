"""Benchmark 14a's rounds alone, for settings of way (c) against each other (docs/BENCHMARKS.md,
"Where (c)'s /health time goes"): the article's app as uvicorn + its executor (a), and behind
lagless with its CPU route in the pool (examples/fastapi/lagless.conf, as bench_fastapi.py
starts it) once per VARIANT, a VARIANT being LAGLESS_* environment settings (which override the
file) given as NAME=VAR=VALUE[,VAR=VALUE...], e.g.

    python3 bench/fastapi_health.py --bin build/lagless --client build/bench/latency \\
        --rounds 8 --runs 3 c0=LAGLESS_COMPUTE_SLICE_MS=0 c=

Each round sends 4 CPU calls and probes the app's /health at 200/s meanwhile
(bench_fastapi.health_during_calls), the ways alternated round by round so that a shared
machine's drift falls on all of them. Per run and way: /health p50, p90, p99, max, the calls'
statuses, and the run-queue wait of each of the way's processes while its rounds ran
(/proc/PID/schedstat, field 2: time runnable but not running), with the load average.
"""

import argparse
import os
import sys

import bench_fastapi as bf
from common import children_of, comm_of, percentile


def tree(pid):
    """pid and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += list(children_of(p))
    return out


def schedstat(pid):
    """(ns on the CPU, ns runnable and waiting, timeslices) of pid, or None once it is gone."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return tuple(int(x) for x in f.read().split()[:3])
    except OSError:
        return None


def start(way, env, binary, so_dir, workers):
    if way is None:
        return bf.Uvicorn(dict(os.environ, **env))
    return bf.Fronted(binary, so_dir, "lagless.conf", workers, dict(env, **way))


def parse_variant(text):
    name, _, rest = text.partition("=")
    settings = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    if not name or any(not k.startswith("LAGLESS_") for k in settings):
        raise SystemExit("a variant is NAME=LAGLESS_VAR=VALUE[,...]: %r" % text)
    return name, settings


def one_run(args, ways, env, n_probe):
    servers, root = {}, {}
    try:
        for name, way in ways.items():
            servers[name] = start(way, env, args.bin, args.so_dir, args.workers)
            root[name] = getattr(servers[name], "pid", None) or servers[name].lg.pid
        probes = {w: [] for w in ways}
        statuses = {w: [] for w in ways}
        waits = {w: {} for w in ways}
        for _ in range(args.rounds):
            for w in ways:
                pids = tree(root[w])
                before = {p: schedstat(p) for p in pids}
                statuses[w] += bf.health_during_calls(args.client, servers[w].port, n_probe,
                                                      probes[w])
                for p in pids:
                    after = schedstat(p)
                    if after and before[p]:
                        key = "%s[%d]" % (comm_of(p), p)
                        acc = waits[w].setdefault(key, [0, 0, 0])
                        for i in range(3):
                            acc[i] += after[i] - before[p][i]
        load = open("/proc/loadavg").read().split()[0]
        for w in ways:
            v = sorted(probes[w])
            print("%-6s /health p50 %.2f p90 %.2f p99 %.2f max %.2f ms (%d probes); calls %s; "
                  "load %s" % (w, percentile(v, 50) / 1e6, percentile(v, 90) / 1e6,
                               percentile(v, 99) / 1e6, v[-1] / 1e6, len(v),
                               {s: statuses[w].count(s) for s in sorted(set(statuses[w]))},
                               load))
            for key, (run, wait, slices) in sorted(waits[w].items()):
                if slices:
                    print("       %-28s on CPU %8.1f ms, waiting %7.1f ms, %6d slices" % (
                        key, run / 1e6, wait / 1e6, slices))
        sys.stdout.flush()
    finally:
        for s in servers.values():
            s.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--client", required=True, help="bench/latency")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-a", action="store_true", help="leave way (a) out")
    ap.add_argument("variants", nargs="+", metavar="NAME=LAGLESS_VAR=VALUE[,...]")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.so_dir = os.path.join(os.path.dirname(args.bin), "modules")
    args.workers = max(1, (os.cpu_count() or 2) - 1)
    ways = {} if args.no_a else {"a": None}
    ways.update(parse_variant(v) for v in args.variants)
    n_probe = bf.iterations_for(bf.T_PROBE_S)
    env = {"WORKER_COUNT": str(args.workers), "CPU_ITERATIONS": str(n_probe),
           "CPU_TIMEOUT_S": str(bf.TIMEOUT_S)}
    for _ in range(args.runs):
        one_run(args, ways, env, n_probe)


if __name__ == "__main__":
    main()
