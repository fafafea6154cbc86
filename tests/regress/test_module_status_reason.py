"""Regression: a status a module chose with set_status went out with the reason phrase
"Unknown" when lagless did not send that status itself: 409 as "409 Unknown", 418 as
"418 Unknown". Every 2xx and 4xx of RFC 9110 section 15 has its phrase."""
import os

import pytest

from conftest import get

MODS = os.environ.get("LAGLESS_TEST_MODULES", "")


@pytest.mark.skipif(not os.path.exists(os.path.join(MODS, "faults.so")),
                    reason="test modules not built (make integration builds them)")
@pytest.mark.timeout(60)
def test_module_chosen_status_has_its_reason_phrase(start_server, tmp_path):
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module faults]\npath = %s\n\n[route /echo]\nmethods = GET\n"
                    "kind = faults.echo\n" % os.path.join(MODS, "faults.so"))
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    for status, reason in ((409, "Conflict"), (418, "I'm a teapot"), (422,
                           "Unprocessable Content"), (429, "Too Many Requests")):
        r = get(srv.port, "/echo?status=%d" % status)
        assert (r.status, r.reason) == (status, reason), r
