"""A reload that tells the truth: --pid-file, `lagless -s reload` (checks the configuration,
signals the master, waits for the outcome the master writes to PID_FILE.reload), the unit's
ExecReload= using it, and a refused reload in systemd's STATUS= line."""
import os
import re
import shlex
import signal
import subprocess

import pytest

from conftest import LAGLESS_BIN, REPO_ROOT, Notify, get, wait_until


def reload_cmd(*args, timeout=60):
    return subprocess.run([LAGLESS_BIN, *args, "-s", "reload"], capture_output=True, text=True,
                          timeout=timeout)


def pid_in(path):
    try:
        return int(open(path).read())
    except (OSError, ValueError):
        return None


def served_from_file(start_server, tmp_path, extra=""):
    """A server started with -c lagless.conf (its pid_file, one compute process, then extra),
    once its pid file names it: (server, conf path, pid file path)."""
    conf = tmp_path / "lagless.conf"
    pidf = tmp_path / "lagless.pid"
    conf.write_text("pid_file = %s\ncompute_workers = 1\n%s" % (pidf, extra))
    srv = start_server("-c", str(conf))
    assert wait_until(lambda: pid_in(pidf) == srv.pid, 5)
    return srv, conf, pidf


@pytest.mark.timeout(60)
def test_pid_file_written_and_removed(start_server, tmp_path):
    pidf = tmp_path / "lagless.pid"
    srv = start_server("--pid-file", str(pidf), "--compute-workers", "1")
    assert wait_until(lambda: pid_in(pidf) == srv.pid, 5), pidf
    assert srv.stop(signal.SIGTERM) == 0
    assert not pidf.exists(), "the pid file outlived the server"


@pytest.mark.timeout(90)
def test_reload_command_waits_for_the_new_generation(start_server, tmp_path):
    srv, conf, pidf = served_from_file(start_server, tmp_path)
    conf.write_text("pid_file = %s\ncompute_workers = 2\n" % pidf)
    r = reload_cmd("-c", str(conf))
    assert r.returncode == 0, r.stderr
    assert "generation 2" in r.stderr, r.stderr
    # by the time it returned, generation 2 was ready and serves
    assert "ready: generation 2" in srv.log(), srv.log()
    assert get(srv.port, "/status").json()["sizing"]["compute_workers"] == 2
    r = reload_cmd("-c", str(conf))  # and again: each reload gets its own answer
    assert r.returncode == 0 and "generation 3" in r.stderr, r.stderr


