"""Regression (issue 39 section 6): /health listed the /test/* fault-injection routes in its
"routes" object although they are not served without --enable-test-jobs (a request to one is a
404). The registry always holds them (the router skips them unless test jobs are on); the
/health renderer did not. It now lists exactly the routes the server serves."""
import pytest

from conftest import get


@pytest.mark.timeout(60)
def test_health_lists_test_routes_only_when_served(start_server):
    srv = start_server()
    routes = get(srv.port, "/health").json()["routes"]
    assert "/ping" in routes and "/heavy" in routes, routes
    assert not [p for p in routes if p.startswith("/test/")], routes
    assert get(srv.port, "/test/crash").status == 404
    srv = start_server("--enable-test-jobs", "1")
    routes = get(srv.port, "/health").json()["routes"]
    assert [p for p in routes if p.startswith("/test/")], routes
