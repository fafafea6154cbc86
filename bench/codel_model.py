#!/usr/bin/env python3
"""A model of queue-wait admission (shm/codel.c), to choose --queue-wait-target-ms against the
jobs' run time (docs/OPERATIONS.md, "Admission by queue wait"). Not a benchmark: no server runs.

Poisson arrivals at LOAD x capacity, C compute processes, a fixed run time S, at most Q = 2 x C
jobs waiting (503 queue_full past that), and the rule as shm/codel.c applies it: an interval is
judged by the shortest wait of the jobs that finished in it (or the youngest queued job's age
when none did); while it was over the target new jobs are refused, and a job that waited longer
than the target (overloaded) or the interval (otherwise) is shed when it would start.

    python3 bench/codel_model.py [run_ms] [load]
"""
import heapq
import random
import sys


def simulate(c, s, load, q, target, interval, n=40000, seed=1):
    """Fractions of n jobs refused by the queue-wait rule and by a full queue. Times in s."""
    rnd = random.Random(seed)
    interval = max(interval, target)            # lg_codel_params_of raises it to the target
    events, t = [], 0.0
    for i in range(n):
        t += rnd.expovariate(load * c / s)
        heapq.heappush(events, (t, 1, 0.0))
    queue, busy = [], 0
    st = {"end": 0.0, "min": None, "over": False}
    refused = shed = full = 0

    def judge(now):
        if now < st["end"]:
            return
        first, st["end"] = st["end"] == 0.0, now + interval
        if first:
            return
        m, st["min"] = st["min"], None
        if m is None:
            m = now - queue[-1] if queue else 0.0
        st["over"] = m > target

    def start(now):
        nonlocal busy, shed
        while busy < c and queue:
            wait = now - queue.pop(0)
            judge(now)
            if wait > (target if st["over"] else interval):
                shed += 1
                continue
            busy += 1
            heapq.heappush(events, (now + s, 2, wait))

    while events:
        now, kind, wait = heapq.heappop(events)
        judge(now)
        if kind == 1:
            if st["over"]:
                refused += 1
            elif busy >= c and len(queue) >= q:
                full += 1
            else:
                queue.append(now)
                start(now)
        else:
            busy -= 1
            st["min"] = wait if st["min"] is None else min(st["min"], wait)
            start(now)
    return (refused + shed) / n, full / n


def main():
    run = float(sys.argv[1]) / 1e3 if len(sys.argv) > 1 else 0.14
    load = float(sys.argv[2]) if len(sys.argv) > 2 else 0.8
    print("jobs of %.0f ms at %.1fx capacity" % (run * 1e3, load))
    for c in (1, 2, 4):
        for target, interval in ((0.005, 0.1), (run, 0.1), (run / 2, 5 * run), (run, 4 * run),
                                 (2 * run, 5 * run)):
            wait, full = simulate(c, run, load, 2 * c, target, interval)
            print("  C=%d target %5.0f ms interval %5.0f ms: refused by queue wait %5.1f %%, "
                  "queue full %4.1f %%" % (c, target * 1e3, max(interval, target) * 1e3,
                                           100 * wait, 100 * full))


if __name__ == "__main__":
    main()
