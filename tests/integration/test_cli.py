"""Command line: --help, --version, rejected flags and values, --print-sizing, port in use."""

import json
import os
import signal
import socket
import subprocess

import pytest

from conftest import LAGLESS_BIN, lagless_in_group

FLAGS = ["--listen", "-p", "--port", "--loop-workers", "--compute-workers", "--queue", "--cpus",
         "--cpu-rounding", "--max-body", "--deadline-ms", "--drain-timeout-ms", "--max-conns",
         "--log-level", "--print-sizing", "-h", "--help", "-V", "--version"]

SIZING_KEYS = ["online", "affinity", "cpuset", "quota", "quota_source", "rounding", "budget",
               "loop_workers", "compute_workers", "queue_capacity"]


def run_cli(args, timeout=10.0):
    """Runs the binary to completion (bounded). If it is still running at the timeout (it started
    a server when it should not have), it and its children are killed and the test fails."""
    p = subprocess.Popen([LAGLESS_BIN] + list(args), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.kill(p.pid, signal.SIGTERM)
            out, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate(timeout=5)
        for pid in lagless_in_group(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        pytest.fail("lagless %r still running after %.0f s (stderr: %r)" % (args, timeout, err[-2000:]))
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(flag):
    rc, out, err = run_cli([flag])
    assert rc == 0, (rc, err)
    text = out + err
    assert out.strip(), "help should go to stdout"
    missing = [f for f in FLAGS if f not in text]
    assert not missing, "--help does not mention %r:\n%s" % (missing, text)
    for word in ("floor", "ceil"):
        assert word in text, word


@pytest.mark.timeout(30)
@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    rc, out, err = run_cli([flag])
    assert rc == 0, (rc, err)
    text = (out + err).strip()
    assert text, "no version printed"
    assert any(c.isdigit() for c in text), text
    assert len(text.splitlines()) <= 5, text


BAD = [
    ["--no-such-flag"],
    ["--queue", "-5"],
    ["--queue", "abc"],
    ["--cpus", "abc"],
    ["--cpus", "-1"],
    ["--listen", "nonsense"],
    ["--listen", "127.0.0.1:99999"],
    ["--port", "65536"],
    ["--loop-workers", "x"],
    ["--compute-workers", "-1"],
    ["--cpu-rounding", "sideways"],
    ["--max-body", "12Q"],
    ["--deadline-ms", "soon"],
    ["--log-level", "loud"],
    ["--max-conns", "-3"],
    ["--queue"],  # missing value
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) for a in BAD])
def test_bad_arguments_exit_2(args):
    # a valid --listen first, so that a wrongly accepted flag binds nothing shared (the bad
    # --listen values come after it and must be rejected all the same)
    full = ["--listen", "127.0.0.1:0"] + args
    rc, out, err = run_cli(full)
    assert rc == 2, "exit %r for %r; stderr %r" % (rc, args, err)
    assert err.strip(), "no message on stderr for %r" % (args,)


def sizing(args):
    rc, out, err = run_cli(list(args) + ["--print-sizing"])
    assert rc == 0, (rc, err)
    text = out.strip()
    assert text, "nothing on stdout (stderr: %r)" % err
    doc = json.loads(text)  # exactly one JSON value (extra text would fail here)
    assert isinstance(doc, dict), doc
    return doc


@pytest.mark.timeout(30)
def test_print_sizing_keys_and_defaults():
    doc = sizing([])
    missing = [k for k in SIZING_KEYS if k not in doc]
    assert not missing, (missing, doc)
    assert doc["rounding"] == "floor", doc
    b = doc["budget"]
    assert isinstance(b, int) and b >= 1, doc
    assert b <= doc["online"], doc
    if doc["affinity"] is not None and doc["affinity"] > 0:
        assert b <= doc["affinity"], doc
    assert doc["loop_workers"] == b, doc
    assert doc["compute_workers"] == max(1, b - 1), doc
    assert doc["queue_capacity"] == 2 * doc["compute_workers"], doc


@pytest.mark.timeout(30)
def test_print_sizing_overrides():
    doc = sizing(["--loop-workers", "3", "--compute-workers", "2", "--queue", "7"])
    assert doc["loop_workers"] == 3, doc
    assert doc["compute_workers"] == 2, doc
    assert doc["queue_capacity"] == 7, doc


@pytest.mark.timeout(30)
def test_print_sizing_cpus_and_rounding():
    doc = sizing(["--cpus", "3"])
    assert doc["budget"] == 3, doc
    assert doc["loop_workers"] == 3 and doc["compute_workers"] == 2, doc
    assert doc["queue_capacity"] == 4, doc
    doc = sizing(["--cpu-rounding", "ceil"])
    assert doc["rounding"] == "ceil", doc
    doc = sizing(["--cpus", "0.5"])
    assert doc["budget"] == 1 and doc["compute_workers"] == 1, doc


@pytest.mark.timeout(30)
def test_print_sizing_does_not_listen():
    # --print-sizing prints and exits; with a port already taken it must not fail on bind
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        doc = sizing(["--listen", "127.0.0.1:%d" % port])
    assert "budget" in doc


@pytest.mark.timeout(30)
def test_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        rc, out, err = run_cli(["--listen", "127.0.0.1:%d" % port, "--loop-workers", "1",
                                "--compute-workers", "1"], timeout=10)
    assert rc != 0, "started on a port already in use"
    low = err.lower()
    assert "in use" in low or str(port) in low, "unclear message: %r" % err
