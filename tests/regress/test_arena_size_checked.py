"""Regression: `lagless -t` accepted `--max-body 1024G --compute-workers 64`, whose shared-memory
arena (768 transit buffers of 2 TiB) cannot be mapped, and start-up then failed with ENOMEM
naming no setting. -t and start-up now compute the arena size the configuration implies (the
same computation lg_gen_create maps) and refuse it naming the settings.
"""
import subprocess

import pytest

from conftest import LAGLESS_BIN


def run_cli(args):
    """Runs the binary bounded in time; it must exit by itself (no server may start)."""
    p = subprocess.run([LAGLESS_BIN] + args, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=20)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args", [
    ["--max-body", "1024G", "--compute-workers", "64"],
    ["--max-body", "64G", "--compute-workers", "64"],
    ["--max-body", "1G", "--max-output", "1024G", "--transit-buffers", "100000"],
])
def test_unmappable_arena_fails_the_test_naming_settings(args):
    rc, out, err = run_cli(["-t"] + args)
    assert rc == 1, (rc, out, err)
    assert "configuration test failed" in err, err
    assert "max_body" in err and "transit buffers" in err, err
    # Start-up says the same at once instead of ENOMEM from mmap.
    rc, out, err = run_cli(["-p", "0"] + args)
    assert rc == 1, (rc, err)
    assert "shared-memory arena this configuration implies" in err, err


@pytest.mark.timeout(30)
def test_a_large_arena_that_fits_passes():
    rc, out, err = run_cli(["-t", "--max-body", "1G", "--compute-workers", "4"])
    assert rc == 0, (rc, err)
