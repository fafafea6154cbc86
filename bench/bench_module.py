"""8. The cost of running a module's kind through lagless: the same run function (the test
module tests/modules/abi_upper.c, which upper-cases its input) called directly in a C loop, on a
where=loop route (HTTP, no hand-off) and on a where=pool route (HTTP plus the hand-off to a
compute process through shared memory), for a 1 KiB and a 16 MiB body, one request at a time
on a keep-alive connection (bench/modcall.c). The hand-off is pool minus loop: the same
request, the same function, only the trip to the compute process differs. Targets (issue 9):
the hand-off adds at most 50 us at 1 KiB and at most 10 % at 16 MiB."""

import os
import subprocess
import tempfile

from common import Lagless, Result, log

SIZES = ((1024, 2000, "1 KiB"), (16 << 20, 12, "16 MiB"))


def _median_ns(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), out.stderr.strip()))
    return int(out.stdout.split("median_ns=")[1].split()[0])


def run(cfg, sz):
    log("== 8. module kind: direct call vs where=loop vs where=pool (hand-off)")
    so = os.path.join(cfg.test_modules, "abi_upper.so")
    if not os.path.isfile(so) or not os.path.isfile(cfg.modcall):
        return [Result("8. module hand-off", skipped="test module or modcall not built")]
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write("[module upper]\npath = %s\n[route /pool]\nmethods = POST\nkind = upper.upper\n"
               "[route /loop]\nmethods = POST\nkind = upper.upper\nwhere = loop\n" % so)
    conf.close()
    srv = Lagless(cfg.bin, ["-c", conf.name, "--loop-workers", "1", "--compute-workers", "1"])
    results = []
    try:
        for size, n, label in SIZES:
            direct = _median_ns([cfg.modcall, "direct", so, "upper", str(size), str(n)])
            loop = _median_ns([cfg.modcall, "http", str(srv.port), "/loop", str(size), str(n)])
            pool = _median_ns([cfg.modcall, "http", str(srv.port), "/pool", str(size), str(n)])
            log("   %-6s direct %10.1f us   where=loop %10.1f us   where=pool %10.1f us   "
                "hand-off %+.1f us" % (label, direct / 1e3, loop / 1e3, pool / 1e3,
                                       (pool - loop) / 1e3))
            figures = {"bytes": size, "requests": n, "direct_ns": direct, "loop_ns": loop,
                       "pool_ns": pool}
            if size == 1024:
                results.append(Result("8a. hand-off at 1 KiB (us, pool - loop)",
                                      max(0.0, (pool - loop) / 1e3), 50.0, figures=figures))
            else:
                results.append(Result("8b. hand-off at 16 MiB (pool / loop)", pool / loop,
                                      1.10, figures=figures))
            results.append(Result("8%s. e2e pool / direct call at %s" % (
                "c" if size == 1024 else "d", label), pool / direct, float("inf"), gated=False,
                figures=figures))
    finally:
        srv.stop()
        os.unlink(conf.name)
    return results
