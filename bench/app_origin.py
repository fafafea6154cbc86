#!/usr/bin/env python3
"""A slow app for the proxy benchmark (bench/bench_proxy.py, 13c and 13d): keep-alive HTTP/1.1
on asyncio, one task per connection, recording how many requests it has in hand at once.

  GET /slow          200 "slow\\n" after --delay-ms (counted in flight while it waits)
  GET /hold          200 "held\\n" once POST /release came after it arrived (in flight)
  GET /stats         JSON: in_flight, max_in_flight, accepts, open (connections), served
                     (not counted)
  POST /release      every /hold waiting goes on
  POST /reset        max_in_flight = in_flight, served = 0

usage: app_origin.py [--delay-ms 1000] [--status N]; listens on 127.0.0.1 (a port of the
kernel's choosing) and prints "port=N" once it does. --status N: /slow answers N (13e: an app
server answering 500 to everything).
"""

import argparse
import asyncio
import json
import sys

state = {"in_flight": 0, "max_in_flight": 0, "accepts": 0, "open": 0, "served": 0}
release = None  # an asyncio.Event replaced at each POST /release


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


async def work(path, delay):
    """The body of a counted request, once its wait is over."""
    global release
    state["in_flight"] += 1
    state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
    try:
        if path == "/hold":
            await release.wait()
            return b"held\n"
        await asyncio.sleep(delay)
        return b"slow\n"
    finally:
        state["in_flight"] -= 1
        state["served"] += 1


async def serve(reader, writer, delay, status):
    global release
    state["accepts"] += 1
    state["open"] += 1
    try:
        while True:
            req = await read_head(reader)
            if req is None:
                break
            method, path = req
            if path in ("/slow", "/hold"):
                answer(writer, status, await work(path, delay))
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
            else:
                answer(writer, 404, b"no\n")
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        state["open"] -= 1
        writer.close()


async def main():
    global release
    p = argparse.ArgumentParser()
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--status", type=int, default=200)
    a = p.parse_args()
    release = asyncio.Event()
    srv = await asyncio.start_server(lambda r, w: serve(r, w, a.delay_ms / 1000.0, a.status),
                                     "127.0.0.1", 0, backlog=4096)
    print("port=%d" % srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
