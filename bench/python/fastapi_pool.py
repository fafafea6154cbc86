"""The background article's service (bounded-process-pools: "Production Implementation:
Lifespan-Managed Process Pool"), as it configures it: a ProcessPoolExecutor of cpu_count - 1
workers made in the lifespan, run_in_executor under asyncio.wait_for(timeout=10). Added for
benchmark 10: /roundtrip (a body through the executor and back), /roundtrip-direct (the same
function called on the event loop: the reference without hand-off) and /queue (calls submitted
and not finished: the executor's queue plus its running calls, and the most seen).

    BENCH_ITERATIONS=N WORKER_COUNT=W python3 -m uvicorn fastapi_pool:app --fd FD
"""
import asyncio
import os
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request, Response

from benchjobs import ITERATIONS, echo, execute_cpu_workload

WORKER_COUNT = int(os.environ.get("WORKER_COUNT", max(1, (os.cpu_count() or 2) - 1)))
pending = {"now": 0, "max": 0}


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.process_pool = ProcessPoolExecutor(max_workers=WORKER_COUNT)
    yield
    app.state.process_pool.shutdown(wait=True)


# FastAPI takes lifespan= from 0.93; Debian 12 has 0.92, whose startup and shutdown events make
# and end the same pool at the same moments.
app = FastAPI()
_life = lifespan(app)
app.add_event_handler("startup", _life.__aenter__)


@app.on_event("shutdown")
async def _shutdown():
    await _life.__aexit__(None, None, None)


async def in_pool(fn, *args):
    loop = asyncio.get_running_loop()
    pending["now"] += 1
    pending["max"] = max(pending["max"], pending["now"])
    try:
        return await asyncio.wait_for(
            loop.run_in_executor(app.state.process_pool, fn, *args), timeout=10.0)
    except asyncio.TimeoutError:
        raise HTTPException(status_code=504,
                            detail="CPU worker execution exceeded timeout threshold.")
    finally:
        pending["now"] -= 1


@app.get("/health")
async def health_check() -> dict:
    return {"status": "healthy", "timestamp": time.time()}


@app.post("/compute")
async def compute_non_blocking(iterations: int = ITERATIONS) -> dict:
    start_time = time.perf_counter()
    result = await in_pool(execute_cpu_workload, iterations)
    duration_ms = (time.perf_counter() - start_time) * 1000
    return {"result": result, "duration_ms": round(duration_ms, 2),
            "active_workers": WORKER_COUNT}


@app.post("/roundtrip")
async def roundtrip(request: Request) -> Response:
    return Response(await in_pool(echo, await request.body()),
                    media_type="application/octet-stream")


@app.post("/roundtrip-direct")
async def roundtrip_direct(request: Request) -> Response:
    return Response(echo(await request.body()), media_type="application/octet-stream")


@app.get("/queue")
async def queue() -> dict:
    return dict(pending)
