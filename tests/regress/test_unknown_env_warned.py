"""Regression: a misspelled LAGLESS_* environment variable was silently ignored (while an unknown
file key is an error), so LAGLESS_MAX_BDOY=1M left max_body at its default without a word. Now
-t and start-up log one warning per unknown name, naming the closest setting.
"""
import os
import subprocess

import pytest

from conftest import LAGLESS_BIN, wait_until


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAGLESS_")}
    env.update(extra)
    return env


@pytest.mark.timeout(30)
def test_t_warns_on_a_misspelled_setting():
    p = subprocess.run([LAGLESS_BIN, "-t"], capture_output=True, text=True, timeout=20,
                       env=clean_env(LAGLESS_MAX_BDOY="1M", LAGLESS_MAX_BODY="2M",
                                     LAGLESS_SYSROOT="/", LAGLESS_NOTHING_LIKE_IT_AT_ALL="1"))
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stderr.splitlines() if "unknown environment variable" in l]
    assert len(lines) == 2, p.stderr
    assert any("LAGLESS_MAX_BDOY" in l and "did you mean LAGLESS_MAX_BODY" in l for l in lines)
    assert any("LAGLESS_NOTHING_LIKE_IT_AT_ALL" in l and "did you mean" not in l for l in lines)


@pytest.mark.timeout(30)
def test_start_up_logs_the_warning(start_server):
    srv = start_server(env=clean_env(LAGLESS_COMPUTE_WORKER="1"))
    assert wait_until(lambda: "unknown environment variable LAGLESS_COMPUTE_WORKER" in srv.log(),
                      5), srv.log()
    assert "did you mean LAGLESS_COMPUTE_WORKERS" in srv.log()
