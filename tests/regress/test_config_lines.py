"""Regression (hostile trial): a configuration line longer than inih's line buffer (199 bytes
in Debian's libinih) was cut, and its tail parsed as a line of its own: a long comment ending
in `max_body = 1K` set max_body, and a long `trusted_proxies` list was "a syntax error" on a
line number the file did not have. A NUL byte cut a value short in silence. Both are now
refused with the file, the line and the reason."""
import os
import subprocess

import pytest

from conftest import LAGLESS_BIN


def check(path, *args):
    return subprocess.run([LAGLESS_BIN, "-t", "-c", str(path), *args], capture_output=True,
                          text=True, timeout=20, env=dict(os.environ))


@pytest.mark.timeout(60)
def test_a_long_comment_is_never_applied(tmp_path):
    conf = tmp_path / "comment.conf"
    conf.write_text("[lagless]\n; " + "a long comment ".ljust(197, ".") + "max_body = 1K\n")
    r = check(conf)
    assert r.returncode != 0, r.stdout
    assert "comment.conf:2:" in r.stderr and "limit of 198 bytes" in r.stderr, r.stderr


@pytest.mark.timeout(60)
def test_a_long_value_is_refused_on_its_line_and_the_flag_takes_it(tmp_path):
    cidrs = " ".join("192.168.%d.0/24" % i for i in range(100, 114))  # 14 of at most 16
    assert len(cidrs) > 200
    conf = tmp_path / "tp.conf"
    conf.write_text("[lagless]\nmax_body = 2K\ntrusted_proxies = %s\n" % cidrs)
    r = check(conf)
    assert r.returncode != 0, r.stdout
    assert "tp.conf:3:" in r.stderr, r.stderr
    # the same list by its flag is taken whole
    ok = tmp_path / "ok.conf"
    ok.write_text("[lagless]\nmax_body = 2K\n")
    r = check(ok, "--trusted-proxies", cidrs)
    assert r.returncode == 0, r.stderr
    # a line of exactly the limit is still read
    edge = tmp_path / "edge.conf"
    edge.write_text("[lagless]\n; " + "x" * 196 + "\nmax_body = 2K\n")
    assert len(edge.read_text().splitlines()[1]) == 198
    r = check(edge)
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(60)
def test_a_nul_byte_is_refused(tmp_path):
    conf = tmp_path / "nul.conf"
    conf.write_bytes(b"[lagless]\nmax_body = 1K\x00junk\n")
    r = check(conf)
    assert r.returncode != 0, r.stdout
    assert "nul.conf:2: a NUL byte" in r.stderr, r.stderr
