"""Regression (issue 18, section 3): a request of a coalescing route that bypassed the cache
and ran its own job (credentials, a body over body-max) answered without X-Cache, although
docs/CACHE.md promises the header on every answer. It now says X-Cache: bypass."""
import pytest

from conftest import get, request


@pytest.mark.timeout(60)
def test_requests_that_run_alone_say_bypass(start_server):
    srv = start_server("--compute-workers", "1", "--cache-jitter-pct", "0", "--coalesce",
                       "/heavy ttl=60000; /compress ttl=60000 body-max=1K")
    path = "/heavy?iterations=1000"
    assert get(srv.port, path).header("X-Cache") == "miss"
    assert get(srv.port, path).header("X-Cache") == "hit"
    for h in ({"Authorization": "Bearer t"}, {"Cookie": "s=1"}):
        r = request(srv.port, "GET", path, headers=h)
        assert r.status == 200 and r.header("X-Cache") == "bypass", (h, r)
    small = request(srv.port, "POST", "/compress", body=b"a" * 1024)
    assert small.status == 200 and small.header("X-Cache") == "miss", small
    for _ in range(2):
        big = request(srv.port, "POST", "/compress", body=b"a" * 1025)
        assert big.status == 200 and big.header("X-Cache") == "bypass", big
    # a request of a route without a rule says nothing about a cache
    assert get(srv.port, "/ping").header("X-Cache") is None