@pytest.mark.timeout(120)
def test_reload_commands_at_once_each_get_an_answer(start_server, tmp_path):
    """Several `-s reload` at once: SIGHUPs coalesce and PID_FILE.reload holds the last outcome
    only, so each takes the outcome of a reload the master began after its signal. A hostile
    trial found one of two (five of six) waiting out its 31 s and exiting 1 although every
    reload had been applied."""
    srv, conf, pidf = served_from_file(start_server, tmp_path, "drain_timeout_ms = 500\n")
    for round_ in range(2):
        procs = [subprocess.Popen([LAGLESS_BIN, "-c", str(conf), "-s", "reload"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        outs = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, (round_, outs)
        assert all(re.search(r"reloaded: generation \d+ accepts", o) for o in outs), outs
    assert get(srv.port, "/ping").status == 200


@pytest.mark.timeout(60)
def test_a_reload_says_what_it_kept(start_server, tmp_path):
    """The listeners change only with a restart: a reload that keeps them says so to -s
    reload, which only the server's log said (a hostile trial took "reloaded: generation 2
    accepts" for the new admin listener). It names the one that moved: a new admin_listen
    alone was said as "kept 127.0.0.1:PORT and the others", the main listener's address."""
    srv, conf, pidf = served_from_file(start_server, tmp_path)
    conf.write_text("pid_file = %s\ncompute_workers = 1\nadmin_listen = 127.0.0.1:0\n" % pidf)
    r = reload_cmd("-c", str(conf))
    assert r.returncode == 0, r.stderr
    assert re.search(r"reloaded: generation 2 accepts; the listeners change only with a "
                     r"restart: kept no admin_listen\n", r.stderr), r.stderr
    conf.write_text("pid_file = %s\ncompute_workers = 2\n" % pidf)  # back as it runs
    r = reload_cmd("-c", str(conf))
    assert r.returncode == 0 and "generation 3 accepts\n" in r.stderr, r.stderr


@pytest.mark.timeout(60)
def test_reload_command_refuses_a_bad_configuration_without_signalling(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    pidf = tmp_path / "lagless.pid"
    conf.write_text("pid_file = %s\n" % pidf)
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    assert wait_until(lambda: pid_in(pidf) == srv.pid, 5)
    conf.write_text("pid_file = %s\nqueue = lots\n" % pidf)
    r = reload_cmd("-c", str(conf))
    assert r.returncode == 1, r.stderr
    assert "queue" in r.stderr and "reload not sent" in r.stderr, r.stderr
    assert "SIGHUP" not in srv.log() and "reload" not in srv.log(), srv.log()


@pytest.mark.timeout(60)
def test_a_reload_the_master_refuses_fails_with_its_reason(start_server, tmp_path):
    """The master reads its own command line's file; when that one is bad (edited after the
    command checked its own), the master's refusal is what the command reports."""
    conf, good = tmp_path / "lagless.conf", tmp_path / "checked.conf"
    pidf = tmp_path / "lagless.pid"
    notify = Notify(str(tmp_path / "notify.sock"))
    try:
        conf.write_text("pid_file = %s\n" % pidf)
        good.write_text("pid_file = %s\n" % pidf)
        srv = start_server("-c", str(conf), "--compute-workers", "1",
                           env=dict(os.environ, NOTIFY_SOCKET=notify.path))
        assert notify.wait_for("READY=1"), notify.messages
        conf.write_text("pid_file = %s\nmax_bodyy = 1M\n" % pidf)
        r = reload_cmd("-c", str(good))
        assert r.returncode == 1, r.stderr
        assert "refused" in r.stderr and "max_bodyy" in r.stderr, r.stderr
        # systemd hears it too, in the STATUS= line
        assert wait_until(lambda: any("last reload refused" in m and "max_bodyy" in m
                                      for m in notify.messages), 5), notify.messages
        assert get(srv.port, "/ping").status == 200  # the running generation stays
        # fixed: the next reload succeeds and the refusal leaves the status line
        conf.write_text("pid_file = %s\n" % pidf)
        r = reload_cmd("-c", str(good))
        assert r.returncode == 0, r.stderr
        notify.drain()
        n = len(notify.messages)
        assert wait_until(lambda: len(notify.messages) > n, 5)
        assert "last reload refused" not in notify.messages[-1], notify.messages[-1]
    finally:
        notify.close()


@pytest.mark.timeout(30)
def test_reload_command_without_a_server(tmp_path):
    r = reload_cmd("--pid-file", str(tmp_path / "none.pid"))
    assert r.returncode == 2 and "none.pid" in r.stderr, r.stderr
    r = reload_cmd()
    assert r.returncode == 2 and "pid" in r.stderr, r.stderr


def unit_line(key):
    unit = open(os.path.join(REPO_ROOT, "deploy", "lagless.service")).read()
    return re.search(r"^%s=(.*)$" % key, unit, re.M).group(1)


@pytest.mark.timeout(90)
def test_unit_exec_reload_reports_a_refused_configuration(start_server, tmp_path):
    """systemctl reload runs ExecReload= and reports its exit status: with a configuration
    typo it must fail (with /bin/kill -HUP it returned 0 whatever happened)."""
    conf, pidf = tmp_path / "lagless.conf", tmp_path / "lagless.pid"
    conf.write_text("compute_workers = 1\n")

    def unit_argv(key, pid=0):
        line = unit_line(key).replace("/usr/local/bin/lagless", LAGLESS_BIN)
        line = line.replace("/etc/lagless/lagless.conf", str(conf))
        line = line.replace("/run/lagless/lagless.pid", str(pidf))
        return [w.replace("$MAINPID", str(pid)) for w in shlex.split(line)]

    start = unit_argv("ExecStart")
    assert start[0] == LAGLESS_BIN, start
    srv = start_server(*start[1:])
    conf.write_text("compute_workers = one\n")
    r = subprocess.run(unit_argv("ExecReload", srv.pid), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0, "ExecReload= succeeded with a broken configuration"
    assert "compute_workers" in r.stderr, r.stderr
    conf.write_text("compute_workers = 2\n")
    r = subprocess.run(unit_argv("ExecReload", srv.pid), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ready: generation 2" in srv.log()
    assert pid_in(pidf) == srv.pid, "ExecStart= writes no pid file"


@pytest.mark.timeout(60)
def test_stale_pid_file_signals_nothing_and_a_live_one_is_not_taken(start_server, tmp_path):
    """Regression (hostile trial): `-s reload` sent SIGHUP to whatever pid a stale pid file named
    (it killed an unrelated process), and a second server given the same --pid-file took the
    live master's file and removed it at its exit, leaving that master unreachable."""
    pidf = tmp_path / "lagless.pid"
    other = subprocess.Popen(["sleep", "60"])
    try:
        pidf.write_text("%d\n" % other.pid)
        r = reload_cmd("--pid-file", str(pidf))
        assert r.returncode == 2, r.stderr
        assert "not a running lagless master" in r.stderr, r.stderr
        assert other.poll() is None, "the unrelated process was signalled"
    finally:
        other.kill()
        other.wait()
    pidf.unlink()
    srv = start_server("--pid-file", str(pidf), "--compute-workers", "1")
    assert wait_until(lambda: pid_in(pidf) == srv.pid, 5), pidf
    second = subprocess.run([LAGLESS_BIN, "--listen", "127.0.0.1:0", "--pid-file", str(pidf),
                             "--compute-workers", "1"], capture_output=True, text=True,
                            timeout=30)
    assert second.returncode != 0, second.stderr
    assert "names a running master (pid %d)" % srv.pid in second.stderr, second.stderr
    assert pid_in(pidf) == srv.pid
    r = reload_cmd("--pid-file", str(pidf))
    assert r.returncode == 0, r.stderr
