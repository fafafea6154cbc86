"""The conf.d directory (master/confd.h, issue 39 section 4): <config dir>/conf.d/*.conf read
after the main file in name order, so that a Kubernetes ConfigMap adds routes without replacing
the whole file. Errors name the conf.d file and line; a key given in two files names both."""
import os
import re
import signal
import subprocess

import pytest

from conftest import LAGLESS_BIN, Server, request, wait_until


def check(conf):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    return subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, text=True,
                          env=env, timeout=30)


@pytest.fixture
def confdir(tmp_path):
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "lagless.conf").write_text("[lagless]\ndeadline_ms = 9000\n")
    return tmp_path


def route_line(out, path):
    m = re.search(r"^%s\s.*$" % re.escape(path), out, re.M)
    return m.group(0) if m else None


@pytest.mark.timeout(30)
def test_conf_d_files_add_routes_and_settings(confdir):
    (confdir / "conf.d" / "10-heavy.conf").write_text("[route /job]\nkind = heavy\n"
                                                       "deadline_ms = 1234\n")
    (confdir / "conf.d" / "20-off.conf").write_text("demo_routes = no\n")
    # not *.conf, hidden (a ConfigMap volume's ..data), or an editor's copy: not read
    (confdir / "conf.d" / "README").write_text("not a configuration\n")
    (confdir / "conf.d" / ".hidden.conf").write_text("oops\n")
    (confdir / "conf.d" / "10-heavy.conf~").write_text("oops\n")
    r = check(confdir / "lagless.conf")
    assert r.returncode == 0, r.stderr
    line = route_line(r.stdout, "/job")
    assert line and " 1234 " in line and line.endswith("conf.d/10-heavy.conf:2"), line
    assert route_line(r.stdout, "/hash") is None, "demo_routes = no of conf.d not applied"
    assert route_line(r.stdout, "/heavy") is None


@pytest.mark.timeout(30)
def test_no_conf_d_directory_is_fine(tmp_path):
    (tmp_path / "lagless.conf").write_text("deadline_ms = 9000\n")
    r = check(tmp_path / "lagless.conf")
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(30)
def test_a_key_in_two_files_names_both(confdir):
    (confdir / "conf.d" / "50-x.conf").write_text("\n[lagless]\ndeadline_ms = 5\n")
    r = check(confdir / "lagless.conf")
    assert r.returncode == 1
    main = str(confdir / "lagless.conf")
    assert "%s:3: key 'deadline_ms' given twice in [lagless] (%s:2;" % (
        confdir / "conf.d" / "50-x.conf", main) in r.stderr, r.stderr
    # between two conf.d files, in name order: 20 is read before 30, so 30 is the repeat
    (confdir / "conf.d" / "50-x.conf").unlink()
    (confdir / "conf.d" / "30-b.conf").write_text("[pool images]\ncompute = 2\n")
    (confdir / "conf.d" / "20-a.conf").write_text("[pool images]\ncompute = 1\n")
    r = check(confdir / "lagless.conf")
    assert r.returncode == 1
    assert "30-b.conf:2: key 'compute' given twice in [pool images] (%s:2;" % (
        confdir / "conf.d" / "20-a.conf") in r.stderr, r.stderr


@pytest.mark.timeout(30)
def test_errors_name_the_conf_d_file_and_line(confdir):
    d = confdir / "conf.d"
    (d / "a.conf").write_text("[route /a]\nkind = heavy\n")
    (d / "b.conf").write_text("; routes\n[route /b]\nkind = nosuch\n")
    r = check(confdir / "lagless.conf")
    assert r.returncode == 1 and "%s:3: key 'kind' = 'nosuch'" % (d / "b.conf") in r.stderr, \
        r.stderr
    (d / "b.conf").write_text("not a key\n")
    r = check(confdir / "lagless.conf")
    assert r.returncode == 1 and "%s:1: syntax error" % (d / "b.conf") in r.stderr, r.stderr
    (d / "b.conf").unlink()
    (d / "c.conf").mkdir()
    r = check(confdir / "lagless.conf")
    assert r.returncode == 1 and "%s: cannot read the conf.d file: not a regular file" % (
        d / "c.conf") in r.stderr, r.stderr


@pytest.mark.timeout(60)
def test_server_serves_a_conf_d_route(confdir):
    """Through symbolic links, as a ConfigMap volume's files are."""
    d = confdir / "conf.d"
    (confdir / "..data").mkdir()
    (confdir / "..data" / "routes.conf").write_text("[route /job]\nkind = heavy\n")
    (d / "routes.conf").symlink_to(confdir / "..data" / "routes.conf")
    srv = Server(["--compute-workers", "1", "-c", str(confdir / "lagless.conf")],
                 workdir=str(confdir))
    try:
        r = request(srv.port, "POST", "/job?iterations=1000", body=b"", timeout=10)
        assert r.status == 200, r
        assert request(srv.port, "GET", "/nowhere").status == 404
    finally:
        srv.kill_all()


@pytest.mark.timeout(60)
def test_reload_reads_conf_d_again(confdir):
    """A file added to conf.d (a ConfigMap's new key) is served after SIGHUP."""
    srv = Server(["--compute-workers", "1", "-c", str(confdir / "lagless.conf")],
                 workdir=str(confdir))

    def status():
        return request(srv.port, "POST", "/added?iterations=1000", body=b"", timeout=10).status

    try:
        assert status() == 404
        (confdir / "conf.d" / "added.conf").write_text("[route /added]\nkind = heavy\n")
        os.kill(srv.pid, signal.SIGHUP)
        assert wait_until(lambda: status() == 200, 30), status()
    finally:
        srv.kill_all()
