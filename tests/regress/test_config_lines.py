"""Regression (hostile trial): a configuration line longer than inih's line buffer (199 bytes
in Debian's libinih) was cut, and its tail parsed as a line of its own: a long comment ending
in `max_body = 1K` set max_body, and a long `trusted_proxies` list was "a syntax error" on a
line number the file did not have. A NUL byte cut a value short in silence. Such lines were
then refused; now a long line is read whole (master/options.c long_line), and a NUL byte is
still refused with the file, the line and the reason."""
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
    # were its tail a line of its own, bogus_key would be refused
    conf.write_text("[lagless]\n; " + "a long comment ".ljust(197, ".") + "bogus_key = 1\n")
    r = check(conf)
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(60)
def test_a_long_value_is_read_whole_on_its_line(tmp_path):
    cidrs = " ".join("192.168.%d.0/24" % i for i in range(100, 114))  # 14 of at most 16
    assert len(cidrs) > 200
    conf = tmp_path / "tp.conf"
    conf.write_text("[lagless]\nmax_body = 2K\ntrusted_proxies = %s\n" % cidrs)
    r = check(conf)
    assert r.returncode == 0, r.stderr
    # its end is read: a bad last entry is refused on its line
    conf.write_text("[lagless]\nmax_body = 2K\ntrusted_proxies = %s nope\n" % cidrs)
    r = check(conf)
    assert r.returncode != 0 and "tp.conf:3: key 'trusted_proxies'" in r.stderr, r.stderr
    # a line of exactly the old limit, and one byte over it
    for n in (196, 197):
        edge = tmp_path / "edge.conf"
        edge.write_text("[lagless]\n; " + "x" * n + "\nmax_body = 2K\n")
        assert len(edge.read_text().splitlines()[1]) == n + 2
        r = check(edge)
        assert r.returncode == 0, r.stderr


@pytest.mark.timeout(60)
def test_a_nul_byte_is_refused(tmp_path):
    conf = tmp_path / "nul.conf"
    conf.write_bytes(b"[lagless]\nmax_body = 1K\x00junk\n")
    r = check(conf)
    assert r.returncode != 0, r.stdout
    assert "nul.conf:2: a NUL byte" in r.stderr, r.stderr
