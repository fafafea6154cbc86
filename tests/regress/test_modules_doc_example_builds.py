"""Regression: docs/MODULES.md's worked example could not be copy-pasted: its code had a literal
`...` in the loop and a check function whose body was only a comment. The document's code block
must be the whole of modules/upper/upper.c, build with the documented command (-Iinclude in
place of pkg-config when lagless is not installed) and run through `lagless --run-kind`."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import LAGLESS_BIN

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def doc_code():
    text = open(os.path.join(ROOT, "docs", "MODULES.md")).read()
    section = text[text.index("### 1. The code"):text.index("### 2. Build")]
    blocks = re.findall(r"```c\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "section 1 must hold the example as one complete code block"
    return text, blocks[0]


def build_command(text):
    m = re.search(r"^ {4}(cc -shared -fPIC \$\(pkg-config --cflags lagless\) .*)$", text, re.M)
    assert m, "docs/MODULES.md lost its build command"
    cmd = m.group(1)
    if subprocess.run(["pkg-config", "--exists", "lagless"]).returncode != 0:
        cmd = cmd.replace("$(pkg-config --cflags lagless)", "-I" + os.path.join(ROOT, "include"))
    return cmd


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.timeout(90)
def test_doc_example_is_upper_c_and_builds_and_runs(tmp_path):
    text, code = doc_code()
    assert "..." not in code.replace("fmt, ...", "")
    assert code == open(os.path.join(ROOT, "modules", "upper", "upper.c")).read()
    (tmp_path / "upper.c").write_text(code)
    r = subprocess.run(["sh", "-c", build_command(text) + " -Werror -Wall"], cwd=tmp_path,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    conf = tmp_path / "lagless.conf"
    conf.write_text("[module upper]\npath = %s\n" % (tmp_path / "upper.so"))
    r = subprocess.run([LAGLESS_BIN, "-c", str(conf), "--run-kind", "upper.upper"],
                       input=b"hello world", capture_output=True, timeout=30,
                       env=dict(os.environ, LAGLESS_RUN_QUERY="skip=6"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello WORLD"
