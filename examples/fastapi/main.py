"""The background article's service ("Eliminating Event Loop Contention in Python Async APIs
Using Bounded Process Pools", its "Production Implementation: Lifespan-Managed Process Pool"),
as the article writes it: /health, and the CPU-bound execute_cpu_workload run in a
ProcessPoolExecutor of cpu_count - 1 workers made in the lifespan, awaited under
asyncio.wait_for(timeout=10.0), 504 past it.

Changed from the article, each for a reason, none in what the routes do:
  * the worker count, the iterations and the timeout may come from the environment
    (WORKER_COUNT, CPU_ITERATIONS, CPU_TIMEOUT_S; defaults the article's: cpu_count - 1,
    35_000_000, 10.0), as the article itself advises for containers; POST
    /compute-non-blocking?iterations=N overrides the iterations of one call;
  * FastAPI(lifespan=) needs FastAPI 0.93; Debian 12 ships 0.92, whose startup and shutdown
    events make and end the same pool at the same moments;
  * GET /pool says how many calls were submitted and not finished (the executor's queue plus
    its running calls) and the most seen: what the benchmark reads at overload.

The same file serves three ways (README.md): uvicorn alone, as the article runs it; behind
lagless with every route proxied (lagless-proxy.conf); behind lagless with
/compute-non-blocking run by lagless's python module in its compute pool (lagless.conf,
through lagless_routes.py), everything else proxied.
"""
import asyncio
import inspect
import os
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException

# Reserve one logical core for the main asyncio event loop and OS scheduling
WORKER_COUNT = int(os.environ.get("WORKER_COUNT", max(1, (os.cpu_count() or 2) - 1)))
ITERATIONS = int(os.environ.get("CPU_ITERATIONS", 35_000_000))
TIMEOUT_S = float(os.environ.get("CPU_TIMEOUT_S", 10.0))
pending = {"now": 0, "max": 0}


def execute_cpu_workload(iterations: int = 35_000_000) -> int:
    """Top-level pure function required for pickle serialization across processes."""
    accumulator = 0
    for i in range(iterations):
        accumulator += i * i
    return accumulator


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.process_pool = ProcessPoolExecutor(max_workers=WORKER_COUNT)
    yield
    app.state.process_pool.shutdown(wait=True)


if "lifespan" in inspect.signature(FastAPI).parameters:
    app = FastAPI(lifespan=lifespan)
else:  # FastAPI < 0.93 takes lifespan= into its **extra and ignores it
    app = FastAPI()
    _life = lifespan(app)
    app.add_event_handler("startup", _life.__aenter__)

    @app.on_event("shutdown")
    async def _shutdown():
        await _life.__aexit__(None, None, None)


@app.get("/health")
async def health_check() -> dict:
    return {"status": "healthy", "timestamp": time.time()}


@app.post("/compute-non-blocking")
async def compute_non_blocking(iterations: int = ITERATIONS) -> dict:
    start_time = time.perf_counter()
    loop = asyncio.get_running_loop()

    pending["now"] += 1
    pending["max"] = max(pending["max"], pending["now"])
    try:
        result = await asyncio.wait_for(
            loop.run_in_executor(
                app.state.process_pool,
                execute_cpu_workload,
                iterations,
            ),
            timeout=TIMEOUT_S,
        )
    except asyncio.TimeoutError:
        raise HTTPException(
            status_code=504,
            detail="CPU worker execution exceeded timeout threshold.",
        )
    finally:
        pending["now"] -= 1

    duration_ms = (time.perf_counter() - start_time) * 1000
    return {
        "result": result,
        "duration_ms": round(duration_ms, 2),
        "active_workers": WORKER_COUNT,
    }


@app.get("/pool")
async def pool() -> dict:
    return {"workers": WORKER_COUNT, "pending": pending["now"], "max_pending": pending["max"]}
