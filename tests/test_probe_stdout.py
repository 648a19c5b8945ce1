"""A command whose stdout cannot take its output (a full disk, a closed descriptor) says so
in one line and exits 2: `opscope info M > /dev/full` ended in a traceback out of the
printer (found by bench/probe_fuzz.py; the self-test alone handled it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from tests.conftest import DEMO_CNN

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [["info", str(DEMO_CNN)], ["info", str(DEMO_CNN), "--json", "-"]])
def test_stdout_on_a_full_disk_is_one_line(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with open("/dev/full", "w", buffering=1) as full:
        monkeypatch.setattr(sys, "stdout", full)
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == "opscope: error: cannot write the output to stdout (No space left on device)\n"


def test_a_closed_stdout_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["info", str(DEMO_CNN)]) == 2
    assert capsys.readouterr().err == "opscope: error: cannot write the output: stdout is closed\n"


def test_the_console_script_on_a_full_disk_ends_without_a_second_error() -> None:
    """What stdout could not take is dropped: the interpreter's flush at exit stays quiet."""
    code = f"import sys; sys.argv = ['opscope', 'info', {str(DEMO_CNN)!r}]\n"
    code += "from app.entry import run\nrun()\n"
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", code], stdout=full, stderr=subprocess.PIPE, text=True,
            cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "opscope: error: cannot write the output to stdout (No space left on device)"
    ]
