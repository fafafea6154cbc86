"""Regression: a field a route lists (fields =) was silently missing from the kind's request
view once it came after 32 other header lines or after 4 KiB of earlier header bytes (the kept
limits then; 100 lines and 16 KiB now).

Only the fields the server reads or a route lists are kept now, so only they count against the
kept limits (LG_HTTP_KEPT lines, LG_HTTP_FIELD_BUF bytes); one that still does not fit refuses
the request with 431 (RFC 6585 section 5) instead of the field silently absent.
"""
import pytest

from conftest import connect, read_response

CONF = """[lagless]
enable_test_jobs = 1

[route /echo]
kind = test-sleep
methods = POST
fields = x-user, content-type
"""


def _echo(port, extra):
    req = (b"POST /echo?ms=0&echo=1 HTTP/1.1\r\nHost: a\r\n" + extra +
           b"X-User: alice\r\nContent-Type: text/csv\r\nContent-Length: 4\r\n"
           b"Connection: close\r\n\r\nbody")
    with connect(port, timeout=10) as s:
        s.sendall(req)
        return read_response(s)


@pytest.fixture
def srv(start_server, tmp_path):
    conf = tmp_path / "fields.conf"
    conf.write_text(CONF)
    return start_server("-c", str(conf), "--enable-test-jobs", "1")


@pytest.mark.timeout(60)
def test_listed_fields_after_many_or_big_others(srv):
    base = _echo(srv.port, b"")
    assert base.status == 200 and b"x-user=alice" in base.body, base
    for extra in (b"".join(b"X-F%d: v\r\n" % i for i in range(40)),
                  b"X-Big: " + b"b" * 4100 + b"\r\n",
                  b"X-Big: " + b"b" * 15000 + b"\r\n",
                  b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 200) for i in range(60))):
        r = _echo(srv.port, extra)
        assert r.status == 200, r
        assert r.body == base.body, (len(extra), r.body)


@pytest.mark.timeout(60)
def test_listed_field_that_cannot_be_kept_is_431(start_server, tmp_path):
    # The kept store is the size of the default limits (LG_HTTP_KEPT = --max-fields 100,
    # LG_HTTP_FIELD_BUF = --max-head 16 KiB), so only raised limits can pass it.
    conf = tmp_path / "fields.conf"
    conf.write_text(CONF)
    srv = start_server("-c", str(conf), "--enable-test-jobs", "1", "--max-fields", "200",
                       "--max-head", "64K")
    # 101 X-User lines: the listed field is past the 100 kept lines
    r = _echo(srv.port, b"".join(b"X-User: u%d\r\n" % i for i in range(101)))
    assert r.status == 431, r
    # a listed field's value over the 16 KiB kept
    r = _echo(srv.port, b"Content-Type: " + b"t" * 16500 + b"\r\n")
    assert r.status == 431, r
    assert _echo(srv.port, b"").status == 200
