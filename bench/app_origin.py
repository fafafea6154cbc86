#!/usr/bin/env python3
"""A slow app for the proxy benchmark (bench/bench_proxy.py, 13c, 13d, 13e, 13g): keep-alive
HTTP/1.1 on asyncio, one task per connection, recording how many requests it has in hand at once.

  GET /slow          200 "slow\\n" after --delay-ms (counted in flight while it waits)
  GET /slow?t=T      the same; T is the client's time.monotonic() at the request's write, and
                     a request a worker starts more than --deadline-ms after T counts as late
  GET /hold          200 "held\\n" once POST /release came after it arrived (in flight)
  GET /stats         JSON: in_flight, max_in_flight, accepts, open (connections), served,
                     started, late, max_lag_ms, arrived_late (read past its deadline,
                     before any wait for a worker) (not counted)
  POST /release      every /hold waiting goes on
  POST /reset        max_in_flight = in_flight, served = 0
  POST /stall?ms=N   for the next N ms no /slow ends: the ones in hand and the ones that
                     start meanwhile are held until the stall is over (a stalled database)

usage: app_origin.py [--delay-ms 1000] [--status N] [--workers W] [--deadline-ms D]; listens
on 127.0.0.1 (a port of the kernel's choosing) and prints "port=N" once it does. --status N:
/slow answers N (13e: an app server answering 500 to everything). --workers W: at most W
/slow at once, the others wait for a worker in the app's own queue, as in a prefork or
thread-pool app (0, the default: no limit); a request "reaches the app" when a worker starts
it (13g counts the ones started after their deadline).
"""

import argparse
import asyncio
import json
import sys
import time

state = {"in_flight": 0, "max_in_flight": 0, "accepts": 0, "open": 0, "served": 0,
         "started": 0, "late": 0, "max_lag_ms": 0.0, "arrived_late": 0}
release = None  # an asyncio.Event replaced at each POST /release
workers = None  # an asyncio.Semaphore with --workers, else None
stall_until = 0.0  # time.monotonic() at which the current stall ends


def answer(writer, status, body):
    writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n%s"
                 % (status, len(body), body))


async def read_head(reader):
    """(method, path) of the next request, its body (Content-Length) read and dropped; None at
    the end of the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path = lines[0].split(" ")[:2]
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length" and int(value) > 0:
            await reader.readexactly(int(value))
    return method, path


def query_arg(path, name):
    """The float value of query argument name in path, or None."""
    for arg in path.partition("?")[2].split("&"):
        key, _, value = arg.partition("=")
        if key == name:
            try:
                return float(value)
            except ValueError:
                return None
    return None


async def work(path, delay, deadline):
    """The body of a counted request: waits for a worker (with --workers), then works."""
    if workers is None:
        return await work_started(path, delay, deadline)
    async with workers:
        return await work_started(path, delay, deadline)


async def work_started(path, delay, deadline):
    """A request a worker took: counted late when started past the client's deadline; held
    while a stall lasts."""
    global release
    sent = query_arg(path, "t")
    state["started"] += 1
    if sent is not None:
        lag = time.monotonic() - sent
        state["max_lag_ms"] = max(state["max_lag_ms"], lag * 1e3)
        if deadline and lag > deadline:
            state["late"] += 1
    state["in_flight"] += 1
    state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
    try:
        if path == "/hold":
            await release.wait()
            return b"held\n"
        await asyncio.sleep(delay)
        while time.monotonic() < stall_until:
            await asyncio.sleep(stall_until - time.monotonic())
        return b"slow\n"
    finally:
        state["in_flight"] -= 1
        state["served"] += 1


async def serve(reader, writer, delay, status, deadline):
    global release, stall_until
    state["accepts"] += 1
    state["open"] += 1
    try:
        while True:
            req = await read_head(reader)
            if req is None:
                break
            method, path = req
            if path.partition("?")[0] in ("/slow", "/hold"):
                sent = query_arg(path, "t")
                if deadline and sent is not None and time.monotonic() - sent > deadline:
                    state["arrived_late"] += 1
                answer(writer, status, await work(path, delay, deadline))
            elif path == "/stats":
                answer(writer, 200, json.dumps(state).encode())
            elif method == "POST" and path == "/release":
                release.set()
                release = asyncio.Event()
                answer(writer, 200, b"released\n")
            elif method == "POST" and path == "/reset":
                state["max_in_flight"] = state["in_flight"]
                state["served"] = 0
                answer(writer, 200, b"reset\n")
            elif method == "POST" and path.startswith("/stall?"):
                stall_until = time.monotonic() + (query_arg(path, "ms") or 0) / 1e3
                answer(writer, 200, b"stalled until=%.6f\n" % stall_until)
            else:
                answer(writer, 404, b"no\n")
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        state["open"] -= 1
        writer.close()


async def main():
    global release, workers
    p = argparse.ArgumentParser()
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--status", type=int, default=200)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--deadline-ms", type=int, default=0)
    a = p.parse_args()
    release = asyncio.Event()
    workers = asyncio.Semaphore(a.workers) if a.workers > 0 else None
    srv = await asyncio.start_server(lambda r, w: serve(r, w, a.delay_ms / 1000.0, a.status,
                                                        a.deadline_ms / 1000.0),
                                     "127.0.0.1", 0, backlog=4096)
    print("port=%d" % srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
