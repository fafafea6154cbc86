"""Regression (issue 18, 1): stale-while-revalidate never refreshed for clients that close after
their answer (Connection: close, HTTP/1.0). The refresh was started only when the stale answer's
respond call returned 0, and a closing answer returns -1 (the connection is finished for the
caller), so such clients got the stale value for the whole stale window and no job ever ran.
The refresh is now decided before the answer, from nothing the answer can free.
"""
import time

import pytest

from conftest import metric, raw_exchange, wait_until


def heavy_jobs(port):
    return metric(port, 'lagless_job_run_seconds_count{kind="heavy"}')


REQUESTS = {
    "connection-close": "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "http-1.0": "GET %s HTTP/1.0\r\nHost: x\r\n\r\n",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("client", sorted(REQUESTS))
def test_stale_answer_to_closing_client_refreshes(start_server, client):
    srv = start_server("--compute-workers", "1", "--cache-jitter-pct", "0", "--coalesce",
                       "/heavy ttl=300 stale=60000 query=iterations")
    path = "/heavy?iterations=5000"
    req = (REQUESTS[client] % path).encode()
    r = raw_exchange(srv.port, req)
    assert r.status == 200 and r.header("X-Cache") == "miss", r
    before = heavy_jobs(srv.port)
    time.sleep(0.5)  # past the 300 ms TTL, well inside the stale window
    r = raw_exchange(srv.port, req)
    assert r.status == 200 and r.header("X-Cache") == "stale", r
    assert (r.header("connection") or "").lower() == "close", r.headers
    # that stale answer started one background job; once it ends the value is fresh again
    assert wait_until(lambda: heavy_jobs(srv.port) - before == 1, 10), \
        "no refresh after a stale answer to a %s client" % client
    assert wait_until(lambda: raw_exchange(srv.port, req).header("X-Cache") == "hit", 10)
    assert heavy_jobs(srv.port) - before == 1
    assert metric(srv.port, "lagless_cache_refreshes_total") == 1
