"""Regression (hostile trial): with more header field names listed by the routes than a keep
set holds (128), the parser keeps every field, only the first LG_HTTP_KEPT (keep_fields'
warning; 32 then, 100 now, the default --max-fields, so the test raises --max-fields to send
more), and X-Forwarded-For was read from those: a client behind a trusted proxy that sent 40
(now 110) lines of
its own X-Forwarded-For pushed the proxy's appended line out of the kept ones, and the
rightmost kept entry, the client's choice, became its identity (access log client=, the
transit share). A request whose fields were not all kept now has no usable X-Forwarded-For:
its client is the peer."""
import socket

import pytest

from conftest import read_response, wait_until


@pytest.mark.timeout(60)
def test_unkept_forwarded_for_lines_name_no_client(start_server, tmp_path):
    conf = tmp_path / "many.conf"
    conf.write_text("".join(
        "[route /r%d]\nkind = heavy\nmethods = GET\nfields = %s\n\n"
        % (r, ", ".join("x-f%d-%d" % (r, i) for i in range(12))) for r in range(12)))
    srv = start_server("-c", str(conf), "--loop-workers", "1", "--compute-workers", "1",
                       "--access-log", "--trusted-proxies", "127.0.0.1", "--max-fields", "200")
    assert "every field is kept" in srv.log()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /ping?spoof HTTP/1.1\r\nHost: x\r\n" +
                  b"X-Forwarded-For: 198.51.100.66\r\n" * 110 +
                  b"X-Forwarded-For: 203.0.113.9\r\nConnection: close\r\n\r\n")
        assert read_response(s).status == 200
    # a request whose fields were all kept still names its client
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /ping?few HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.66\r\n"
                  b"X-Forwarded-For: 203.0.113.9\r\nConnection: close\r\n\r\n")
        assert read_response(s).status == 200

    def client(marker):
        lines = [ln for ln in srv.log().splitlines() if " access: " in ln and marker in ln]
        return lines[0].split(" client=", 1)[1].split(" ", 1)[0] if lines else None
    assert wait_until(lambda: client('query="few"') is not None, 5)
    assert client('query="few"') == "203.0.113.9"
    assert wait_until(lambda: client('query="spoof"') is not None, 5)
    assert client('query="spoof"') == "127.0.0.1", srv.log()[-1500:]
