"""How far benchmark 10b's "lagless >= FastAPI's pool in the same run" can be told on this
machine: 10b's saturation slices (W + 1 closed-loop clients, 2 s each, bench_python.py) for
lagless's python module and for TWO identical FastAPI + ProcessPoolExecutor servers (F1, F2:
the same app, the same worker count), the three alternated slice by slice (the order reversed
every round), so that the second FastAPI server is an A/A control: whatever F2 / F1 shows
beyond 1.0 is the machine, not a server.

    /usr/bin/python3 bench/python_aa.py --bin build/lagless [--rounds 16] [--groups 4]

Prints, for L / F1, F2 / F1 and L / F2: the ratio of the rates summed over each group of
`--groups` rounds (10b's own unit: 4 slices per side), the paired mean and median of the
per-round ratios with a 95 % bootstrap interval of the mean, and each server's CPU time per
call (its whole process tree, /proc/PID/schedstat). docs/BENCHMARKS.md quotes its output.
Bounded: rounds x 3 slices of 2 s, plus the servers' start and stop."""
import argparse
import os
import random
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_python as bp  # noqa: E402
from common import Lagless  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--pin", type=int, default=None, metavar="CPU",
                    help="run every server's CPU-bound processes on this CPU (bench_python.pin_workers)")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    so_dir = os.path.join(os.path.dirname(binary), "modules")
    workers = max(1, (os.cpu_count() or 2) - 1)
    n_call = bp.iterations_for(bp.T_CALL_S)
    fd, conf = tempfile.mkstemp(suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(bp.lagless_conf(so_dir, n_call, workers, 2 * workers))
    servers = {}
    rate = {"L": [], "F1": [], "F2": []}
    cpu = {"L": [], "F1": [], "F2": []}
    try:
        lg = servers["L"] = Lagless(binary, ["-c", conf, "--compute-workers", str(workers)],
                                    start_timeout=30)
        servers["F1"] = bp.FastAPIPool(workers, n_call)
        servers["F2"] = bp.FastAPIPool(workers, n_call)
        sides = [("L", lg.port, lg.pid)] + [(k, servers[k].port, servers[k].proc.pid)
                                             for k in ("F1", "F2")]
        for name, port, root in sides:  # the executors start their workers on a first call
            bp.saturation(port, workers + 1, 0.5)
        if args.pin is not None:
            for name, port, root in sides:
                print("%s: %s on CPU %d" % (name, bp.pin_workers(root, args.pin), args.pin))
        for r in range(args.rounds):
            for name, port, root in (sides if r % 2 == 0 else sides[::-1]):
                got, _, cpus, _ = bp.saturation_cpu(port, workers + 1, args.seconds, root)
                rate[name].append(got)
                cpu[name].append(cpus / got if got else 0.0)
    finally:
        for s in servers.values():
            s.stop()
        os.unlink(conf)
    k = args.groups
    print("W = %d, a call of %d iterations; calls/s: L %.2f, F1 %.2f, F2 %.2f; load %s" % (
        workers, n_call, statistics.mean(rate["L"]), statistics.mean(rate["F1"]),
        statistics.mean(rate["F2"]), open("/proc/loadavg").read().split()[0]))
    for a, b in (("L", "F1"), ("F2", "F1"), ("L", "F2")):
        groups = [sum(rate[a][i:i + k]) / sum(rate[b][i:i + k])
                  for i in range(0, len(rate[a]) - k + 1, k)]
        per = [x / y for x, y in zip(rate[a], rate[b]) if y]
        boot = sorted(statistics.mean(random.choices(per, k=len(per))) for _ in range(2000))
        print("%-2s / %-2s  per %d rounds %s; per round: mean %.3f, median %.3f, 95%% "
              "interval of the mean [%.3f, %.3f]" % (
                  a, b, k, " ".join("%.2f" % g for g in groups), statistics.mean(per),
                  statistics.median(per), boot[49], boot[1949]))
    print("CPU per call (ms, median): " + ", ".join(
        "%s %.1f" % (s, 1e3 * statistics.median(cpu[s])) for s in ("L", "F1", "F2")))


if __name__ == "__main__":
    main()
