"""Regression: a module file replaced in place with its old mtime (and the same size: cp -p,
rsync -t, a build that restores time stamps) was silently not reloaded on SIGHUP, because
"unchanged" was decided by device, inode, size and mtime. It is decided by the contents now."""
import os
import signal

import pytest

from conftest import get, wait_until

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "faults.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(60)
def test_module_swapped_with_old_mtime_is_reloaded(start_server, tmp_path):
    so = tmp_path / "faults.so"
    data = open(os.path.join(MODS, "faults.so"), "rb").read()
    assert data.count(b"greeting=") == 1
    so.write_bytes(data)
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module faults]\npath = %s\n\n[route /echo]\nmethods = GET\n"
                    "kind = faults.echo\ngreeting = hi\n" % so)
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    assert b" greeting=hi " in get(srv.port, "/echo").body
    # the same file (inode), the same size, the old time stamps, other bytes
    st = os.stat(so)
    with open(so, "r+b") as f:
        f.write(data.replace(b"greeting=", b"GREETING="))
    os.utime(so, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(so)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
        (st.st_ino, st.st_size, st.st_mtime_ns)
    os.kill(srv.pid, signal.SIGHUP)
    assert wait_until(lambda: "generation 1 retired" in srv.log(), 20), srv.log()[-2000:]
    assert b" GREETING=hi " in get(srv.port, "/echo").body, srv.log()[-2000:]
