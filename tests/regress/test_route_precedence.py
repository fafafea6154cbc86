"""Regression (hostile trial): routes matched in table order, first match winning, so a
catch-all `[route /*]` took /ping, /health and /ready into the compute pool (they answered
heavy JSON, and would get 503 with the pool full), and a GET to `/heavy/x` under a POST-only
`[route /heavy/*]` fell through to `/*` instead of 405. The rule is now nginx's: an exact
path wins, then the longest prefix, and the best match's methods decide."""
import pytest

from conftest import get, request


@pytest.mark.timeout(60)
def test_exact_routes_beat_a_catch_all_and_the_longest_prefix_decides(start_server, tmp_path):
    conf = tmp_path / "pre.conf"
    conf.write_text("[lagless]\n[route /*]\nkind = heavy\nmethods = GET\n"
                    "[route /heavy/*]\nkind = compress\nmethods = POST\n")
    srv = start_server("-c", str(conf), "--compute-workers", "1")
    plain = get(srv.port, "/ping")
    assert plain.status == 200 and not plain.body.startswith(b"{"), plain
    for path in ("/health", "/ready"):
        r = get(srv.port, path + "?iterations=3")
        assert r.status == 200 and b"iterations" not in r.body, (path, r)
    # the catch-all serves what nothing more specific takes
    r = get(srv.port, "/other?iterations=3")
    assert r.status == 200 and b"iterations" in r.body, r
    # /heavy/* is the best match for /heavy/x: its methods decide (405, not the catch-all)
    r = get(srv.port, "/heavy/x?iterations=3")
    assert r.status == 405, r
    r = request(srv.port, "POST", "/heavy/x", body=b"abc" * 100)
    assert r.status == 200, r
