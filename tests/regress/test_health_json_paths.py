"""Regression (hostile trial): /health wrote route paths into its "routes" object unescaped,
and a route path may hold '"' or '\\' ([route /a"b\\c] is a valid section): the document was no
longer JSON. Paths are now JSON strings (RFC 8259 section 7)."""
import json

import pytest

from conftest import get


@pytest.mark.timeout(60)
def test_health_is_json_whatever_the_route_paths(start_server, tmp_path):
    conf = tmp_path / "q.conf"
    conf.write_text('[lagless]\n[route /a"b\\c]\nkind = heavy\nmethods = GET\n'
                    '[route /x%22y]\nkind = heavy\nmethods = GET\n')
    srv = start_server("-c", str(conf))
    r = get(srv.port, "/health")
    assert r.status == 200, r
    doc = json.loads(r.body.decode())
    assert '/a"b\\c' in doc["routes"] and "/x%22y" in doc["routes"], doc["routes"]
