"""The FastAPI app behind lagless in the upstream routes' tests (issue 35), served by Debian's
uvicorn: ``python3 -m uvicorn fastapi_app:app --app-dir tests/integration --uds PATH`` (or
``--port N``); tests start it with appserver.UvicornApp.

Every route is served at the root and again under /api, so a ``[route /api/*]`` and a
``[route /*]`` in front of it both reach it without a rewrite of the path:

    GET  /health          {"status": "ok"}
    GET  /items/{id}      {"id": id}
    GET  /slow?ms=N       {"slept_ms": N}, after an asyncio sleep of N ms (at most 60 s)
    POST /echo            {"body_len": bytes received, "headers": [[name, value], ...]}
    GET  /fib?n=N         {"n": N, "fib": fib(N)}, computed the slow recursive way (N <= 32)
    WS   /ws/echo         a WebSocket (RFC 6455) echoing each message as it came (text or
                          binary), until the client closes
    WS   /ws/flood?mb=N   a WebSocket sending N binary messages of 1 MiB at once, then echoing
    GET  /cc/{name}       counts its calls by name; answers {"name", "n" (this call's number),
                          "user" (X-User), "query"} after the mode's ms, with its status and
                          headers: POST /mode/{name}?ms=&status=&cache_control=&vary=&age=
                          &set_cookie=1&private_for=USER (Cache-Control: private to that X-User)
                          &pad=BYTES (a "pad" member of that many bytes)
    GET  /calls/{name}    {"n": calls of /cc/{name} so far}
"""

import asyncio

from fastapi import APIRouter, FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

router = APIRouter()


@router.get("/health")
async def health():
    return {"status": "ok"}


@router.get("/items/{item_id}")
async def item(item_id: int):
    return {"id": item_id}


@router.get("/slow")
async def slow(ms: int = 0):
    ms = max(0, min(ms, 60_000))
    await asyncio.sleep(ms / 1000.0)
    return {"slept_ms": ms}


@router.post("/echo")
async def echo(request: Request):
    body = await request.body()
    return {"body_len": len(body), "headers": [[k, v] for k, v in request.headers.items()]}


_calls = {}
_modes = {}


@router.post("/mode/{name}")
async def mode(name: str, ms: int = 0, status: int = 200, cache_control: str = "", vary: str = "",
               age: str = "", set_cookie: int = 0, private_for: str = "", pad: int = 0):
    _modes[name] = {"ms": ms, "status": status, "cache_control": cache_control, "vary": vary,
                    "age": age, "set_cookie": set_cookie, "private_for": private_for,
                    "pad": max(0, min(pad, 1 << 24))}
    return {"ok": True}


@router.get("/cc/{name}")
async def cc(name: str, request: Request):
    m = _modes.get(name, {})
    _calls[name] = n = _calls.get(name, 0) + 1
    await asyncio.sleep(m.get("ms", 0) / 1000.0)
    user = request.headers.get("x-user", "")
    headers = {}
    cache_control = m.get("cache_control", "")
    if m.get("private_for") and user == m["private_for"]:
        cache_control = "private"
    if cache_control:
        headers["Cache-Control"] = cache_control
    if m.get("vary"):
        headers["Vary"] = m["vary"]
    if m.get("age"):
        headers["Age"] = m["age"]
    if m.get("set_cookie"):
        headers["Set-Cookie"] = "sid=%d" % n
    body = {"name": name, "n": n, "user": user, "query": request.url.query}
    if m.get("pad"):
        body["pad"] = "x" * m["pad"]
    return JSONResponse(body, status_code=m.get("status", 200), headers=headers)


@router.get("/calls/{name}")
async def calls(name: str):
    return {"n": _calls.get(name, 0)}


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@router.get("/fib")
def fib(n: int = 20):
    if not 0 <= n <= 32:
        raise HTTPException(status_code=400, detail="n must be within 0..32")
    return {"n": n, "fib": _fib(n)}


async def _echo(ws: WebSocket):
    try:
        while True:
            m = await ws.receive()
            if m["type"] == "websocket.disconnect":
                return
            if m.get("bytes") is not None:
                await ws.send_bytes(m["bytes"])
            else:
                await ws.send_text(m["text"])
    except WebSocketDisconnect:
        return


@router.websocket("/ws/echo")
async def ws_echo(ws: WebSocket):
    await ws.accept()
    await _echo(ws)


@router.websocket("/ws/flood")
async def ws_flood(ws: WebSocket, mb: int = 1):
    await ws.accept()
    try:
        for _ in range(max(0, min(mb, 256))):
            await ws.send_bytes(b"\x5a" * (1 << 20))
    except (WebSocketDisconnect, OSError, RuntimeError):
        return
    await _echo(ws)


app = FastAPI()
app.include_router(router)
app.include_router(router, prefix="/api")
