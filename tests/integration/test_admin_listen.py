"""--admin-listen: probes and scrapes on a port the Service does not expose. The admin
listener answers /metrics, /status, /health, /ready and /ping, nothing else; the public
listeners then no longer answer /metrics and /status."""
import socket

import pytest

from conftest import get, request, wait_until


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.timeout(60)
def test_admin_listener_serves_only_the_admin_routes(start_server):
    admin = free_port()
    srv = start_server("--admin-listen", "127.0.0.1:%d" % admin, "--loop-workers", "2",
                       "--compute-workers", "1")
    assert "admin listener on 127.0.0.1:%d" % admin in srv.log(), srv.log()
    for path in ("/metrics", "/status", "/health", "/ping"):
        assert get(admin, path).status == 200, path
    assert wait_until(lambda: get(admin, "/ready").status == 200, 10)
    assert "lagless_build_info" in get(admin, "/metrics").body.decode()
    # nothing else on the admin port
    assert get(admin, "/heavy?iterations=1000").status == 404
    assert request(admin, "POST", "/hash", body=b"pw").status == 404
    # the public port keeps the application and the probes, not the scrapes
    assert get(srv.port, "/heavy?iterations=1000").status == 200
    assert get(srv.port, "/health").status == 200 and get(srv.port, "/ping").status == 200
    assert get(srv.port, "/metrics").status == 404 and get(srv.port, "/status").status == 404
    # many connections alternating between the two: the marks follow descriptor reuse
    for i in range(40):
        assert get(admin, "/metrics").status == 200, i
        assert get(srv.port, "/metrics").status == 404, i


@pytest.mark.timeout(60)
def test_options_asterisk_lists_only_what_the_listener_serves(start_server):
    """OPTIONS * answers Allow with the methods of the routes this listener serves: the admin
    listener's handlers are GET/HEAD only, so no POST there; the public one keeps POST."""
    admin = free_port()
    srv = start_server("--admin-listen", "127.0.0.1:%d" % admin, "--compute-workers", "1")
    assert wait_until(lambda: get(admin, "/ping").status == 200, 10)
    r = request(admin, "OPTIONS", "*")
    allow = [m.strip() for m in r.header("allow", "").split(",")]
    assert r.status == 200 and sorted(allow) == ["GET", "HEAD", "OPTIONS"], r
    r = request(srv.port, "OPTIONS", "*")
    allow = [m.strip() for m in r.header("allow", "").split(",")]
    assert r.status == 200 and "POST" in allow and "GET" in allow, r


@pytest.mark.timeout(30)
def test_without_admin_listener_metrics_stay_public(start_server):
    srv = start_server("--compute-workers", "1")
    assert get(srv.port, "/metrics").status == 200


@pytest.mark.timeout(30)
def test_bad_admin_listen_fails_the_check():
    import subprocess
    from conftest import LAGLESS_BIN
    r = subprocess.run([LAGLESS_BIN, "-t", "--admin-listen", "nowhere!"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1 and "--admin-listen" in r.stderr, r.stderr
