"""Regression: `lagless -t` accepted route sections whose path the router can never match.

The router compares a route's path byte for byte with the request path, which never holds the
query ('?' starts it), a fragment, a space, a control or a non-ASCII byte (the parser refuses
those targets). `[route /a?x=1]` or `[route /a b]` was valid and listed by -t, and then every
request for it got 404. Such a section is now a configuration error with its file and line."""
import os
import subprocess

import pytest

from conftest import LAGLESS_BIN


def check(tmp_path, path):
    conf = tmp_path / "routes.conf"
    conf.write_bytes(b"[route " + path + b"]\nkind = heavy\nmethods = GET\n")
    return subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True,
                          timeout=20, env=dict(os.environ))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", [b"/a?x=1", b"/a b", b"/a\tb", b"/a#top", b"/caf\xc3\xa9",
                                  b"/a\x7f", b"a"])
def test_unmatchable_route_path_is_refused(tmp_path, path):
    r = check(tmp_path, path)
    assert r.returncode == 1, r.stderr
    assert b"routes.conf:" in r.stderr and b"route path" in r.stderr, r.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", [b"/", b"/a", b"/caf%C3%A9", b"/v1/x-y_z.~!$&'()*+,;=:@"])
def test_matchable_route_path_is_accepted(tmp_path, path):
    r = check(tmp_path, path)
    assert r.returncode == 0, r.stderr
