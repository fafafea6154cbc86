"""Regression: every 4xx a kind answered on an offloaded route wrote a warning line, so any
client could flood the log (1,574 lines a minute). Those answers are the client's request
refused: logged at debug level only, and counted in lagless_jobs_client_errors_total."""
import os

import pytest

from conftest import get, request, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "faults.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(60)
def test_kind_4xx_counted_not_warned(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module faults]\npath = %s\n\n[route /echo]\nmethods = GET\n"
                    "kind = faults.echo\n" % os.path.join(MODS, "faults.so"))
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    n = 200
    for i in range(n):
        r = get(srv.port, "/echo?status=%d" % (404 if i % 2 else 422))
        assert r.status in (404, 422), r
    # a built-in kind's own 4xx (a malformed ?codec= is the loop's, before any job)
    r = request(srv.port, "POST", "/compress?codec=gzip&level=15", body=b"x")
    assert r.status == 400, r

    def counted():
        for line in get(srv.port, "/metrics").body.decode().splitlines():
            if line.startswith("lagless_jobs_client_errors_total "):
                return int(line.split()[1]) == n + 1
        return False
    assert wait_until(counted, 10), get(srv.port, "/metrics").body.decode()[-2000:]
    warned = [line for line in srv.log().splitlines() if " warn " in line and "failed" in line]
    assert warned == [], warned[:5]


@pytest.mark.timeout(60)
def test_coalesced_4xx_counted_not_warned(start_server):
    srv = start_server("--compute-workers", "1", "--coalesce", "/compress")
    n = 10
    for i in range(n):   # gzip levels 10..19: in the declared range, refused by the kind
        r = request(srv.port, "POST", "/compress?codec=gzip&level=%d" % (10 + i), body=b"x")
        assert r.status == 400, r

    def counted():
        for line in get(srv.port, "/metrics").body.decode().splitlines():
            if line.startswith("lagless_jobs_client_errors_total "):
                return int(line.split()[1]) == n
        return False
    assert wait_until(counted, 10), get(srv.port, "/metrics").body.decode()[-2000:]
    warned = [line for line in srv.log().splitlines() if " warn " in line and "failed" in line]
    assert warned == [], warned[:5]
