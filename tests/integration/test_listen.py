"""Listening like the servers lagless replaces: several listeners (blank-separated, or a
repeated --listen, which used to replace the earlier one in silence), unix:/path sockets with
their mode, host names resolved at start-up."""
import os
import re
import signal
import socket
import stat
import subprocess

import pytest

from conftest import LAGLESS_BIN, get, wait_until


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def unix_get(path, target="/ping", timeout=5):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.timeout(60)
def test_repeated_listen_adds_listeners(start_server):
    p1, p2 = free_port(), free_port()
    srv = start_server("--listen", "127.0.0.1:%d" % p1, "--listen", "127.0.0.1:%d" % p2,
                       "--compute-workers", "1")
    for p in (p1, p2, srv.port):  # and the harness's own --listen 127.0.0.1:0 after them
        assert get(p, "/ping").status == 200, p
        assert get(p, "/heavy?iterations=1000").status == 200, p
    assert srv.stop(signal.SIGTERM) == 0


@pytest.mark.timeout(60)
def test_unix_socket_with_mode_and_host_name(start_server, tmp_path):
    sock = tmp_path / "http.sock"
    srv = start_server("--listen", "localhost:0 unix:%s,mode=0600" % sock,
                       "--loop-workers", "2", "--compute-workers", "1")
    text = srv.log()
    assert "listening on unix:%s" % sock in text, text
    # localhost was resolved to its address when the configuration was read
    assert re.search(r"listening on (127\.0\.0\.1|\[::1\]):\d+", text), text
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    for _ in range(10):  # every loop worker accepts on it
        assert unix_get(str(sock)) == (200, b"ok")
    status, body = unix_get(str(sock), "/heavy?iterations=1000")
    assert status == 200 and b'"result"' in body
    assert srv.stop(signal.SIGTERM) == 0
    assert not sock.exists(), "the socket file outlived the server"


@pytest.mark.timeout(60)
def test_stale_unix_socket_is_replaced_a_live_one_is_not(start_server, tmp_path):
    sock = tmp_path / "http.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))  # a file left by a server that died: nobody accepts on it
    stale.close()
    srv = start_server("--listen", "unix:%s" % sock, "--compute-workers", "1")
    assert unix_get(str(sock)) == (200, b"ok")
    second = subprocess.run([LAGLESS_BIN, "--listen", "unix:%s" % sock, "--compute-workers", "1"],
                            capture_output=True, text=True, timeout=30)
    assert second.returncode == 1 and "Address already in use" in second.stderr, second.stderr
    assert unix_get(str(sock)) == (200, b"ok"), "the running server lost its socket"
    assert srv.stop(signal.SIGTERM) == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", ["unix:relative.sock", "unix:/tmp/x.sock,mode=999",
                                   "unix:/tmp/x.sock,owner=no-such-user-here",
                                   "unix:/tmp/x.sock,color=red", "bad!host:80",
                                   "127.0.0.1:1 nonsense", "1 2 3 4 5 6 7 8 9 10",
                                   # nine TCP listeners: over 8 in all (they were accepted)
                                   " ".join(["127.0.0.1:0"] * 9)])
def test_bad_listeners_fail_the_check(value):
    """Each value is refused by -t; eight listeners in all are the most (README)."""
    r = subprocess.run([LAGLESS_BIN, "-t", "--listen", value], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 1 and "--listen" in r.stderr, (value, r.stderr)


@pytest.mark.timeout(30)
def test_a_reload_keeps_the_listeners(start_server, tmp_path):
    sock = tmp_path / "http.sock"
    conf = tmp_path / "lagless.conf"
    conf.write_text("compute_workers = 1\n")
    srv = start_server("-c", str(conf), "--listen", "unix:%s" % sock)
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "ready: generation 2" in srv.log(), 10), srv.log()
    assert unix_get(str(sock)) == (200, b"ok")
    assert get(srv.port, "/ping").status == 200


@pytest.mark.timeout(30)
def test_eight_listeners_in_all_pass_the_check():
    for value in (" ".join(["127.0.0.1:0"] * 8),
                  "unix:/tmp/lagless-8.sock " + " ".join(["127.0.0.1:0"] * 7)):
        r = subprocess.run([LAGLESS_BIN, "-t", "--listen", value], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 0, (value, r.stderr)
