#!/usr/bin/env python3
"""A tiny HTTP/1.1 server with known, injected latencies, for testing lagless-load.

One asyncio event loop, keep-alive, GET only. Routes:

* ``/fast``: 200 at once.
* ``/delay?ms=N``: 200 after N ms (a timer; other requests go on meanwhile).
* ``/mix``: every 10th request (the 10th, 20th, ... since start) after 100 ms, the others after
  10 ms: p50 and p90 10 ms, p99 100 ms by construction.

* ``/knee``: served one at a time, exactly ``--knee-rps`` N per second (each takes 1/N s of a
  single server, FIFO; requests beyond wait in its queue): a server whose knee is known, N/s.
  With ``--knee-refuse Q`` a request that would wait more than Q requests' time gets 503 at
  once instead (a server that refuses overload).

  With ``--knee-halve-after S`` the rate halves S seconds after the first request (a machine
  whose load changed between a calibration and the run).
* ``/api/only``: 200 (and ``/only`` 404): shows that a path in the target URL is a prefix.
* ``/need-header``: 200 when the request carries ``X-Token: secret``, else 401.

``--stall-after S --stall-for D``: S seconds after the first request, the whole server blocks
(time.sleep in the loop, like a stuck event loop or a GC pause) for D seconds, once, and prints
``stall START END`` in CLOCK_MONOTONIC seconds. Every request due during the stall must show
that wait. Prints ``listening PORT`` first; stops on SIGTERM.
"""

import argparse
import asyncio
import signal
import sys
import time


class State:
    def __init__(self, stall_after, stall_for):
        self.first = None
        self.stall_after = stall_after
        self.stall_for = stall_for
        self.stalled = stall_for <= 0
        self.mix_count = 0
        self.knee_rps = 50.0
        self.knee_refuse = None
        self.knee_free = 0.0      # monotonic time the single /knee server is free again


def stall_check(st, loop):
    if st.stalled or st.first is None:
        return
    st.stalled = True

    def block():
        start = time.monotonic()
        time.sleep(st.stall_for)
        end = time.monotonic()
        print("stall %.6f %.6f" % (start, end), flush=True)

    loop.call_at(loop.time() + max(0.0, st.first + st.stall_after - time.monotonic()), block)


async def handle(st, reader, writer):
    loop = asyncio.get_running_loop()
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            target = parts[1] if len(parts) == 3 else "/"
            if st.first is None:
                st.first = time.monotonic()
                stall_check(st, loop)
            path, _, query = target.partition("?")
            delay = 0.0
            status = "200 OK"
            if path == "/delay":
                delay = float(dict(q.split("=", 1) for q in query.split("&") if "=" in q)
                              .get("ms", "0")) / 1000.0
            elif path == "/mix":
                st.mix_count += 1
                delay = 0.100 if st.mix_count % 10 == 0 else 0.010
            elif path == "/knee":
                now = time.monotonic()
                if st.knee_halve_after is not None and now - st.first > st.knee_halve_after:
                    st.knee_rps = st.knee_rps_start / 2
                start = max(now, st.knee_free)
                if st.knee_refuse is not None and start - now > st.knee_refuse / st.knee_rps:
                    status = "503 Service Unavailable"
                else:
                    st.knee_free = start + 1.0 / st.knee_rps
                    delay = st.knee_free - now
            elif path == "/api/only":
                pass
            elif path == "/need-header":
                if b"\r\nx-token: secret\r\n" not in head.lower():
                    status = "401 Unauthorized"
            elif path != "/fast":
                status = "404 Not Found"
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(("HTTP/1.1 %s\r\nContent-Length: 3\r\n\r\nok\n" % status).encode())
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stall-after", type=float, default=0.0)
    ap.add_argument("--stall-for", type=float, default=0.0)
    ap.add_argument("--knee-rps", type=float, default=50.0)
    ap.add_argument("--knee-refuse", type=float, default=None)
    ap.add_argument("--knee-halve-after", type=float, default=None)
    args = ap.parse_args()
    st = State(args.stall_after, args.stall_for)
    st.knee_rps = args.knee_rps
    st.knee_refuse = args.knee_refuse
    st.knee_rps_start = args.knee_rps
    st.knee_halve_after = args.knee_halve_after
    # a deep backlog: connections opened during a stall wait in the kernel, not in SYN retries
    server = await asyncio.start_server(lambda r, w: handle(st, r, w), "127.0.0.1", 0,
                                        backlog=4096)
    print("listening %d" % server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
