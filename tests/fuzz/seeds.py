#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: the conformance cases' request bytes for fuzz_http, and a
few well-formed and broken msgpack headers for fuzz_wire.   usage: seeds.py HTTP_DIR WIRE_DIR"""
import glob
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


def main(http_dir, wire_dir):
    os.makedirs(http_dir, exist_ok=True)
    os.makedirs(wire_dir, exist_ok=True)
    for c in CASES:
        with open(os.path.join(http_dir, c["name"]), "wb") as f:
            f.write(c["data"][:4096])
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
    main(sys.argv[1], sys.argv[2])
