"""Production defaults: demo_routes = no removes the built-in kinds' demonstration routes at
once (a [route] declaring one still serves it); handler = puts a loop answer on another path."""
import subprocess

import pytest

from conftest import LAGLESS_BIN, get, request

DEMO = [("GET", "/heavy?iterations=1000"), ("POST", "/compress"), ("POST", "/decompress"),
        ("POST", "/hash"), ("POST", "/verify")]


@pytest.mark.timeout(60)
def test_demo_routes_off(start_server):
    srv = start_server("--demo-routes=no", "--compute-workers", "1")
    for method, path in DEMO:
        r = request(srv.port, method, path, body=b"x" if method == "POST" else None)
        assert r.status == 404, (path, r)
    for path in ("/ping", "/health", "/ready", "/metrics", "/status"):
        assert get(srv.port, path).status in (200, 503), path


@pytest.mark.timeout(60)
def test_demo_routes_off_keeps_a_declared_one_and_handler_key(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("demo_routes = no\n\n[route /heavy]\nkind = heavy\nmethods = GET\n\n"
                    "[route /healthz]\nhandler = health\n")
    t = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, text=True,
                       timeout=30)
    assert t.returncode == 0, t.stderr
    assert "/heavy" in t.stdout and "/hash" not in t.stdout and "/healthz" in t.stdout, t.stdout
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    assert get(srv.port, "/heavy?iterations=1000").status == 200
    assert request(srv.port, "POST", "/hash", body=b"pw").status == 404
    r = get(srv.port, "/healthz")
    assert r.status == 200 and r.json()["pid"] > 0, r


@pytest.mark.timeout(30)
def test_demo_routes_default_is_on(start_server):
    srv = start_server("--compute-workers", "1")
    assert get(srv.port, "/heavy?iterations=1000").status == 200
