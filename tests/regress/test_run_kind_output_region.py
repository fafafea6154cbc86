"""Regression: `lagless --run-kind` sized the job's output region from the input's length
(input + 1/256 + 128 KiB) where the server sizes it from max_body, so a kind whose answer is
larger than its input failed there and worked in the server: `--run-kind decompress` of a
zstd stream of 15 MB (640 KB compressed) said 'too large: decompressed data exceeds 773127
bytes'. --run-kind is how a module's own tests call a kind; it must answer what the server
does."""
import os
import subprocess
import zlib

import pytest

from conftest import LAGLESS_BIN


@pytest.mark.timeout(60)
def test_run_kind_decompress_output_larger_than_input():
    plain = b"".join(b"%d\n" % i for i in range(400000))   # 2.7 MB, gzip makes it about a third
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    gz = c.compress(plain) + c.flush()
    assert len(gz) + len(gz) // 256 + (128 << 10) < len(plain)
    env = dict(os.environ, LAGLESS_RUN_QUERY="codec=gzip")
    r = subprocess.run([LAGLESS_BIN, "--run-kind", "decompress"], input=gz, capture_output=True,
                       timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain
    # the bound still holds: over --max-output it is 413's "too large"
    r = subprocess.run([LAGLESS_BIN, "--run-kind", "decompress", "--max-output", "1M"],
                       input=gz, capture_output=True, timeout=30, env=env)
    assert r.returncode == 1 and b"too large" in r.stderr, r.stderr
