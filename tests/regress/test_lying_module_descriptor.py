"""Regression: a module descriptor whose nkinds is larger than its kinds[] array, or whose
kind_size is 1<<30, crashed the master (SIGSEGV, exit 139) in `lagless -t` before any check ran
(and so start-up, and a running server on SIGHUP): the registry walked kinds[] off the module's
image. The descriptor and the whole kinds[] array must lie inside the module's loaded segments,
and nkinds / kind_size have upper bounds; a liar is refused with an error naming the file."""
import os
import signal
import subprocess

import pytest

from conftest import LAGLESS_BIN, get, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "liar_nkinds.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["liar_nkinds", "liar_ksize"])
def test_lying_descriptor_refused_not_crashed(tmp_path, name):
    so = os.path.join(MODS, name + ".so")
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module %s]\npath = %s\n" % (name, so))
    r = subprocess.run([LAGLESS_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 1, (r.returncode, err)
    assert so in err and "kinds" in err, err


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "liar_nkinds.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(90)
def test_lying_descriptor_on_sighup_keeps_the_server(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("; default routes\n")
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    assert get(srv.port, "/ping").status == 200
    so = os.path.join(MODS, "liar_nkinds.so")
    with open(conf, "a") as f:
        f.write("\n[module liar_nkinds]\npath = %s\n" % so)
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "reload refused" in srv.log(), 15), srv.log()[-2000:]
    assert so in srv.log() and srv.running()
    assert get(srv.port, "/ping").status == 200
