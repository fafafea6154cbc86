"""The pure-Python speed of lagless's embedded interpreter (libpython through the python module,
lagless --run-kind) against /usr/bin/python3, on the same fixed work: benchjobs.
execute_cpu_workload(N), the background article's loop, timed inside the interpreter (start-up
excluded). Runs alternate between the two so that a busy machine slows both alike; the figure
to compare is the fastest run of each (the least disturbed), the median is printed beside it.

    python3 bench/python_speed.py [--bin build/lagless] [--modules build/modules]
                                  [--iterations 5000000] [--runs 7] [--python /usr/bin/python3]

docs/MODULES.md ("Speed") quotes its output."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "python")


def embedded(binary, conf, n):
    env = dict(os.environ, LAGLESS_RUN_QUERY="n=%d&k=1" % n)
    env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    p = subprocess.run([binary, "-c", conf, "--run-kind", "python.call"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    if p.returncode != 0:
        sys.exit("lagless --run-kind failed: %s" % p.stderr.decode(errors="replace"))
    return float(p.stdout)


def standalone(python, n):
    code = ("import sys, time; sys.path.insert(0, %r); import benchjobs; "
            "t0 = time.perf_counter(); benchjobs.execute_cpu_workload(%d); "
            "print('%%.9f' %% (time.perf_counter() - t0))" % (PYDIR, n))
    p = subprocess.run([python, "-I", "-c", code], capture_output=True, timeout=600)
    if p.returncode != 0:
        sys.exit("%s failed: %s" % (python, p.stderr.decode(errors="replace")))
    return float(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/lagless")
    ap.add_argument("--modules", default="build/modules")
    ap.add_argument("--iterations", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    fd, conf = tempfile.mkstemp(suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write("[module python]\npath = %s\npython_path = %s\n[route /t]\n"
                "kind = python.call\ncallable = benchjobs:timed\n"
                % (os.path.abspath(os.path.join(a.modules, "python.so")), PYDIR))
    emb, std = [], []
    try:
        for _ in range(a.runs):
            emb.append(embedded(a.bin, conf, a.iterations))
            std.append(standalone(a.python, a.iterations))
    finally:
        os.unlink(conf)
    for name, xs in (("embedded (lagless --run-kind)", emb), (a.python, std)):
        print("%-32s fastest %7.1f ms  median %7.1f ms  runs %s" % (
            name, min(xs) * 1e3, statistics.median(xs) * 1e3,
            " ".join("%.0f" % (x * 1e3) for x in xs)))
    print("embedded / standalone: fastest %.2f, median %.2f" % (
        min(emb) / min(std), statistics.median(emb) / statistics.median(std)))


if __name__ == "__main__":
    main()
