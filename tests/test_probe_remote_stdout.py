"""`opscope remote ...` (what a host answers over SSH) with its stdout closed or on a full
disk: one line and exit 2, as every command (found by bench/probe_fuzz.py: `remote take X
>&-` ended in `AttributeError: 'NoneType' object has no attribute 'buffer'`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.remote.host_side import main_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [["take", "/etc/passwd"], ["version"]])
def test_a_closed_stdout_is_one_line(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    assert main_cli(argv) == 2
    assert capsys.readouterr().err == (
        "opscope: error: remote: stdout is closed: the answer has nowhere to go\n"
    )


def test_the_answer_on_a_full_disk_is_one_line(tmp_path: Path) -> None:
    code = "import sys; sys.argv = ['opscope', 'remote', 'version']\n"
    code += "from app.entry import run\nrun()\n"
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", code],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
            env={**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path)},
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "opscope: error: remote: No space left on device\n"
