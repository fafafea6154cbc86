"""Starts the FastAPI test app (fastapi_app.py) under Debian's uvicorn for a test.

``UvicornApp(uds=PATH)`` or ``UvicornApp(port=N)``: start() runs ``python3 -m uvicorn`` as a
subprocess and waits, bounded, until ``GET /health`` answers 200 on that socket; stop() ends
that process (SIGTERM, then SIGKILL by its pid). ``request(method, path, ...)`` talks to it
directly, without lagless. The ``fastapi_app`` fixture is a factory of started apps, each
stopped at teardown; a test module imports it (``from appserver import fastapi_app``). The
tests that use it are skipped when fastapi or uvicorn is not installed for this Python.
"""

import http.client
import os
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def have_uvicorn():
    return subprocess.run([sys.executable, "-c", "import fastapi, uvicorn"],
                          capture_output=True).returncode == 0


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class UvicornApp:
    def __init__(self, uds=None, port=None, log_path=None):
        assert (uds is None) != (port is None), "a unix socket path or a TCP port"
        self.uds, self.port = uds, port
        self.log_path = log_path
        self.proc = None
        self._log = None

    @property
    def server(self):
        """The `server =` value of an [upstream] section for this app."""
        return "unix:%s" % self.uds if self.uds else "127.0.0.1:%d" % self.port

    def _conn(self, timeout):
        if self.uds:
            return _UnixHTTPConnection(self.uds, timeout)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=10.0):
        """(status, headers dict lower-case, body bytes) of one request straight to the app."""
        c = self._conn(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def _answers(self):
        try:
            return self.request("GET", "/health", timeout=2.0)[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    def start(self, timeout=30.0):
        argv = [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--app-dir", HERE,
                "--log-level", "warning", "--no-access-log"]
        argv += ["--uds", self.uds] if self.uds else ["--host", "127.0.0.1",
                                                      "--port", str(self.port)]
        self._log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        end = time.monotonic() + timeout
        while not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError("uvicorn exited with %s" % self.proc.returncode)
            if time.monotonic() >= end:
                self.stop()
                raise RuntimeError("uvicorn did not answer /health within %.0f s" % timeout)
            time.sleep(0.05)  # polls a condition (the app answers), bounded above
        return self

    def stop(self, timeout=10.0):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None


@pytest.fixture
def fastapi_app(tmp_path):
    """Factory: fastapi_app(uds=True) -> a started UvicornApp on a unix socket in tmp_path
    (uds=False: on a free loopback port). Stopped at teardown."""
    if not have_uvicorn():
        pytest.skip("fastapi or uvicorn missing for %s" % sys.executable)
    apps = []

    def _start(uds=True):
        n = len(apps)
        if uds:
            app = UvicornApp(uds=str(tmp_path / ("app%d.sock" % n)),
                             log_path=str(tmp_path / ("uvicorn%d.log" % n)))
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            app = UvicornApp(port=port, log_path=str(tmp_path / ("uvicorn%d.log" % n)))
        apps.append(app)
        return app.start()

    yield _start
    for app in apps:
        app.stop()
