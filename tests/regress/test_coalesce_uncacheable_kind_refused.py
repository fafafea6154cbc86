"""Regression (issue 18, section 3): a coalescing rule on a kind that does not declare itself
LAGLESS_KIND_CACHEABLE was accepted (the flag was never read): coalescing /hash gave two users
the same salt and hash. Such a rule is refused, with the reason, by lagless -t, at start-up
and on SIGHUP (the running configuration stays)."""
import os
import signal
import subprocess

import pytest

from conftest import LAGLESS_BIN, request, wait_until

WHY = "does not declare its answers cacheable"


def check(*args):
    p = subprocess.run([LAGLESS_BIN, "-t"] + list(args), capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_t_refuses_a_rule_on_an_uncacheable_kind(tmp_path):
    rc, out = check("--coalesce", "/hash ttl=1000")
    assert rc != 0 and "coalesce rule /hash" in out and "kind hash " + WHY in out, out
    rc, out = check("--coalesce", "/verify")
    assert rc != 0 and "kind verify " + WHY in out, out
    conf = tmp_path / "site.conf"
    conf.write_text("[route /h]\nkind = hash\nmethods = POST\n\ncoalesce = on\n")
    rc, out = check("-c", str(conf))
    assert rc != 0 and "%s:5: route /h: kind hash %s" % (conf, WHY) in out, out
    # a cacheable kind is still fine
    rc, out = check("--coalesce", "/compress ttl=1000")
    assert rc == 0, out


@pytest.mark.timeout(60)
def test_start_refuses_it_and_reload_keeps_the_running_configuration(start_server, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    p = subprocess.run([LAGLESS_BIN, "--listen", "127.0.0.1:0", "--coalesce", "/hash"],
                       capture_output=True, text=True, timeout=15, env=env)
    assert p.returncode != 0 and WHY in p.stderr, (p.returncode, p.stderr)
    conf = tmp_path / "site.conf"
    conf.write_text("[route /h]\nkind = hash\nmethods = POST\nmemory_kib = 64\niterations = 1\n")
    srv = start_server("-c", str(conf))
    conf.write_text("[route /h]\nkind = hash\nmethods = POST\nmemory_kib = 64\niterations = 1\n"
                    "ttl_ms = 60000\n")
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "reload refused" in srv.log() and WHY in srv.log(), 20), srv.log()
    # still the old configuration: every hash has its own salt
    a = request(srv.port, "POST", "/h", body=b"secret")
    b = request(srv.port, "POST", "/h", body=b"secret")
    assert a.status == 200 and b.status == 200, (a, b)
    assert a.body != b.body and a.header("X-Cache") is None, (a, b)
