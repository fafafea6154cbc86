"""The pure-Python speed of lagless's python module, both ways it runs calls (lagless
--run-kind: in the python3 executable the compute process starts, the default, and with
interpreter = embedded, in libpython), against /usr/bin/python3, on the same fixed work: benchjobs.
execute_cpu_workload(N), the background article's loop, timed inside the interpreter (start-up
excluded). Runs alternate between the ways so that a busy machine slows all alike; the figure
to compare is the fastest run of each (the least disturbed), the median is printed beside it.

Where the pycall programs are built (make build/bench/pycall.so build/bench/pycall
build/bench/pycall-static; bench/pycall.c), it also times the same function called through
the C API (PyObject_Call, timed in C) in three interpreter builds, to tell where the embedded
interpreter's time goes:
  - "C API in python3": an extension module imported by /usr/bin/python3 (the executable's own
    interpreter code: Debian's static LTO + PGO build);
  - "C API, libpython.so": a program embedding libpython3.11.so, as the python module does;
    "... LD_BIND_NOW" the same with every symbol bound at start (ld.so(8)), which tells whether
    lazy binding costs anything;
  - "C API, libpython.a": a non-PIE program linking libpython3.11.a (the same library without
    position-independent code or symbol interposition).

    python3 bench/python_speed.py [--bin build/lagless] [--modules build/modules]
                                  [--pycall build/bench] [--clock wall|cpu]
                                  [--iterations 5000000] [--runs 7] [--python /usr/bin/python3]

--clock cpu times this thread's CPU time (time.thread_time, CLOCK_THREAD_CPUTIME_ID) rather
than the wall clock: on a machine shared with other work, the time the process waited for a CPU
is then left out. docs/MODULES.md ("Speed") quotes its output."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.join(HERE, "python")


def run_kind(binary, conf, n, clock):
    env = dict(os.environ, LAGLESS_RUN_QUERY="n=%d&k=1&clock=%s" % (n, clock))
    env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    p = subprocess.run([binary, "-c", conf, "--run-kind", "python.call"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    if p.returncode != 0:
        sys.exit("lagless --run-kind failed: %s" % p.stderr.decode(errors="replace"))
    return float(p.stdout)


def standalone(python, n, clock):
    timer = "thread_time" if clock == "cpu" else "perf_counter"
    code = ("import sys, time; sys.path.insert(0, %r); import benchjobs; "
            "t0 = time.%s(); benchjobs.execute_cpu_workload(%d); "
            "print('%%.9f' %% (time.%s() - t0))" % (PYDIR, timer, n, timer))
    return output([python, "-I", "-c", code])


def capi_in_python(python, pycall_dir, n, clock):
    code = ("import sys; sys.path[:0] = [%r, %r]; import benchjobs, pycall; "
            "print('%%.9f' %% pycall.best(benchjobs.execute_cpu_workload, %d, 1, %s))"
            % (PYDIR, pycall_dir, n, clock == "cpu"))
    return output([python, "-I", "-c", code])


def output(argv, env=None):
    p = subprocess.run(argv, capture_output=True, timeout=600, env=env)
    if p.returncode != 0:
        sys.exit("%s failed: %s" % (argv[0], p.stderr.decode(errors="replace")))
    return float(p.stdout)


def ways(a, conf):
    """(name, function of no argument returning seconds) for each way that can run here."""
    n, c = a.iterations, a.clock
    out = [("lagless --run-kind, embedded", lambda: run_kind(a.bin, conf, n, c)),
           (a.python, lambda: standalone(a.python, n, c)),
           ("lagless --run-kind, python3", lambda: run_kind(a.bin, conf + ".exec", n, c))]
    so = os.path.join(a.pycall, "pycall.so")
    if os.path.isfile(so):
        out.append(("C API in python3", lambda: capi_in_python(a.python, a.pycall, n, c)))
    prog = os.path.join(a.pycall, "pycall")
    if os.path.isfile(prog):
        argv = [prog, PYDIR, str(n), "1", c]
        out.append(("C API, libpython.so", lambda: output(argv)))
        now = dict(os.environ, LD_BIND_NOW="1")
        out.append(("C API, libpython.so LD_BIND_NOW", lambda: output(argv, now)))
    static = os.path.join(a.pycall, "pycall-static")
    if os.path.isfile(static):
        argv_s = [static, PYDIR, str(n), "1", c]
        out.append(("C API, libpython.a (non-PIE)", lambda: output(argv_s)))
    if len(out) == 3:
        print("(no pycall programs in %s: make build/bench/pycall.so build/bench/pycall "
              "build/bench/pycall-static to time the C-API ways)" % a.pycall)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/lagless")
    ap.add_argument("--modules", default="build/modules")
    ap.add_argument("--pycall", default="build/bench")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--iterations", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    a.pycall = os.path.abspath(a.pycall)
    fd, conf = tempfile.mkstemp(suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write("[module python]\npath = %s\npython_path = %s\ninterpreter = embedded\n"
                "[route /t]\nkind = python.call\ncallable = benchjobs:timed\n"
                % (os.path.abspath(os.path.join(a.modules, "python.so")), PYDIR))
    with open(conf + ".exec", "w") as f:
        f.write("[module python]\npath = %s\npython_path = %s\n[route /t]\n"
                "kind = python.call\ncallable = benchjobs:timed\n"
                % (os.path.abspath(os.path.join(a.modules, "python.so")), PYDIR))
    todo = ways(a, conf)
    times = [[] for _ in todo]
    try:
        for _ in range(a.runs):
            for (_, fn), xs in zip(todo, times):
                xs.append(fn())
    finally:
        os.unlink(conf)
        os.unlink(conf + ".exec")
    ref = min(times[1])
    print("clock: %s, %d runs x %d iterations" % (a.clock, a.runs, a.iterations))
    for (name, _), xs in zip(todo, times):
        print("%-34s fastest %7.1f ms  median %7.1f ms  / python3 %.2f  runs %s" % (
            name, min(xs) * 1e3, statistics.median(xs) * 1e3, min(xs) / ref,
            " ".join("%.0f" % (x * 1e3) for x in xs)))
    for name, xs in (("embedded", times[0]), ("python3 through lagless", times[2])):
        print("%s / standalone: fastest %.2f, median %.2f" % (
            name, min(xs) / min(times[1]), statistics.median(xs) / statistics.median(times[1])))


if __name__ == "__main__":
    main()
