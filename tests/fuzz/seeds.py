#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: the conformance cases' request bytes for fuzz_http, a
few well-formed and broken msgpack headers for fuzz_wire, and upstream answers for fuzz_resp
(its own and llhttp's response vectors, tests/conformance/llhttp-responses.json), each after
its flag byte (bit 0: the request was HEAD; bits 1-4: a piece size).
usage: seeds.py HTTP_DIR WIRE_DIR [RESP_DIR]"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, ".."))  # conftest, imported by test_conformance
from test_conformance import CASES  # noqa: E402  (the one decoder of the case format)


def mp_uint(v):
    if v < 128:
        return bytes([v])
    for tag, n in ((0xcc, 1), (0xcd, 2), (0xce, 4), (0xcf, 8)):
        if v < 1 << (8 * n):
            return bytes([tag]) + v.to_bytes(n, "big")
    raise ValueError(v)


def mp_array(vals):
    return bytes([0x90 | len(vals)]) + b"".join(mp_uint(v) for v in vals)


RESPONSES = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
    "empty-reason": b"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n",
    "http10-keep-alive": b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
    # an empty list element before the token (RFC 9110 5.6.1.2): kept, as http-parser does not
    "http10-keep-alive-empty-element": b"HTTP/1.0 200 OK\r\nConnection: ,keep-alive\r\n"
                                       b"Content-Length: 2\r\n\r\nhi",
    # a list before the token: kept, as http-parser does not
    "http10-keep-alive-list": b"HTTP/1.0 200 OK\r\nConnection:u,keep-alive\r\n"
                              b"Content-Length: 2\r\n\r\nhi",
    "close-delimited": b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil the close",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
               b"6;a=b\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
               b"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
    "upgrade": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\n\r\n\x81\x00",
    "no-content": b"HTTP/1.1 204 No Content\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
    "not-modified": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
    "cl-and-te": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "obs-fold": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n",
    "pipelined": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\n",
    # caching fields for http/cachectl.c: directives, quoted arguments, Vary, Age
    "cache-control": b"HTTP/1.1 200 OK\r\nCache-Control: public, max-age=60, s-maxage=\"30\", "
                     b"x=\"a,\\\"b\"\r\nCache-Control: stale-while-revalidate=5\r\nAge: 7\r\n"
                     b"Vary: Accept\r\nContent-Length: 0\r\n\r\n",
    "cache-private": b"HTTP/1.1 404 Not Found\r\nCache-Control: private=\"set-cookie\", "
                     b"max-age=-1\r\nSet-Cookie: a=b\r\nExpires: 0\r\nContent-Length: 0\r\n\r\n",
}


UPGRADES = {
    "upgrade-websocket": b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n"
                         b"Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                         b"Sec-WebSocket-Version: 13\r\n\r\n",
    "upgrade-two-lines": b"GET /x HTTP/1.1\r\nHost: a\r\nConnection: x-a\r\nConnection: upgrade\r\n"
                         b"Upgrade: foo/2, bar\r\nUpgrade: baz\r\nX-A: 1\r\n\r\n",
    "upgrade-h2c": b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                   b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
}


def write_resp(resp_dir):
    os.makedirs(resp_dir, exist_ok=True)
    corpus = os.path.join(HERE, "..", "conformance", "llhttp-responses.json")
    with open(corpus) as f:  # llhttp's response vectors, under a flag byte of their own
        for i, v in enumerate(json.load(f)["vectors"]):
            with open(os.path.join(resp_dir, "llhttp-%03d" % i), "wb") as out:
                out.write(bytes([0x01 if v["head"] else 0x00]) + v["data"].encode("latin-1"))
    for name, data in RESPONSES.items():
        for flag, suffix in ((0x00, ""), (0x01, "-head"), (0x0e, "-piece8")):
            with open(os.path.join(resp_dir, name + suffix), "wb") as f:
                f.write(bytes([flag]) + data)


def main(http_dir, wire_dir, resp_dir=None):
    if resp_dir is not None:
        write_resp(resp_dir)
    os.makedirs(http_dir, exist_ok=True)
    os.makedirs(wire_dir, exist_ok=True)
    for c in CASES:
        with open(os.path.join(http_dir, c["name"]), "wb") as f:
            f.write(c["data"][:4096])
    for name, data in UPGRADES.items():  # what an upstream route relays as a tunnel
        with open(os.path.join(http_dir, name), "wb") as f:
            f.write(data)
    v = 2  # shm/wire.h LG_WIRE_VERSION
    seeds = {
        "job": mp_array([v, 1, 0, 0]),
        "done": mp_array([v, 2, 1, 9]),
        "kill": mp_array([v, 3, 1, 9]),
        "retire": mp_array([v, 4, 5]),
        "wake": mp_array([v, 5, 3, 4, 200, 17, 2 ** 40, 1000, 2000]),
        "unwanted": mp_array([v, 6, 3, 4]),
        "old-version-job": mp_array([1, 1, 0, 7, 1, 0, 12288, 5, 16384, 4096, 3, 10 ** 12, 999]),
        "bad-version": mp_array([3, 3, 1, 9]),
        "truncated": mp_array([v, 5, 3, 4, 200, 17, 2 ** 40, 1000, 2000])[:-3],
        "trailing": mp_array([v, 3, 1, 9]) + b"\x00",
        "negative": bytes([0x94, v, 3, 0xff, 9]),
        "map": bytes([0x81, v, 2]),
        "big": mp_array([v, 5, 2 ** 40, 9, 0, 0, 2 ** 64 - 1, 0, 0]),
    }
    for name, data in seeds.items():
        with open(os.path.join(wire_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(*sys.argv[1:4])
