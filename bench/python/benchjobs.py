"""The functions benchmark 10 (bench/bench_python.py) serves two ways: as lagless python kinds
(compute, roundtrip) and through the FastAPI + ProcessPoolExecutor app (fastapi_pool.py), which
calls execute_cpu_workload and echo in its executor."""
import os

ITERATIONS = int(os.environ.get("BENCH_ITERATIONS", "35000000"))


def execute_cpu_workload(iterations: int = 35_000_000) -> int:
    """The background article's workload, unchanged."""
    accumulator = 0
    for i in range(iterations):
        accumulator += i * i
    return accumulator


def echo(data: bytes) -> bytes:
    """The round trip: what goes in comes out (pickled both ways by the executor)."""
    return data


# ------------------------------------------------------------------ the lagless python kinds


def compute(body, request):
    n = int(request.query.get("iterations", request.route.get("iterations", ITERATIONS)))
    return b'{"result": %d}' % execute_cpu_workload(n)


def roundtrip(body, request):
    return body


def timed(body, request):
    """The fastest of k runs of execute_cpu_workload(n), in seconds: t_call as the embedded
    interpreter runs it (lagless --run-kind; benchmark 10b). clock=cpu times this thread's CPU
    time (time.thread_time) instead of the wall clock (bench/python_speed.py --clock)."""
    import time
    clock = time.thread_time if request.query.get("clock") == "cpu" else time.perf_counter
    n, best = int(request.query["n"]), None
    for _ in range(int(request.query.get("k", "3"))):
        t0 = clock()
        execute_cpu_workload(n)
        dt = clock() - t0
        best = dt if best is None else min(best, dt)
    return "%.9f" % best
