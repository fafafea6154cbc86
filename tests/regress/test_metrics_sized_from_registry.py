"""Regression: /metrics answered 500 once about 27 routes had been hit, or with a module of 14
kinds: its buffer was a fixed 64 KiB plus the loops' lag histograms and did not count the route
and kind rows it renders. It is sized from the registry (every route's and kind's series with
its label) now: 100 routes, all hit, and a module of 64 kinds (tests/modules/many.c)."""
import os

import pytest

from conftest import get, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "many.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(120)
def test_metrics_with_100_routes_and_64_kinds(start_server, tmp_path):
    kinds = ["k%d%d" % (i // 8, i % 8) for i in range(64)]
    text = "[module many]\npath = %s\n" % os.path.join(MODS, "many.so")
    # long paths: the labels are what grows the rendering
    paths = ["/a-route-with-a-long-name/%03d" % i for i in range(100)]
    for i, p in enumerate(paths):
        text += "[route %s]\nmethods = GET\nkind = many.%s\n" % (p, kinds[i % 64])
    conf = tmp_path / "lagless.conf"
    conf.write_text(text)
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    for i, p in enumerate(paths):
        r = get(srv.port, p)
        assert r.status == 200 and r.body == (kinds[i % 64] + "\n").encode(), (p, r)
        # a second status code per route: more series per route
        assert get(srv.port, p + "?x", timeout=10).status in (200, 400)
        assert get(srv.port, p, timeout=10).status == 200

    def complete():
        r = get(srv.port, "/metrics")
        assert r.status == 200, (r, srv.log()[-2000:])
        m = r.body.decode()
        return all('lagless_requests_total{route="%s",code="200"}' % p in m for p in paths) \
            and all('lagless_job_run_seconds_count{kind="many.%s"}' % k in m for k in kinds) \
            and all('lagless_request_duration_seconds_count{route="%s"}' % p in m
                    for p in paths)
    assert wait_until(complete, 20), get(srv.port, "/metrics").body.decode()[-3000:]
    assert get(srv.port, "/status").status == 200
