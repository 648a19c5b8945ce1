"""A PYTHONPATH that holds an `engine.py` of its own replaced OpScope's `engine` package:
`opscope --self-test` ended in that file's SyntaxError traceback, or with the exit code the
file chose (the probe fuzz, stop 61). The console script now refuses it in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("body", ["def (\n", "import sys\nsys.exit(7)\n"])
def test_a_shadowing_engine_module_is_one_line_and_exit_2(tmp_path: Path, body: str) -> None:
    (tmp_path / "engine.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("opscope")), "--self-test"],  # the console script:
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,  # no '' on the path
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(tmp_path / "engine.py") in lines[0] and "'engine'" in lines[0]
