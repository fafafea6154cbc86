"""The app of benchmark 13f (X6, bench/bench_proxy.py): one FastAPI app whose two endpoints
share uvicorn's thread pool, as a FastAPI team writes them (plain `def`: FastAPI runs them in
anyio's thread pool, 40 threads by default).

  GET /fast   5 ms of work (a sleep standing for a quick query)
  GET /slow   1 s (a report)

Run: python3 -m uvicorn bulkhead_app:app --host 127.0.0.1 --port N (from bench/).
"""

import time

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

app = FastAPI()


@app.get("/fast", response_class=PlainTextResponse)
def fast():
    time.sleep(0.005)
    return "fast\n"


@app.get("/slow", response_class=PlainTextResponse)
def slow():
    time.sleep(1.0)
    return "slow\n"
