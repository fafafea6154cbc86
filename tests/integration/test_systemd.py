"""systemd integration played for real: a NOTIFY_SOCKET datagram socket (sd_notify protocol,
systemd.service(5)) and socket activation through systemd-socket-activate."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import LAGLESS_BIN, Notify, get, read_response, wait_until


@pytest.fixture
def notify(tmp_path):
    n = Notify(str(tmp_path / "notify.sock"))
    yield n
    n.close()


@pytest.mark.timeout(60)
def test_notify_sequence_ready_status_stopping(start_server, notify):
    env = dict(os.environ, NOTIFY_SOCKET=notify.path)
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", env=env)
    assert notify.wait_for("READY=1"), notify.messages
    ready = next(m for m in notify.messages if "READY=1" in m)
    assert "STATUS=2/2 loop workers, 1/1 compute" in ready
    assert notify.wait_for("STATUS="), notify.messages
    # READY comes only after every loop worker accepts: /ping works by now.
    assert get(srv.port, "/ping").status == 200
    assert srv.stop(signal.SIGTERM) == 0
    msgs = notify.drain()
    assert any("STOPPING=1" in m for m in msgs), msgs
    first_ready = next(i for i, m in enumerate(msgs) if "READY=1" in m)
    stopping = next(i for i, m in enumerate(msgs) if "STOPPING=1" in m)
    assert first_ready < stopping


@pytest.mark.timeout(60)
def test_watchdog_pings_stop_while_a_loop_is_stuck(start_server, notify):
    # WATCHDOG_USEC without WATCHDOG_PID applies to whichever process reads it: the master.
    env = dict(os.environ, NOTIFY_SOCKET=notify.path, WATCHDOG_USEC="400000")
    srv = start_server("--loop-workers", "2", "--compute-workers", "1", env=env)
    assert notify.wait_for("WATCHDOG=1", timeout=5), notify.messages
    loop = srv.children("loop")[0]
    os.kill(loop, signal.SIGSTOP)  # its heartbeat stops
    try:
        time.sleep(0.6)  # longer than the freshness bound (half the interval)
        notify.drain()
        before = notify.count("WATCHDOG=1")
        time.sleep(1.0)
        assert notify.count("WATCHDOG=1") == before, "pinged while a loop worker was stuck"
    finally:
        os.kill(loop, signal.SIGCONT)
    before = notify.count("WATCHDOG=1")
    assert wait_until(lambda: notify.count("WATCHDOG=1") > before, 5), "pings did not resume"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.timeout(60)
def test_socket_activation(tmp_path):
    if shutil.which("systemd-socket-activate") is None:
        pytest.skip("systemd-socket-activate is not installed (Debian package systemd)")
    port = free_port()
    log = open(tmp_path / "stderr.log", "wb")
    # The --listen given here must be ignored in favour of the passed socket.
    proc = subprocess.Popen(["systemd-socket-activate", "-l", "127.0.0.1:%d" % port, LAGLESS_BIN,
                             "--listen", "127.0.0.1:1", "--loop-workers", "1",
                             "--compute-workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        # systemd-socket-activate starts the server on the first connection; that connection
        # waits in the backlog of the passed socket and must be served.
        ok = wait_until(lambda: _ping(port), 15)
        text = open(tmp_path / "stderr.log", "rb").read().decode()
        assert ok, text
        assert "socket activation" in text and ":%d" % port in text
        assert get(port, "/heavy?iterations=1000").status == 200
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # systemd-socket-activate execs lagless: same pid
        try:
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()


def _activate(tmp_path, ports, *args):
    """lagless under systemd-socket-activate with one passed socket per port, in that order."""
    if shutil.which("systemd-socket-activate") is None:
        pytest.skip("systemd-socket-activate is not installed (Debian package systemd)")
    log = open(tmp_path / "stderr.log", "wb")
    listen = [a for p in ports for a in ("-l", "127.0.0.1:%d" % p)]
    proc = subprocess.Popen(["systemd-socket-activate"] + listen + [LAGLESS_BIN] + list(args),
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    log.close()
    return proc


def _end(proc, want):
    try:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # the same pid: systemd-socket-activate execs
        assert proc.wait(timeout=15) == want
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


@pytest.mark.timeout(60)
def test_socket_activation_serves_every_passed_socket(tmp_path):
    # Issue 33 section 4: with LISTEN_FDS=2 only the first socket was served and the second
    # was closed, so its port refused connections.
    ports = [free_port(), free_port()]
    proc = _activate(tmp_path, ports, "--loop-workers", "2", "--compute-workers", "1")
    try:
        assert wait_until(lambda: _ping(ports[0]), 15), (tmp_path / "stderr.log").read_text()
        text = (tmp_path / "stderr.log").read_text()
        assert ":%d (socket activation, fd 3, 1 of 2)" % ports[0] in text, text
        assert ":%d (socket activation, fd 4, 2 of 2)" % ports[1] in text, text
        for _ in range(4):  # each loop worker accepts on both
            assert _ping(ports[1]), (tmp_path / "stderr.log").read_text()
        assert get(ports[1], "/heavy?iterations=1000").status == 200
    finally:
        _end(proc, 0)


@pytest.mark.timeout(60)
def test_socket_activation_refuses_more_sockets_than_it_serves(tmp_path):
    ports = [free_port() for _ in range(9)]
    proc = _activate(tmp_path, ports, "--loop-workers", "1", "--compute-workers", "1")
    try:
        # the first connection starts it (once systemd-socket-activate listens)
        assert wait_until(lambda: _ping(ports[0]) or proc.poll() is not None, 15)
        assert proc.wait(timeout=15) == 1
        text = (tmp_path / "stderr.log").read_text()
        assert "systemd passed 9 sockets (LISTEN_FDS); lagless serves at most 8" in text, text
    finally:
        _end(proc, 1)


def _ping(port):
    try:
        return get(port, "/ping", timeout=2).status == 200
    except OSError:
        return False


@pytest.mark.timeout(60)
def test_reload_sends_reloading_then_ready(start_server, notify, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("compute_workers = 1\n")
    env = dict(os.environ, NOTIFY_SOCKET=notify.path)
    srv = start_server("-c", str(conf), env=env)
    assert notify.wait_for("READY=1"), notify.messages
    n_ready = notify.count("READY=1")
    os.kill(srv.pid, signal.SIGHUP)
    assert notify.wait_for("RELOADING=1"), notify.messages
    reloading = next(m for m in notify.messages if "RELOADING=1" in m)
    assert re.search(r"MONOTONIC_USEC=\d+", reloading), reloading
    assert wait_until(lambda: notify.count("READY=1") > n_ready, 10), notify.messages
    i_rel = max(i for i, m in enumerate(notify.messages) if "RELOADING=1" in m)
    i_ready = max(i for i, m in enumerate(notify.messages) if "READY=1" in m)
    assert i_rel < i_ready
    assert "generation 2" in notify.messages[i_ready]


@pytest.mark.timeout(60)
def test_socket_activation_proxy_flags_apply_by_position(tmp_path):
    # The n-th --listen entry's ,proxy applies to the n-th passed socket (worker/loop.c
    # takes_proxy); the docs said only the first entry's applied (man: none), and nothing in
    # the log said which passed socket took a PROXY header.
    ports = [free_port(), free_port()]
    proc = _activate(tmp_path, ports, "--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2,proxy",
                     "--trusted-proxies", "127.0.0.1", "--loop-workers", "1",
                     "--compute-workers", "1")
    try:
        assert wait_until(lambda: _ping(ports[0]), 15), (tmp_path / "stderr.log").read_text()
        text = (tmp_path / "stderr.log").read_text()
        assert ":%d (socket activation, fd 3, 1 of 2)" % ports[0] in text, text
        assert ":%d (socket activation, fd 4, 2 of 2, PROXY header first)" % ports[1] in text, text
        with socket.create_connection(("127.0.0.1", ports[1]), timeout=5) as s:
            s.sendall(b"PROXY TCP4 192.0.2.7 127.0.0.1 1234 80\r\n"
                      b"GET /ping HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            assert read_response(s).status == 200
    finally:
        _end(proc, 0)
