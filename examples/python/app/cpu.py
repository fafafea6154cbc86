"""The CPU-bound workload of the FastAPI + ProcessPoolExecutor article lagless's background
documents quote, unchanged, served by lagless instead of an executor."""
import json
import time

import lagless

MAX_ITERATIONS = 1_000_000_000


def execute_cpu_workload(iterations: int = 35_000_000) -> int:
    """Simulates deterministic CPU-bound computation."""
    accumulator = 0
    for i in range(iterations):
        accumulator += i * i
    return accumulator


def compute(body, request):
    """POST /compute?iterations=N: the article's /compute-non-blocking, without the executor.
    A client that disconnects while it runs (its own timeout) has this process killed
    (--on-client-gone kill, the default), and a request past its deadline_ms is answered 504
    and this process killed: the article's asyncio.wait_for could only stop waiting, its worker
    went on computing."""
    try:
        iterations = int(request.query.get("iterations", "35000000"))
    except ValueError:
        raise lagless.BadRequest("iterations must be an integer")
    if not 0 <= iterations <= MAX_ITERATIONS:
        raise lagless.BadRequest("iterations must be in 0..%d" % MAX_ITERATIONS)
    start = time.perf_counter()
    result = execute_cpu_workload(iterations)
    duration_ms = (time.perf_counter() - start) * 1000
    return (200, "application/json",
            json.dumps({"result": result, "duration_ms": round(duration_ms, 2)}))
