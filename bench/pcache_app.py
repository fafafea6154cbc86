"""The app of benchmark 15 (bench/bench_pcache.py): a FastAPI app whose GETs take 200 ms, as the
article's I/O routes await a database, and that counts its calls per path and query.

  GET /slow?k=KEY[&ttl=S]   200 after DELAY_MS (env, default 200): a body naming the key,
                            Cache-Control: public, max-age=S (default 60)
  GET /fail?k=KEY           500 after the same wait, no Cache-Control (as FastAPI's own error
                            answers: HTTPException, an unhandled exception)
  GET /count                JSON {path?query: calls} (not counted)
  GET /ping                 200 at once (not counted)

Run under uvicorn: uvicorn --app-dir bench pcache_app:app --port N (127.0.0.1 only).
"""

import asyncio
import os

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

DELAY_S = int(os.environ.get("DELAY_MS", "200")) / 1000.0
app = FastAPI()
counts = {}


def count(request: Request):
    key = request.url.path + ("?" + request.url.query if request.url.query else "")
    counts[key] = counts.get(key, 0) + 1


@app.get("/ping")
async def ping():
    return PlainTextResponse("ok")


@app.get("/count")
async def get_count():
    return JSONResponse(counts)


@app.get("/slow")
async def slow(request: Request, k: str = "", ttl: int = 60):
    count(request)
    await asyncio.sleep(DELAY_S)
    return PlainTextResponse("value of %s\n" % k,
                             headers={"Cache-Control": "public, max-age=%d" % ttl})


@app.get("/fail")
async def fail(request: Request, k: str = ""):
    count(request)
    await asyncio.sleep(DELAY_S)
    return PlainTextResponse("failed\n", status_code=500)
