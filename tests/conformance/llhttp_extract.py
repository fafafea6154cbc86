#!/usr/bin/env python3
"""Extracts the response vectors of llhttp's own tests (test/response/*.md of a checkout of
nodejs/llhttp) into the JSON corpus tests/conformance/llhttp-responses.json, decoding each input
as llhttp's test/md-test.ts does. Kept: the strict-mode tests (type "response"), without pause,
skip or inline code templates; "skipBody" ones (the caller skips the body, as for HEAD) are
marked "head". Each vector: its file and title, llhttp's verdict ("error": its reason, or null),
the messages it completed, the status of each head it read, and the input ("data", one
character per byte).   usage: llhttp_extract.py LLHTTP_TEST_RESPONSE_DIR COMMIT > out.json"""
import glob
import json
import os
import re
import sys


def decode(text):
    """test/md-test.ts: the code block's text to the bytes the parser is given."""
    s = re.sub(r"\n\Z", "", text)  # JavaScript's /\n$/: only at the very end
    s = re.sub(r"\\(\r\n|\r|\n)", "", s)
    s = re.sub(r"\r\n|\r|\n", "\r\n", s)
    s = s.replace("\\r", "\r").replace("\\n", "\n").replace("\\t", "\t").replace("\\f", "\f")
    s = re.sub(r"\\x([0-9a-fA-F]+)", lambda m: chr(int(m.group(1), 16)), s)
    s = re.sub(r"\\([0-7]{1,3})", lambda m: chr(int(m.group(1), 8)), s)
    return s


def tests_of(path):
    title, meta, block, kind, body, inp = None, None, None, None, [], None
    for line in open(path, encoding="utf-8").read().split("\n"):
        if block is not None:
            if line == "```":
                text = "\n".join(body) + "\n"
                if block == "http":
                    inp = text
                elif block == "log" and inp is not None:
                    yield title, meta or {}, inp, text
                    meta, inp = None, None
                block, body = None, []
            else:
                body.append(line)
            continue
        m = re.match(r"^#+\s+(.*)$", line)
        if m:
            title = m.group(1).strip()
        m = re.match(r"^<!--\s*meta=(.*?)\s*-->", line)
        if m:
            meta = json.loads(m.group(1))
        if line.startswith("```"):
            block = line[3:].strip()


def main(folder, commit):
    vectors = []
    for path in sorted(glob.glob(os.path.join(folder, "*.md"))):
        for title, meta, inp, log in tests_of(path):
            if meta.get("type") != "response" or "pause" in meta or meta.get("skip"):
                continue
            if "${" in inp:
                continue
            err = re.search(r' error code=\d+ reason="(.*)"', log)
            vectors.append({
                "file": os.path.basename(path), "title": title,
                "head": bool(meta.get("skipBody")),
                "error": err.group(1) if err else None,
                "messages": log.count(" message complete"),
                "statuses": [int(s) for s in re.findall(r"headers complete status=(\d+)", log)],
                "data": decode(inp),
            })
    json.dump({"source": "nodejs/llhttp test/response/*.md at commit %s (MIT licence, Copyright "
               "Fedor Indutny and other Node contributors): the inputs of every strict-mode "
               "('response') test without pause, skip or code templates, decoded as llhttp's "
               "test/md-test.ts does (tests/conformance/llhttp_extract.py); 'error' is llhttp's "
               "verdict (its reason), 'messages' the messages it completed, 'statuses' the status "
               "of each head it read, 'head' a test whose caller skipped the body." % commit,
               "vectors": vectors}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
