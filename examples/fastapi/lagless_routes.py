"""The python kind of lagless.conf's /compute-non-blocking: the app's own execute_cpu_workload
(imported from main.py, not copied), called in lagless's compute pool as python.call calls a
function, fn(body, request) (docs/MODULES.md "Python kinds"). It answers what the app's route
answers, but for active_workers: the compute pool's size is lagless's (its /status), not the
app's executor's. The route's deadline_ms is the article's timeout: past it the client has 504
and the process running the call is killed, so the call stops there.
"""
import json
import time

from main import ITERATIONS, execute_cpu_workload


def compute_non_blocking(body, request):
    start_time = time.perf_counter()
    iterations = int(request.query.get("iterations", ITERATIONS))
    result = execute_cpu_workload(iterations)
    duration_ms = (time.perf_counter() - start_time) * 1000
    return (200, "application/json",
            json.dumps({"result": result, "duration_ms": round(duration_ms, 2)}))
